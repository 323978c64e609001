// RUN: mla-opt %s --mla-plan="target=sm90" | FileCheck %s --check-prefix=SM90
// RUN: mla-opt %s --mla-plan="target=sm100" | FileCheck %s --check-prefix=SM100
// RUN: mla-opt %s --mla-plan="target=cpu" | FileCheck %s --check-prefix=CPU
// RUN: mla-opt %s --mla-plan="target=sm90 split-policy=heuristic num-sms=132 max-seq-len=8192" | FileCheck %s --check-prefix=HEUR

// One mla-plan run makes every decision, per target. A cache whose page size
// is left open gets the target's (64 on sm90, FlashMLA; 128 on sm100, Cutlass
// MLA); sm100 pads 16 heads to 128; the split plan is balanced on GPUs
// (sm90: 132 SMs / ceil(16 * 1 / 64) = 132 parts), one piece per request on
// the CPU, or vLLM's heuristic when asked (next_pow2(8192 / 512) = 16).

// SM90: module attributes {mla.target = #mla.target<chip = sm90>}
// SM90-LABEL: func.func @decode_layer
// SM90: mla.plan_splits %{{.*}} heads 16 rows 1 {plan = #mla.split_plan<policy = balanced, num_sm_parts = 132>} : tensor<4xi32> -> tensor<4x133xi32>
// SM90: mla.decode_partial {{.*}} bounds %{{.*}} layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 num_splits 132
// SM90-NOT: mla.padded_heads
// SM90: mla.combine

// SM100: module attributes {mla.target = #mla.target<chip = sm100>}
// SM100-LABEL: func.func @decode_layer
// SM100: mla.decode_partial {{.*}} layout #mla.cache_layout<format = bf16, page_size = 128> {{.*}} {mla.padded_heads = 128 : i64}

// CPU: module attributes {mla.target = #mla.target<chip = cpu>}
// CPU-LABEL: func.func @decode_layer
// CPU-NOT: mla.plan_splits
// CPU: mla.decode_partial {{.*}} layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 num_splits 1 :

// HEUR-LABEL: func.func @decode_layer
// HEUR: mla.plan_splits {{.*}} {plan = #mla.split_plan<policy = heuristic, num_sm_parts = 132>} : tensor<4xi32> -> tensor<4x17xi32>
func.func @decode_layer(%q: tensor<4x1x16x576xbf16>, %cache: tensor<?x?x576xbf16>, %bt: tensor<4x64xi32>, %lens: tensor<4xi32>)
    -> (tensor<4x1x16x512xbf16>, tensor<4x16x1xf32>) {
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16> scale 0.0721687824
      : (tensor<4x1x16x576xbf16>, tensor<?x?x576xbf16>, tensor<4x64xi32>, tensor<4xi32>) -> (tensor<4x1x16x512xbf16>, tensor<4x16x1xf32>)
  return %o, %lse : tensor<4x1x16x512xbf16>, tensor<4x16x1xf32>
}

// A mixed batch (two single-token decodes, then a 4-token extend) becomes the
// absorbed decode path and the chunked prefill path on every target.
// SM90-LABEL: func.func @mixed_batch
// SM90: mla.absorb_q
// SM90: mla.decode_partial {{.*}} page_size = 64
// SM90: mla.up_proj_out
// SM90: scf.for
// SM90: mla.gather_cache
// SM90: mla.merge_states
// SM100-LABEL: func.func @mixed_batch
// CPU-LABEL: func.func @mixed_batch
// CPU: mla.decode_partial {{.*}} num_splits 1 :
// CPU: mla.gather_cache
// HEUR-LABEL: func.func @mixed_batch
func.func @mixed_batch(%q: tensor<6x16x192xbf16>, %kv: tensor<6x512xbf16>, %pe: tensor<6x64xbf16>, %w: tensor<4096x512xbf16>,
                       %cache: tensor<?x?x576xbf16>, %bt: tensor<3x16xi32>, %lens: tensor<3xi32>) -> tensor<6x16x128xbf16> {
  %qsl = arith.constant dense<[0, 1, 2, 6]> : tensor<4xi32>
  %o = mla.attention %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = bf16> scale 0.0721687824 workspace_rows 256
      : (tensor<6x16x192xbf16>, tensor<6x512xbf16>, tensor<6x64xbf16>, tensor<4096x512xbf16>, tensor<?x?x576xbf16>, tensor<3x16xi32>, tensor<4xi32>, tensor<3xi32>) -> tensor<6x16x128xbf16>
  return %o : tensor<6x16x128xbf16>
}
