// The sm_90a mma.sync decode (pinned by its tiling): partial kernel
// (cp.async staging, ldmatrix, mma.sync, base-2 softmax; the softmax scale is
// the last of the eleven shared parameters, then the in-kernel combine's
// counters, out and lse), the device planner (decode-plan.mlir) and the
// combine kernel, and the PTX they become.
// RUN: mla-opt %s --mla-select-gpu-tiling --convert-mla-to-gpu | FileCheck %s
// RUN: mla-opt %s --mla-to-nvvm="chip=sm_90a format=isa" | FileCheck %s --check-prefix=PTX

// CHECK: module attributes {gpu.container_module}
// CHECK-NOT: func.func
// CHECK: gpu.module @mla_kernels
// CHECK: llvm.mlir.global external @mla_dyn_smem() {addr_space = 3 : i32, alignment = 1024 : i64}
// CHECK-LABEL: gpu.func @mla_decode_partial(
// CHECK-SAME: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: f32, %[[COUNTERS:.*]]: !llvm.ptr<1>, %[[OUT:.*]]: !llvm.ptr<1>, %[[LSE:.*]]: !llvm.ptr<1>) kernel
// CHECK-SAME: known_block_size = array<i32: 256, 1, 1>
// CHECK-SAME: nvvm.maxntid = array<i32: 256, 1, 1>
// CHECK: nvvm.cp.async.shared.global {{.*}}, 16, cache = cg
// CHECK: nvvm.cp.async.commit.group
// CHECK: scf.for
// CHECK: nvvm.cp.async.wait.group 1
// CHECK: nvvm.ldmatrix {{.*}}layout = #nvvm.mma_layout<row>, num = 4 : i32
// CHECK: nvvm.mma.sync A[{{.*}}]  B[{{.*}}]  C[{{.*}}]  {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>}
// CHECK: nvvm.shfl.sync bfly
// CHECK: ex2.approx.ftz.f32
// CHECK: nvvm.ldmatrix {{.*}}layout = #nvvm.mma_layout<col>, num = 4 : i32
// The rows go out once, behind one branch on the split count: with one split
// (KernelABI.h) as the final bf16 rows (pairs packed into 4-byte stores, no
// combine runs), else as f32 partials.
// CHECK: %[[ONE:.*]] = arith.cmpi eq, %arg9, %c1_i32{{.*}} : i32
// CHECK-NEXT: scf.if %[[ONE]] {
// CHECK-NOT: vector<2xf32>, !llvm.ptr<1>
// CHECK: arith.truncf {{.*}} : vector<2xf32> to vector<2xbf16>
// CHECK: llvm.getelementptr %arg5[{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, bf16
// CHECK: llvm.store {{.*}} {alignment = 4 : i64} : i32, !llvm.ptr<1>
// CHECK: lg2.approx.ftz.f32
// CHECK: llvm.store {{.*}} : f32, !llvm.ptr<1>
// CHECK: } else {
// CHECK-NOT: bf16
// CHECK: llvm.getelementptr %arg5[{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
// CHECK: llvm.store {{.*}} {alignment = 8 : i64} : vector<2xf32>, !llvm.ptr<1>
// Given counters and S > 1 (KernelABI.h's decodeMergesAsLastPiece), thread 0
// counts the CTA into its row block's counter after a CTA barrier (a release
// atom); the piece that completes the count fences for acquire and resets
// the word, and after a second barrier its warps merge the block's rows into
// out and lse as mla_combine would (no CTA waits for another).
// CHECK: %[[CPTR:.*]] = llvm.ptrtoint %[[COUNTERS]]
// CHECK: %[[GIVEN:.*]] = arith.cmpi ne, %[[CPTR]]
// CHECK: %[[MANY:.*]] = arith.cmpi slt, %{{.*}}, %arg9 : i32
// CHECK: %[[MERGE:.*]] = arith.andi %[[GIVEN]], %[[MANY]]
// CHECK: scf.if %[[MERGE]] {
// CHECK-NEXT: nvvm.barrier0
// CHECK: %[[WORD:.*]] = llvm.getelementptr %[[COUNTERS]][
// CHECK: "fence.acq_rel.gpu;"
// CHECK: %[[BEFORE:.*]] = llvm.inline_asm has_side_effects "atom.release.gpu.global.add.u32
// CHECK: %[[LASTN:.*]] = arith.subi %arg9, %{{.*}} : i32
// CHECK: %[[LAST:.*]] = arith.cmpi eq, %[[BEFORE]], %[[LASTN]]
// CHECK: scf.if %[[LAST]] {
// CHECK-NEXT: "fence.acq_rel.gpu;"
// CHECK: "st.relaxed.gpu.global.u32 [$0], $1;"
// CHECK: nvvm.barrier0
// CHECK: scf.for
// CHECK: ex2.approx.ftz.f32
// CHECK: llvm.getelementptr %[[OUT]][{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, bf16
// CHECK: llvm.getelementptr %[[LSE]][
// CHECK: gpu.return
// CHECK-LABEL: gpu.func @mla_decode_plan(
// CHECK-LABEL: gpu.func @mla_combine(
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>

// PTX: .target sm_90a
// PTX: .extern .shared .align 1024 .b8 mla_dyn_smem[]
// PTX: .entry mla_decode_partial(
// PTX: cp.async.cg.shared.global
// PTX: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// PTX: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// PTX: ex2.approx.ftz.f32
// PTX: ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// PTX: atom.release.gpu.global.add.u32
// PTX: st.relaxed.gpu.global.u32
// PTX: .entry mla_decode_plan(
// PTX: .entry mla_combine(

module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @decode(%q: tensor<?x1x128x576xbf16>, %cache: tensor<?x64x576xbf16>,
                    %bt: tensor<?x?xi32>, %lens: tensor<?xi32>)
      -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens]
        layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
        {mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 32, stages = 3>}
        : (tensor<?x1x128x576xbf16>, tensor<?x64x576xbf16>, tensor<?x?xi32>, tensor<?xi32>)
        -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>)
    return %o, %l : tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>
  }
}
