// The seesaw sm_90a decode over an fp8_e4m3_token cache (tile suffix s,
// opt-in; KernelABI.h decodeSeesawReadsE4M3 and decodeSeesawRowsPerMapRow),
// pinned by its tiling:
//  * sixteen parameters: no kv_scale (the scales are in the rows), the two
//    by-value maps (%arg11 q, unused; %arg12 the cache's byte map), then the
//    combine's counters, out and lse;
//  * 584-byte rows are no multiple of 16 bytes, so the map's rows are pairs
//    of cache rows (map row = cache row / 2, the same for both halves of a
//    box): each of the five 128-byte boxes of a block is two loads, the
//    even tokens at byte columns 0, 128, ..., 512 and the odd ones at 584,
//    712, ..., 1096 (8192 bytes expected per box);
//  * the consumers stage Q's latent columns as two E4M3 parts and its RoPE
//    columns in bf16 (the same power of two);
//  * a warpgroup scores its block with 32 E4M3 wgmmas (the latent part),
//    then converts the RoPE box in place: each row's codes and scales are
//    read (an mbarrier wait, then the clamped latent scale's reciprocal
//    times the RoPE scale), the warpgroup syncs (named barrier 4 for
//    warpgroup 0), the codes go back as bf16, the clamped latent scale to
//    the slot's scale array, a proxy fence and a second sync; then 4 bf16
//    m64n64k16 wgmmas on the converted box, one commit;
//  * the scores are folded per token: lg2 of the latent scale (the bias)
//    and its reciprocal (the row sum's factor); at an edge block score
//    column c is token 2 (c % 32) + c / 32 of the block.
// RUN: mla-opt %s --mla-select-gpu-tiling --convert-mla-to-gpu | FileCheck %s
// RUN: mla-opt %s --mla-to-nvvm="chip=sm_90a format=isa" -o %t.mlir
// RUN: %python %mla_src_root/scripts/extract-gpu-payload.py %t.mlir %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: %if ptxas %{ /usr/local/cuda/bin/ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS %}
// The causal s_q = 2 build passes ptxas as cleanly.
// RUN: sed -e 's/x1x128x/x2x128x/g; s/x128x1xf32/x128x2xf32/g; s/scale 0.0721687824/scale 0.0721687824 causal/' %s | mla-opt --mla-to-nvvm="chip=sm_90a format=isa" -o %t.causal.mlir
// RUN: %python %mla_src_root/scripts/extract-gpu-payload.py %t.causal.mlir %t.causal.ptx
// RUN: %if ptxas %{ /usr/local/cuda/bin/ptxas -arch=sm_90a -v %t.causal.ptx -o %t.causal.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS %}

// CHECK-LABEL: llvm.func @mla_decode_partial(
// CHECK-SAME:    %arg10: f32, %arg11: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<16 x i64>, nvvm.grid_constant}, %arg12: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<16 x i64>, nvvm.grid_constant}, %arg13: !llvm.ptr<1>, %arg14: !llvm.ptr<1>, %arg15: !llvm.ptr<1>)
// CHECK-SAME:    nvvm.maxntid = array<i32: 384, 1, 1>
// CHECK-NOT:     llvm.load %arg11
// CHECK:         nvvm.setmaxregister  decrease 24
// CHECK:         scf.for
// CHECK:           scf.if
// CHECK:             %[[ROW:.*]] = arith.divui %{{.*}}, %c2_i32
// CHECK:             nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c8192_i32
// CHECK:             nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg12, %{{.*}}, box[%c0_i32{{.*}}, %c0_i32{{.*}}, %[[ROW]]] :
// CHECK:             nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg12, %{{.*}}, box[%c584_i32{{.*}}, %c0_i32{{.*}}, %[[ROW]]] :
// CHECK:             nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg12, %{{.*}}, box[%c128_i32{{.*}}, %c0_i32{{.*}}, %[[ROW]]] :
// CHECK:             nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg12, %{{.*}}, box[%c712_i32{{.*}}, %c0_i32{{.*}}, %[[ROW]]] :
// CHECK:             nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg12, %{{.*}}, box[%c256_i32{{.*}}, %c0_i32{{.*}}, %[[ROW]]] :
// CHECK:             nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg12, %{{.*}}, box[%c840_i32{{.*}}, %c0_i32{{.*}}, %[[ROW]]] :
// CHECK:             nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg12, %{{.*}}, box[%c384_i32{{.*}}, %c0_i32{{.*}}, %[[ROW]]] :
// CHECK:             nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg12, %{{.*}}, box[%c968_i32{{.*}}, %c0_i32{{.*}}, %[[ROW]]] :
// CHECK:             nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg12, %{{.*}}, box[%c512_i32{{.*}}, %c0_i32{{.*}}, %[[ROW]]] :
// CHECK:             nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg12, %{{.*}}, box[%c1096_i32{{.*}}, %c0_i32{{.*}}, %[[ROW]]] :
// CHECK-NOT:         nvvm.cp.async.bulk.tensor
// CHECK:           } else {
// CHECK:         nvvm.setmaxregister  increase 240
// CHECK:         cvt.rn.satfinite.e4m3x2.f32 lo, $2, $1;
// CHECK:         arith.truncf %{{.*}} : vector<2xf32> to vector<2xbf16>
// CHECK:         nvvm.barrier id = %c1_i32{{.*}} number_of_threads = %c256_i32
// CHECK:         scf.for
// CHECK-COUNT-8:   wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {{.*}} p, 1, 1;
// CHECK:           nvvm.mbarrier.try_wait.parity
// CHECK-NEXT:      nvvm.wgmma.fence.aligned
// CHECK-COUNT-24:  wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3
// CHECK-NOT:       m64n64k32
// CHECK:           nvvm.mbarrier.try_wait.parity
// CHECK:           llvm.load %{{.*}} {alignment = 8 : i64} : !llvm.ptr<3> -> vector<2xf32>
// CHECK:           llvm.intr.maxnum(%{{.*}}, %{{.*}}) : (f32, f32) -> f32
// CHECK-NEXT:      llvm.intr.minnum(%{{.*}}, %{{.*}}) : (f32, f32) -> f32
// CHECK-NEXT:      nvvm.rcp.approx.ftz.f
// CHECK:           nvvm.barrier id = %c4_i32{{.*}} number_of_threads = %c128_i32
// CHECK:           cvt.rn.f16x2.e4m3x2
// CHECK:           arith.truncf %{{.*}} : vector<2xf32> to vector<2xbf16>
// CHECK:           nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
// CHECK:           nvvm.barrier id = %c4_i32{{.*}} number_of_threads = %c128_i32
// CHECK-NEXT:      nvvm.wgmma.fence.aligned
// CHECK-COUNT-4:   wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}} p, 1, 1, 0, 0;
// CHECK-NOT:       wgmma.mma_async
// CHECK:           nvvm.wgmma.commit.group.sync.aligned
// CHECK:           nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:           nvvm.barrier.arrive id = %c6_i32{{.*}} number_of_threads = %c256_i32
// CHECK:           lg2.approx.ftz.f32
// CHECK:           nvvm.rcp.approx.ftz.f
// The edge block's mask reads score column c as token 2 (c % 32) + c / 32.
// CHECK:           scf.if
// CHECK:             %[[COL:.*]] = arith.addi %{{.*}}, %c0_i32
// CHECK:             %[[HALF:.*]] = arith.divui %[[COL]], %c32_i32
// CHECK:             %[[IN:.*]] = arith.remui %[[COL]], %c32_i32
// CHECK-NEXT:        %[[EVEN:.*]] = arith.muli %[[IN]], %c2_i32
// CHECK-NEXT:        %[[TOK:.*]] = arith.addi %[[EVEN]], %[[HALF]]
// CHECK-NEXT:        arith.addi %{{.*}}, %[[TOK]]
// CHECK:           nvvm.barrier.arrive id = %c2_i32{{.*}} number_of_threads = %c256_i32
// CHECK-NEXT:      nvvm.wgmma.fence.aligned
// CHECK-COUNT-4:   wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {{.*}} p, 1, 1, 0, 1;

// 32 E4M3 and 4 bf16 score wgmmas per warpgroup role, four P V steps per
// block pair per warpgroup (16).
// PTX-LABEL: .entry mla_decode_partial(
// PTX:         setmaxnreg.dec.sync.aligned.u32 24
// PTX-COUNT-10: cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// PTX-NOT:     cp.async.bulk.tensor
// PTX:         setmaxnreg.inc.sync.aligned.u32 240
// PTX-COUNT-32: wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// PTX-COUNT-32: wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// PTX-NOT:     wgmma.mma_async.sync.aligned.m64n64
// PTX-LABEL: .entry mla_decode_plan(

// ptxas: no spill, and no C75xx notice (wgmma serialised, a warpgroup.wait
// or warpgroup.arrive injected).
// PTXAS-NOT:   {{C75[0-9][0-9]|warning}}
// PTXAS:       0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT:   {{C75[0-9][0-9]|warning}}
// PTXAS:       0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT:   {{C75[0-9][0-9]|warning}}
// PTXAS:       0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT:   {{C75[0-9][0-9]|warning}}

module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @decode(%q: tensor<?x1x128x576xbf16>, %cache: tensor<?x64x584xi8>,
                    %bt: tensor<?x?xi32>, %lens: tensor<?xi32>)
      -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens]
        layout #mla.cache_layout<format = fp8_e4m3_token, page_size = 64> scale 0.0721687824
        {mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 64, stages = 2, wgmma = true, pipelined = true, seesaw = true>}
        : (tensor<?x1x128x576xbf16>, tensor<?x64x584xi8>, tensor<?x?xi32>, tensor<?xi32>)
        -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>)
    return %o, %l : tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>
  }
}
