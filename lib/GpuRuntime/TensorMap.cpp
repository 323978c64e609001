//===- TensorMap.cpp - TMA descriptors of the runtime's kernels -----------===//

#include "mla/GpuRuntime/TensorMap.h"

#include <system_error>

using namespace mla::gpu;

namespace {
llvm::Error invalid(const llvm::Twine &msg) {
  return llvm::createStringError(
      std::make_error_code(std::errc::invalid_argument), msg);
}

llvm::Error checkAligned(CUdeviceptr base) {
  if (base % 16 != 0)
    return invalid("a TMA-loaded tensor must be 16-byte aligned (got 0x" +
                   llvm::Twine::utohexstr(base) + ")");
  return llvm::Error::success();
}
} // namespace

llvm::Expected<CUtensorMap>
mla::gpu::encodeHeadRowsMap(const CudaDriver &driver, CUdeviceptr base,
                            ActType elem, int64_t rows, int64_t heads,
                            int64_t width, int64_t boxRows) {
  if (elem != ActType::BF16 && elem != ActType::F16)
    return invalid("TMA tiles hold bf16 or f16 elements");
  if (llvm::Error err = checkAligned(base))
    return std::move(err);
  if (rows <= 0 || heads <= 0 || width <= 0 || width % 64 != 0 ||
      boxRows <= 0 || boxRows > 256)
    return invalid("TMA map of [" + llvm::Twine(rows) + ", " +
                   llvm::Twine(heads) + ", " + llvm::Twine(width) +
                   "] with boxes of " + llvm::Twine(boxRows) +
                   " rows: counts must be positive, the width a multiple "
                   "of 64, the box at most 256 rows");
  // Innermost first: columns, heads, rows. Strides (bytes) of dims 1 and 2.
  cuuint64_t dims[3] = {cuuint64_t(width), cuuint64_t(heads), cuuint64_t(rows)};
  cuuint64_t strides[2] = {cuuint64_t(width * 2),
                           cuuint64_t(heads * width * 2)};
  cuuint32_t box[3] = {64, 1, cuuint32_t(boxRows)};
  cuuint32_t elementStrides[3] = {1, 1, 1};
  CUtensorMap map;
  CUresult r = driver.api().tensorMapEncodeTiled(
      &map,
      elem == ActType::BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                            : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
      3, reinterpret_cast<void *>(base), dims, strides, box, elementStrides,
      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (llvm::Error err = driver.check(r, "cuTensorMapEncodeTiled"))
    return std::move(err);
  return map;
}

llvm::Expected<CUtensorMap>
mla::gpu::encodeByteRowsMap(const CudaDriver &driver, CUdeviceptr base,
                            int64_t rows, int64_t rowBytes, int64_t boxRows,
                            int64_t boxBytes) {
  if (llvm::Error err = checkAligned(base))
    return std::move(err);
  if (rows <= 0 || rowBytes <= 0 || rowBytes % 16 != 0 || boxRows <= 0 ||
      boxRows > 256 || (boxBytes != 128 && boxBytes != 16))
    return invalid("TMA map of " + llvm::Twine(rows) + " rows of " +
                   llvm::Twine(rowBytes) + " bytes with boxes of " +
                   llvm::Twine(boxBytes) + " bytes x " + llvm::Twine(boxRows) +
                   " rows: counts must be positive, the row a multiple of 16 "
                   "bytes, the box 128 or 16 bytes x at most 256 rows");
  cuuint64_t dims[3] = {cuuint64_t(rowBytes), 1, cuuint64_t(rows)};
  cuuint64_t strides[2] = {cuuint64_t(rowBytes), cuuint64_t(rowBytes)};
  cuuint32_t box[3] = {cuuint32_t(boxBytes), 1, cuuint32_t(boxRows)};
  cuuint32_t elementStrides[3] = {1, 1, 1};
  CUtensorMap map;
  CUresult r = driver.api().tensorMapEncodeTiled(
      &map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, reinterpret_cast<void *>(base),
      dims, strides, box, elementStrides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      boxBytes == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (llvm::Error err = driver.check(r, "cuTensorMapEncodeTiled"))
    return std::move(err);
  return map;
}
