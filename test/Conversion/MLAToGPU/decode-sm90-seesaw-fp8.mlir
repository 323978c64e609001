// The seesaw sm_90a decode over an fp8_e4m3 cache (tile suffix s; the
// consumers are decode-sm90-seesaw.mlir's): kv_scale is the 12th parameter,
// before the two maps, and goes into the scores' scale. The producer
// warpgroup shrinks to 40 registers (the consumers grow to 232); its thread 0
// waits for all three release groups of a slot, then loads the block's nine
// 64-byte boxes of codes through the 2-D byte map (two coordinates, 4096
// bytes each) onto the slot's "raw" barriers. Its warps 1-3 (the converters)
// wait on each raw barrier, turn 8 codes at a time into a 16-byte bf16 chunk
// of the slot's Box128B tile (cvt.rn.f16x2.e4m3x2, prmt), fence for the
// async proxy, meet on named barrier 7 (96 threads) and one of them arrives
// on the box's full barrier. ptxas assembles it without spills.
// RUN: mla-opt %s --convert-mla-to-gpu | FileCheck %s
// RUN: mla-opt %s --mla-to-nvvm="chip=sm_90a format=isa" -o %t.mlir
// RUN: %python %mla_src_root/scripts/extract-gpu-payload.py %t.mlir %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: %if ptxas %{ /usr/local/cuda/bin/ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS %}

// CHECK-LABEL: llvm.func @mla_decode_partial(
// CHECK-SAME:    %arg10: f32, %arg11: !llvm.ptr<1>, %arg12: !llvm.ptr {{{.*}}nvvm.grid_constant}, %arg13: !llvm.ptr {{{.*}}nvvm.grid_constant}, %arg14: !llvm.ptr<1>, %arg15: !llvm.ptr<1>, %arg16: !llvm.ptr<1>)
// CHECK:         %[[L2E:.*]] = arith.mulf %arg10, %{{.*}} : f32
// CHECK-NEXT:    %[[KVS:.*]] = llvm.load %arg11 {{.*}} : !llvm.ptr<1> -> f32
// CHECK-NEXT:    arith.mulf %[[L2E]], %[[KVS]] : f32
// CHECK:         nvvm.setmaxregister  decrease 40
// CHECK:         nvvm.mbarrier.try_wait.parity
// CHECK:         nvvm.mbarrier.try_wait.parity
// CHECK:         nvvm.mbarrier.try_wait.parity
// Box 0's codes at 40 KiB into the slot (the KV ring starts at 73728), the
// last box's past the barriers (221696 + 384).
// CHECK:         nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c4096_i32
// CHECK:         %[[S0:.*]] = arith.muli %{{.*}}, %c73728_i32 : i32
// CHECK-NEXT:    %c114688_i32 = arith.constant 114688 : i32
// CHECK-NEXT:    arith.addi %c114688_i32, %[[S0]] : i32
// CHECK:         nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg13, %{{.*}}, box[%c0_i32{{[_0-9]*}}, %[[ROW:[0-9]+]]] :
// CHECK-COUNT-7: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg13, %{{.*}}, box[%c{{[0-9]+}}_i32{{[_0-9]*}}, %[[ROW]]] :
// CHECK:         nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c4096_i32
// CHECK:         %c222080_i32 = arith.constant 222080 : i32
// CHECK:         nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg13, %{{.*}}, box[%c512_i32{{[_0-9]*}}, %[[ROW]]] :
// CHECK:         nvvm.mbarrier.try_wait.parity
// CHECK:         cvt.rn.f16x2.e4m3x2
// CHECK:         "prmt.b32 $0, $1, $2, 0x7632;"
// CHECK:         llvm.store %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<3>
// CHECK:         nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT:    %[[N96:.*]] = arith.constant 96 : i32
// CHECK-NEXT:    %[[B7:.*]] = arith.constant 7 : i32
// CHECK-NEXT:    nvvm.barrier id = %[[B7]] number_of_threads = %[[N96]]
// CHECK:         scf.if
// CHECK:         nvvm.mbarrier.arrive %{{.*}} : !llvm.ptr<3>
// CHECK:         nvvm.setmaxregister  increase 232

// PTX-LABEL: .entry mla_decode_partial(
// PTX:         setmaxnreg.dec.sync.aligned.u32 40
// PTX-DAG:     cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// PTX-DAG:     cvt.rn.f16x2.e4m3x2
// PTX-DAG:     bar.sync 7, 96;
// PTX-DAG:     setmaxnreg.inc.sync.aligned.u32 232

// PTXAS:       Compiling entry function 'mla_decode_partial'
// PTXAS-NOT:   {{C75[0-9][0-9]|warning}}
// PTXAS:       0 bytes spill stores, 0 bytes spill loads

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
