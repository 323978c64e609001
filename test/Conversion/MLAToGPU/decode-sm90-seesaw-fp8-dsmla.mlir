// The seesaw sm_90a decode over an fp8_ds_mla cache (tile suffix s, opt-in;
// KernelABI.h decodeSeesawReadsE4M3 and decodeSeesawScaleTiles), pinned by
// its tiling:
//  * seventeen parameters: no kv_scale, three by-value maps (%arg11 q,
//    unused; %arg12 the cache's byte map; %arg13 the rows' scales, 16-byte
//    boxes), then the combine's counters, out and lse;
//  * per block, the four latent boxes at byte columns 0..384, the RoPE box
//    (bf16) at byte 528 and, on the RoPE box's barrier (8192 + 1024 bytes),
//    the scales from byte 512 through the scale map;
//  * a warpgroup scores its block tile by tile in one accumulator: tile 0's
//    8 E4M3 wgmmas and a commit; the RoPE box rewritten in place over the
//    last tile's scale (four reciprocals: the row's four clamped scales),
//    a warpgroup sync; then per further tile a wait, the per-column factor,
//    a fence and its 8 wgmmas; the last tile's go with the 4 bf16 RoPE
//    wgmmas in one group; warpgroup 0 arrives on "S0 done" once it has
//    issued them (S1's wgmmas may fill the chain's waits), and warpgroup 1
//    frees V0_R's raw boxes after "P0 ready", not after "S0 done";
//  * warp 1 of the producer warpgroup reduces each block's largest scale
//    per tile once its RoPE box has landed (a butterfly over the warp per
//    tile) and arrives on the slot's "maxima ready" barrier; before
//    converting its V columns a consumer warpgroup waits for that barrier
//    (no shuffle, no warpgroup sync), takes reciprocals of its tiles'
//    running maxima and scales each converted chunk (mul.f16x2).
// RUN: mla-opt %s --mla-select-gpu-tiling --convert-mla-to-gpu | FileCheck %s
// RUN: mla-opt %s --mla-to-nvvm="chip=sm_90a format=isa" -o %t.mlir
// RUN: %python %mla_src_root/scripts/extract-gpu-payload.py %t.mlir %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: FileCheck %s --check-prefix=TMA < %t.ptx
// RUN: %if ptxas %{ /usr/local/cuda/bin/ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS %}
// The causal s_q = 2 build passes ptxas as cleanly.
// RUN: sed -e 's/x1x128x/x2x128x/g; s/x128x1xf32/x128x2xf32/g; s/scale 0.0721687824/scale 0.0721687824 causal/' %s | mla-opt --mla-to-nvvm="chip=sm_90a format=isa" -o %t.causal.mlir
// RUN: %python %mla_src_root/scripts/extract-gpu-payload.py %t.causal.mlir %t.causal.ptx
// RUN: %if ptxas %{ /usr/local/cuda/bin/ptxas -arch=sm_90a -v %t.causal.ptx -o %t.causal.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS %}

// CHECK-LABEL: llvm.func @mla_decode_partial(
// CHECK-SAME:    %arg10: f32, %arg11: !llvm.ptr {{{.*}}nvvm.grid_constant}, %arg12: !llvm.ptr {{{.*}}nvvm.grid_constant}, %arg13: !llvm.ptr {{{.*}}nvvm.grid_constant}, %arg14: !llvm.ptr<1>, %arg15: !llvm.ptr<1>, %arg16: !llvm.ptr<1>)
// CHECK-NOT:     llvm.load %arg11
// CHECK:         nvvm.setmaxregister  decrease 24
// CHECK:         scf.for
// CHECK:           scf.if
// CHECK:             nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg12, %{{.*}}, box[%c0_i32{{.*}}, %c0_i32{{.*}}, %[[ROW:.*]]] :
// CHECK:             nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg12, %{{.*}}, box[%c128_i32{{.*}}, %c0_i32{{.*}}, %[[ROW]]] :
// CHECK:             nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg12, %{{.*}}, box[%c256_i32{{.*}}, %c0_i32{{.*}}, %[[ROW]]] :
// CHECK:             nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg12, %{{.*}}, box[%c384_i32{{.*}}, %c0_i32{{.*}}, %[[ROW]]] :
// CHECK:             nvvm.mbarrier.arrive.expect_tx %[[BAR:.*]], %c9216_i32
// CHECK:             nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg12, %[[BAR]], box[%c528_i32{{.*}}, %c0_i32{{.*}}, %[[ROW]]] :
// CHECK:             nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg13, %[[BAR]], box[%c512_i32{{.*}}, %c0_i32{{.*}}, %[[ROW]]] :
// CHECK-NOT:         nvvm.cp.async.bulk.tensor
// CHECK:           } else {
// CHECK:         nvvm.mbarrier.try_wait.parity
// CHECK-COUNT-4:   nvvm.shfl.sync  bfly %{{.*}}, %{{.*}}, %c1_i32
// CHECK-COUNT-4:   nvvm.shfl.sync  bfly %{{.*}}, %{{.*}}, %c16_i32
// CHECK:           nvvm.mbarrier.arrive
// CHECK:         nvvm.setmaxregister  increase 240
// CHECK:         cvt.rn.satfinite.e4m3x2.f32 lo, $2, $1;
// CHECK:         arith.truncf %{{.*}} : vector<2xf32> to vector<2xbf16>
// CHECK:         scf.for
// CHECK-COUNT-8:   wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3
// CHECK-NOT:       wgmma.mma_async
// CHECK:           nvvm.wgmma.commit.group.sync.aligned
// CHECK:           nvvm.mbarrier.try_wait.parity
// CHECK-COUNT-4:   nvvm.rcp.approx.ftz.f
// CHECK:           arith.truncf %{{.*}} : vector<2xf32> to vector<2xbf16>
// CHECK:           nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
// CHECK:           nvvm.barrier id = %c4_i32{{.*}} number_of_threads = %c128_i32
// CHECK-NEXT:      nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-COUNT-32:  arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK:           nvvm.wgmma.fence.aligned
// CHECK-COUNT-8:   wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3
// CHECK-NOT:       wgmma.mma_async
// CHECK:           nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT:      nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:           nvvm.wgmma.fence.aligned
// CHECK-COUNT-8:   wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3
// CHECK-NOT:       wgmma.mma_async
// CHECK:           nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT:      nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:           nvvm.wgmma.fence.aligned
// CHECK-COUNT-8:   wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3
// CHECK-COUNT-4:   wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// CHECK-NOT:       wgmma.mma_async
// CHECK:           nvvm.barrier.arrive id = %c6_i32{{.*}} number_of_threads = %c256_i32
// CHECK-NEXT:      nvvm.wgmma.commit.group.sync.aligned
// CHECK-NOT:       nvvm.shfl.sync
// CHECK-NOT:       nvvm.barrier id
// CHECK:           nvvm.mbarrier.try_wait.parity
// CHECK-NOT:       nvvm.shfl.sync
// CHECK-NOT:       nvvm.barrier id
// CHECK:           nvvm.rcp.approx.ftz.f
// CHECK-NOT:       nvvm.barrier id
// CHECK:           cvt.rn.f16x2.e4m3x2
// CHECK:           llvm.fmul %{{.*}}, %{{.*}} : vector<2xf16>
// CHECK:           nvvm.wgmma.wait.group.sync.aligned 0
// Warpgroup 1 issues S1 once warpgroup 0 has issued S0 ("S0 done",
// barrier 6) and frees V0_R's raw boxes only after "P0 ready" (barrier 2).
// CHECK:           nvvm.barrier id = %c6_i32{{.*}} number_of_threads = %c256_i32
// CHECK-NOT:       nvvm.mbarrier.arrive
// CHECK:           nvvm.barrier id = %c2_i32{{.*}} number_of_threads = %c256_i32
// CHECK-NOT:       wgmma.mma_async
// CHECK:           nvvm.mbarrier.arrive

// 32 E4M3 and 4 bf16 score wgmmas per warpgroup role, and f16x2 multiplies
// in the V conversion.
// PTX-LABEL: .entry mla_decode_partial(
// PTX:         setmaxnreg.dec.sync.aligned.u32 24
// PTX:         setmaxnreg.inc.sync.aligned.u32 240
// PTX-COUNT-32: wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// PTX:         mul.rn.f16x2
// PTX-COUNT-32: wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// PTX-NOT:     wgmma.mma_async.sync.aligned.m64n64

// Six loads per block (four code boxes, the RoPE box and the row scales) in
// each of the producer's block loops (which ptxas-bound code lays out among
// the consumers' code): with an L2 evict-first hint (kEvictFirstMaxBlocks),
// then without.
// TMA-COUNT-6: cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint
// TMA-NOT:     cp.async.bulk.tensor
// TMA-COUNT-6: cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [
// TMA-NOT:     cp.async.bulk.tensor
// TMA-LABEL:   .entry mla_decode_plan(
// PTX-LABEL: .entry mla_decode_plan(

// ptxas: no spill, and no C75xx notice.
// PTXAS-NOT:   {{C75[0-9][0-9]|warning}}
// PTXAS:       0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT:   {{C75[0-9][0-9]|warning}}
// PTXAS:       0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT:   {{C75[0-9][0-9]|warning}}
// PTXAS:       0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT:   {{C75[0-9][0-9]|warning}}

module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @decode(%q: tensor<?x1x128x576xbf16>, %cache: tensor<?x64x656xi8>,
                    %bt: tensor<?x?xi32>, %lens: tensor<?xi32>)
      -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens]
        layout #mla.cache_layout<format = fp8_ds_mla, page_size = 64> scale 0.0721687824
        {mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 64, stages = 2, wgmma = true, pipelined = true, seesaw = true>}
        : (tensor<?x1x128x576xbf16>, tensor<?x64x656xi8>, tensor<?x?xi32>, tensor<?xi32>)
        -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>)
    return %o, %l : tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>
  }
}
