// The sm_100a decode partial kernel: tcgen05 MMAs with tensor-memory
// accumulators, checked in the emitted IR and in the PTX of the full
// mla-to-nvvm pipeline.
// RUN: mla-opt %s --split-input-file --mla-select-gpu-tiling --convert-mla-to-gpu=chip=sm_100a | FileCheck %s
// RUN: mla-opt %s --split-input-file --mla-to-nvvm="chip=sm_100a format=isa" | FileCheck %s --check-prefix=PTX

// DeepSeek-V3 at TP1 (N = 128, L = 512, R = 64, bf16, 128-token pages) with
// a given tiling: 32-token KV blocks so that Q and two stages fit.
// CHECK-LABEL: gpu.module @mla_kernels
// CHECK: llvm.mlir.global external @mla_sm100_dynamic_smem() {addr_space = 3 : i32, alignment = 128 : i64} : !llvm.array<0 x i8>
// CHECK: gpu.func @mla_decode_partial(%{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: f32) kernel
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>
// CHECK: nvvm.tcgen05.alloc %{{.*}}, %[[COLS:.*]] : !llvm.ptr<3>, i32
// CHECK: nvvm.tcgen05.relinquish_alloc_permit
// CHECK: nvvm.cp.async.shared.global {{.*}}, 16, cache = cg
// Unswizzled shared-memory descriptors (version bit 46): Q (and every K
// block) K-major with LBO = 128 and SBO = 16 * 576 bytes
// (8 << 16 | 576 << 32 | 1 << 46), P with SBO = 16 * 32 bytes (32 << 32).
// CHECK: arith.constant 72842645864448 : i64
// CHECK: arith.constant 70506183655424 : i64
// QK^T: M = 64, N = 32, bf16 x bf16 -> f32, both operands K-major
// (idesc = 4 << 24 | 4 << 17 | 1 << 10 | 1 << 7 | 1 << 4).
// CHECK: nvvm.tcgen05.mma {{.*}} %c67634320_i32, {{.*}}kind = #nvvm.tcgen05_mma_kind<f16>
// CHECK: nvvm.tcgen05.commit
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.tcgen05.ld {{.*}}shape_32x32b{{.*}} : vector<32xi32>
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.f32"
// CHECK: nvvm.vote.sync any
// CHECK: nvvm.tcgen05.st {{.*}}shape_32x32b{{.*}} : vector<32xi32>
// V is the same block read MN-major: LBO = 16 * 576 (576 << 16), SBO = 128
// (8 << 32).
// CHECK: arith.constant 70403141664768 : i64
// PV: N = L/2 = 256 per half, B (the latent rows) MN-major (bit 16).
// CHECK: nvvm.tcgen05.mma {{.*}} %c71369872_i32, {{.*}}kind = #nvvm.tcgen05_mma_kind<f16>
// CHECK: nvvm.tcgen05.mma {{.*}} %c71369872_i32{{.*}}, {{.*}}kind = #nvvm.tcgen05_mma_kind<f16>
// CHECK: nvvm.tcgen05.commit
// CHECK: nvvm.tcgen05.dealloc %{{.*}}, %[[COLS]] : !llvm.ptr<6>, i32
// CHECK: gpu.return
// The device planner goes with every decode image (decode-plan.mlir).
// CHECK: gpu.func @mla_decode_plan(
// CHECK: llvm.atomicrmw _or

// PTX: .target sm_100a
// PTX: .extern .shared .align 128 .b8 mla_sm100_dynamic_smem[];
// PTX: .entry mla_decode_partial(
// PTX: .maxntid 128, 1, 1
// PTX: tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32
// PTX: cp.async.cg.shared.global
// PTX: tcgen05.mma.cta_group::1.kind::f16
// PTX: tcgen05.commit.cta_group::1.mbarrier::arrive::one
// PTX: tcgen05.ld.sync.aligned.32x32b.x32.b32
// PTX: ex2.approx.f32
// PTX: tcgen05.st.sync.aligned.32x32b.x32.b32
// PTX: tcgen05.mma.cta_group::1.kind::f16
// PTX: tcgen05.dealloc.cta_group::1.sync.aligned.b32
module attributes {mla.target = #mla.target<chip = sm100>} {
  func.func @decode_deepseek(%q: tensor<2x1x128x576xbf16>, %cache: tensor<64x128x576xbf16>, %bt: tensor<2x8xi32>,
                             %lens: tensor<2xi32>, %bounds: tensor<2x5xi32>) {
    %po, %pl = mla.decode_partial %q, %cache[%bt, %lens] bounds %bounds layout #mla.cache_layout<format = bf16, page_size = 128> scale 0.0721687824 num_splits 4
        {mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 1, kv_block = 32, stages = 2>}
        : (tensor<2x1x128x576xbf16>, tensor<64x128x576xbf16>, tensor<2x8xi32>, tensor<2xi32>, tensor<2x5xi32>) -> (tensor<4x2x1x128x512xf32>, tensor<4x2x128x1xf32>)
    return
  }
}

// -----

// A narrow latent (L = 256, R = 32), f16, 16 heads, two causal query tokens,
// tiled by mla-select-gpu-tiling (64-token KV blocks fit here).
// CHECK-LABEL: gpu.module @mla_kernels
// CHECK: gpu.func @mla_decode_partial(
// CHECK: nvvm.tcgen05.alloc
// QK^T: N = 64, f16 operands (type fields 0).
// CHECK: nvvm.tcgen05.mma {{.*}} %c68157456_i32,
// CHECK: nvvm.tcgen05.ld {{.*}} : vector<64xi32>
// PV: N = L/2 = 128 per half.
// CHECK: nvvm.tcgen05.mma {{.*}} %c69271568_i32,
// CHECK: nvvm.tcgen05.dealloc

// PTX: .target sm_100a
// PTX: .entry mla_decode_partial(
// PTX: tcgen05.alloc.cta_group::1
// PTX: tcgen05.mma.cta_group::1.kind::f16
// PTX: tcgen05.commit.cta_group::1
// PTX: tcgen05.ld.sync.aligned.32x32b.x64.b32
// PTX: tcgen05.dealloc.cta_group::1
module attributes {mla.target = #mla.target<chip = sm100>} {
  func.func @decode_narrow(%q: tensor<3x2x16x288xf16>, %cache: tensor<32x128x288xf16>, %bt: tensor<3x4xi32>,
                           %lens: tensor<3xi32>, %bounds: tensor<3x3xi32>) {
    %po, %pl = mla.decode_partial %q, %cache[%bt, %lens] bounds %bounds layout #mla.cache_layout<format = f16, page_size = 128> scale 0.0721687824 causal num_splits 2
        : (tensor<3x2x16x288xf16>, tensor<32x128x288xf16>, tensor<3x4xi32>, tensor<3xi32>, tensor<3x3xi32>) -> (tensor<2x3x2x16x256xf32>, tensor<2x3x16x2xf32>)
    return
  }
}
