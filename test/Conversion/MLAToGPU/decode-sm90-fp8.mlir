// sm_90a decode over fp8 caches: the raw rows of each KV block are staged
// with 16-byte cp.async into a ring, then dequantised (cvt.rn.f16x2.e4m3x2,
// times the scale, one rounding to bf16) into the KV tile the MMAs read,
// tokens past the piece as zeros; fp8_e4m3 reads its per-tensor scale from
// a 12th parameter. The tiling pass picks wgmma where two raw stages fit
// (fp8_e4m3, fp8_e4m3_token) and mma.sync for fp8_ds_mla.
// RUN: mla-opt %s --split-input-file --mla-select-gpu-tiling --convert-mla-to-gpu | FileCheck %s

// CHECK-LABEL: gpu.func @mla_decode_partial(
// CHECK-SAME: %{{.*}}: f32, %[[KVSCALE:.*]]: !llvm.ptr<1>) kernel
// CHECK-SAME: known_block_size = array<i32: 256, 1, 1>
// CHECK: llvm.load %[[KVSCALE]] {{.*}} : !llvm.ptr<1> -> f32
// CHECK: nvvm.cp.async.shared.global
// CHECK: scf.for
// CHECK: llvm.mlir.zero : vector<4xi32>
// CHECK: cvt.rn.f16x2.e4m3x2
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK: wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16
// CHECK: wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
// CHECK-LABEL: gpu.func @mla_combine(
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @e4m3(%q: tensor<?x1x128x576xbf16>, %cache: tensor<?x64x576xi8>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>)
      -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens]
        layout #mla.cache_layout<format = fp8_e4m3, page_size = 64, scale = 0.5 : f32> scale 0.0721687824
        : (tensor<?x1x128x576xbf16>, tensor<?x64x576xi8>, tensor<?x?xi32>, tensor<?xi32>)
        -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>)
    return %o, %l : tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>
  }
}

// -----

// fp8_e4m3_token: the two f32 scales after the L+R codes, read from the
// staged row; eleven parameters.
// CHECK-LABEL: gpu.func @mla_decode_partial(
// CHECK-SAME: %{{.*}}: i32, %{{.*}}: f32) kernel
// CHECK: cvt.rn.f16x2.e4m3x2
// CHECK: llvm.load {{.*}} : !llvm.ptr<3> -> f32
// CHECK: wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @token(%q: tensor<?x1x16x576xbf16>, %cache: tensor<?x64x584xi8>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>)
      -> (tensor<?x1x16x512xbf16>, tensor<?x16x1xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens]
        layout #mla.cache_layout<format = fp8_e4m3_token, page_size = 64> scale 0.0721687824
        : (tensor<?x1x16x576xbf16>, tensor<?x64x584xi8>, tensor<?x?xi32>, tensor<?xi32>)
        -> (tensor<?x1x16x512xbf16>, tensor<?x16x1xf32>)
    return %o, %l : tensor<?x1x16x512xbf16>, tensor<?x16x1xf32>
  }
}

// -----

// fp8_ds_mla: the mma.sync kernel (64 rows, 2 x 4 warps, 32-token blocks,
// three raw stages); the RoPE part is copied as bf16.
// CHECK-LABEL: gpu.func @mla_decode_partial(
// CHECK-SAME: known_block_size = array<i32: 256, 1, 1>
// CHECK: cvt.rn.f16x2.e4m3x2
// CHECK: llvm.load {{.*}} : !llvm.ptr<3> -> vector<4xi32>
// CHECK: nvvm.mma.sync
// CHECK-NOT: wgmma
// CHECK-LABEL: gpu.func @mla_combine(
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @ds(%q: tensor<?x1x128x576xbf16>, %cache: tensor<?x64x656xi8>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>)
      -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens]
        layout #mla.cache_layout<format = fp8_ds_mla, page_size = 64> scale 0.0721687824
        : (tensor<?x1x128x576xbf16>, tensor<?x64x656xi8>, tensor<?x?xi32>, tensor<?xi32>)
        -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>)
    return %o, %l : tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>
  }
}
