// The 16-row mma.sync decode over fp8_e4m3 and fp8_ds_mla reads its MMA
// fragments from the raw ring (abi::decodeReadsRawFp8), and fills that ring
// with one bulk copy per block (BulkStageRing): thread 0 initialises one
// mbarrier per stage before the CTA's first barrier, each refill zeroes the
// bytes past the piece (a partial last block only) with every thread, then
// thread 0 arms the stage's barrier with the block's bytes and issues
// cp.async.bulk; every step waits on its stage's barrier before the CTA
// barrier. The first blocks' copies are issued before Q is staged, so they
// are in flight while Q's loads and conversion run. No thread issues
// per-thread cp.async copies.
// RUN: mla-opt %s --split-input-file --mla-select-gpu-tiling --convert-mla-to-gpu | FileCheck %s
// RUN: mla-opt %s --split-input-file --mla-to-nvvm="chip=sm_90a format=isa" -o %t.mlir
// RUN: %python %mla_src_root/scripts/extract-gpu-payload.py %t.mlir %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: %if ptxas %{ /usr/local/cuda/bin/ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS %}

// CHECK-LABEL: gpu.func @mla_decode_partial
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>
// CHECK-NOT: nvvm.cp.async.shared.global
// CHECK: nvvm.mbarrier.init
// CHECK-NEXT: nvvm.fence.mbarrier.init
// CHECK-NOT: nvvm.barrier0
// CHECK: nvvm.mbarrier.init
// CHECK-NEXT: nvvm.fence.mbarrier.init
// CHECK: nvvm.barrier0
// The prefill: block 0 (the tail zeroed when it is partial, then the copy).
// CHECK: %[[VALID:.*]] = arith.muli %{{.*}}, %c576_i32{{.*}} : i32
// CHECK: arith.cmpi slt, %[[VALID]], %c36864_i32{{.*}} : i32
// CHECK-NEXT: scf.if
// CHECK-NEXT: %[[ZERO:.*]] = llvm.mlir.zero : vector<4xi32>
// CHECK: scf.for
// CHECK: arith.cmpi sge, %{{.*}}, %[[VALID]] : i32
// CHECK: llvm.store %[[ZERO]], %{{.*}} : vector<4xi32>, !llvm.ptr<3>
// CHECK: nvvm.mbarrier.arrive.expect_tx %[[BAR:.*]], %[[VALID]] : !llvm.ptr<3>, i32
// CHECK-NEXT: llvm.getelementptr
// CHECK-NEXT: llvm.addrspacecast %{{.*}} : !llvm.ptr<3> to !llvm.ptr<7>
// CHECK-NEXT: nvvm.cp.async.bulk.shared.cluster.global %{{.*}}, %{{.*}}, %[[BAR]], %[[VALID]] : !llvm.ptr<7>, <1>
// Q is staged (loaded into registers, stored as f16) while the copy runs.
// CHECK: llvm.load %{{.*}} : !llvm.ptr<1> -> vector<4xi32>
// CHECK: arith.truncf %{{.*}} : vector<2xf32> to vector<2xf16>
// The block loop: wait for the stage, the CTA barrier, then the refill.
// CHECK: scf.for
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-NEXT: nvvm.barrier0
// CHECK: nvvm.mbarrier.arrive.expect_tx
// CHECK: nvvm.cp.async.bulk.shared.cluster.global
// CHECK-NOT: nvvm.cp.async.shared.global
// CHECK: gpu.return
// PTX: mbarrier.init.shared.b64
// PTX: cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes
// PTX: mbarrier.try_wait.parity.shared.b64
// PTX-NOT: cp.async.cg.shared.global
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @e4m3(%q: tensor<?x1x16x576xbf16>, %cache: tensor<?x64x576xi8>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>)
      -> (tensor<?x1x16x512xbf16>, tensor<?x16x1xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens]
        layout #mla.cache_layout<format = fp8_e4m3, page_size = 64, scale = 0.5 : f32> scale 0.0721687824
        : (tensor<?x1x16x576xbf16>, tensor<?x64x576xi8>, tensor<?x?xi32>, tensor<?xi32>)
        -> (tensor<?x1x16x512xbf16>, tensor<?x16x1xf32>)
    return %o, %l : tensor<?x1x16x512xbf16>, tensor<?x16x1xf32>
  }
}

// -----

// CHECK-LABEL: gpu.func @mla_decode_partial
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>
// CHECK-NOT: nvvm.cp.async.shared.global
// CHECK: nvvm.mbarrier.init
// CHECK: nvvm.barrier0
// CHECK: nvvm.cp.async.bulk.shared.cluster.global
// CHECK: scf.for
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-NEXT: nvvm.barrier0
// CHECK: nvvm.cp.async.bulk.shared.cluster.global
// CHECK-NOT: nvvm.cp.async.shared.global
// CHECK: gpu.return
// PTX: cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes
// PTX-NOT: cp.async.cg.shared.global
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @ds_mla(%q: tensor<?x1x16x576xbf16>, %cache: tensor<?x64x656xi8>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>)
      -> (tensor<?x1x16x512xbf16>, tensor<?x16x1xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens]
        layout #mla.cache_layout<format = fp8_ds_mla, page_size = 64> scale 0.0721687824
        : (tensor<?x1x16x576xbf16>, tensor<?x64x656xi8>, tensor<?x?xi32>, tensor<?xi32>)
        -> (tensor<?x1x16x512xbf16>, tensor<?x16x1xf32>)
    return %o, %l : tensor<?x1x16x512xbf16>, tensor<?x16x1xf32>
  }
}
