// RUN: mla-opt %s --split-input-file --mla-plan-splits --remarks-filter=mla-plan-splits --remark-format=emitRemark -o /dev/null 2>&1 | FileCheck %s
// RUN: mla-opt %s --split-input-file --mla-plan="target=cpu" --remarks-filter=mla-plan-splits --remark-format=emitRemark -o /dev/null 2>&1 | FileCheck %s --check-prefix=AUTO
// RUN: mla-opt %s --split-input-file --mla-plan-splits -o /dev/null 2>&1 | count 0

// mla-plan-splits says what it chose and why as optimization remarks (they
// work with Debian's LLVM, which has no -debug-only and whose pass
// statistics stay zero).

// CHECK: remark: [Analysis] SplitPlan | Category:mla-plan-splits | Function=constant_lengths | Reason="constant seq_lens: the pieces are planned now; policy=heuristic from the pass option, 132 SMs", num_splits=4, policy=heuristic
// AUTO: Function=constant_lengths | Reason="constant seq_lens: the pieces are planned now; policy=auto on cpu is batch-invariant, 132 SMs", num_splits=1, policy=batch_invariant
func.func @constant_lengths(%q: tensor<2x1x16x576xbf16>, %cache: tensor<64x64x576xbf16>, %bt: tensor<2x32xi32>) -> (tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>) {
  %lens = arith.constant dense<[2048, 100]> : tensor<2xi32>
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
      : (tensor<2x1x16x576xbf16>, tensor<64x64x576xbf16>, tensor<2x32xi32>, tensor<2xi32>) -> (tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>)
  return %o, %lse : tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>
}

// -----

// CHECK: Function=dynamic_lengths | Reason="run-time seq_lens: the partial state is sized for max-seq-len=32768 and the host planner cuts the pieces; policy=heuristic from the pass option, 132 SMs", num_splits=64, policy=heuristic
// AUTO: Function=dynamic_lengths | Reason="run-time seq_lens: {{.*}}; policy=auto on cpu is batch-invariant, 132 SMs", num_splits=1, policy=batch_invariant
func.func @dynamic_lengths(%q: tensor<4x1x16x576xbf16>, %cache: tensor<300x64x576xbf16>, %bt: tensor<4x160xi32>, %lens: tensor<4xi32>) -> (tensor<4x1x16x512xbf16>, tensor<4x16x1xf32>) {
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
      : (tensor<4x1x16x576xbf16>, tensor<300x64x576xbf16>, tensor<4x160xi32>, tensor<4xi32>) -> (tensor<4x1x16x512xbf16>, tensor<4x16x1xf32>)
  return %o, %lse : tensor<4x1x16x512xbf16>, tensor<4x16x1xf32>
}

// -----

// CHECK: Function=given_count | Reason="num_splits was given; the user's count wins; {{.*}}", num_splits=3, policy=given
func.func @given_count(%q: tensor<4x1x16x576xbf16>, %cache: tensor<300x64x576xbf16>, %bt: tensor<4x160xi32>, %lens: tensor<4xi32>) -> (tensor<4x1x16x512xbf16>, tensor<4x16x1xf32>) {
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 num_splits 3
      : (tensor<4x1x16x576xbf16>, tensor<300x64x576xbf16>, tensor<4x160xi32>, tensor<4xi32>) -> (tensor<4x1x16x512xbf16>, tensor<4x16x1xf32>)
  return %o, %lse : tensor<4x1x16x512xbf16>, tensor<4x16x1xf32>
}
