//===- Passes.td - mla conversion passes -------------------*- tablegen -*-===//

#ifndef MLA_CONVERSION_PASSES_TD
#define MLA_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertMLAToLinalg : Pass<"convert-mla-to-linalg", "mlir::ModuleOp"> {
  let summary = "Lower every mla op to linalg/tensor/scf/vector/arith/math";
  let description = [{
    The CPU lowering and the numerical ground truth of the project. Every op
    of the mla dialect becomes tensor-level code in upstream dialects, so the
    result bufferizes with one-shot bufferization and runs through LLVM:

    * cache ops: paged row writes and gathers through `slot_mapping` and
      `block_table`, with e4m3 quantisation (round to nearest even, saturated
      at +-448) and the per-tensor, per-token and `fp8_ds_mla` row formats;
    * decode: a page-by-page online softmax (max-subtracted, natural
      exponent) per request and split; rows beyond `seq_lens` and masked
      causal positions are never read into a result, so NaN or garbage in
      unused slots cannot leak; `mla.decode` becomes `decode_partial` +
      `combine`;
    * projections: batched contractions over heads;
    * `mha` and `merge_states`: varlen attention with bottom-right causal
      masks and LSE merges with the +-inf rules;
    * `mla.prefill` must have been decomposed by `mla-chunk-prefill`.

    Inner products and row updates use `vector` ops on f32 so the CPU path is
    usable at DeepSeek-V3 sizes.
  }];
  let dependentDialects = [
    "mlir::arith::ArithDialect", "mlir::bufferization::BufferizationDialect",
    "mlir::func::FuncDialect", "mlir::linalg::LinalgDialect",
    "mlir::math::MathDialect", "mlir::memref::MemRefDialect",
    "mlir::scf::SCFDialect", "mlir::tensor::TensorDialect",
    "mlir::vector::VectorDialect"
  ];
}

def ConvertMLAToGPU : Pass<"convert-mla-to-gpu", "mlir::ModuleOp"> {
  let summary = "Emit GPU kernels (gpu.module of gpu.func on NVVM) for mla ops";
  let description = [{
    The device half of the GPU path. Every `mla.decode`,
    `mla.decode_partial`, `mla.combine`, `mla.cache_write`, `mla.absorb_q`
    and `mla.up_proj_out` of a function becomes one or more kernels in a
    `gpu.module @mla_kernels` (the module gets `gpu.container_module`);
    `mla.plan_splits` is host work. The kernels follow the contract in
    `mla/Contract/KernelABI.h` (names, raw-pointer parameters, grid,
    block, shared memory), which the host runtime launches through the
    CUDA driver API; the host functions themselves are removed, since the
    runtime owns argument checks, split planning and launches.

    * `sm90`: the decode partial kernel stages KV blocks in shared memory with
      `cp.async` (swizzled, `stages` deep), computes QK^T and PV with bf16/f16
      `mma.sync` m16n8k16 from `ldmatrix` fragments and runs a base-2 online
      softmax (`scale * log2(e)` folded into the scores, `ex2.approx`), with
      the row maxima and P exchanged through shared memory. Tile parameters
      come from `mla.gpu_tiling` (`mla-select-gpu-tiling`).
    * `sm100`: the same contract with `tcgen05` MMAs into tensor memory.

    Ops the GPU path does not cover (prefill, gathers, MHA) are reported as
    errors naming the op.
  }];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"\"\"",
           "sm_90a or sm_100a; empty: from the module's mla.target">
  ];
  let dependentDialects = [
    "mlir::arith::ArithDialect", "mlir::gpu::GPUDialect",
    "mlir::LLVM::LLVMDialect", "mlir::NVVM::NVVMDialect",
    "mlir::scf::SCFDialect", "mlir::vector::VectorDialect",
    "mlir::memref::MemRefDialect"
  ];
}

#endif // MLA_CONVERSION_PASSES_TD
