// The multicast sm_90a decode (tile suffix m, pinned by its tiling): the
// seesaw build (decode-sm90-seesaw.mlir) with each query token's two 64-row
// blocks (grid x 2i and 2i + 1) run as a cluster of two CTAs sharing the KV
// boxes.
//  * The kernel carries its cluster shape (nvvm.cluster_dim, PTX
//    .reqnctapercluster 2, 1, 1): an ordinary launch starts clusters.
//  * A slot's empty barriers count both CTAs' consumers: V_L and V_R groups
//    256 arrivals (128 per CTA), the P group 512.
//  * Every thread passes a cluster barrier (barrier.cluster.arrive/wait)
//    after the barriers' init, before any CTA loads into or arrives on its
//    peer, and again before it exits.
//  * The producer of rank 0 loads the even boxes of every block (columns 0,
//    128, 256, 384 and the RoPE box at 512), rank 1 the odd ones (64, 192,
//    320, 448), each multicast to both CTAs (mask 0b11); each producer arms
//    its own full barriers with all nine boxes' bytes. Two loops per rank,
//    evict-first (a short piece) and not, as in the seesaw build.
//  * Each consumer warp's lane 0 arrives for its 32 threads on the peer's
//    empty barrier (mapa, then a remote mbarrier.arrive, count 32, with the
//    default release at CTA scope: a .release.cluster arrival cost 36%) next
//    to each thread's own arrival.
// RUN: mla-opt %s --mla-select-gpu-tiling --convert-mla-to-gpu | FileCheck %s
// RUN: mla-opt %s --mla-to-nvvm="chip=sm_90a format=isa" -o %t.mlir
// RUN: %python %mla_src_root/scripts/extract-gpu-payload.py %t.mlir %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: %if ptxas %{ /usr/local/cuda/bin/ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS %}
// The causal s_q = 2 build passes ptxas as cleanly.
// RUN: sed -e 's/x1x128x/x2x128x/g; s/x128x1xf32/x128x2xf32/g; s/scale 0.0721687824/scale 0.0721687824 causal/' %s | mla-opt --mla-to-nvvm="chip=sm_90a format=isa" -o %t.causal.mlir
// RUN: %python %mla_src_root/scripts/extract-gpu-payload.py %t.causal.mlir %t.causal.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.causal.ptx
// RUN: %if ptxas %{ /usr/local/cuda/bin/ptxas -arch=sm_90a -v %t.causal.ptx -o %t.causal.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS %}

module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @decode(%q: tensor<?x1x128x576xbf16>, %cache: tensor<?x64x576xbf16>,
                    %bt: tensor<?x?xi32>, %lens: tensor<?xi32>)
      -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens]
        layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
        {mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 64, stages = 2, wgmma = true, pipelined = true, seesaw = true, multicast = true>}
        : (tensor<?x1x128x576xbf16>, tensor<?x64x576xbf16>, tensor<?x?xi32>, tensor<?xi32>)
        -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>)
    return %o, %l : tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>
  }
}

// CHECK-LABEL: llvm.func @mla_decode_partial(
// CHECK-SAME:    nvvm.cluster_dim = array<i32: 2, 1, 1>
// CHECK:         %[[RANK:.*]] = nvvm.read.ptx.sreg.cluster.ctarank : i32
// The empty barriers of slots 0 and 1: V_L, V_R (two CTAs' 128 threads) and P.
// CHECK:         arith.constant 256 : i32
// CHECK-NEXT:    nvvm.mbarrier.init
// CHECK:         arith.constant 256 : i32
// CHECK-NEXT:    nvvm.mbarrier.init
// CHECK:         arith.constant 512 : i32
// CHECK-NEXT:    nvvm.mbarrier.init
// CHECK:         arith.constant 256 : i32
// CHECK-NEXT:    nvvm.mbarrier.init
// CHECK:         arith.constant 256 : i32
// CHECK-NEXT:    nvvm.mbarrier.init
// CHECK:         arith.constant 512 : i32
// CHECK-NEXT:    nvvm.mbarrier.init
// CHECK-NOT:     nvvm.mbarrier.init
// CHECK:         nvvm.cluster.arrive
// CHECK-NEXT:    nvvm.cluster.wait
// CHECK:         nvvm.setmaxregister  decrease 24
// Rank 0: the even boxes, in the evict-first loop and the plain one.
// CHECK:         arith.cmpi eq, %[[RANK]],
// CHECK:         scf.for
// CHECK:         nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}}box[%c0_i32{{[_0-9]*}}, {{.*}}] multicast_mask = %c3_i16 l2_cache_hint
// CHECK-NOT:     nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}}box[%c64_i32
// CHECK:         nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}}box[%c128_i32{{[_0-9]*}}, {{.*}}] multicast_mask = %c3_i16 l2_cache_hint
// CHECK:         nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}}box[%c256_i32{{[_0-9]*}}, {{.*}}] multicast_mask = %c3_i16 l2_cache_hint
// CHECK:         nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}}box[%c384_i32{{[_0-9]*}}, {{.*}}] multicast_mask = %c3_i16 l2_cache_hint
// CHECK:         nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}}box[%c512_i32{{[_0-9]*}}, {{.*}}] multicast_mask = %c3_i16 l2_cache_hint
// CHECK:         scf.for
// CHECK-COUNT-5: multicast_mask = %c3_i16 :
// Rank 1: the odd boxes.
// CHECK:         scf.for
// CHECK:         nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}}box[%c64_i32{{[_0-9]*}}, {{.*}}] multicast_mask = %c3_i16 l2_cache_hint
// CHECK:         nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}}box[%c192_i32{{[_0-9]*}}, {{.*}}] multicast_mask = %c3_i16 l2_cache_hint
// CHECK:         nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}}box[%c320_i32{{[_0-9]*}}, {{.*}}] multicast_mask = %c3_i16 l2_cache_hint
// CHECK:         nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}}box[%c448_i32{{[_0-9]*}}, {{.*}}] multicast_mask = %c3_i16 l2_cache_hint
// CHECK-NOT:     box[%c512_i32
// CHECK:         scf.for
// CHECK-COUNT-4: multicast_mask = %c3_i16 :
// CHECK-NOT:     multicast_mask
// Consumers: lane 0 of each warp releases for its warp on the peer (rank ^ 1).
// CHECK:         nvvm.setmaxregister  increase 240
// CHECK:         %[[PEER:.*]] = arith.xori %[[RANK]], %{{.*}} : i32
// CHECK-NEXT:    %[[OWN:.*]] = llvm.ptrtoint %{{.*}} : !llvm.ptr<3> to i32
// CHECK-NEXT:    %[[COUNT:.*]] = arith.constant 32 : i32
// CHECK-NEXT:    llvm.inline_asm has_side_effects {{.*}}mapa.shared::cluster.u32 remote, $0, $1;{{.*}}mbarrier.arrive.shared::cluster.b64 _, [remote], $2;{{.*}} %[[OWN]], %[[PEER]], %[[COUNT]]
// The end: a cluster barrier before the CTA exits.
// CHECK:         nvvm.cluster.arrive
// CHECK-NEXT:    nvvm.cluster.wait
// CHECK-NEXT:    llvm.return

// PTX:       .entry mla_decode_partial(
// PTX:       .reqnctapercluster 2, 1, 1
// PTX:       barrier.cluster.arrive;
// PTX-NEXT:  barrier.cluster.wait;
// PTX:       cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster.L2::cache_hint
// PTX:       mapa.shared::cluster.u32
// PTX-NEXT:  mbarrier.arrive.shared::cluster.b64 _,
// PTX:       barrier.cluster.arrive;
// PTX-NEXT:  barrier.cluster.wait;
// PTX-NOT:   nanosleep

// ptxas: no spill, and no C75xx notice (wgmma serialised, a warpgroup.wait
// or warpgroup.arrive injected).
// PTXAS-NOT:   {{C75[0-9][0-9]|warning}}
// PTXAS:       0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT:   {{C75[0-9][0-9]|warning}}
// PTXAS:       0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT:   {{C75[0-9][0-9]|warning}}
// PTXAS:       0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT:   {{C75[0-9][0-9]|warning}}
