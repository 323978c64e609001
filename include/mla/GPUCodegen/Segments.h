//===- Segments.h - finding a row's segment in varlen offsets ---*- C++ -*-===//
//
// Variable-length batches describe their requests by non-decreasing offsets
// (cu_seqlens, cu_rows): request b owns rows [offsets[b], offsets[b+1]). A
// kernel whose grid spans all rows, so that its launch does not depend on
// the offsets' values (and can be captured in a CUDA graph), finds a row's
// request with this binary search. Every lane of a warp that searches for
// the same row loads the same offsets, so the loads are broadcasts.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_GPUCODEGEN_SEGMENTS_H
#define MLA_GPUCODEGEN_SEGMENTS_H

#include "mla/GPUCodegen/DeviceBuilder.h"

namespace mla::gpu_codegen {

/// The number of entries of offsets[0, size) (i32, non-decreasing, global
/// memory) that are <= x: row x lies in segment `result - 1` when
/// 1 <= result <= size - 1, and in none otherwise. `size` and `x` are i32.
mlir::Value upperBound(DeviceBuilder &d, mlir::Value offsets, mlir::Value size,
                       mlir::Value x);

} // namespace mla::gpu_codegen

#endif // MLA_GPUCODEGEN_SEGMENTS_H
