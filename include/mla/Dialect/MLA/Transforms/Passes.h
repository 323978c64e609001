//===- Passes.h - mla dialect passes ----------------------------*- C++ -*-===//
#ifndef MLA_DIALECT_MLA_TRANSFORMS_PASSES_H
#define MLA_DIALECT_MLA_TRANSFORMS_PASSES_H

#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/Pass.h"

namespace mla {

#define GEN_PASS_DECL
#include "mla/Dialect/MLA/Transforms/Passes.h.inc"

/// The rewrite of mla-chunk-prefill, for reuse by other pipelines.
/// `defaultWorkspaceRows` applies to ops without a workspace_rows attribute.
void populateChunkPrefillPatterns(mlir::RewritePatternSet &patterns,
                                  int64_t defaultWorkspaceRows);

/// The rewrite of mla-split-kv (decode -> decode_partial + combine).
void populateSplitKVPatterns(mlir::RewritePatternSet &patterns);

#define GEN_PASS_REGISTRATION
#include "mla/Dialect/MLA/Transforms/Passes.h.inc"

} // namespace mla

#endif // MLA_DIALECT_MLA_TRANSFORMS_PASSES_H
