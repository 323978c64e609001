//===- MLADialect.td - the mla dialect ---------------------*- tablegen -*-===//
//
// The `mla` dialect: DeepSeek-style Multi-head Latent Attention as ops on
// ranked tensors.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_DIALECT_MLA_IR_MLADIALECT_TD
#define MLA_DIALECT_MLA_IR_MLADIALECT_TD

include "mlir/IR/OpBase.td"

def MLA_Dialect : Dialect {
  let name = "mla";
  let cppNamespace = "::mla";
  let summary = "Multi-head Latent Attention: paged latent cache, absorbed "
                "decode, chunked prefill and LSE merges";
  let description = [{
    The `mla` dialect expresses the whole attention path of DeepSeek-style
    Multi-head Latent Attention (MLA) on ranked tensors: writes of the
    576-wide latent row into a paged cache, query absorption with `W_UK`,
    MQA decode over the latent cache (whole or split into partial states
    plus a combine), the output up-projection with `W_UV`, and the chunked
    up-projected MHA prefill with its LSE merges.

    Every dimension (heads `N`, latent width `L`, RoPE width `R`, nope width
    `P`, value width `V`, page size) is read from operand types; choices a
    planning pass or a user makes (page size, row format, split count,
    workspace budget) are attributes. Ops that write into an existing
    buffer (the cache, a workspace) are in destination-passing style so that
    one-shot bufferization can perform the writes in place.

    The discardable attribute `mla.target` (a `#mla.target`) on a module
    names the chip the module is compiled for.
    `mla.padded_heads` (an i64, at least N) on `mla.decode`,
    `mla.decode_partial` or `mla.attention` is the head count the chip's
    decode kernel pads q to (Cutlass MLA on sm100: 128).
    `mla.gpu_tiling` (a `#mla.gpu_tiling`) on `mla.decode` or
    `mla.decode_partial` holds the GPU decode kernel's tile parameters.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let dependentDialects = ["::mlir::tensor::TensorDialect"];
  let extraClassDeclaration = [{
    /// Registers the attributes (defined next to their storage classes).
    void registerAttributes();

    /// Name of the discardable module attribute carrying the `#mla.target`.
    static constexpr ::llvm::StringLiteral getTargetAttrName() {
      return ::llvm::StringLiteral("mla.target");
    }

    /// Name of the discardable i64 attribute on decode-kernel ops giving the
    /// head count the kernel pads q to (set by `mla-select-layout`).
    static constexpr ::llvm::StringLiteral getPaddedHeadsAttrName() {
      return ::llvm::StringLiteral("mla.padded_heads");
    }

    /// Name of the discardable `#mla.gpu_tiling` attribute on decode ops
    /// (set by `mla-select-gpu-tiling`).
    static constexpr ::llvm::StringLiteral getGpuTilingAttrName() {
      return ::llvm::StringLiteral("mla.gpu_tiling");
    }
  }];
}

class MLA_Op<string mnemonic, list<Trait> traits = []>
    : Op<MLA_Dialect, mnemonic, traits>;

#endif // MLA_DIALECT_MLA_IR_MLADIALECT_TD
