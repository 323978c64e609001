// A decode whose head count is dynamic: it parses and verifies, but
// mla-plan-splits cannot size a plan for it, so the CPU pipeline fails.
func.func @decode_dynamic_heads(%q: tensor<2x1x?x80xf32>, %cache: tensor<8x16x80xf32>, %bt: tensor<2x4xi32>, %lens: tensor<2xi32>) -> (tensor<2x1x?x64xf32>, tensor<2x?x1xf32>) {
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32> scale 0.125
      : (tensor<2x1x?x80xf32>, tensor<8x16x80xf32>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x?x64xf32>, tensor<2x?x1xf32>)
  return %o, %lse : tensor<2x1x?x64xf32>, tensor<2x?x1xf32>
}
