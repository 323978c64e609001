// The sm_90a mma.sync and wgmma decodes read the block table a step ahead:
// the page of the first refill (block stages - 1) is read before the block
// loop and carried in it as its last value, and each step reads the page of
// the refill after its own (block k + stages) before it waits for block k,
// so that load's latency passes under the wait and the block's compute; the
// refill's copies take the carried page (no block-table load between the
// wait and the copies). Pinned on the 16-row fp8_e4m3 kernel (the tiling
// pass's choice at 16 query rows) and on the wgmma build.
// RUN: mla-opt %s --split-input-file --mla-select-gpu-tiling --convert-mla-to-gpu | FileCheck %s

// CHECK-LABEL: gpu.func @mla_decode_partial
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>
// The prefill's block reads its own page.
// CHECK: scf.if %{{.*}} -> (i32)
// CHECK: llvm.load %{{.*}} : !llvm.ptr<1> -> i32
// CHECK: nvvm.cp.async.bulk.shared.cluster.global
// CHECK: %[[FIRST:.*]] = scf.if %{{.*}} -> (i32)
// CHECK-NEXT: arith.constant 64 : i32
// CHECK: llvm.load %{{.*}} : !llvm.ptr<1> -> i32
// CHECK: scf.for %{{.*}} iter_args({{.*}}, %[[PAGE:arg[0-9]+]] = %[[FIRST]]) -> ({{.*}}, i32)
// CHECK: %[[NEXT:.*]] = scf.if %{{.*}} -> (i32)
// CHECK: llvm.load %{{.*}} : !llvm.ptr<1> -> i32
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-NOT: !llvm.ptr<1> -> i32
// CHECK: arith.extsi %[[PAGE]] : i32 to i64
// CHECK: nvvm.cp.async.bulk.shared.cluster.global
// CHECK: scf.yield {{.*}}, %[[NEXT]] : {{.*}}, i32
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
// CHECK: scf.if %{{.*}} -> (i32)
// CHECK: nvvm.cp.async.shared.global
// CHECK: %[[FIRST:.*]] = scf.if %{{.*}} -> (i32)
// CHECK: scf.for %{{.*}} iter_args({{.*}}, %[[PAGE:arg[0-9]+]] = %[[FIRST]]) -> ({{.*}}, i32)
// CHECK: %[[NEXT:.*]] = scf.if %{{.*}} -> (i32)
// CHECK: llvm.load %{{.*}} : !llvm.ptr<1> -> i32
// CHECK: nvvm.cp.async.wait.group 0
// CHECK-NOT: !llvm.ptr<1> -> i32
// CHECK: arith.extsi %[[PAGE]] : i32 to i64
// CHECK: nvvm.cp.async.shared.global
// CHECK: wgmma.mma_async.sync.aligned.m64
// CHECK: scf.yield {{.*}}, %[[NEXT]] : {{.*}}, i32
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @bf16(%q: tensor<?x1x128x576xbf16>, %cache: tensor<?x64x576xbf16>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>)
      -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens]
        layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
        {mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 64, stages = 2, wgmma = true>}
        : (tensor<?x1x128x576xbf16>, tensor<?x64x576xbf16>, tensor<?x?xi32>, tensor<?xi32>)
        -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>)
    return %o, %l : tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>
  }
}
