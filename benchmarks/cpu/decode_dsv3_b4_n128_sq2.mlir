// CPU benchmark: DeepSeek-V3 absorbed decode at TP1 (N = 128), b = 4,
// s_q = 2 causal (MTP), bf16 cache with 64-token pages, up to 4096 tokens per
// request. Run: mla-run benchmarks/cpu/decode_dsv3_b4_n128_sq2.mlir --seq-len=4096 --repeat=5
func.func @decode_dsv3_b4_n128_sq2(%q: tensor<4x2x128x576xbf16>, %cache: tensor<260x64x576xbf16>,
                                   %block_table: tensor<4x64xi32>, %seq_lens: tensor<4xi32>)
    -> (tensor<4x2x128x512xbf16>, tensor<4x128x2xf32>) {
  %out, %lse = mla.decode %q, %cache[%block_table, %seq_lens]
      layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 causal
      : (tensor<4x2x128x576xbf16>, tensor<260x64x576xbf16>, tensor<4x64xi32>, tensor<4xi32>)
      -> (tensor<4x2x128x512xbf16>, tensor<4x128x2xf32>)
  return %out, %lse : tensor<4x2x128x512xbf16>, tensor<4x128x2xf32>
}
