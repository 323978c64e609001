//===- TensorMap.h - TMA descriptors of the runtime's kernels ---*- C++ -*-===//
//
// The host half of the kernels that load tiles by TMA: a CUtensorMap
// (cuTensorMapEncodeTiled) over a row-major [rows, heads, width] tensor of
// two-byte elements, read in boxes of 64 columns (one 128-byte row, the
// 128B swizzle) x `boxRows` rows of one head. The kernel receives it by value
// as a __grid_constant__ parameter, so a launch needs no device copy and can
// be captured in a CUDA graph. Rows past `rows` read as zeros. Raw fp8 cache
// rows have a byte map of their own (encodeByteRowsMap).
//
//===----------------------------------------------------------------------===//
#ifndef MLA_GPURUNTIME_TENSORMAP_H
#define MLA_GPURUNTIME_TENSORMAP_H

#include "mla/Contract/CacheProjectionABI.h"
#include "mla/GpuRuntime/CudaDriver.h"
#include "llvm/Support/Error.h"

namespace mla::gpu {

/// Fails (std::errc::invalid_argument) when `base` is not 16-byte aligned,
/// the element is not two bytes wide, `width` is not a multiple of 64 or a
/// count is not positive.
llvm::Expected<CUtensorMap> encodeHeadRowsMap(const CudaDriver &driver,
                                              CUdeviceptr base, ActType elem,
                                              int64_t rows, int64_t heads,
                                              int64_t width, int64_t boxRows);

/// A CUtensorMap over `rows` rows of `rowBytes` bytes (a row-major uint8
/// tensor: fp8 cache rows) as [rows, 1, rowBytes], read in boxes of
/// `boxBytes` bytes x `boxRows` rows: 128 bytes with the 128B swizzle, or 16
/// unswizzled (the f32 scales of fp8_ds_mla rows); a box reaching past the
/// row reads zeros there. Fails (std::errc::invalid_argument) when `base` is
/// not 16-byte aligned, `rowBytes` is not a multiple of 16 (a TMA stride),
/// `boxBytes` is neither 128 nor 16 or a count is not positive.
llvm::Expected<CUtensorMap> encodeByteRowsMap(const CudaDriver &driver,
                                              CUdeviceptr base, int64_t rows,
                                              int64_t rowBytes, int64_t boxRows,
                                              int64_t boxBytes = 128);

} // namespace mla::gpu

#endif // MLA_GPURUNTIME_TENSORMAP_H
