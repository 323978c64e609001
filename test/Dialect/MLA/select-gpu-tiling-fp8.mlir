// mla-select-gpu-tiling picks the fp8 decode variants: the tiling that fits
// the raw fp8 staging ring in shared memory, and no fp8 decode on sm_100a.
// RUN: mla-opt %s --split-input-file --mla-select-gpu-tiling --verify-diagnostics | FileCheck %s

// At 64 query rows or more fp8_e4m3 takes the seesaw build (E4M3 wgmmas on
// the raw codes), fp8_e4m3_token (584-byte rows, which that build cannot
// TMA-load) the wgmma kernel; at 16 query rows every fp8 format takes the
// 16-row mma.sync kernel (four warps and two stages for fp8_e4m3, eight
// warps of 8 tokens and three stages for the formats scaled in f32).
// CHECK-LABEL: func.func @e4m3_heads128
// CHECK: mla.decode {{.*}}mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 64, stages = 2, wgmma = true, pipelined = true, seesaw = true>
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @e4m3_heads128(%q: tensor<2x1x128x576xbf16>, %c: tensor<8x64x576xi8>, %bt: tensor<2x4xi32>, %l: tensor<2xi32>) -> (tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>) {
    %o, %s = mla.decode %q, %c[%bt, %l] layout #mla.cache_layout<format = fp8_e4m3, page_size = 64, scale = 0.5 : f32> scale 0.0721687824
        : (tensor<2x1x128x576xbf16>, tensor<8x64x576xi8>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>)
    return %o, %s : tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>
  }
}

// -----

// CHECK-LABEL: func.func @e4m3_heads16
// CHECK: mla.decode {{.*}}mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 16, warps_n = 4, kv_block = 64, stages = 2>
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @e4m3_heads16(%q: tensor<2x1x16x576xbf16>, %c: tensor<8x64x576xi8>, %bt: tensor<2x4xi32>, %l: tensor<2xi32>) -> (tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>) {
    %o, %s = mla.decode %q, %c[%bt, %l] layout #mla.cache_layout<format = fp8_e4m3, page_size = 64, scale = 0.5 : f32> scale 0.0721687824
        : (tensor<2x1x16x576xbf16>, tensor<8x64x576xi8>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>)
    return %o, %s : tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>
  }
}

// -----

// The same at 32 rows (N = 16, Sq = 2): the wgmma kernel.
// CHECK-LABEL: func.func @e4m3_heads16_sq2
// CHECK: mla.decode {{.*}}mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 64, stages = 2, wgmma = true>
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @e4m3_heads16_sq2(%q: tensor<2x2x16x576xbf16>, %c: tensor<8x64x576xi8>, %bt: tensor<2x4xi32>, %l: tensor<2xi32>) -> (tensor<2x2x16x512xbf16>, tensor<2x16x2xf32>) {
    %o, %s = mla.decode %q, %c[%bt, %l] layout #mla.cache_layout<format = fp8_e4m3, page_size = 64, scale = 0.5 : f32> scale 0.0721687824 causal
        : (tensor<2x2x16x576xbf16>, tensor<8x64x576xi8>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x2x16x512xbf16>, tensor<2x16x2xf32>)
    return %o, %s : tensor<2x2x16x512xbf16>, tensor<2x16x2xf32>
  }
}

// -----

// CHECK-LABEL: func.func @token_heads16
// CHECK: mla.decode {{.*}}mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 16, warps_n = 4, kv_block = 32, stages = 2>
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @token_heads16(%q: tensor<2x1x16x576xbf16>, %c: tensor<8x64x584xi8>, %bt: tensor<2x4xi32>, %l: tensor<2xi32>) -> (tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>) {
    %o, %s = mla.decode %q, %c[%bt, %l] layout #mla.cache_layout<format = fp8_e4m3_token, page_size = 64> scale 0.0721687824
        : (tensor<2x1x16x576xbf16>, tensor<8x64x584xi8>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>)
    return %o, %s : tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>
  }
}

// -----

// fp8_ds_mla takes the seesaw build at 64 query rows (its 656-byte rows
// overflow shared memory next to the wgmma kernel's tiles) and the 16-row
// kernel at 16.
// CHECK-LABEL: func.func @ds_heads128
// CHECK: mla.decode {{.*}}mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 64, stages = 2, wgmma = true, pipelined = true, seesaw = true>
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @ds_heads128(%q: tensor<2x1x128x576xbf16>, %c: tensor<8x64x656xi8>, %bt: tensor<2x4xi32>, %l: tensor<2xi32>) -> (tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>) {
    %o, %s = mla.decode %q, %c[%bt, %l] layout #mla.cache_layout<format = fp8_ds_mla, page_size = 64> scale 0.0721687824
        : (tensor<2x1x128x576xbf16>, tensor<8x64x656xi8>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>)
    return %o, %s : tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>
  }
}

// -----

// fp8_ds_mla at 16 rows reads the raw ring (decodeReadsRawFp8): 64-token
// blocks.
// CHECK-LABEL: func.func @ds_heads16
// CHECK: mla.decode {{.*}}mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 16, warps_n = 4, kv_block = 64, stages = 2>
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @ds_heads16(%q: tensor<2x1x16x576xbf16>, %c: tensor<8x64x656xi8>, %bt: tensor<2x4xi32>, %l: tensor<2xi32>) -> (tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>) {
    %o, %s = mla.decode %q, %c[%bt, %l] layout #mla.cache_layout<format = fp8_ds_mla, page_size = 64> scale 0.0721687824
        : (tensor<2x1x16x576xbf16>, tensor<8x64x656xi8>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>)
    return %o, %s : tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>
  }
}

// -----

// The sm_100a decode reads fp8_e4m3 and fp8_ds_mla caches, not
// fp8_e4m3_token (decode-sm100-fp8.mlir has the kernels).
module attributes {mla.target = #mla.target<chip = sm100>} {
  func.func @sm100(%q: tensor<2x1x128x576xbf16>, %c: tensor<8x128x584xi8>, %bt: tensor<2x4xi32>, %l: tensor<2xi32>) -> (tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>) {
    // expected-error @+1 {{no GPU decode tiling for this shape on sm_100a: the sm_100a (tcgen05) decode does not read fp8_e4m3_token caches}}
    %o, %s = mla.decode %q, %c[%bt, %l] layout #mla.cache_layout<format = fp8_e4m3_token, page_size = 128> scale 0.0721687824
        : (tensor<2x1x128x576xbf16>, tensor<8x128x584xi8>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>)
    return %o, %s : tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>
  }
}

// -----

// A given seesaw tiling is refused over fp8_e4m3_token, with the reason: its
// odd 584-byte rows start where no TMA box may (the H200 raised an illegal
// instruction on 2026-12-05).
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @token_seesaw(%q: tensor<2x1x128x576xbf16>, %c: tensor<8x64x584xi8>, %bt: tensor<2x4xi32>, %l: tensor<2xi32>) -> (tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>) {
    // expected-error @+1 {{cannot run this decode on sm_90a: the seesaw decode (tile suffix s) does not read fp8_e4m3_token caches: every odd 584-byte row starts 8 bytes off a 16-byte boundary}}
    %o, %s = mla.decode %q, %c[%bt, %l] layout #mla.cache_layout<format = fp8_e4m3_token, page_size = 64> scale 0.0721687824
        {mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 64, stages = 2, wgmma = true, pipelined = true, seesaw = true>}
        : (tensor<2x1x128x576xbf16>, tensor<8x64x584xi8>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>)
    return %o, %s : tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>
  }
}
