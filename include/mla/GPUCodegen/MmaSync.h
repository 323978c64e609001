//===- MmaSync.h - warp-level mma.sync m16n8k16 with ldmatrix ---*- C++ -*-===//
//
// The Ampere-style tensor-core MMA: one warp computes a 16x8 f32 tile from a
// 16x16 A and a 16x8 B fragment (bf16 or f16), each lane holding the PTX ISA
// fragment layout (g = lane / 4, t = lane % 4): A register r holds row
// g + 8(r & 1), columns 2t + 8(r >> 1) and +1; B register r holds k rows
// 2t + 8r and +1 of column g; accumulator i holds row g + 8((i >> 1) & 1),
// column 2t + (i & 1). Fragments are i32-packed pairs (for f16 also
// vector<2xf16>, which nvvm.mma.sync takes as is).
//
//===----------------------------------------------------------------------===//
#ifndef MLA_GPUCODEGEN_MMASYNC_H
#define MLA_GPUCODEGEN_MMASYNC_H

#include "mla/GPUCodegen/DeviceBuilder.h"

namespace mla::gpu_codegen {

struct MmaFragA {
  std::array<mlir::Value, 4> regs;
};
struct MmaFragB {
  std::array<mlir::Value, 2> regs;
};
struct MmaAccum {
  std::array<mlir::Value, 4> regs;
  /// All four accumulators `v` (e.g. 0 before the first MMA).
  static MmaAccum splat(mlir::Value v) { return {{v, v, v, v}}; }
};

/// The A fragment of a 16x16 tile by ldmatrix.x4: lane l passes the shared
/// address of row l % 16, 16-byte chunk l / 16 of the tile.
MmaFragA loadFragA(DeviceBuilder &d, mlir::Value sharedPtr);

/// Two B fragments (n tiles 0 and 1) of a 16(k) x 16(n) tile by one
/// ldmatrix.x4: without `trans` the tile is stored n-major (K^T rows, lane l
/// addresses n row (l % 8) + 8(l / 16), k chunk (l / 8) % 2); with `trans`
/// it is stored k-major (V rows, lane l addresses k row (l % 8) + 8((l / 8)
/// % 2), n chunk l / 16).
std::array<MmaFragB, 2> loadFragBPair(DeviceBuilder &d, mlir::Value sharedPtr,
                                      bool trans);

/// D = A * B + C (row.col), bf16 or f16 inputs, f32 accumulators.
MmaAccum mmaSync(DeviceBuilder &d, const MmaFragA &a, const MmaFragB &b,
                 const MmaAccum &c, bool bf16);

} // namespace mla::gpu_codegen

#endif // MLA_GPUCODEGEN_MMASYNC_H
