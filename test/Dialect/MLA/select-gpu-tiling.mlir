// mla-select-gpu-tiling picks the decode kernel's tiles from the target and
// the shape, keeps a given tiling and leaves CPU modules alone.
// RUN: mla-opt %s --split-input-file --mla-select-gpu-tiling --verify-diagnostics | FileCheck %s

// DeepSeek-V3 on sm_90a: the seesaw build of the warp-specialised wgmma
// kernel (64 rows, 2 consumer warpgroups, 64-token blocks) for every head
// count.
// CHECK-LABEL: func.func @heads128
// CHECK: mla.decode_partial {{.*}}mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 64, stages = 2, wgmma = true, pipelined = true, seesaw = true>
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @heads128(%q: tensor<?x1x128x576xbf16>, %c: tensor<?x64x576xbf16>, %bt: tensor<?x?xi32>, %l: tensor<?xi32>, %b: tensor<?x?xi32>)
      -> (tensor<?x?x1x128x512xf32>, tensor<?x?x128x1xf32>) {
    %o, %s = mla.decode_partial %q, %c[%bt, %l] bounds %b layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 num_splits 4
        : (tensor<?x1x128x576xbf16>, tensor<?x64x576xbf16>, tensor<?x?xi32>, tensor<?xi32>, tensor<?x?xi32>) -> (tensor<?x?x1x128x512xf32>, tensor<?x?x128x1xf32>)
    return %o, %s : tensor<?x?x1x128x512xf32>, tensor<?x?x128x1xf32>
  }
}

// -----

// CHECK-LABEL: func.func @heads16
// CHECK: mla.decode {{.*}}mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 64, stages = 2, wgmma = true, pipelined = true, seesaw = true>
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @heads16(%q: tensor<2x1x16x576xbf16>, %c: tensor<8x64x576xbf16>, %bt: tensor<2x4xi32>, %l: tensor<2xi32>)
      -> (tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>) {
    %o, %s = mla.decode %q, %c[%bt, %l] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
        : (tensor<2x1x16x576xbf16>, tensor<8x64x576xbf16>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>)
    return %o, %s : tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>
  }
}

// -----

// CHECK-LABEL: func.func @mtp
// CHECK: mla.decode {{.*}}mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 64, stages = 2, wgmma = true, pipelined = true, seesaw = true>
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
    // expected-error @+1 {{kv_block = 48 must give each of the 2 warps a multiple of 16 tokens (or 8)}}
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

// -----

// Pages of 16 tokens rule the wgmma kernel's 64-token blocks out: the
// mma.sync kernel with 16-token blocks (one warp per row block on them).
// CHECK-LABEL: func.func @page16
// CHECK: mla.decode {{.*}}mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 1, kv_block = 16, stages = 3>
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @page16(%q: tensor<2x1x128x576xbf16>, %c: tensor<32x16x576xbf16>, %bt: tensor<2x16xi32>, %l: tensor<2xi32>)
      -> (tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>) {
    %o, %s = mla.decode %q, %c[%bt, %l] layout #mla.cache_layout<format = bf16, page_size = 16> scale 0.0721687824
        : (tensor<2x1x128x576xbf16>, tensor<32x16x576xbf16>, tensor<2x16xi32>, tensor<2xi32>) -> (tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>)
    return %o, %s : tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>
  }
}

// -----

// L = 256, R = 32 (L+R = 288 is not a whole number of 64-column boxes):
// the mma.sync kernel.
// CHECK-LABEL: func.func @narrow
// CHECK: mla.decode {{.*}}mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 16, warps_n = 4, kv_block = 64, stages = 2>
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @narrow(%q: tensor<2x1x16x288xbf16>, %c: tensor<8x64x288xbf16>, %bt: tensor<2x4xi32>, %l: tensor<2xi32>)
      -> (tensor<2x1x16x256xbf16>, tensor<2x16x1xf32>) {
    %o, %s = mla.decode %q, %c[%bt, %l] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
        : (tensor<2x1x16x288xbf16>, tensor<8x64x288xbf16>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x16x256xbf16>, tensor<2x16x1xf32>)
    return %o, %s : tensor<2x1x16x256xbf16>, tensor<2x16x1xf32>
  }
}

// -----

// The warp-specialised TMA build is selectable by its tiling, and kept.
// CHECK-LABEL: func.func @pipelined
// CHECK: mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 64, stages = 2, wgmma = true, pipelined = true>
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @pipelined(%q: tensor<2x2x16x576xbf16>, %c: tensor<8x64x576xbf16>, %bt: tensor<2x4xi32>, %l: tensor<2xi32>)
      -> (tensor<2x2x16x512xbf16>, tensor<2x16x2xf32>) {
    %o, %s = mla.decode %q, %c[%bt, %l] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 causal
        {mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 64, stages = 2, wgmma = true, pipelined = true>}
        : (tensor<2x2x16x576xbf16>, tensor<8x64x576xbf16>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x2x16x512xbf16>, tensor<2x16x2xf32>)
    return %o, %s : tensor<2x2x16x512xbf16>, tensor<2x16x2xf32>
  }
}

// -----

// Three 72 KiB stages next to Q do not fit in shared memory.
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @pipelined3(%q: tensor<2x1x128x576xbf16>, %c: tensor<8x64x576xbf16>, %bt: tensor<2x4xi32>, %l: tensor<2xi32>)
      -> (tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>) {
    // expected-error @+1 {{needs 303872 bytes of shared memory}}
    %o, %s = mla.decode %q, %c[%bt, %l] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
        {mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 64, stages = 3, wgmma = true, pipelined = true>}
        : (tensor<2x1x128x576xbf16>, tensor<8x64x576xbf16>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>)
    return %o, %s : tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>
  }
}

// -----

module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @pipelinedNoWgmma(%q: tensor<2x1x128x576xbf16>, %c: tensor<8x64x576xbf16>, %bt: tensor<2x4xi32>, %l: tensor<2xi32>)
      -> (tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>) {
    %o, %s = mla.decode %q, %c[%bt, %l] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
        // expected-error @+1 {{pipelined needs wgmma}}
        {mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 64, stages = 2, pipelined = true>}
        : (tensor<2x1x128x576xbf16>, tensor<8x64x576xbf16>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>)
    return %o, %s : tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>
  }
}

// -----

// The seesaw schedule of the TMA build is selectable by its tiling, and kept.
// CHECK-LABEL: func.func @seesaw
// CHECK: mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 64, stages = 2, wgmma = true, pipelined = true, seesaw = true>
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @seesaw(%q: tensor<2x2x16x576xbf16>, %c: tensor<8x64x576xbf16>, %bt: tensor<2x4xi32>, %l: tensor<2xi32>)
      -> (tensor<2x2x16x512xbf16>, tensor<2x16x2xf32>) {
    %o, %s = mla.decode %q, %c[%bt, %l] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 causal
        {mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 64, stages = 2, wgmma = true, pipelined = true, seesaw = true>}
        : (tensor<2x2x16x576xbf16>, tensor<8x64x576xbf16>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x2x16x512xbf16>, tensor<2x16x2xf32>)
    return %o, %s : tensor<2x2x16x512xbf16>, tensor<2x16x2xf32>
  }
}

// -----

module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @seesawNotPipelined(%q: tensor<2x1x128x576xbf16>, %c: tensor<8x64x576xbf16>, %bt: tensor<2x4xi32>, %l: tensor<2xi32>)
      -> (tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>) {
    %o, %s = mla.decode %q, %c[%bt, %l] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
        // expected-error @+1 {{seesaw needs pipelined}}
        {mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 64, stages = 2, wgmma = true, seesaw = true>}
        : (tensor<2x1x128x576xbf16>, tensor<8x64x576xbf16>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>)
    return %o, %s : tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>
  }
}

// -----

module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @persistentNotSeesaw(%q: tensor<2x1x128x576xbf16>, %c: tensor<8x64x576xbf16>, %bt: tensor<2x4xi32>, %l: tensor<2xi32>)
      -> (tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>) {
    %o, %s = mla.decode %q, %c[%bt, %l] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
        // expected-error @+1 {{persistent needs seesaw}}
        {mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 64, stages = 2, wgmma = true, pipelined = true, persistent = true>}
        : (tensor<2x1x128x576xbf16>, tensor<8x64x576xbf16>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>)
    return %o, %s : tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>
  }
}

// -----

module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @persistentFp8(%q: tensor<2x1x128x576xbf16>, %c: tensor<8x64x656xi8>, %bt: tensor<2x4xi32>, %l: tensor<2xi32>)
      -> (tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>) {
    // expected-error @+1 {{the persistent decode (tile suffix b) is the seesaw build over a balanced split plan}}
    %o, %s = mla.decode %q, %c[%bt, %l] layout #mla.cache_layout<format = fp8_ds_mla, page_size = 64> scale 0.0721687824
        {mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 64, stages = 2, wgmma = true, pipelined = true, seesaw = true, persistent = true>}
        : (tensor<2x1x128x576xbf16>, tensor<8x64x656xi8>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>)
    return %o, %s : tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>
  }
}


// -----

module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @multicastPersistent(%q: tensor<2x1x128x576xbf16>, %c: tensor<8x64x576xbf16>, %bt: tensor<2x4xi32>, %l: tensor<2xi32>)
      -> (tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>) {
    %o, %s = mla.decode %q, %c[%bt, %l] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
        // expected-error @+1 {{multicast needs seesaw and not persistent}}
        {mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 64, stages = 2, wgmma = true, pipelined = true, seesaw = true, persistent = true, multicast = true>}
        : (tensor<2x1x128x576xbf16>, tensor<8x64x576xbf16>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>)
    return %o, %s : tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>
  }
}

// -----

// The two CTAs of a cluster must be one query token's heads: N = 64 has a
// single 64-row block per token.
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @multicastNarrowHeads(%q: tensor<2x1x64x576xbf16>, %c: tensor<8x64x576xbf16>, %bt: tensor<2x4xi32>, %l: tensor<2xi32>)
      -> (tensor<2x1x64x512xbf16>, tensor<2x64x1xf32>) {
    // expected-error @+1 {{the multicast decode (tile suffix m) is the seesaw build over bf16/f16 caches on sm_90a, uniform s_q, with N a multiple of 128 (each cluster's two 64-row blocks are one query token's heads), got N = 64; use tile suffix s}}
    %o, %s = mla.decode %q, %c[%bt, %l] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
        {mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 64, stages = 2, wgmma = true, pipelined = true, seesaw = true, multicast = true>}
        : (tensor<2x1x64x576xbf16>, tensor<8x64x576xbf16>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x64x512xbf16>, tensor<2x64x1xf32>)
    return %o, %s : tensor<2x1x64x512xbf16>, tensor<2x64x1xf32>
  }
}

// -----

// A given multicast tiling is kept.
// CHECK-LABEL: func.func @multicastKept
// CHECK: mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 64, stages = 2, wgmma = true, pipelined = true, seesaw = true, multicast = true>
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @multicastKept(%q: tensor<2x1x128x576xbf16>, %c: tensor<8x64x576xbf16>, %bt: tensor<2x4xi32>, %l: tensor<2xi32>)
      -> (tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>) {
    %o, %s = mla.decode %q, %c[%bt, %l] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
        {mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 64, stages = 2, wgmma = true, pipelined = true, seesaw = true, multicast = true>}
        : (tensor<2x1x128x576xbf16>, tensor<8x64x576xbf16>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>)
    return %o, %s : tensor<2x1x128x512xbf16>, tensor<2x128x1xf32>
  }
}
