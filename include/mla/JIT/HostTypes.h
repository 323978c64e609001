//===- HostTypes.h - host element types of MLIR types ----------*- C++ -*-===//
//
// The JIT side of mla/Contract/HostTensor.h: which host array element type
// binds to an MLIR element type. Kept out of the contract layer, which has no
// MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_JIT_HOSTTYPES_H
#define MLA_JIT_HOSTTYPES_H

#include "mla/Contract/HostTensor.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Types.h"
#include <optional>

namespace mla {

/// The host type of an MLIR element type, if it has one.
std::optional<DType> getDTypeOf(mlir::Type type);

/// The MLIR element type host arrays of `dtype` are bound to.
mlir::Type getElementType(mlir::MLIRContext &context, DType dtype);

} // namespace mla

#endif // MLA_JIT_HOSTTYPES_H
