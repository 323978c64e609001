// Causal multi-token decode at small, odd widths (L = 64, R = 16, N = 3):
// 2 requests, 2 query rows each, 8 pages of 16 tokens, 4 pages per request.
func.func @decode(%q: tensor<2x2x3x80xf32>, %cache: tensor<8x16x80xf32>, %block_table: tensor<2x4xi32>, %seq_lens: tensor<2xi32>)
    -> (tensor<2x2x3x64xf32>, tensor<2x3x2xf32>) {
  %out, %lse = mla.decode %q, %cache[%block_table, %seq_lens]
      layout #mla.cache_layout<format = f32, page_size = 16> scale 0.176776692 causal
      : (tensor<2x2x3x80xf32>, tensor<8x16x80xf32>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x2x3x64xf32>, tensor<2x3x2xf32>)
  return %out, %lse : tensor<2x2x3x64xf32>, tensor<2x3x2xf32>
}
