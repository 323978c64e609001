//===- HostTypes.cpp - host element types of MLIR types -------------------===//

#include "mla/JIT/HostTypes.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mla;

std::optional<DType> mla::getDTypeOf(mlir::Type type) {
  if (type.isF32())
    return DType::f32;
  if (type.isF16())
    return DType::f16;
  if (type.isBF16())
    return DType::bf16;
  if (type.isSignlessInteger(32))
    return DType::i32;
  if (type.isSignlessInteger(8))
    return DType::i8;
  return std::nullopt;
}

static_assert(kDynamicDim == mlir::ShapedType::kDynamic,
              "HostTensor's dynamic dimension must be MLIR's");
