//===- HostTypes.cpp - host element types of MLIR types -------------------===//

#include "mla/JIT/HostTypes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/ErrorHandling.h"

using namespace mla;
using namespace mlir;

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

Type mla::getElementType(MLIRContext &ctx, DType dtype) {
  switch (dtype) {
  case DType::f32:
    return Float32Type::get(&ctx);
  case DType::f16:
    return Float16Type::get(&ctx);
  case DType::bf16:
    return BFloat16Type::get(&ctx);
  case DType::i32:
    return IntegerType::get(&ctx, 32);
  case DType::i8:
  case DType::u8:
    return IntegerType::get(&ctx, 8);
  }
  llvm_unreachable("unknown DType");
}

static_assert(kDynamicDim == mlir::ShapedType::kDynamic,
              "HostTensor's dynamic dimension must be MLIR's");
