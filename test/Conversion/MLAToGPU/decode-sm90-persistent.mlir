// The persistent seesaw sm_90a decode (tile suffix b, DecodeTiling::persistent):
// the seesaw build (decode-sm90-seesaw.mlir) launched over (row blocks, SM
// parts) and walking its part's row of a balanced plan's schedule (%arg16,
// SplitPlanner.h's columns) piece by piece, with cu_splits (%arg17) giving
// each request's piece count.
//  * Two more parameters after counters, out and lse; a "Q empty" barrier
//    of the 256 consumer threads after the ring's.
//  * The producer (40 registers: at 24 it spilled; the consumers get 232) reads the schedule row and loops over its
//    requests, carrying the ring index across them (scf.for iter_args): the
//    first piece's Q goes out before its blocks; a later piece's Q after
//    the piece's first two blocks (at block index 2), behind a wait on
//    "Q empty", or after the loop for a two-block piece.
//  * The consumers loop over the same requests; each piece waits for its Q
//    with the piece's parity, runs the seesaw loop, writes its rows (the
//    final bf16 rows of a one-piece request to out, %arg14) and arrives on
//    "Q empty" behind a proxy fence; a request of several pieces is merged
//    by the last of them to finish its row block (a release atom.add on its
//    counter, no spin: no nanosleep loop).
// RUN: mla-opt %s --mla-select-gpu-tiling --convert-mla-to-gpu | FileCheck %s
// RUN: mla-opt %s --mla-to-nvvm="chip=sm_90a format=isa" -o %t.mlir
// RUN: %python %mla_src_root/scripts/extract-gpu-payload.py %t.mlir %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: %if ptxas %{ /usr/local/cuda/bin/ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS %}
// The causal s_q = 2 build passes ptxas as cleanly.
// RUN: sed -e 's/x1x128x/x2x128x/g; s/x128x1xf32/x128x2xf32/g; s/scale 0.0721687824/scale 0.0721687824 causal/' %s | mla-opt --mla-to-nvvm="chip=sm_90a format=isa" -o %t.causal.mlir
// RUN: %python %mla_src_root/scripts/extract-gpu-payload.py %t.causal.mlir %t.causal.ptx
// RUN: %if ptxas %{ /usr/local/cuda/bin/ptxas -arch=sm_90a -v %t.causal.ptx -o %t.causal.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS %}

module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @decode(%q: tensor<?x1x128x576xbf16>, %cache: tensor<?x64x576xbf16>,
                    %bt: tensor<?x?xi32>, %lens: tensor<?xi32>)
      -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens]
        layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
        {mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 64, stages = 2, wgmma = true, pipelined = true, seesaw = true, persistent = true>}
        : (tensor<?x1x128x576xbf16>, tensor<?x64x576xbf16>, tensor<?x?xi32>, tensor<?xi32>)
        -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>)
    return %o, %l : tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>
  }
}

// CHECK-LABEL: llvm.func @mla_decode_partial(
// CHECK-SAME:    %arg13: !llvm.ptr<1>, %arg14: !llvm.ptr<1>, %arg15: !llvm.ptr<1>, %arg16: !llvm.ptr<1>, %arg17: !llvm.ptr<1>)
// CHECK:         nvvm.mbarrier.init %{{.*}}, %c1_i32
// The P groups of slots 0 and 1 (256 arrivals each), then "Q empty".
// CHECK:         nvvm.mbarrier.init %{{.*}}, %c256_i32
// CHECK:         nvvm.mbarrier.init %{{.*}}, %c256_i32
// CHECK:         nvvm.mbarrier.init %{{.*}}, %c256_i32
// CHECK-NEXT:    nvvm.fence.mbarrier.init
// CHECK-NOT:     nvvm.mbarrier.init
// CHECK:         nvvm.barrier0
// Producer: the schedule row, the request loop carrying the ring index.
// CHECK:         nvvm.setmaxregister  decrease 40
// CHECK-COUNT-5: llvm.getelementptr %arg16[
// CHECK:         scf.for %[[REQ:.*]] = %{{.*}} iter_args(%[[RING:.*]] = %c0_i32{{.*}}) -> (i32)
// CHECK:           llvm.getelementptr %arg17[%[[REQ]]]
// CHECK:           llvm.getelementptr %arg3[%[[REQ]]]
// The first piece's Q, then the block loop with a later piece's Q at block 2.
// CHECK:           scf.if
// CHECK:             nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c73728_i32
// CHECK-COUNT-9:     nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg11,
// CHECK:           scf.for
// CHECK:             scf.if
// CHECK:               nvvm.mbarrier.try_wait.parity
// CHECK:               nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c73728_i32
// CHECK-COUNT-9:       nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg11,
// CHECK:             nvvm.mbarrier.try_wait.parity
// CHECK:             nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg12,
// CHECK:           scf.if
// CHECK:             nvvm.mbarrier.try_wait.parity
// CHECK-COUNT-9:     nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg11,
// CHECK:           scf.yield
// Consumers: the same request loop, the seesaw inside it.
// CHECK:         nvvm.setmaxregister  increase 232
// CHECK-COUNT-5: llvm.getelementptr %arg16[
// CHECK:         scf.for %{{.*}} iter_args(%{{.*}} = %c0_i32{{.*}}) -> (i32)
// CHECK:           llvm.getelementptr %arg17[
// CHECK:           nvvm.mbarrier.try_wait.parity
// CHECK:           wgmma.mma_async.sync.aligned.m64n64k16
// The final rows of a one-piece request go to out (%arg14), the LSE to %arg15.
// CHECK:           llvm.getelementptr %arg14[
// CHECK:           llvm.getelementptr %arg15[
// "Q empty": fenced, then every consumer thread arrives.
// CHECK:           nvvm.fence.proxy
// CHECK-COUNT-5:   arith.
// CHECK-NEXT:      llvm.getelementptr
// CHECK-NEXT:      nvvm.mbarrier.arrive
// Then the merge of a request of several pieces (cu_splits' difference > 1).
// CHECK-NEXT:      arith.constant 1
// CHECK-NEXT:      arith.cmpi slt
// CHECK-NEXT:      scf.if
// CHECK-NOT:       scf.while
// CHECK:           scf.yield

// PTX:       .entry mla_decode_partial(
// PTX:       atom.release.gpu.global.add.u32
// PTX-NOT:   nanosleep

// PTXAS-NOT:   {{C75[0-9][0-9]|warning}}
// PTXAS:       0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT:   {{C75[0-9][0-9]|warning}}
// PTXAS:       0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT:   {{C75[0-9][0-9]|warning}}
// PTXAS:       0 bytes spill stores, 0 bytes spill loads
// PTXAS:       Used 168 registers
