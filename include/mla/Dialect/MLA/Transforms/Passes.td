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

def MLAPrepareCpuEntry : Pass<"mla-prepare-cpu-entry", "mlir::ModuleOp"> {
  let summary = "Give bufferized public functions the in-process JIT's calling convention";
  let description = [{
    Runs after one-shot bufferization in `mla-to-llvm-cpu`. For every public
    function with a body:

    * results that are (equivalent to) one of its memref arguments are
      dropped: the caller already owns that buffer, and written-in-place
      caches must not be returned (the deallocation pipeline would otherwise
      clone the whole cache to hand ownership back);
    * the function is marked `llvm.emit_c_interface`, so the executor calls
      `_mlir_ciface_<name>` with pointers to memref descriptors.

    Upstream `drop-equivalent-buffer-results` skips public functions because
    unknown callers may rely on their signatures; the JIT entry points have
    exactly one caller, the mla executor, which expects this convention.
  }];
  let dependentDialects = ["mlir::LLVM::LLVMDialect"];
}

#endif // MLA_DIALECT_MLA_TRANSFORMS_PASSES_TD
