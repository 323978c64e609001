//===- MLADialect.h - the mla dialect ---------------------------*- C++ -*-===//
#ifndef MLA_DIALECT_MLA_IR_MLADIALECT_H
#define MLA_DIALECT_MLA_IR_MLADIALECT_H

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dialect.h"

#include "mla/Dialect/MLA/IR/MLAOpsDialect.h.inc"

#endif // MLA_DIALECT_MLA_IR_MLADIALECT_H
