// Causal 2-row decode over up to 1024 cached tokens per request (N = 16,
// L = 64, R = 16, 16-token pages): long enough that every split policy cuts
// requests into several pieces.
func.func @decode_long(%q: tensor<4x2x16x80xf32>, %cache: tensor<260x16x80xf32>, %block_table: tensor<4x64xi32>, %seq_lens: tensor<4xi32>)
    -> (tensor<4x2x16x64xf32>, tensor<4x16x2xf32>) {
  %out, %lse = mla.decode %q, %cache[%block_table, %seq_lens]
      layout #mla.cache_layout<format = f32, page_size = 16> scale 0.111803399 causal
      : (tensor<4x2x16x80xf32>, tensor<260x16x80xf32>, tensor<4x64xi32>, tensor<4xi32>) -> (tensor<4x2x16x64xf32>, tensor<4x16x2xf32>)
  return %out, %lse : tensor<4x2x16x64xf32>, tensor<4x16x2xf32>
}
