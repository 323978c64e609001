// sm_90a decode over fp8 caches: the raw rows of each KV block are staged
// with 16-byte cp.async into a ring, then the warps that score a token slice
// dequantise that slice into the KV tile the MMAs read and meet at a named
// barrier of their own (id 1 + slice, 128 threads here) before Q K^T
// (the mma.sync kernel of fp8_e4m3 reads the raw ring itself: see below).
// fp8_e4m3 folds its per-tensor scale (the 12th parameter) into the scores'
// scale and the output, and computes in f16: Q is read once, scaled by the
// power of two 2^-e that puts the CTA's largest |q| below 2^15 (the largest
// exponent over the CTA: warp shuffles, then each warp's through shared
// memory) and stored as f16, 2^e goes into the scores' scale, and each
// pair of codes is one cvt.rn.f16x2.e4m3x2 (exact; no widening, prmt or
// multiply); its 576-byte rows are whole 16-byte chunks, zero-filled past
// the piece, so no select either. The wgmma build dequantises box by box (64 columns), issuing each
// box's four k-steps before converting the next. The N = 128 fp8_e4m3 and
// fp8_ds_mla cases pin these builds (wgmma, and mma.sync 64x2x32x3: two raw
// 656-byte stages do not fit beside the wgmma tiles); the tiling pass gives
// them the seesaw build (decode-sm90-seesaw-fp8*.mlir) and fp8_e4m3_token
// the wgmma one.
// RUN: mla-opt %s --split-input-file --mla-select-gpu-tiling --convert-mla-to-gpu | FileCheck %s

// CHECK-LABEL: gpu.func @mla_decode_partial(
// CHECK-SAME: %[[SCALE:[^:]*]]: f32, %[[KVSCALE:[^:]*]]: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>) kernel
// CHECK-SAME: known_block_size = array<i32: 256, 1, 1>
// CHECK: %[[L2E:.*]] = arith.mulf %[[SCALE]], %{{.*}} : f32
// CHECK: %[[KVS:.*]] = llvm.load %[[KVSCALE]] {{.*}} : !llvm.ptr<1> -> f32
// CHECK: %[[KVL2E:.*]] = arith.mulf %[[L2E]], %[[KVS]] : f32
// CHECK-NOT: nvvm.cp.async.shared.global
// CHECK: llvm.load {{.*}} : !llvm.ptr<1> -> vector<4xi32>
// CHECK: nvvm.shfl.sync bfly
// CHECK: nvvm.barrier0
// CHECK: %[[DOWN:.*]] = arith.bitcast %{{.*}} : i32 to f32
// CHECK: %[[UP:.*]] = arith.bitcast %{{.*}} : i32 to f32
// CHECK: arith.mulf %[[KVL2E]], %[[UP]] : f32
// CHECK: arith.mulf %{{.*}}, %[[DOWN]] : f32
// CHECK: arith.truncf %{{.*}} : vector<2xf32> to vector<2xf16>
// CHECK: llvm.store {{.*}} : vector<4xi32>, !llvm.ptr<3>
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
// CHECK: nvvm.cp.async.shared.global
// CHECK: scf.for
// CHECK: nvvm.barrier0
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-NOT: arith.mulf
// CHECK-NOT: arith.select
// CHECK: cvt.rn.f16x2.e4m3x2
// CHECK-NOT: arith.mulf
// CHECK-NOT: arith.extf
// CHECK-NOT: prmt.b32
// CHECK-NOT: arith.select
// CHECK: llvm.store {{.*}} : vector<4xi32>, !llvm.ptr<3>
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK: nvvm.barrier id = %c1_i32{{.*}} number_of_threads = %c128_i32
// CHECK: nvvm.barrier id = %c2_i32{{.*}} number_of_threads = %c128_i32
// CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16
// CHECK-NOT: nvvm.wgmma.wait.group.sync.aligned
// CHECK: cvt.rn.f16x2.e4m3x2
// CHECK: nvvm.barrier id = %c1_i32{{.*}} number_of_threads = %c128_i32
// CHECK: wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16
// CHECK: scf.yield
// CHECK: %[[INV:.*]] = arith.mulf %{{.*}}, %[[KVS]] : f32
// CHECK: arith.mulf %{{.*}}, %[[INV]] : f32
// CHECK-LABEL: gpu.func @mla_combine(
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @e4m3(%q: tensor<?x1x128x576xbf16>, %cache: tensor<?x64x576xi8>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>)
      -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens]
        layout #mla.cache_layout<format = fp8_e4m3, page_size = 64, scale = 0.5 : f32> scale 0.0721687824
        {mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 64, stages = 2, wgmma = true>}
        : (tensor<?x1x128x576xbf16>, tensor<?x64x576xi8>, tensor<?x?xi32>, tensor<?xi32>)
        -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>)
    return %o, %l : tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>
  }
}

// -----

// fp8_e4m3_token: the two f32 scales after the L+R codes, read from the
// staged row, multiply the codes in f32 before one rounding to bf16; 584-byte
// rows share 16-byte chunks with the next row, so tokens past the piece are
// selected to zero. Eleven parameters. (128 heads: at 16 query rows the
// fp8 formats take the 16-row mma.sync kernel.)
// CHECK-LABEL: gpu.func @mla_decode_partial(
// CHECK-SAME: %{{.*}}: i32, %{{.*}}: f32, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>) kernel
// CHECK: %[[ZERO:.*]] = llvm.mlir.zero : vector<4xi32>
// CHECK: llvm.load {{.*}} : !llvm.ptr<3> -> f32
// CHECK: cvt.rn.f16x2.e4m3x2
// CHECK: arith.mulf
// CHECK: arith.truncf {{.*}} : vector<2xf32> to vector<2xbf16>
// CHECK: arith.select %{{.*}}, %{{.*}}, %[[ZERO]] : vector<4xi32>
// CHECK: nvvm.barrier id = %c1_i32{{.*}} number_of_threads = %c128_i32
// CHECK: wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @token(%q: tensor<?x1x128x576xbf16>, %cache: tensor<?x64x584xi8>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>)
      -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens]
        layout #mla.cache_layout<format = fp8_e4m3_token, page_size = 64> scale 0.0721687824
        : (tensor<?x1x128x576xbf16>, tensor<?x64x584xi8>, tensor<?x?xi32>, tensor<?xi32>)
        -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>)
    return %o, %l : tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>
  }
}

// -----

// fp8_e4m3 at 16 query rows (default 16x4x64x2, 128 threads): the MMAs read
// the raw ring, no KV tile and no dequantisation or named barrier. Q is
// staged in the raw K fragments' k order (4-byte stores of its f16 pairs).
// Per block: each 64-column group is one 16-byte load of codes per n tile
// (two here), then four k-steps, each one cvt.rn.f16x2.e4m3x2 pair per
// MMA (9 x 4 x 2 = 72 score MMAs); after the CTA barrier that publishes P,
// each 16-token k-step loads four rows of V codes (odd quad lanes in the
// order 1, 0, 3, 2), transposes their bytes (four prmt with constant
// selectors, four with the lane's selectors 0x5410/0x7632, or 0x4501/0x6723
// (17665/26403) that put odd lanes' rows back in order) and converts each
// column: 4 x 16 = 64 output MMAs.
// CHECK-LABEL: gpu.func @mla_decode_partial(
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>
// CHECK: llvm.store {{.*}} : i32, !llvm.ptr<3>
// CHECK: %[[SEL_EVEN:.*]] = arith.select %{{.*}}, %c17665_i32, %c21520_i32 : i32
// CHECK: %[[SEL_ODD:.*]] = arith.select %{{.*}}, %c26403_i32, %c30258_i32 : i32
// CHECK: scf.for
// CHECK-NOT: nvvm.barrier id
// CHECK-COUNT-2: llvm.load {{.*}} : !llvm.ptr<3> -> vector<4xi32>
// CHECK: cvt.rn.f16x2.e4m3x2
// CHECK-COUNT-72: nvvm.mma.sync
// CHECK: nvvm.barrier0
// CHECK-COUNT-4: llvm.load {{.*}} : !llvm.ptr<3> -> vector<4xi32>
// CHECK-NOT: arith.select {{.*}} : vector<4xi32>
// CHECK: prmt.b32 $0, $1, $2, 0x5140;
// CHECK: prmt.b32 $0, $1, $2, 0x7362;
// CHECK: prmt.b32 $0, $1, $2, $3;", "=r,r,r,r" %{{.*}}, %{{.*}}, %[[SEL_EVEN]]
// CHECK: prmt.b32 $0, $1, $2, $3;", "=r,r,r,r" %{{.*}}, %{{.*}}, %[[SEL_ODD]]
// CHECK: cvt.rn.f16x2.e4m3x2
// CHECK-COUNT-64: nvvm.mma.sync
// CHECK-NOT: nvvm.mma.sync
// CHECK: scf.yield
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @e4m3_16(%q: tensor<?x1x16x576xbf16>, %cache: tensor<?x64x576xi8>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>)
      -> (tensor<?x1x16x512xbf16>, tensor<?x16x1xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens]
        layout #mla.cache_layout<format = fp8_e4m3, page_size = 64, scale = 0.5 : f32> scale 0.0721687824
        : (tensor<?x1x16x576xbf16>, tensor<?x64x576xi8>, tensor<?x?xi32>, tensor<?xi32>)
        -> (tensor<?x1x16x512xbf16>, tensor<?x16x1xf32>)
    return %o, %l : tensor<?x1x16x512xbf16>, tensor<?x16x1xf32>
  }
}

// -----

// fp8_e4m3_token at 16 query rows, tiled 16x8x64x3 (the default is
// 16x4x32x2): the 16-row mma.sync kernel with eight
// warps of 8 tokens each and three raw stages, 256
// threads. Each warp dequantises its own tokens, two 16-byte chunks of a row
// per loop iteration (both loaded and converted before either is stored),
// and meets its own named barrier (ids 1..8, 32 threads); it scores its
// single n tile two k-steps per ldmatrix.x4, into four independent
// accumulator chains (the first four MMAs start from zero, the fifth
// continues the first), summed (3 x 4 adds) after the last of the 36 MMAs.
// CHECK-LABEL: gpu.func @mla_decode_partial(
// CHECK-SAME: known_block_size = array<i32: 256, 1, 1>
// CHECK: scf.for {{.*}} to %c4_i32
// CHECK-COUNT-2: cvt.rn.f16x2.e4m3x2
// CHECK-NOT: llvm.store
// CHECK: cvt.rn.f16x2.e4m3x2
// CHECK: llvm.store {{.*}} : vector<4xi32>, !llvm.ptr<3>
// CHECK: llvm.store {{.*}} : vector<4xi32>, !llvm.ptr<3>
// CHECK: nvvm.barrier id = %c8_i32{{.*}} number_of_threads = %c32_i32
// CHECK-COUNT-4: nvvm.mma.sync {{.*}} C[%cst_{{[0-9]+}}, %cst_{{[0-9]+}},
// CHECK-NOT: C[%cst
// CHECK-COUNT-32: nvvm.mma.sync
// CHECK-NOT: nvvm.mma.sync
// CHECK-COUNT-12: arith.addf
// CHECK: nvvm.shfl.sync bfly
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @token16(%q: tensor<?x1x16x576xbf16>, %cache: tensor<?x64x584xi8>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>)
      -> (tensor<?x1x16x512xbf16>, tensor<?x16x1xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens]
        layout #mla.cache_layout<format = fp8_e4m3_token, page_size = 64> scale 0.0721687824
        {mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 16, warps_n = 8, kv_block = 64, stages = 3>}
        : (tensor<?x1x16x576xbf16>, tensor<?x64x584xi8>, tensor<?x?xi32>, tensor<?xi32>)
        -> (tensor<?x1x16x512xbf16>, tensor<?x16x1xf32>)
    return %o, %l : tensor<?x1x16x512xbf16>, tensor<?x16x1xf32>
  }
}

// -----

// fp8_ds_mla: the mma.sync kernel (64 rows, 2 x 4 warps, 32-token blocks,
// three raw stages): the four warps of a token slice dequantise it and meet
// at their named barrier; the RoPE part is copied as bf16.
// CHECK-LABEL: gpu.func @mla_decode_partial(
// CHECK-SAME: known_block_size = array<i32: 256, 1, 1>
// CHECK: cvt.rn.f16x2.e4m3x2
// CHECK: llvm.load {{.*}} : !llvm.ptr<3> -> vector<4xi32>
// CHECK: nvvm.barrier id = %c1_i32{{.*}} number_of_threads = %c128_i32
// CHECK: nvvm.barrier id = %c2_i32{{.*}} number_of_threads = %c128_i32
// CHECK: nvvm.mma.sync
// CHECK-NOT: wgmma
// CHECK-LABEL: gpu.func @mla_combine(
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @ds(%q: tensor<?x1x128x576xbf16>, %cache: tensor<?x64x656xi8>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>)
      -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens]
        layout #mla.cache_layout<format = fp8_ds_mla, page_size = 64> scale 0.0721687824
        {mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 32, stages = 3>}
        : (tensor<?x1x128x576xbf16>, tensor<?x64x656xi8>, tensor<?x?xi32>, tensor<?xi32>)
        -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>)
    return %o, %l : tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>
  }
}

// -----

// fp8_ds_mla at 16 query rows (default 16x4x64x2, 128 threads): the MMAs
// read the raw ring as for fp8_e4m3, no named barrier. Per block: the RoPE
// part first, 8 bf16 MMAs (two 16-byte loads per n tile hold four k-steps'
// B fragments); then per scale tile its 8 k-steps of f16 MMAs (16 per tile,
// 64 in all) added to the scores times the tokens' scales; the warp's tile
// maximum (a shuffle reduction) goes out before the barrier of the row
// maxima; P is stored once per scale tile, scaled per token, two f16 stores
// per pair (the score columns are tokens 4 apart: 2 n tiles x 4 tiles x 2
// rows x 2); after the barrier that publishes P, 64 output MMAs whose V
// rows need no lane-dependent transpose (k order = token order).
// CHECK-LABEL: gpu.func @mla_decode_partial(
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>
// CHECK: scf.for
// CHECK-NOT: nvvm.barrier id
// CHECK-COUNT-8: nvvm.mma.sync {{.*}}multiplicandAPtxType = #nvvm.mma_type<bf16>
// CHECK-COUNT-64: nvvm.mma.sync {{.*}} : (vector<2xf16>, vector<2xf16>, f32)
// CHECK: nvvm.shfl.sync bfly {{.*}} : f32 -> f32
// CHECK: nvvm.barrier0
// CHECK: nvvm.rcp.approx.ftz.f
// CHECK-COUNT-32: llvm.store {{.*}} : f16, !llvm.ptr<3>
// CHECK-NOT: : f16, !llvm.ptr<3>
// CHECK: nvvm.barrier0
// CHECK-COUNT-64: nvvm.mma.sync {{.*}} : (vector<2xf16>, vector<2xf16>, f32)
// CHECK-NOT: nvvm.mma.sync
// CHECK: scf.yield
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @ds16(%q: tensor<?x1x16x576xbf16>, %cache: tensor<?x64x656xi8>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>)
      -> (tensor<?x1x16x512xbf16>, tensor<?x16x1xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens]
        layout #mla.cache_layout<format = fp8_ds_mla, page_size = 64> scale 0.0721687824
        : (tensor<?x1x16x576xbf16>, tensor<?x64x656xi8>, tensor<?x?xi32>, tensor<?xi32>)
        -> (tensor<?x1x16x512xbf16>, tensor<?x16x1xf32>)
    return %o, %l : tensor<?x1x16x512xbf16>, tensor<?x16x1xf32>
  }
}
