//===- MLAOps.h - mla operations --------------------------------*- C++ -*-===//
#ifndef MLA_DIALECT_MLA_IR_MLAOPS_H
#define MLA_DIALECT_MLA_IR_MLAOPS_H

#include "mla/Dialect/MLA/IR/MLAAttrs.h"
#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mla {
/// The query dimensions of a decode op in either form: q [B, Sq, N, L+R],
/// or varlen q [T, N, L+R] whose Sq is the largest per-request query length
/// (`max_query_len`, by default kMaxVarlenQueryRows) and B comes from
/// query_start_loc [B+1]. Dynamic sizes are ShapedType::kDynamic.
struct DecodeQueryDims {
  int64_t batch, queryRows, numHeads, rowDim;
};
} // namespace mla

#define GET_OP_CLASSES
#include "mla/Dialect/MLA/IR/MLAOps.h.inc"

#endif // MLA_DIALECT_MLA_IR_MLAOPS_H
