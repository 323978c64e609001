// The device planner every decode image carries (mla_decode_plan,
// KernelABI.h): one warp per request checks seq_len as the host would
// (capacity maxPages x page, causal 0 or >= Sq), ORs the used block-table
// entries' range checks over the warp, plans a failing request as empty and
// writes min(s * chunk, len) for s in [0, S], chunk = max(alignTo(ceil(len /
// S), page), 1), in i64; lane 0 ORs the failure into the status word. And the
// runtime softmax scale: the partial kernel multiplies its f32 parameter by
// log2(e) instead of baking a constant. (The sm_100a image carries the same
// planner: decode-sm100.mlir.) The wgmma tile is pinned: its partial
// kernel is a gpu.func, the warp-specialised builds' an llvm.func.
// RUN: mla-opt %s --mla-select-gpu-tiling --convert-mla-to-gpu | FileCheck %s
// RUN: mla-opt %s --mla-to-nvvm="chip=sm_90a format=isa" | FileCheck %s --check-prefix=PTX

// CHECK-LABEL: gpu.func @mla_decode_partial(
// CHECK-SAME: %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %[[SCALE:[^:]*]]: f32, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>) kernel
// CHECK: %[[LOG2E:.*]] = arith.constant 1.44269502 : f32
// CHECK: arith.mulf %[[SCALE]], %[[LOG2E]] : f32

// CHECK-LABEL: gpu.func @mla_decode_plan(
// CHECK-SAME: %[[LENS:[a-z0-9]+]]: !llvm.ptr<1>, %[[TABLE:[a-z0-9]+]]: !llvm.ptr<1>, %[[BOUNDS:[a-z0-9]+]]: !llvm.ptr<1>, %[[STATUS:[a-z0-9]+]]: !llvm.ptr<1>, %[[B:[a-z0-9]+]]: i32, %[[MAXPAGES:[a-z0-9]+]]: i32, %[[NUMPAGES:[a-z0-9]+]]: i32, %[[S:[a-z0-9]+]]: i32) kernel
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>
// Request = 4 x ctaid.x + warp; lane = tid % 32.
// CHECK: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x
// CHECK: %[[LANE:.*]] = arith.remui %[[TID]]
// CHECK: %[[WARP:.*]] = arith.divui %[[TID]]
// CHECK: %[[C4:.*]] = arith.constant 4 : i32
// CHECK: %[[CTA:.*]] = nvvm.read.ptx.sreg.ctaid.x
// CHECK: %[[CTA4:.*]] = arith.muli %[[CTA]], %[[C4]]
// CHECK: %[[REQ:.*]] = arith.addi %[[CTA4]], %[[WARP]]
// CHECK: %[[INB:.*]] = arith.cmpi slt, %[[REQ]], %[[B]]
// CHECK: scf.if %[[INB]] {
// CHECK: %[[LENP:.*]] = llvm.getelementptr %[[LENS]][%[[REQ]]]
// CHECK: %[[LEN:.*]] = llvm.load %[[LENP]]
// The seq_len rule: [0, maxPages * 64], and for causal Sq = 2 not 1.
// CHECK: %[[C64:.*]] = arith.constant 64 : i32
// CHECK: %[[CAP:.*]] = arith.muli %[[MAXPAGES]], %[[C64]]
// CHECK: arith.cmpi slt, %[[CAP]], %[[LEN]]
// CHECK: arith.cmpi slt, %[[LEN]], %c0_i32
// CHECK: %[[C2:.*]] = arith.constant 2 : i32
// CHECK: arith.cmpi slt, %[[LEN]], %[[C2]]
// Pages: lanes stride the used entries, each checked against [0, numPages).
// CHECK: scf.for %[[P:.*]] = %[[LANE]] to %{{.*}} step %c32_i32{{.*}} iter_args
// CHECK: llvm.getelementptr %[[TABLE]]
// CHECK: arith.cmpi sge, %{{.*}}, %[[NUMPAGES]]
// CHECK-COUNT-5: nvvm.shfl.sync  bfly
// A failing request is planned with length 0.
// CHECK: %[[PLANLEN:.*]] = arith.select %{{.*}}, %[[LEN]], %{{.*}} : i32
// CHECK: %[[LEN64:.*]] = arith.extsi %[[PLANLEN]] : i32 to i64
// CHECK: %[[S64:.*]] = arith.extsi %[[S]] : i32 to i64
// CHECK: %[[PIECE:.*]] = arith.divui %{{.*}}, %[[S64]] : i64
// CHECK: arith.addi %[[PIECE]], %c64_i64
// CHECK: %[[CHUNK:.*]] = arith.maxsi %{{.*}}, %c1_i64
// CHECK: %[[S1:.*]] = arith.addi %[[S]], %{{.*}} : i32
// CHECK: scf.for %[[SI:.*]] = %[[LANE]] to %[[S1]] step
// CHECK: %[[SI64:.*]] = arith.extsi %[[SI]] : i32 to i64
// CHECK: %[[PROD:.*]] = arith.muli %[[SI64]], %[[CHUNK]] : i64
// CHECK: %[[BOUND:.*]] = arith.minsi %[[PROD]], %[[LEN64]] : i64
// CHECK: %[[B32:.*]] = arith.trunci %[[BOUND]] : i64 to i32
// CHECK: llvm.getelementptr %[[BOUNDS]]
// CHECK: llvm.store %[[B32]]
// CHECK: arith.cmpi eq, %[[LANE]], %{{.*}}
// CHECK: scf.if
// CHECK: llvm.atomicrmw _or %[[STATUS]], %{{.*}} monotonic : !llvm.ptr<1>, i32
// CHECK-LABEL: gpu.func @mla_combine(

// PTX: .entry mla_decode_partial(
// PTX: .entry mla_decode_plan(
// PTX: shfl.sync.bfly.b32
// PTX: atom.global.or.b32
// PTX: .entry mla_combine(

module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @decode(%q: tensor<?x2x16x576xbf16>, %cache: tensor<?x64x576xbf16>,
                    %bt: tensor<?x?xi32>, %lens: tensor<?xi32>)
      -> (tensor<?x2x16x512xbf16>, tensor<?x16x2xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens]
        layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 causal
        {mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 64, stages = 2, wgmma = true>}
        : (tensor<?x2x16x576xbf16>, tensor<?x64x576xbf16>, tensor<?x?xi32>, tensor<?xi32>)
        -> (tensor<?x2x16x512xbf16>, tensor<?x16x2xf32>)
    return %o, %l : tensor<?x2x16x512xbf16>, tensor<?x16x2xf32>
  }
}
