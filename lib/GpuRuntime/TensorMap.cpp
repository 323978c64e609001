//===- TensorMap.cpp - TMA descriptors of the runtime's kernels -----------===//

#include "mla/GpuRuntime/TensorMap.h"

#include <system_error>

using namespace mla::gpu;

llvm::Expected<CUtensorMap>
mla::gpu::encodeHeadRowsMap(const CudaDriver &driver, CUdeviceptr base,
                            ActType elem, int64_t rows, int64_t heads,
                            int64_t width, int64_t boxRows) {
  auto invalid = [](const llvm::Twine &msg) {
    return llvm::createStringError(
        std::make_error_code(std::errc::invalid_argument), msg);
  };
  if (elem != ActType::BF16 && elem != ActType::F16)
    return invalid("TMA tiles hold bf16 or f16 elements");
  if (base % 16 != 0)
    return invalid("a TMA-loaded tensor must be 16-byte aligned (got 0x" +
                   llvm::Twine::utohexstr(base) + ")");
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
