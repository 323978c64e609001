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
    `max(min(max(8 * max-model-len, 4 * max-num-seqs * page-size), 64 * 1024),
    max-num-seqs * page-size)` rows (vLLM's budget; its one-page-per-request
    floor wins over the 64K cap). W is then clamped to the rows a static
    block table can address. Peak workspace is W rows whatever the context
    length.
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

def MLAPlanSplits : Pass<"mla-plan-splits", "mlir::ModuleOp"> {
  let summary = "Choose the split-KV plan of every mla.decode";
  let description = [{
    Annotates each `mla.decode` that has no `num_splits` yet with
    `num_splits` (the partial-state capacity S) and a `#mla.split_plan`:

    * `heuristic` (vLLM's Triton MLA): one count for the batch,
      `min(next_pow2(max(1, max_seq_len / 512)), 2 * num_SMs)`, equal pieces
      per request;
    * `balanced` (FlashMLA): KV in 64-token blocks, each request charged 5
      blocks of overhead, the total spread evenly over `num_sm_parts =
      num_SMs / ceil(N * Sq / 64)` persistent CTAs; a long request spans
      several CTAs while short ones stay whole;
    * `batch-invariant`: one piece per request, so a request's result never
      depends on the rest of the batch.

    With constant `seq_lens` the plan is computed now by the C++ planner
    (`mla/Contract/SplitPlanner.h`) and stored as `bounds`; otherwise S is the
    plan's capacity (heuristic: from `max-seq-len`; balanced: `num_sm_parts`;
    batch-invariant: 1) and the same planner runs on the host at run time
    (`mla.plan_splits`, inserted by `mla-split-kv`). `num-sms` defaults to
    the module's `#mla.target` `num_sms`, else 148 on sm100 (B200) and 132
    otherwise (H200).
  }];
  let options = [
    Option<"numSms", "num-sms", "int64_t", /*default=*/"0",
           "Streaming multiprocessors (0: the module target's, else 132)">,
    Option<"policy", "policy", "std::string", /*default=*/"\"heuristic\"",
           "heuristic | balanced | batch-invariant | auto (balanced on GPU "
           "targets, batch-invariant on the CPU, heuristic without a target)">,
    Option<"maxSeqLen", "max-seq-len", "int64_t", /*default=*/"32768",
           "Longest sequence a dynamic batch may hold (sizes heuristic plans)">
  ];
}

def MLASplitKV : Pass<"mla-split-kv", "mlir::func::FuncOp"> {
  let summary = "Rewrite mla.decode into mla.decode_partial + mla.combine";
  let description = [{
    Follows the decode's plan: static `bounds` become a constant
    `split_bounds` operand, a dynamic plan becomes an `mla.plan_splits` of the
    run-time `seq_lens`, a bare `num_splits` keeps equal pieces, and a decode
    with neither is one piece per request. The partial state is f32,
    split-major (`[S, B, Sq, N, L]`); `mla.combine` merges it per primer
    section 6.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

def MLADcp : Pass<"mla-dcp", "mlir::func::FuncOp"> {
  let summary = "Rewrite mla.decode for decode context parallelism (DCP)";
  let description = [{
    Decode context parallelism shards each request's latent cache over
    `world-size` ranks in runs of `interleave` tokens (`#mla.dcp_shard`;
    vLLM's layout). Each rank decodes its shard into a rank-local
    `(out, lse)`, the ranks all-gather those states and merge them with the
    LSE combine. Every `mla.decode` of the function becomes, per rank,
    `mla.decode_partial` with the rank's `shard` (the decode's `num_splits`
    pieces over the rank's local positions, merged by `mla.combine` when
    there are several), and the decode's results become `mla.dcp_combine`
    of the gathered states.

    * `rank=r` (0 <= r < world-size): the SPMD program of rank `r`. The
      function's cache and block table are that rank's shard (their types
      are kept, their meaning changes) and `seq_lens` stay global; the
      states are gathered by `mla.dcp_all_gather`, which a runtime with a
      transport (NCCL, gloo) executes.
    * `rank=-1` (default): every rank in one program over the function's
      global cache, for checking the decomposition where there is one
      process (`mla-opt`, `mla-run`, the CPU lowering). A rank's shard is
      then a view of the global cache, which needs whole pages per run:
      `interleave` must be the page size, and rank `r`'s block table is
      columns `r, r + world-size, ...` of the global one (static column
      count). The states are concatenated along a new rank axis.

    `interleave=0` (default) means one page. A decode that already has a
    `split_plan` is rejected: plans count global positions, so `mla-dcp`
    runs before `mla-plan-splits`.
  }];
  let options = [
    Option<"worldSize", "world-size", "int64_t", /*default=*/"1",
           "Number of DCP ranks the cache is sharded over">,
    Option<"rank", "rank", "int64_t", /*default=*/"-1",
           "The rank whose program to build (-1: all ranks in one program)">,
    Option<"interleave", "interleave", "int64_t", /*default=*/"0",
           "Tokens per run of a rank's shard (0: one page; vLLM's default is 1)">
  ];
  let dependentDialects = ["mlir::tensor::TensorDialect"];
}

def MLASelectAlgorithm : Pass<"mla-select-algorithm", "mlir::func::FuncOp"> {
  let summary = "Split mla.attention into absorbed decode and up-projected prefill";
  let description = [{
    Rewrites every `mla.attention` (primer section 8): requests with
    `1 <= q_len <= decode-threshold` take the absorbed MQA path
    (`split_kv_b_proj`, `absorb_q`, causal `decode` over the cache,
    `up_proj_out`; primer section 5), the others the up-projected MHA path
    (`prefill` of their tokens with `query_start_loc` rebased to 0; primer
    section 7). Outputs are written back at their tokens' rows; rows of no
    request are 0.

    The threshold follows the systems this compiler mirrors: vLLM's MLA
    backends reorder each batch decode-first with threshold 1 for their
    single-token decode kernels, FlashMLA-based backends use 128 so that
    short extends (speculative drafts, MTP) also take the decode kernel.
    0 sends everything to prefill.

    With a constant `query_start_loc` the split is decided at compile time,
    in any request order: decode requests are grouped by `q_len`, one
    `mla.decode` per group (its `[B, Sq]` query shape is uniform). Otherwise
    it is read at run time, which needs `decode-threshold=1` (`Sq` is part
    of the decode's type): the leading requests with `q_len = 1` take the
    decode path and all later ones the prefill path, so batches should put
    decode requests first, as engines do; any order gives the same result.
  }];
  let options = [
    Option<"decodeThreshold", "decode-threshold", "int64_t", /*default=*/"1",
           "Requests with at most this many query rows take the decode path">
  ];
  let dependentDialects = [
    "mlir::arith::ArithDialect", "mlir::scf::SCFDialect",
    "mlir::tensor::TensorDialect", "mlir::linalg::LinalgDialect"
  ];
}

def MLASelectLayout : Pass<"mla-select-layout", "mlir::ModuleOp"> {
  let summary = "Plan the paged cache's page size and row format, and head padding, for one chip";
  let description = [{
    Runs before the lowerings so that they read decisions instead of making
    them. For every op with a `#mla.cache_layout` (`cache_write`,
    `gather_cache`, `decode`, `decode_partial`, `prefill`, `attention`):

    1. Page size. The kernels each chip runs fix it: 64 on `sm90` (FlashMLA's
       paged layout), 128 on `sm100` (Cutlass MLA's), any multiple of 16 on
       `cpu`. A layout `page_size` or a static page dimension of the cache
       fixes the op's page size; it must be the chip's, else the pass fails
       naming both. With neither, the op takes the size fixed by another op
       on the same cache (a `cache_write` result is the same cache), else
       the chip's default (64 on `cpu`, FlashMLA's). The result is always
       written into the layout's `page_size`; two different fixed sizes on
       one cache are an error.
    2. Row format. With `kv-format`, every layout must end up in that format
       (vLLM's `kv_cache_dtype`): the format is set when the cache tensor can
       hold it (element type, and row width `getRowWidth(L, R)` when static),
       else the pass fails naming the cache type and the element type and
       row width it needs. `fp8_e4m3` needs a per-tensor scale that only
       calibration can provide, so it is accepted only on layouts that
       already are `fp8_e4m3` with their `scale`. Without `kv-format` the
       formats are kept.
    3. Head padding. On `sm100`, Cutlass MLA runs 128 query heads per CTA,
       so `decode`, `decode_partial` and `attention` (whose decode requests
       run the same kernel) with N < 128 get `mla.padded_heads = 128 : i64`,
       which the GPU lowering reads to pad q and drop the padded heads of
       the output; N > 128 or a dynamic N is an error. On `sm90` (FlashMLA
       takes any head count) and `cpu` the real head count runs and the
       attribute is removed.
    4. The module gets `mla.target = #mla.target<chip = ...>` if it has none,
       so later passes plan for the same chip.

    The chip is the `target` option, else the module's `mla.target`; the
    pass fails if there is neither or if they disagree.
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"\"",
           "sm90 | sm100 | cpu (empty: the module's mla.target)">,
    Option<"kvFormat", "kv-format", "std::string", /*default=*/"\"\"",
           "bf16 | f16 | f32 | fp8_e4m3 | fp8_e4m3_token | fp8_ds_mla "
           "(empty: keep the layouts' formats)">
  ];
  let dependentDialects = ["mla::MLADialect"];
}

def MLASelectGpuTiling : Pass<"mla-select-gpu-tiling", "mlir::ModuleOp"> {
  let summary = "Choose the GPU decode kernel's tile parameters";
  let description = [{
    For a module whose `mla.target` chip is `sm90` or `sm100`, sets
    `mla.gpu_tiling = #mla.gpu_tiling<...>` on every `mla.decode` and
    `mla.decode_partial` that has none, from the target and the op's shape
    (heads N, query rows Sq, L, R): compute-bound shapes (N*Sq >= 64) get 64
    query rows per CTA and two warps per row block, memory-bound ones one
    16-row block with more warps on the output columns and deeper KV
    staging. The choice is `mla::gpu::chooseDecodeTiling`, the function the
    host runtime uses for kernels it compiles itself. A tiling already
    present is checked and kept. Modules for `cpu` are left alone.
  }];
}

#endif // MLA_DIALECT_MLA_TRANSFORMS_PASSES_TD
