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

#endif // MLA_CONVERSION_PASSES_TD
