// Varlen decode on sm_90a (query_start_loc, KernelABI.h): the partial
// kernel takes query_start_loc and T after the scale, reads request b's
// q_b = qsl[b+1] - qsl[b] (a malformed one counts as empty), limits causal
// rows by seq_len - q_b + i and writes token-packed partials; the planner
// takes the same two parameters and flags bad entries (status bit 4); the
// combine is the Sq = 1 kernel. Both MMA schedules build it (the first
// function gets wgmma, the second is pinned to mma.sync), and so does an fp8
// cache (the third); ptxas assembles all three. sm_100a rejects it.
// RUN: mla-opt %s --split-input-file --mla-select-gpu-tiling --convert-mla-to-gpu | FileCheck %s
// RUN: mla-opt %s --split-input-file --mla-to-nvvm="chip=sm_90a format=isa" | FileCheck %s --check-prefix=PTX
// RUN: %if ptxas %{ env CUDA_ROOT=/usr/local/cuda mla-opt %s --split-input-file --mla-to-nvvm="chip=sm_90a format=bin" -o /dev/null %}
// RUN: not mla-opt %s --split-input-file --mla-select-gpu-tiling --convert-mla-to-gpu=chip=sm_100a 2>&1 | FileCheck %s --check-prefix=SM100

// CHECK-LABEL: gpu.func @mla_decode_partial(
// CHECK-SAME: %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: f32, %[[QSL:[a-z0-9]+]]: !llvm.ptr<1>, %[[T:[a-z0-9]+]]: i32) kernel
// CHECK: %[[FIRSTP:.*]] = llvm.getelementptr %[[QSL]]
// CHECK: llvm.load %[[FIRSTP]]
// CHECK: %[[NEXTP:.*]] = llvm.getelementptr %[[QSL]]
// CHECK: llvm.load %[[NEXTP]]
// CHECK: arith.subi %[[T]]
// A CTA whose first row is past the request's q_b * N rows returns at once.
// CHECK: %[[REQROWS:.*]] = arith.muli %{{.*}}, %c128_i32 : i32
// CHECK-NEXT: %[[PAST:.*]] = arith.cmpi sge, %{{.*}}, %[[REQROWS]] : i32
// CHECK-NEXT: llvm.cond_br %[[PAST]], ^[[EXIT:bb[0-9]+]], ^bb{{[0-9]+}}
// CHECK: ^[[EXIT]]:
// CHECK-NEXT: gpu.return
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-LABEL: gpu.func @mla_decode_plan(
// CHECK-SAME: %{{.*}}: i32, %[[PQSL:[a-z0-9]+]]: !llvm.ptr<1>, %[[PT:[a-z0-9]+]]: i32) kernel
// CHECK: llvm.getelementptr %[[PQSL]]
// CHECK: arith.constant 4 : i32
// CHECK-LABEL: gpu.func @mla_combine(

// CHECK-LABEL: gpu.func @mla_decode_partial(
// CHECK-SAME: %{{.*}}: f32, %{{.*}}: !llvm.ptr<1>, %{{.*}}: i32) kernel
// CHECK: nvvm.mma.sync

// Over an fp8_e4m3 cache: kv_scale is the 12th parameter, query_start_loc
// and T follow it, and the query rows come from the 13th.
// CHECK-LABEL: gpu.func @mla_decode_partial(
// CHECK-SAME: %{{.*}}: f32, %[[KVS8:[a-z0-9]+]]: !llvm.ptr<1>, %[[QSL8:[a-z0-9]+]]: !llvm.ptr<1>, %[[T8:[a-z0-9]+]]: i32) kernel
// CHECK: llvm.load %[[KVS8]]
// CHECK: %[[FIRST8:.*]] = llvm.getelementptr %[[QSL8]]
// CHECK: llvm.load %[[FIRST8]]
// CHECK: arith.subi %[[T8]]
// CHECK: cvt.rn.f16x2.e4m3x2

// PTX: .entry mla_decode_partial(
// PTX: wgmma.mma_async.sync.aligned
// PTX: .entry mla_decode_plan(
// PTX: .entry mla_combine(
// PTX: .entry mla_decode_partial(
// PTX: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// PTX: .entry mla_decode_partial(
// PTX: cvt.rn.f16x2.e4m3x2

// SM100: varlen decode (query_start_loc) is built for sm_90a only

module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @decode(%q: tensor<?x128x576xbf16>, %cache: tensor<?x64x576xbf16>,
                    %bt: tensor<?x?xi32>, %lens: tensor<?xi32>, %qsl: tensor<?xi32>)
      -> (tensor<?x128x512xbf16>, tensor<?x128xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens] query_start_loc %qsl
        layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 causal
        {max_query_len = 4 : i64}
        : (tensor<?x128x576xbf16>, tensor<?x64x576xbf16>, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>)
        -> (tensor<?x128x512xbf16>, tensor<?x128xf32>)
    return %o, %l : tensor<?x128x512xbf16>, tensor<?x128xf32>
  }
}

// -----

module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @decode(%q: tensor<?x16x576xbf16>, %cache: tensor<?x64x576xbf16>,
                    %bt: tensor<?x?xi32>, %lens: tensor<?xi32>, %qsl: tensor<?xi32>)
      -> (tensor<?x16x512xbf16>, tensor<?x16xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens] query_start_loc %qsl
        layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 causal
        {max_query_len = 8 : i64, mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 32, stages = 3>}
        : (tensor<?x16x576xbf16>, tensor<?x64x576xbf16>, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>)
        -> (tensor<?x16x512xbf16>, tensor<?x16xf32>)
    return %o, %l : tensor<?x16x512xbf16>, tensor<?x16xf32>
  }
}

// -----

module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @decode(%q: tensor<?x16x576xbf16>, %cache: tensor<?x64x576xi8>,
                    %bt: tensor<?x?xi32>, %lens: tensor<?xi32>, %qsl: tensor<?xi32>)
      -> (tensor<?x16x512xbf16>, tensor<?x16xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens] query_start_loc %qsl
        layout #mla.cache_layout<format = fp8_e4m3, page_size = 64, scale = 0.5 : f32> scale 0.0721687824 causal
        {max_query_len = 8 : i64}
        : (tensor<?x16x576xbf16>, tensor<?x64x576xi8>, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>)
        -> (tensor<?x16x512xbf16>, tensor<?x16xf32>)
    return %o, %l : tensor<?x16x512xbf16>, tensor<?x16xf32>
  }
}
