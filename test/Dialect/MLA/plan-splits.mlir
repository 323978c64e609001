// RUN: mla-opt %s --split-input-file --mla-plan-splits | FileCheck %s --check-prefix=HEUR
// RUN: mla-opt %s --split-input-file --mla-plan-splits="policy=balanced num-sms=8" | FileCheck %s --check-prefix=BAL
// RUN: mla-opt %s --split-input-file --mla-plan-splits="policy=batch-invariant" | FileCheck %s --check-prefix=INV

// One long request among short ones (constant seq_lens): the heuristic picks
// one count for the batch from the longest request (next_pow2(10240 / 512) =
// 32, capped at 2 * 132) and cuts every request into that many equal pieces;
// the balanced plan (FlashMLA) spreads 64-token blocks plus 5 blocks of
// overhead per request over 8 parts, so only the long request is split;
// batch-invariant keeps one piece per request.
// HEUR-LABEL: func.func @long_among_short
// HEUR: mla.decode {{.*}} num_splits 32 {split_plan = #mla.split_plan<policy = heuristic, num_sm_parts = 132, bounds = [0, 32, 64,
// BAL-LABEL: func.func @long_among_short
// BAL: mla.decode {{.*}} num_splits 5 {split_plan = #mla.split_plan<policy = balanced, num_sm_parts = 8, bounds = [0, 1024, 1024, 1024, 1024, 1024, 0, 1024, 1024, 1024, 1024, 1024, 0, 1024, 1024, 1024, 1024, 1024, 0, 1024, 1024, 1024, 1024, 1024, 0, 1024, 1024, 1024, 1024, 1024, 0, 1024, 1024, 1024, 1024, 1024, 0, 1024, 1024, 1024, 1024, 1024, 0, 1152, 3648, 6144, 8640, 10240]>}
// INV-LABEL: func.func @long_among_short
// INV: mla.decode {{.*}} num_splits 1 {split_plan = #mla.split_plan<policy = batch_invariant, num_sm_parts = 132, bounds = [0, 1024, 0, 1024, 0, 1024, 0, 1024, 0, 1024, 0, 1024, 0, 1024, 0, 10240]>}
func.func @long_among_short(%q: tensor<8x1x16x576xbf16>, %cache: tensor<300x64x576xbf16>, %bt: tensor<8x160xi32>) -> (tensor<8x1x16x512xbf16>, tensor<8x16x1xf32>) {
  %lens = arith.constant dense<[1024, 1024, 1024, 1024, 1024, 1024, 1024, 10240]> : tensor<8xi32>
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
      : (tensor<8x1x16x576xbf16>, tensor<300x64x576xbf16>, tensor<8x160xi32>, tensor<8xi32>) -> (tensor<8x1x16x512xbf16>, tensor<8x16x1xf32>)
  return %o, %lse : tensor<8x1x16x512xbf16>, tensor<8x16x1xf32>
}

// -----

// Run-time seq_lens: the plan fixes the partial-state capacity and leaves the
// pieces to the host planner. Heuristic: next_pow2(32768 / 512) = 64;
// balanced: 8 SMs / ceil(16 * 2 / 64) = 8 parts; batch-invariant: 1.
// HEUR-LABEL: func.func @dynamic_lengths
// HEUR: num_splits 64 {split_plan = #mla.split_plan<policy = heuristic, num_sm_parts = 132>}
// BAL-LABEL: func.func @dynamic_lengths
// BAL: num_splits 8 {split_plan = #mla.split_plan<policy = balanced, num_sm_parts = 8>}
// INV-LABEL: func.func @dynamic_lengths
// INV: num_splits 1 {split_plan = #mla.split_plan<policy = batch_invariant, num_sm_parts = 132>}
func.func @dynamic_lengths(%q: tensor<4x2x16x576xbf16>, %cache: tensor<300x64x576xbf16>, %bt: tensor<4x160xi32>, %lens: tensor<4xi32>) -> (tensor<4x2x16x512xbf16>, tensor<4x16x2xf32>) {
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 causal
      : (tensor<4x2x16x576xbf16>, tensor<300x64x576xbf16>, tensor<4x160xi32>, tensor<4xi32>) -> (tensor<4x2x16x512xbf16>, tensor<4x16x2xf32>)
  return %o, %lse : tensor<4x2x16x512xbf16>, tensor<4x16x2xf32>
}

// -----

// A count the user already chose is kept; the module target's SM count is
// used when num-sms is not given (heuristic: min(next_pow2(8192/512), 2*4) = 8).
// HEUR-LABEL: func.func @user_count_and_target
// HEUR: num_splits 3 :
// HEUR: num_splits 8 {split_plan = #mla.split_plan<policy = heuristic, num_sm_parts = 4, bounds = [0, 1024, 2048, 3072, 4096, 5120, 6144, 7168, 8192, 0, 0, 0, 0, 0, 0, 0, 0, 0]>}
// BAL-LABEL: func.func @user_count_and_target
// INV-LABEL: func.func @user_count_and_target
module attributes {mla.target = #mla.target<chip = sm90, num_sms = 4>} {
func.func @user_count_and_target(%q: tensor<2x1x16x576xbf16>, %cache: tensor<300x64x576xbf16>, %bt: tensor<2x160xi32>, %dyn: tensor<2xi32>) {
  %o, %lse = mla.decode %q, %cache[%bt, %dyn] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 num_splits 3
      : (tensor<2x1x16x576xbf16>, tensor<300x64x576xbf16>, tensor<2x160xi32>, tensor<2xi32>) -> (tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>)
  %lens = arith.constant dense<[8192, 0]> : tensor<2xi32>
  %o2, %lse2 = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
      : (tensor<2x1x16x576xbf16>, tensor<300x64x576xbf16>, tensor<2x160xi32>, tensor<2xi32>) -> (tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>)
  return
}
}
