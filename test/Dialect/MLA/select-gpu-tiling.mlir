// mla-select-gpu-tiling picks the decode kernel's tiles from the target and
// the shape, keeps a given tiling and leaves CPU modules alone.
// RUN: mla-opt %s --split-input-file --mla-select-gpu-tiling --verify-diagnostics | FileCheck %s

// Compute-bound (N*Sq = 128): 64 rows per CTA, 2 warps on the output columns.
// CHECK-LABEL: func.func @heads128
// CHECK: mla.decode_partial {{.*}}mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 32, stages = 2>
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @heads128(%q: tensor<?x1x128x576xbf16>, %c: tensor<?x64x576xbf16>, %bt: tensor<?x?xi32>, %l: tensor<?xi32>, %b: tensor<?x?xi32>)
      -> (tensor<?x?x1x128x512xf32>, tensor<?x?x128x1xf32>) {
    %o, %s = mla.decode_partial %q, %c[%bt, %l] bounds %b layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 num_splits 4
        : (tensor<?x1x128x576xbf16>, tensor<?x64x576xbf16>, tensor<?x?xi32>, tensor<?xi32>, tensor<?x?xi32>) -> (tensor<?x?x1x128x512xf32>, tensor<?x?x128x1xf32>)
    return %o, %s : tensor<?x?x1x128x512xf32>, tensor<?x?x128x1xf32>
  }
}

// -----

// Memory-bound (N*Sq = 16): one 16-row block, 4 warps, 64-token blocks.
// CHECK-LABEL: func.func @heads16
// CHECK: mla.decode {{.*}}mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 16, warps_n = 4, kv_block = 64, stages = 2>
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @heads16(%q: tensor<2x1x16x576xbf16>, %c: tensor<8x64x576xbf16>, %bt: tensor<2x4xi32>, %l: tensor<2xi32>)
      -> (tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>) {
    %o, %s = mla.decode %q, %c[%bt, %l] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
        : (tensor<2x1x16x576xbf16>, tensor<8x64x576xbf16>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>)
    return %o, %s : tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>
  }
}

// -----

// Two query rows of 16 heads (32 rows): 32 rows per CTA.
// CHECK-LABEL: func.func @mtp
// CHECK: mla.decode {{.*}}mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 32, warps_n = 2, kv_block = 32, stages = 2>
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @mtp(%q: tensor<2x2x16x576xbf16>, %c: tensor<8x64x576xbf16>, %bt: tensor<2x4xi32>, %l: tensor<2xi32>)
      -> (tensor<2x2x16x512xbf16>, tensor<2x16x2xf32>) {
    %o, %s = mla.decode %q, %c[%bt, %l] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 causal
        : (tensor<2x2x16x576xbf16>, tensor<8x64x576xbf16>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x2x16x512xbf16>, tensor<2x16x2xf32>)
    return %o, %s : tensor<2x2x16x512xbf16>, tensor<2x16x2xf32>
  }
}

// -----

// A tiling already present is kept.
// CHECK-LABEL: func.func @given
// CHECK: mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 32, warps_n = 4, kv_block = 64, stages = 2>
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @given(%q: tensor<2x1x128x576xbf16>, %c: tensor<8x64x576xbf16>, %bt: tensor<2x4xi32>, %l: tensor<2xi32>)
      -> (tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>) {
    %o, %s = mla.decode %q, %c[%bt, %l] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
        {mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 32, warps_n = 4, kv_block = 64, stages = 2>}
        : (tensor<2x1x128x576xbf16>, tensor<8x64x576xbf16>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>)
    return %o, %s : tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>
  }
}

// -----

// A given tiling that cannot run is an error naming the reason.
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @bad(%q: tensor<2x1x128x576xbf16>, %c: tensor<8x64x576xbf16>, %bt: tensor<2x4xi32>, %l: tensor<2xi32>)
      -> (tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>) {
    // expected-error @+1 {{kv_block = 48 must give each of the 2 warps a multiple of 16 tokens}}
    %o, %s = mla.decode %q, %c[%bt, %l] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
        {mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 48, stages = 2>}
        : (tensor<2x1x128x576xbf16>, tensor<8x64x576xbf16>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>)
    return %o, %s : tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>
  }
}

// -----

// CPU modules get no GPU tiling.
// CHECK-LABEL: func.func @cpu
// CHECK-NOT: mla.gpu_tiling
module attributes {mla.target = #mla.target<chip = cpu>} {
  func.func @cpu(%q: tensor<2x1x16x576xbf16>, %c: tensor<8x64x576xbf16>, %bt: tensor<2x4xi32>, %l: tensor<2xi32>)
      -> (tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>) {
    %o, %s = mla.decode %q, %c[%bt, %l] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
        : (tensor<2x1x16x576xbf16>, tensor<8x64x576xbf16>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>)
    return %o, %s : tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>
  }
}
