//===- MLAToLinalg.h - mla to linalg/tensor/scf patterns --------*- C++ -*-===//
//
// Pattern sets of the CPU lowering, one per op family, so pipelines and
// other conversions can reuse them.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_CONVERSION_MLATOLINALG_MLATOLINALG_H
#define MLA_CONVERSION_MLATOLINALG_MLATOLINALG_H

#include "mlir/IR/PatternMatch.h"

namespace mla {

/// cache_write and gather_cache: paged writes/reads and the fp8 row formats.
void populateMLACacheToLinalgPatterns(mlir::RewritePatternSet &patterns);

/// decode (as decode_partial + combine), decode_partial and combine.
void populateMLADecodeToLinalgPatterns(mlir::RewritePatternSet &patterns);

/// split_kv_b_proj, absorb_q, up_proj_out and up_proj_kv.
void populateMLAProjectionToLinalgPatterns(mlir::RewritePatternSet &patterns);

/// mha and merge_states.
void populateMLAAttentionToLinalgPatterns(mlir::RewritePatternSet &patterns);

} // namespace mla

#endif // MLA_CONVERSION_MLATOLINALG_MLATOLINALG_H
