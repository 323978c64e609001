// RUN: mla-opt %s --mla-plan="target=cpu" | FileCheck %s --check-prefix=PLAN
// RUN: mla-opt %s --mla-plan="target=cpu decode-threshold=0" | FileCheck %s --check-prefix=PREFILL
// RUN: mla-opt %s --mla-to-llvm-cpu | FileCheck %s --check-prefix=LLVM
// RUN: mla-opt %s --mla-to-llvm-cpu="decode-threshold=0" | FileCheck %s --check-prefix=LLVM
// RUN: not mla-opt %s --mla-to-llvm-cpu="decode-threshold=2" 2>&1 | FileCheck %s --check-prefix=TWO

// mla.attention as the runtime builds it for an API call (KernelBuilder's
// buildAttention): static shapes, and the batch (query_start_loc) an
// argument known only at run time. The CPU pipeline plans it with its
// decode-threshold option (the runtime's decode_threshold, part of the
// compile cache key): 1 splits off the leading single-token requests at run
// time, 0 makes the whole batch a prefill, and 2 cannot split a run-time
// batch.

// PLAN-LABEL: func.func @attention
// PLAN: scf.while
// PLAN: mla.absorb_q
// PLAN: mla.decode_partial {{.*}} num_splits 1 :
// PLAN: mla.combine
// PLAN: mla.up_proj_out
// PLAN: mla.gather_cache
// PLAN: mla.mha
// PLAN: mla.merge_states

// PREFILL-LABEL: func.func @attention
// PREFILL-NOT: scf.while
// PREFILL-NOT: mla.decode_partial
// PREFILL: mla.gather_cache
// PREFILL-NOT: mla.decode_partial

// LLVM: llvm.func @attention(
// LLVM: llvm.func @_mlir_ciface_attention(

// TWO: error: 'mla.attention' op decode-threshold 2 needs a constant query_start_loc
func.func @attention(%q: tensor<6x2x12xf32>, %kv: tensor<6x16xf32>, %pe: tensor<6x4xf32>, %w: tensor<24x16xf32>,
                     %cache: tensor<8x16x20xf32>, %bt: tensor<3x2xi32>, %qsl: tensor<4xi32>, %lens: tensor<3xi32>) -> tensor<6x2x4xf32> {
  %o = mla.attention %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.25
      : (tensor<6x2x12xf32>, tensor<6x16xf32>, tensor<6x4xf32>, tensor<24x16xf32>, tensor<8x16x20xf32>, tensor<3x2xi32>, tensor<4xi32>, tensor<3xi32>) -> tensor<6x2x4xf32>
  return %o : tensor<6x2x4xf32>
}
