//===- HostTensor.h - host arrays crossing the runtime boundary -*- C++ -*-===//
//
// The runtime's view of a caller's array: a data pointer, an element type and
// a shape, dense and row-major. The C API, the kernel builder, the executor
// and mla-run all speak this type, so no layer converts between array
// descriptions. It needs no MLIR, so the contract layer's argument rules and
// the GPU runtime use it too; MLIR element types map to it in
// KernelBuilder.h.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_CONTRACT_HOSTTENSOR_H
#define MLA_CONTRACT_HOSTTENSOR_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include <climits>
#include <cstdint>
#include <optional>
#include <string>

namespace mla {

/// Element types of host arrays. `u8` holds fp8 cache bytes: the IR calls
/// them i8, host code (numpy) calls them uint8; both are the same bytes.
enum class DType { f32, f16, bf16, i32, i8, u8 };

/// Bytes per element.
int64_t getDTypeSize(DType dtype);

/// numpy-style name ("float32", "uint8", ...), used in error messages.
llvm::StringRef getDTypeName(DType dtype);

/// The MLIR spelling of the element type ("f32", "i8", ...).
llvm::StringRef getDTypeIRName(DType dtype);

/// True if an array of `actual` may be bound to IR elements of `expected`
/// (equal types, or u8 bytes for i8).
bool isCompatibleDType(DType actual, DType expected);

/// A dimension not known until run time (the value of MLIR's
/// ShapedType::kDynamic), printed as '?'.
inline constexpr int64_t kDynamicDim = INT64_MIN;

/// "[2, 16, 576]"; a kDynamicDim dimension prints as "?".
std::string formatShape(llvm::ArrayRef<int64_t> shape);

/// Number of elements of a shape.
int64_t getNumElements(llvm::ArrayRef<int64_t> shape);

/// A dense row-major host array. Does not own its data.
struct HostTensor {
  void *data = nullptr;
  DType dtype = DType::f32;
  llvm::SmallVector<int64_t, 4> shape;

  int64_t getRank() const { return shape.size(); }
  int64_t getNumElements() const { return mla::getNumElements(shape); }
  int64_t getSizeInBytes() const {
    return getNumElements() * getDTypeSize(dtype);
  }
  /// Element `i` (row-major flat index) of an i32 array.
  int32_t getI32(int64_t i) const { return static_cast<int32_t *>(data)[i]; }
};

} // namespace mla

#endif // MLA_CONTRACT_HOSTTENSOR_H
