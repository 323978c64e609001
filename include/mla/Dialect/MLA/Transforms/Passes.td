//===- Passes.td - mla dialect passes ----------------------*- tablegen -*-===//

#ifndef MLA_DIALECT_MLA_TRANSFORMS_PASSES_TD
#define MLA_DIALECT_MLA_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def MLAChunkPrefill : Pass<"mla-chunk-prefill", "mlir::func::FuncOp"> {
  let summary = "Decompose mla.prefill into chunked gather/up-project/attend/merge";
  let description = [{
    Rewrites every `mla.prefill` into (primer section 7):

    1. the new tokens' K/V: `up_proj_kv` of `kv_c`, with `k_pe` broadcast over
       heads and appended to K;
    2. causal `mha` of the new tokens among themselves, with LSE;
    3. a loop over page-aligned chunks of the cached context: `gather_cache`
       of at most `W` rows into a workspace, `up_proj_kv`, non-causal `mha`
       of the new tokens against the chunk, `merge_states` into the running
       context state;
    4. a final `merge_states` of the context state with the new-token state.

    `W` is the op's `workspace_rows` if set, else the `workspace-rows` option
    if non-zero, else the primer's default
    `min(max(8 * max-model-len, 4 * max-num-seqs * page-size), 64 * 1024)`
    rows. Peak workspace is W rows whatever the context length.
  }];
  let options = [
    Option<"workspaceRows", "workspace-rows", "int64_t", /*default=*/"0",
           "Context rows up-projected at once (0: the op's attribute or the default budget)">,
    Option<"maxModelLen", "max-model-len", "int64_t", /*default=*/"4096",
           "Longest sequence the engine serves (default budget)">,
    Option<"maxNumSeqs", "max-num-seqs", "int64_t", /*default=*/"128",
           "Most concurrent sequences (default budget)">,
    Option<"pageSize", "page-size", "int64_t", /*default=*/"64",
           "Cache page size (default budget)">
  ];
  let dependentDialects = [
    "mlir::arith::ArithDialect", "mlir::scf::SCFDialect",
    "mlir::tensor::TensorDialect", "mlir::linalg::LinalgDialect"
  ];
}

#endif // MLA_DIALECT_MLA_TRANSFORMS_PASSES_TD
