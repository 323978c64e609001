// Decode shapes for the sm_100a ptxas test: one module per shape, tiled by
// mla-select-gpu-tiling inside mla-to-nvvm.
module @deepseek_tp1 attributes {mla.target = #mla.target<chip = sm100>} {
  func.func @decode(%q: tensor<4x1x128x576xbf16>, %cache: tensor<64x128x576xbf16>, %bt: tensor<4x8xi32>, %lens: tensor<4xi32>, %bounds: tensor<4x9xi32>) {
    %po, %pl = mla.decode_partial %q, %cache[%bt, %lens] bounds %bounds layout #mla.cache_layout<format = bf16, page_size = 128> scale 0.0721687824 num_splits 8
        : (tensor<4x1x128x576xbf16>, tensor<64x128x576xbf16>, tensor<4x8xi32>, tensor<4xi32>, tensor<4x9xi32>) -> (tensor<8x4x1x128x512xf32>, tensor<8x4x128x1xf32>)
    return
  }
}
// -----
module @deepseek_tp8 attributes {mla.target = #mla.target<chip = sm100>} {
  func.func @decode(%q: tensor<4x1x16x576xbf16>, %cache: tensor<64x128x576xbf16>, %bt: tensor<4x8xi32>, %lens: tensor<4xi32>, %bounds: tensor<4x3xi32>) {
    %po, %pl = mla.decode_partial %q, %cache[%bt, %lens] bounds %bounds layout #mla.cache_layout<format = bf16, page_size = 128> scale 0.0721687824 num_splits 2
        : (tensor<4x1x16x576xbf16>, tensor<64x128x576xbf16>, tensor<4x8xi32>, tensor<4xi32>, tensor<4x3xi32>) -> (tensor<2x4x1x16x512xf32>, tensor<2x4x16x1xf32>)
    return
  }
}
// -----
module @deepseek_mtp_causal attributes {mla.target = #mla.target<chip = sm100>} {
  func.func @decode(%q: tensor<4x2x128x576xbf16>, %cache: tensor<64x128x576xbf16>, %bt: tensor<4x8xi32>, %lens: tensor<4xi32>, %bounds: tensor<4x5xi32>) {
    %po, %pl = mla.decode_partial %q, %cache[%bt, %lens] bounds %bounds layout #mla.cache_layout<format = bf16, page_size = 128> scale 0.0721687824 causal num_splits 4
        : (tensor<4x2x128x576xbf16>, tensor<64x128x576xbf16>, tensor<4x8xi32>, tensor<4xi32>, tensor<4x5xi32>) -> (tensor<4x4x2x128x512xf32>, tensor<4x4x128x2xf32>)
    return
  }
}
// -----
module @narrow_f16 attributes {mla.target = #mla.target<chip = sm100>} {
  func.func @decode(%q: tensor<3x2x16x288xf16>, %cache: tensor<32x128x288xf16>, %bt: tensor<3x4xi32>, %lens: tensor<3xi32>, %bounds: tensor<3x3xi32>) {
    %po, %pl = mla.decode_partial %q, %cache[%bt, %lens] bounds %bounds layout #mla.cache_layout<format = f16, page_size = 128> scale 0.0721687824 causal num_splits 2
        : (tensor<3x2x16x288xf16>, tensor<32x128x288xf16>, tensor<3x4xi32>, tensor<3xi32>, tensor<3x3xi32>) -> (tensor<2x3x2x16x256xf32>, tensor<2x3x16x2xf32>)
    return
  }
}
