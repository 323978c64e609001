// The seesaw sm_90a decode over an fp8_e4m3 cache (tile suffix s, opt-in;
// KernelABI.h decodeSeesawReadsE4M3), pinned by its tiling:
//  * seventeen parameters: kv_scale (%arg11) before the two by-value maps,
//    then the combine's counters, out and lse;
//  * the producer loads no Q; it loads five raw boxes per block from the
//    cache's byte map (%arg13), 128 bytes x 64 tokens (8192 bytes each) at
//    byte columns 0, 128, ..., 512 (the last one half past the row, filled
//    with zeros by the TMA unit), and frees them in the seesaw's three
//    groups: raw V_L (boxes 0-1, 128 arrivals), raw V_R (2-3, 128) and the
//    RoPE box that P overwrites (4, 256);
//  * the consumers stage Q themselves as two E4M3 parts (cvt.rn.satfinite
//    e4m3x2 of q and of q - hi), after the CTA's largest exponent met in the
//    scratch (named barrier 1), and sync before the first wgmma;
//  * warpgroup 0 scores its block with 36 m64n64k32 E4M3 wgmmas (18 k-steps,
//    Q's hi then lo part), commits, converts its V columns (cvt.rn.f16x2
//    e4m3x2, an scf.if masking the tokens outside the piece at an edge
//    block; the shared loads of four 16-byte units go out before their
//    conversions) while they run, waits, and frees its raw V boxes before "S0
//    done"; its P V reads the f16 V tile (m64n256k16 f16), P of its own
//    block from registers, the other warpgroup's from the slot;
//  * after issuing P0 V0_L it waits for it, frees its share of slot 0 and
//    converts V1_L (waiting for slot 1's raw boxes) before it waits for "P1
//    ready" (barrier 3); only then do V1_L's raw boxes go back;
//  * warpgroup 1 converts V0_R (its own barrier 5) before it waits for "S0
//    done" (barrier 6), frees V0_R's raw boxes after it, and converts
//    nothing between "P0 ready" (barrier 2) and its P0 V0_R.
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
// CHECK-SAME:    %arg10: f32, %arg11: !llvm.ptr<1>, %arg12: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<16 x i64>, nvvm.grid_constant}, %arg13: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<16 x i64>, nvvm.grid_constant}, %arg14: !llvm.ptr<1>, %arg15: !llvm.ptr<1>, %arg16: !llvm.ptr<1>)
// CHECK-SAME:    nvvm.maxntid = array<i32: 384, 1, 1>
// CHECK:         llvm.load %arg11
// CHECK:         nvvm.mbarrier.init %{{.*}}, %c1_i32
// CHECK-COUNT-5: nvvm.mbarrier.init %{{.*}}, %c1_i32
// CHECK:         nvvm.mbarrier.init %{{.*}}, %c128_i32
// CHECK:         nvvm.mbarrier.init %{{.*}}, %c128_i32
// CHECK:         nvvm.mbarrier.init %{{.*}}, %c256_i32
// CHECK-COUNT-5: nvvm.mbarrier.init %{{.*}}, %c1_i32
// CHECK:         nvvm.mbarrier.init %{{.*}}, %c128_i32
// CHECK:         nvvm.mbarrier.init %{{.*}}, %c128_i32
// CHECK:         nvvm.mbarrier.init %{{.*}}, %c256_i32
// CHECK-NOT:     nvvm.mbarrier.init
// CHECK-NOT:     %arg12,
// CHECK:         nvvm.setmaxregister  decrease 24
// CHECK:         scf.for
// CHECK:           nvvm.mbarrier.try_wait.parity
// CHECK:           scf.if
// CHECK:             nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c8192_i32
// CHECK:             nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg13, %{{.*}}, box[%c0_i32{{.*}}, %c0_i32{{.*}}, %[[ROW:.*]]] :
// CHECK:             nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg13, %{{.*}}, box[%c128_i32{{.*}}, %c0_i32{{.*}}, %[[ROW]]] :
// CHECK:             nvvm.mbarrier.try_wait.parity
// CHECK:             nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg13, %{{.*}}, box[%c256_i32{{.*}}, %c0_i32{{.*}}, %[[ROW]]] :
// CHECK:             nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg13, %{{.*}}, box[%c384_i32{{.*}}, %c0_i32{{.*}}, %[[ROW]]] :
// CHECK:             nvvm.mbarrier.try_wait.parity
// CHECK:             nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg13, %{{.*}}, box[%c512_i32{{.*}}, %c0_i32{{.*}}, %[[ROW]]] :
// CHECK-NOT:         nvvm.cp.async.bulk.tensor
// CHECK:           } else {
// CHECK:         nvvm.setmaxregister  increase 240
// CHECK-NOT:     nvvm.mbarrier.try_wait.parity
// CHECK:         nvvm.barrier id = %c1_i32{{.*}} number_of_threads = %c256_i32
// CHECK:         cvt.rn.satfinite.e4m3x2.f32 lo, $2, $1;
// CHECK:         nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
// CHECK:         nvvm.barrier id = %c1_i32{{.*}} number_of_threads = %c256_i32
// CHECK:         scf.for
// CHECK:           nvvm.mbarrier.try_wait.parity
// CHECK-NEXT:      nvvm.wgmma.fence.aligned
// CHECK-COUNT-8:   wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {{.*}} p, 1, 1;
// CHECK:           nvvm.mbarrier.try_wait.parity
// CHECK-NEXT:      nvvm.wgmma.fence.aligned
// CHECK-COUNT-28:  wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3
// CHECK:           nvvm.wgmma.commit.group.sync.aligned
// CHECK:           scf.if
// CHECK-NOT:         } else {
// CHECK:             llvm.mlir.zero : vector<4xi32>
// CHECK-NEXT:        arith.select %{{.*}}, %{{.*}}, %{{.*}} : vector<4xi32>
// CHECK:             cvt.rn.f16x2.e4m3x2
// CHECK:           } else {
// CHECK:             llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xi32>
// CHECK-NOT:         cvt.rn.f16x2.e4m3x2
// CHECK:             llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xi32>
// CHECK-NOT:         cvt.rn.f16x2.e4m3x2
// CHECK:             llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xi32>
// CHECK-NOT:         cvt.rn.f16x2.e4m3x2
// CHECK:             llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xi32>
// CHECK-NEXT:        llvm.mlir.poison : vector<4xi32>
// CHECK:             cvt.rn.f16x2.e4m3x2
// CHECK-NOT:         arith.select
// CHECK:             llvm.store %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<3>
// CHECK-NOT:         arith.select
// CHECK:             llvm.store %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<3>
// CHECK:           nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:           nvvm.mbarrier.arrive %
// CHECK:           nvvm.barrier.arrive id = %c6_i32{{.*}} number_of_threads = %c256_i32
// CHECK:           nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
// CHECK:           nvvm.barrier id = %c4_i32{{.*}} number_of_threads = %c128_i32
// CHECK:           nvvm.barrier.arrive id = %c2_i32{{.*}} number_of_threads = %c256_i32
// CHECK-NEXT:      nvvm.wgmma.fence.aligned
// CHECK-COUNT-4:   wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {{.*}}}, {${{[0-9]+}}, ${{[0-9]+}}, ${{[0-9]+}}, ${{[0-9]+}}}, ${{[0-9]+}}, p, 1, 1, 1;
// CHECK:           nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT:      nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:           nvvm.mbarrier.arrive %
// CHECK-NOT:       nvvm.barrier id = %c3_i32
// CHECK:           nvvm.mbarrier.try_wait.parity
// CHECK-NOT:       nvvm.barrier id = %c3_i32
// CHECK:           cvt.rn.f16x2.e4m3x2
// CHECK-NOT:       nvvm.barrier id = %c3_i32
// CHECK:           nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
// CHECK:           nvvm.barrier id = %c4_i32{{.*}} number_of_threads = %c128_i32
// CHECK:           nvvm.barrier id = %c3_i32{{.*}} number_of_threads = %c256_i32
// CHECK-NOT:       cvt.rn.f16x2.e4m3x2
// CHECK:           nvvm.mbarrier.arrive %
// CHECK-NOT:       cvt.rn.f16x2.e4m3x2
// CHECK:           nvvm.wgmma.fence.aligned
// CHECK-COUNT-4:   wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {{.*}} p, 1, 1, 0, 1;
// CHECK:         } else {
// CHECK:           scf.for
// CHECK-NOT:         nvvm.barrier id = %c6_i32
// CHECK:             cvt.rn.f16x2.e4m3x2
// CHECK:             nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
// CHECK:             nvvm.barrier id = %c5_i32{{.*}} number_of_threads = %c128_i32
// CHECK-NEXT:        %{{.*}} = arith.constant 256 : i32
// CHECK-NEXT:        %{{.*}} = arith.constant 6 : i32
// CHECK-NEXT:        nvvm.barrier id
// CHECK:             nvvm.mbarrier.arrive %
// CHECK:             wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3
// CHECK:             nvvm.barrier id = %c2_i32{{.*}} number_of_threads = %c256_i32
// CHECK-NOT:         cvt.rn.f16x2.e4m3x2
// CHECK:             wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16

// 36 E4M3 wgmmas per warpgroup role (72 in all), four P V steps per block
// pair per warpgroup (16), and no bf16 wgmma.
// PTX-LABEL: .entry mla_decode_partial(
// PTX:         setmaxnreg.dec.sync.aligned.u32 24
// PTX:         cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// PTX:         setmaxnreg.inc.sync.aligned.u32 240
// PTX:         cvt.rn.satfinite.e4m3x2.f32
// PTX-COUNT-72: wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3
// PTX-NOT:     wgmma.mma_async.sync.aligned.m64n64k32
// PTX-NOT:     bf16.bf16
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
  func.func @decode(%q: tensor<?x1x128x576xbf16>, %cache: tensor<?x64x576xi8>,
                    %bt: tensor<?x?xi32>, %lens: tensor<?xi32>)
      -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens]
        layout #mla.cache_layout<format = fp8_e4m3, page_size = 64, scale = 0.5 : f32> scale 0.0721687824
        {mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 64, stages = 2, wgmma = true, pipelined = true, seesaw = true>}
        : (tensor<?x1x128x576xbf16>, tensor<?x64x576xi8>, tensor<?x?xi32>, tensor<?xi32>)
        -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>)
    return %o, %l : tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>
  }
}
