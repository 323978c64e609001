// Chunked prefill over a cached context (N = 3, P = 8, R = 16, V = 5,
// L = 64): 2 requests, 7 new tokens, 8 pages of 16 tokens.
func.func @prefill(%q: tensor<7x3x24xf32>, %kv_c: tensor<7x64xf32>, %k_pe: tensor<7x16xf32>, %w: tensor<39x64xf32>,
                   %cache: tensor<8x16x80xf32>, %block_table: tensor<2x4xi32>, %qsl: tensor<3xi32>, %seq_lens: tensor<2xi32>)
    -> tensor<7x3x5xf32> {
  %out = mla.prefill %q, %kv_c, %k_pe, %w, %cache[%block_table, %qsl, %seq_lens]
      layout #mla.cache_layout<format = f32, page_size = 16> scale 0.204124153 workspace_rows 16
      : (tensor<7x3x24xf32>, tensor<7x64xf32>, tensor<7x16xf32>, tensor<39x64xf32>, tensor<8x16x80xf32>, tensor<2x4xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<7x3x5xf32>
  return %out : tensor<7x3x5xf32>
}
