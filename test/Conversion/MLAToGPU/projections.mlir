// RUN: mla-opt %s --convert-mla-to-gpu=chip=sm_90a | FileCheck %s
// RUN: mla-opt %s --mla-to-nvvm="chip=sm_90a format=isa" | FileCheck --check-prefix=PTX %s
// RUN: %if ptxas %{ env CUDA_ROOT=/usr/local/cuda mla-opt %s --mla-to-nvvm="chip=sm_90a format=bin" -o /dev/null %}

// absorb_q and up_proj_out are batched GEMMs over heads with a dynamic token
// count: bf16/f16 on tensor cores (nvvm.mma.sync m16n8k16, f32
// accumulators, 64x64 tiles per CTA staged in static shared memory), f32 on
// FMAs.

// DeepSeek-V3 absorb_q (N = 128, P = 128, L = 512, R = 64), bf16.
// CHECK:       llvm.mlir.global internal @mla_absorb_q_smem() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<10240 x i8>
// CHECK-LABEL: gpu.func @mla_absorb_q(
// CHECK-SAME:    %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %[[T:.*]]: i32) kernel
// CHECK-SAME:    known_block_size = array<i32: 128, 1, 1>
// CHECK:         nvvm.read.ptx.sreg.ctaid.z
// CHECK:         llvm.mlir.addressof @mla_absorb_q_smem : !llvm.ptr<3>
// CHECK:         scf.for {{.*}} iter_args
// CHECK:         llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xi16>
// CHECK:         gpu.barrier
// CHECK:         llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<3> -> i32
// CHECK-COUNT-8: nvvm.mma.sync A[{{.*}}] B[{{.*}}] C[{{.*}}] {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// CHECK:         gpu.barrier
// CHECK:         arith.truncf %{{.*}} : f32 to bf16
// CHECK:         llvm.store %{{.*}} {alignment = 4 : i64} : vector<2xbf16>, !llvm.ptr<1>
// The RoPE part of q is copied through by the first column tile's CTAs.
// CHECK:         arith.constant 512 : i32
// CHECK:         llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xbf16>
// CHECK:         gpu.return
func.func @absorb(%q: tensor<?x128x192xbf16>, %w: tensor<128x128x512xbf16>) -> tensor<?x128x576xbf16> {
  %r = mla.absorb_q %q, %w : tensor<?x128x192xbf16>, tensor<128x128x512xbf16> -> tensor<?x128x576xbf16>
  return %r : tensor<?x128x576xbf16>
}

// up_proj_out at TP8 (N = 16, L = 512, V = 128), f16: fragments as
// vector<2xf16>, no RoPE copy.
// CHECK-LABEL: gpu.func @mla_up_proj_out(
// CHECK-COUNT-8: nvvm.mma.sync {{.*}} : (vector<2xf16>, vector<2xf16>, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// CHECK:         arith.truncf %{{.*}} : f32 to f16
// CHECK:         llvm.store %{{.*}} {alignment = 4 : i64} : vector<2xf16>, !llvm.ptr<1>
// CHECK-NOT:     vector<8xf16>
// CHECK:         gpu.return
func.func @up(%o: tensor<?x16x512xf16>, %w: tensor<16x512x128xf16>) -> tensor<?x2048xf16> {
  %r = mla.up_proj_out %o, %w : tensor<?x16x512xf16>, tensor<16x512x128xf16> -> tensor<?x2048xf16>
  return %r : tensor<?x2048xf16>
}

// A narrow model (P = 16: one 16-deep K step) whose output width is not a
// multiple of the 64-wide tile (L = 72).
// CHECK-LABEL: gpu.func @mla_absorb_q_1(
// CHECK:         llvm.mlir.addressof @mla_absorb_q_1_smem
// CHECK-COUNT-8: nvvm.mma.sync
// CHECK:         gpu.return
func.func @absorb_narrow(%q: tensor<?x4x48xbf16>, %w: tensor<4x16x72xbf16>) -> tensor<?x4x104xbf16> {
  %r = mla.absorb_q %q, %w : tensor<?x4x48xbf16>, tensor<4x16x72xbf16> -> tensor<?x4x104xbf16>
  return %r : tensor<?x4x104xbf16>
}

// f32: one thread per output element, an FMA loop over K.
// CHECK-LABEL: gpu.func @mla_absorb_q_2(
// CHECK-NOT:     nvvm.mma.sync
// CHECK:         scf.for
// CHECK:         llvm.intr.fma
// CHECK:         gpu.return
func.func @absorb_f32(%q: tensor<?x16x48xf32>, %w: tensor<16x32x256xf32>) -> tensor<?x16x272xf32> {
  %r = mla.absorb_q %q, %w : tensor<?x16x48xf32>, tensor<16x32x256xf32> -> tensor<?x16x272xf32>
  return %r : tensor<?x16x272xf32>
}

// PTX: .entry mla_absorb_q(
// PTX: ld.global.v4.b32
// PTX: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// PTX: cvt.rn.bf16x2.f32
// PTX: .entry mla_up_proj_out(
// PTX: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// PTX: .entry mla_absorb_q_2(
// PTX: fma.rn.f32
