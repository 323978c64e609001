// RUN: mla-opt %s --convert-mla-to-gpu=chip=sm_90a | FileCheck %s
// RUN: mla-opt %s --mla-to-nvvm="chip=sm_90a format=isa" -o %t.mlir
// RUN: %python %mla_src_root/scripts/extract-gpu-payload.py %t.mlir %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: %if ptxas %{ /usr/local/cuda/bin/ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS %}

// The sm_90a build of `mla_up_proj_kv`: a warp-specialised wgmma GEMM.
// latent and kv_b_proj come as by-value TMA descriptors; 384 threads; a
// 4-stage ring of full/empty mbarriers (empty counts the 256 consumer
// threads); the producer loads a 128-row latent box and a 256-row kv_b_proj
// box per 64-deep K slice; each consumer warpgroup issues 4 m64n256k16
// steps per slice (slice 0 with scale-d 0, before the loop), keeps one
// group in flight (wait_group 1) and hands the older slot back.
// CHECK-LABEL: llvm.func @mla_up_proj_kv(
// CHECK-SAME:    !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<16 x i64>, nvvm.grid_constant}
// CHECK-SAME:    nvvm.kernel, nvvm.maxntid = array<i32: 384, 1, 1>, nvvm.minctasm = 1 : i32
// The CTA's tile comes from the grid shape (grouped raster order).
// CHECK:         nvvm.read.ptx.sreg.nctaid.x
// CHECK:         nvvm.read.ptx.sreg.nctaid.y
// CHECK-COUNT-4: nvvm.mbarrier.init %{{.*}}, %c1_i32
// CHECK:         nvvm.barrier0
// CHECK:         nvvm.setmaxregister decrease 24
// CHECK:         scf.for
// CHECK:           nvvm.mbarrier.try_wait.parity
// CHECK:           nvvm.mbarrier.arrive.expect_tx
// CHECK-COUNT-2:   nvvm.cp.async.bulk.tensor.shared.cluster.global
// CHECK:         nvvm.setmaxregister increase 240
// CHECK:         nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
// CHECK:         nvvm.wgmma.commit.group.sync.aligned
// CHECK:         scf.for
// CHECK:           nvvm.mbarrier.try_wait.parity
// CHECK-COUNT-4:   wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
// CHECK:           nvvm.wgmma.wait.group.sync.aligned 1
// CHECK:           nvvm.mbarrier.arrive
// CHECK:         nvvm.wgmma.wait.group.sync.aligned 0
// The tile leaves through shared memory: both consumers meet on named
// barrier 1 (256 threads), stage their rows as bf16 pairs, meet per
// warpgroup, then store 16-byte vectors; column c = n*(P+V) + j goes to
// k_nope when j < P, else to v.
// CHECK:         nvvm.barrier id = %{{.*}} number_of_threads = %c256_i32
// CHECK:         llvm.store %{{.*}} {alignment = 4 : i64} : i32, !llvm.ptr<3>
// CHECK:         nvvm.barrier id = %{{.*}} number_of_threads = %c128_i32
// CHECK:         llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xi32>
// CHECK:         arith.remui %{{.*}}, %c256_i32{{[_0-9]*}} : i32
// CHECK:         arith.cmpi slt, %{{.*}}, %c128_i32{{[_0-9]*}} : i32
// CHECK:         llvm.store %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
// PTX-LABEL: .entry mla_up_proj_kv(
// PTX:         .param .align 64 .b8 mla_up_proj_kv_param_0[128]
// PTX:         cp.async.bulk.tensor.3d
// PTX:         wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
// ptxas keeps the wgmmas asynchronous and spills nothing.
// PTXAS-NOT:   {{C75[0-9][0-9]|warning}}
// PTXAS:       0 bytes spill stores, 0 bytes spill loads
func.func @upkv(%lat: tensor<?x512xbf16>, %w: tensor<4096x512xbf16>) -> (tensor<?x16x128xbf16>, tensor<?x16x128xbf16>) {
  %k, %v = mla.up_proj_kv %lat, %w : tensor<?x512xbf16>, tensor<4096x512xbf16> -> tensor<?x16x128xbf16>, tensor<?x16x128xbf16>
  return %k, %v : tensor<?x16x128xbf16>, tensor<?x16x128xbf16>
}
