//===- MLAAttrs.h - mla attributes ------------------------------*- C++ -*-===//
#ifndef MLA_DIALECT_MLA_IR_MLAATTRS_H
#define MLA_DIALECT_MLA_IR_MLAATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"
#include <optional>

#include "mla/Dialect/MLA/IR/MLAEnums.h.inc"

namespace mla::gpu {
struct DecodeTiling;
} // namespace mla::gpu

#define GET_ATTRDEF_CLASSES
#include "mla/Dialect/MLA/IR/MLAAttrs.h.inc"

#endif // MLA_DIALECT_MLA_IR_MLAATTRS_H
