// RUN: mla-opt %s --split-input-file --mla-split-kv | FileCheck %s
// RUN: mla-opt %s --split-input-file --mla-plan-splits="policy=balanced num-sms=8" --mla-split-kv | FileCheck %s --check-prefix=PLANNED

// Static bounds become a constant split_bounds operand of decode_partial.
// CHECK-LABEL: func.func @static_plan
// CHECK: %[[BOUNDS:.*]] = arith.constant dense<{{\[\[}}0, 64, 100], [0, 0, 0]]> : tensor<2x3xi32>
// CHECK: %[[PO:.*]], %[[PL:.*]] = mla.decode_partial %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] bounds %[[BOUNDS]] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 num_splits 2 : {{.*}} -> (tensor<2x2x1x16x512xf32>, tensor<2x2x16x1xf32>)
// CHECK: mla.combine %[[PO]], %[[PL]] : (tensor<2x2x1x16x512xf32>, tensor<2x2x16x1xf32>) -> (tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>)
func.func @static_plan(%q: tensor<2x1x16x576xbf16>, %cache: tensor<8x64x576xbf16>, %bt: tensor<2x4xi32>) -> (tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>) {
  %lens = arith.constant dense<[100, 0]> : tensor<2xi32>
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 num_splits 2
      {split_plan = #mla.split_plan<policy = balanced, num_sm_parts = 4, bounds = [0, 64, 100, 0, 0, 0]>}
      : (tensor<2x1x16x576xbf16>, tensor<8x64x576xbf16>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>)
  return %o, %lse : tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>
}

// -----

// A plan without bounds asks the host planner at run time; a bare num_splits
// keeps equal pieces; nothing at all is one piece per request.
// CHECK-LABEL: func.func @dynamic
// CHECK: %[[B:.*]] = mla.plan_splits %{{.*}} heads 16 rows 2 {plan = #mla.split_plan<policy = balanced, num_sm_parts = 8>} : tensor<4xi32> -> tensor<4x9xi32>
// CHECK: mla.decode_partial {{.*}} bounds %[[B]] layout {{.*}} causal num_splits 8
// CHECK: mla.decode_partial
// CHECK-NOT: bounds
// CHECK-SAME: num_splits 3
// CHECK: mla.decode_partial
// CHECK-SAME: num_splits 1 :
// PLANNED-LABEL: func.func @dynamic
// PLANNED: mla.plan_splits {{.*}} -> tensor<4x9xi32>
// PLANNED: mla.decode_partial {{.*}} num_splits 3
// PLANNED: mla.plan_splits {{.*}} -> tensor<4x9xi32>
func.func @dynamic(%q: tensor<4x2x16x576xbf16>, %cache: tensor<300x64x576xbf16>, %bt: tensor<4x160xi32>, %lens: tensor<4xi32>) {
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 causal num_splits 8
      {split_plan = #mla.split_plan<policy = balanced, num_sm_parts = 8>}
      : (tensor<4x2x16x576xbf16>, tensor<300x64x576xbf16>, tensor<4x160xi32>, tensor<4xi32>) -> (tensor<4x2x16x512xbf16>, tensor<4x16x2xf32>)
  %o2, %lse2 = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 causal num_splits 3
      : (tensor<4x2x16x576xbf16>, tensor<300x64x576xbf16>, tensor<4x160xi32>, tensor<4xi32>) -> (tensor<4x2x16x512xbf16>, tensor<4x16x2xf32>)
  %o3, %lse3 = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 causal
      : (tensor<4x2x16x576xbf16>, tensor<300x64x576xbf16>, tensor<4x160xi32>, tensor<4xi32>) -> (tensor<4x2x16x512xbf16>, tensor<4x16x2xf32>)
  return
}

// -----

// A run-time batch-invariant plan is one piece per request: no host call.
// CHECK-LABEL: func.func @batch_invariant_dynamic
// CHECK-NOT: mla.plan_splits
// CHECK: mla.decode_partial
// CHECK-NOT: bounds
// CHECK-SAME: num_splits 1 :
// PLANNED-LABEL: func.func @batch_invariant_dynamic
func.func @batch_invariant_dynamic(%q: tensor<4x1x16x576xbf16>, %cache: tensor<300x64x576xbf16>, %bt: tensor<4x160xi32>, %lens: tensor<4xi32>) {
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 num_splits 1
      {split_plan = #mla.split_plan<policy = batch_invariant, num_sm_parts = 132>}
      : (tensor<4x1x16x576xbf16>, tensor<300x64x576xbf16>, tensor<4x160xi32>, tensor<4xi32>) -> (tensor<4x1x16x512xbf16>, tensor<4x16x1xf32>)
  return
}
