// The warp-specialised sm_90a decode (tile suffix p, pinned by its tiling):
// an llvm.func kernel taking q and the cache as two more by-value TMA maps,
// 384 threads. The producer warpgroup shrinks to 24 registers and loads Q
// (nine 64-column boxes) once, then per block waits for its ring slot to be
// empty and loads nine boxes, each completing its own full barrier (or, for
// an empty piece's placeholder block, only arrives on them). The consumers
// grow to 240 registers and score block 0 (36 k-steps of m64n32k16, each
// box's four once that box has landed, after a wgmma.fence), then per
// block issue the next S and this P V
// (4 k-steps of m64n256k16) as two groups, wait for S alone (wait_group 1),
// exchange row maxima on named barrier 1 of 256 threads, wait for P V
// (wait_group 0), free the slot, and publish P (fenced to the async proxy).
// RUN: mla-opt %s --mla-select-gpu-tiling --convert-mla-to-gpu | FileCheck %s
// RUN: mla-opt %s --mla-to-nvvm="chip=sm_90a format=isa" -o %t.mlir
// RUN: %python %mla_src_root/scripts/extract-gpu-payload.py %t.mlir %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: %if ptxas %{ /usr/local/cuda/bin/ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS %}

// CHECK-LABEL: llvm.func @mla_decode_partial(
// CHECK-SAME:    %arg10: f32, %arg11: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<16 x i64>, nvvm.grid_constant}, %arg12: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<16 x i64>, nvvm.grid_constant})
// CHECK-SAME:    nvvm.kernel, nvvm.maxntid = array<i32: 384, 1, 1>, nvvm.minctasm = 1 : i32
// Q full, then per stage nine box-full barriers (1 arrival) and an empty
// one (256 consumer arrivals).
// CHECK:         nvvm.mbarrier.init %{{.*}}, %c1_i32
// CHECK-COUNT-9: nvvm.mbarrier.init %{{.*}}, %c1_i32
// CHECK:         nvvm.mbarrier.init %{{.*}}, %c256_i32
// CHECK-COUNT-9: nvvm.mbarrier.init %{{.*}}, %c1_i32
// CHECK:         nvvm.mbarrier.init %{{.*}}, %c256_i32
// The Q tile's load goes out with the barriers' init, before the piece's
// bounds are read (seq_lens, split_bounds) and the CTA syncs.
// CHECK:         nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c73728_i32
// CHECK-COUNT-9: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg11,
// CHECK:         llvm.getelementptr %arg3[
// CHECK:         nvvm.barrier0
// CHECK:         nvvm.setmaxregister  decrease 24
// CHECK-NOT:     %arg11,
// The first block's cache row is looked up before the loop, each next
// block's before the wait for a free slot (its latency overlaps the wait).
// CHECK:         scf.if
// CHECK:           llvm.load
// CHECK:         scf.for
// CHECK:           scf.if
// CHECK:             llvm.load
// CHECK:           nvvm.mbarrier.try_wait.parity
// CHECK:           scf.if
// CHECK-NOT:         llvm.load
// CHECK:             nvvm.mbarrier.arrive.expect_tx %[[BOX0:[0-9]+]], %c8192_i32
// CHECK:             nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg12, %[[BOX0]],
// CHECK:             nvvm.mbarrier.arrive.expect_tx %[[BOX1:[0-9]+]], %c8192_i32
// CHECK:             nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg12, %[[BOX1]],
// CHECK-COUNT-7:     nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg12,
// CHECK:           } else {
// CHECK-COUNT-9:     nvvm.mbarrier.arrive %
// CHECK:         nvvm.setmaxregister  increase 240
// CHECK:         nvvm.mbarrier.try_wait.parity
// CHECK:         nvvm.mbarrier.try_wait.parity
// CHECK-NEXT:    nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16
// CHECK:         nvvm.mbarrier.try_wait.parity
// CHECK-NEXT:    nvvm.wgmma.fence.aligned
// CHECK-COUNT-32: wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16
// CHECK:         nvvm.wgmma.commit.group.sync.aligned
// CHECK:         nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:         nvvm.barrier id = %{{.*}} number_of_threads = %c256_i32
// CHECK:         ex2.approx.ftz.f32
// CHECK:         nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK:         nvvm.barrier id = %{{.*}} number_of_threads = %c256_i32
// CHECK:         scf.for
// CHECK:           "mov.b32 $0, $1;"
// CHECK:           nvvm.mbarrier.try_wait.parity
// CHECK-NEXT:      nvvm.wgmma.fence.aligned
// CHECK-COUNT-36:  wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16
// CHECK:           nvvm.wgmma.commit.group.sync.aligned
// CHECK:           nvvm.wgmma.fence.aligned
// CHECK-COUNT-4:   wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {{.*}} p, 1, 1, 0, 1;
// CHECK:           nvvm.wgmma.commit.group.sync.aligned
// CHECK:           nvvm.wgmma.wait.group.sync.aligned 1
// CHECK:           nvvm.barrier id = %{{.*}} number_of_threads = %c256_i32
// CHECK:           ex2.approx.ftz.f32
// CHECK:           nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:           nvvm.mbarrier.arrive
// CHECK:           nvvm.barrier id = %{{.*}} number_of_threads = %c256_i32
// CHECK:           nvvm.fence.proxy
// CHECK:           nvvm.barrier id = %{{.*}} number_of_threads = %c256_i32
// CHECK:         }
// CHECK:         nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
// CHECK:         nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:         nvvm.barrier id = %{{.*}} number_of_threads = %c256_i32
// CHECK-NOT:     nvvm.cp.async.shared.global
// CHECK-LABEL: gpu.func @mla_decode_plan(
// CHECK-LABEL: gpu.func @mla_combine(

// PTX-LABEL: .entry mla_decode_partial(
// PTX:         .param .align 64 .b8 mla_decode_partial_param_11[128]
// PTX:         .param .align 64 .b8 mla_decode_partial_param_12[128]
// PTX:         .maxntid 384, 1, 1
// PTX:         setmaxnreg.dec.sync.aligned.u32 24
// PTX:         cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// PTX:         setmaxnreg.inc.sync.aligned.u32 240
// PTX:         wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16
// PTX:         bar.sync 1, 256;
// PTX:         wgmma.wait_group.sync.aligned 1;
// PTX:         wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
// PTX-LABEL: .entry mla_decode_plan(

// ptxas: no spill, and no C75xx notice (wgmma serialised, or a
// warpgroup.arrive injected) in any of the three kernels.
// PTXAS-NOT:   {{C75[0-9][0-9]|warning}}
// PTXAS:       0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT:   {{C75[0-9][0-9]|warning}}
// PTXAS:       0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT:   {{C75[0-9][0-9]|warning}}
// PTXAS:       0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT:   {{C75[0-9][0-9]|warning}}

module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @decode(%q: tensor<?x1x128x576xbf16>, %cache: tensor<?x64x576xbf16>,
                    %bt: tensor<?x?xi32>, %lens: tensor<?xi32>)
      -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens]
        layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
        {mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 64, stages = 2, wgmma = true, pipelined = true>}
        : (tensor<?x1x128x576xbf16>, tensor<?x64x576xbf16>, tensor<?x?xi32>, tensor<?xi32>)
        -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>)
    return %o, %l : tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>
  }
}
