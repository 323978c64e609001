// fp8 decode shapes for the ptxas test: one module per shape (format x N x
// Sq, a causal one, an f16 q). The N = 128 fp8_e4m3 and fp8_ds_mla ones pin
// the wgmma and mma.sync builds (the tiling pass would pick the seesaw one,
// which decode-sm90-seesaw-fp8*.mlir assemble).
module @e4m3_n128 attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @decode(%q: tensor<?x1x128x576xbf16>, %cache: tensor<?x64x576xi8>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = fp8_e4m3, page_size = 64, scale = 0.5 : f32> scale 0.0721687824 {mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 64, stages = 2, wgmma = true>}
        : (tensor<?x1x128x576xbf16>, tensor<?x64x576xi8>, tensor<?x?xi32>, tensor<?xi32>) -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>)
    return %o, %l : tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>
  }
}
// -----
module @e4m3_n16 attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @decode(%q: tensor<?x1x16x576xbf16>, %cache: tensor<?x64x576xi8>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> (tensor<?x1x16x512xbf16>, tensor<?x16x1xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = fp8_e4m3, page_size = 64, scale = 0.5 : f32> scale 0.0721687824
        : (tensor<?x1x16x576xbf16>, tensor<?x64x576xi8>, tensor<?x?xi32>, tensor<?xi32>) -> (tensor<?x1x16x512xbf16>, tensor<?x16x1xf32>)
    return %o, %l : tensor<?x1x16x512xbf16>, tensor<?x16x1xf32>
  }
}
// -----
module @token_n128 attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @decode(%q: tensor<?x1x128x576xbf16>, %cache: tensor<?x64x584xi8>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = fp8_e4m3_token, page_size = 64> scale 0.0721687824
        : (tensor<?x1x128x576xbf16>, tensor<?x64x584xi8>, tensor<?x?xi32>, tensor<?xi32>) -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>)
    return %o, %l : tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>
  }
}
// -----
module @token_n16_sq4 attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @decode(%q: tensor<?x4x16x576xbf16>, %cache: tensor<?x64x584xi8>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> (tensor<?x4x16x512xbf16>, tensor<?x16x4xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = fp8_e4m3_token, page_size = 64> scale 0.0721687824
        : (tensor<?x4x16x576xbf16>, tensor<?x64x584xi8>, tensor<?x?xi32>, tensor<?xi32>) -> (tensor<?x4x16x512xbf16>, tensor<?x16x4xf32>)
    return %o, %l : tensor<?x4x16x512xbf16>, tensor<?x16x4xf32>
  }
}
// -----
module @ds_n128 attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @decode(%q: tensor<?x1x128x576xbf16>, %cache: tensor<?x64x656xi8>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = fp8_ds_mla, page_size = 64> scale 0.0721687824 {mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 32, stages = 3>}
        : (tensor<?x1x128x576xbf16>, tensor<?x64x656xi8>, tensor<?x?xi32>, tensor<?xi32>) -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>)
    return %o, %l : tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>
  }
}
// -----
module @ds_n16_causal attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @decode(%q: tensor<?x2x16x576xbf16>, %cache: tensor<?x64x656xi8>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> (tensor<?x2x16x512xbf16>, tensor<?x16x2xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = fp8_ds_mla, page_size = 64> scale 0.0721687824 causal
        : (tensor<?x2x16x576xbf16>, tensor<?x64x656xi8>, tensor<?x?xi32>, tensor<?xi32>) -> (tensor<?x2x16x512xbf16>, tensor<?x16x2xf32>)
    return %o, %l : tensor<?x2x16x512xbf16>, tensor<?x16x2xf32>
  }
}
// -----
module @ds_f16 attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @decode(%q: tensor<?x1x16x576xf16>, %cache: tensor<?x64x656xi8>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> (tensor<?x1x16x512xf16>, tensor<?x16x1xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = fp8_ds_mla, page_size = 64> scale 0.0721687824
        : (tensor<?x1x16x576xf16>, tensor<?x64x656xi8>, tensor<?x?xi32>, tensor<?xi32>) -> (tensor<?x1x16x512xf16>, tensor<?x16x1xf32>)
    return %o, %l : tensor<?x1x16x512xf16>, tensor<?x16x1xf32>
  }
}
