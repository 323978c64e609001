// CPU benchmark: DeepSeek-V3 absorbed decode at TP8 (N = 16 heads, L = 512,
// R = 64), b = 4, s_q = 1, a bf16 cache with 64-token pages, room for 4096
// tokens per request. Run: mla-run benchmarks/cpu/decode_dsv3_b4_n16.mlir --seq-len=4096 --repeat=10
func.func @decode_dsv3_b4_n16(%q: tensor<4x1x16x576xbf16>, %cache: tensor<260x64x576xbf16>,
                              %block_table: tensor<4x64xi32>, %seq_lens: tensor<4xi32>)
    -> (tensor<4x1x16x512xbf16>, tensor<4x16x1xf32>) {
  %out, %lse = mla.decode %q, %cache[%block_table, %seq_lens]
      layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
      : (tensor<4x1x16x576xbf16>, tensor<260x64x576xbf16>, tensor<4x64xi32>, tensor<4xi32>)
      -> (tensor<4x1x16x512xbf16>, tensor<4x16x1xf32>)
  return %out, %lse : tensor<4x1x16x512xbf16>, tensor<4x16x1xf32>
}
