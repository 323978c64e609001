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

#define GET_OP_CLASSES
#include "mla/Dialect/MLA/IR/MLAOps.h.inc"

#endif // MLA_DIALECT_MLA_IR_MLAOPS_H
