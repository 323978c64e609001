//===- HostArray.h - host arrays and .npy files for mla-run -----*- C++ -*-===//
//
// mla-run's arrays: owned, typed, row-major, readable from and writable to
// numpy's .npy format (version 1-3, C order, little-endian '<f4', '<f2',
// '<i4', '|i1', '|u1', plus '<i8' read into i32 arguments). .npy has no
// bfloat16, so bf16 arrays are stored as float32 (exactly) and read back
// from float32 with round-to-nearest-even.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TOOLS_MLARUN_HOSTARRAY_H
#define MLA_TOOLS_MLARUN_HOSTARRAY_H

#include "mla/Contract/HostTensor.h"
#include "llvm/Support/Error.h"
#include <vector>

namespace mla {

class HostArray {
public:
  HostArray(DType dtype, llvm::ArrayRef<int64_t> shape)
      : dtype(dtype), shape(shape),
        bytes(mla::getNumElements(shape) * getDTypeSize(dtype)) {}

  DType getDType() const { return dtype; }
  llvm::ArrayRef<int64_t> getShape() const { return shape; }
  int64_t getNumElements() const { return mla::getNumElements(shape); }
  char *getData() { return bytes.data(); }
  const char *getData() const { return bytes.data(); }

  /// A view for CpuExecutor calls.
  HostTensor getTensor() { return HostTensor{bytes.data(), dtype, shape}; }

  /// Element `i` (flat, row-major) converted to double.
  double get(int64_t i) const;
  /// Sets element `i` from a double: rounded to nearest even for floats,
  /// truncated for integers.
  void set(int64_t i, double value);

private:
  DType dtype;
  llvm::SmallVector<int64_t, 4> shape;
  std::vector<char> bytes;
};

/// IEEE half and bfloat16 conversions, round-to-nearest-even.
uint16_t floatToHalf(float value);
float halfToFloat(uint16_t bits);
uint16_t floatToBF16(float value);
float bf16ToFloat(uint16_t bits);

/// Reads `path` as an array of `dtype` whose shape matches `shape` (dynamic
/// dimensions match anything). Converts where it is exact or documented:
/// float32 to bf16, int64 to int32 (range-checked), uint8 and int8 bytes.
llvm::Expected<HostArray> readNpy(llvm::StringRef path, DType dtype,
                                  llvm::ArrayRef<int64_t> shape);

/// Writes `data` of `dtype` and `shape` to `path` (bf16 as float32).
llvm::Error writeNpy(llvm::StringRef path, DType dtype,
                     llvm::ArrayRef<int64_t> shape, const void *data);

} // namespace mla

#endif // MLA_TOOLS_MLARUN_HOSTARRAY_H
