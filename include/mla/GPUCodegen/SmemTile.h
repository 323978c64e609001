//===- SmemTile.h - shared-memory tile layouts ------------------*- C++ -*-===//
//
// A tile of `rows` rows staged in shared memory at a fixed byte offset of the
// kernel's shared buffer, in one of the layouts the MMAs read without bank
// conflicts. Addresses are in 16-byte chunks (one cp.async / one ldmatrix
// row); `byteOffset(row, chunk)` is relative to the tile's base.
//
//  * Linear: rows of `rowBytes` (padded by the caller), chunks in order.
//  * ChunkXor: the mma.sync layout; rows padded to whole 128-byte groups and
//    chunk c of row r stored at chunk c ^ (r & 7), so the eight rows an
//    ldmatrix reads hit eight different banks.
//  * Box128B: the canonical 128B-swizzled K-major layout of wgmma and TMA:
//    the tile is split into boxes of 64 two-byte columns (128-byte rows,
//    `rows` rows per box), the same xor inside each 8 x 128-byte atom.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_GPUCODEGEN_SMEMTILE_H
#define MLA_GPUCODEGEN_SMEMTILE_H

#include "mla/GPUCodegen/DeviceBuilder.h"

namespace mla::gpu_codegen {

enum class SmemSwizzle { Linear, ChunkXor, Box128B };

struct SmemTile {
  SmemSwizzle swizzle;
  /// Byte offset of the tile in the shared buffer.
  int64_t base;
  int64_t rows;
  /// Bytes from one row to the next (inside a box for Box128B).
  int64_t rowBytes;

  /// A Linear tile of rows `rowBytes` apart.
  static SmemTile linear(int64_t base, int64_t rows, int64_t rowBytes);
  /// A ChunkXor tile of rows of `dataBytes`, padded to 128-byte groups.
  static SmemTile chunkXor(int64_t base, int64_t rows, int64_t dataBytes);
  /// A Box128B tile (rows of any multiple of 128 bytes, as 64-column boxes).
  static SmemTile box128B(int64_t base, int64_t rows);

  /// Bytes one row occupies in a ChunkXor or Linear tile, or one 128-byte
  /// row per box in a Box128B tile (`dataBytes` is the unpadded row).
  static int64_t paddedRowBytes(SmemSwizzle swizzle, int64_t dataBytes);

  /// Byte offset (i32, from the tile base) of 16-byte chunk `chunk` of `row`.
  mlir::Value byteOffset(DeviceBuilder &d, mlir::Value row,
                         mlir::Value chunk) const;
  /// Bytes from chunk c to chunk c + 8 of the same row, the same for every
  /// row and c (the swizzles permute chunks inside aligned groups of 8).
  int64_t eightChunkStride() const {
    return swizzle == SmemSwizzle::Box128B ? rows * 128 : 128;
  }
  /// Byte offset of element `col` (of `elemBytes` bytes) of `row` in a
  /// Linear tile or a one-box Box128B tile (rows of at most 128 bytes).
  mlir::Value elementOffset(DeviceBuilder &d, mlir::Value row, mlir::Value col,
                            int64_t elemBytes) const;
  /// Byte offset (from the tile base) of the kk-th 16-column k slice of a
  /// Box128B tile of 2-byte elements: box kk / 4, 32 bytes per slice inside
  /// the 128-byte row. The start of a K-major wgmma operand.
  int64_t kSliceOffset(int64_t kk) const;
};

/// wgmma shared-memory matrix descriptors of Box128B tiles (PTX ISA "matrix
/// descriptor"): start address >> 4 (bits 0-13), leading-dimension byte
/// offset >> 4 (16-29), stride byte offset >> 4 (32-45), swizzle mode 1 =
/// 128B (62-63). The address is the shared buffer's base plus `base` (i32,
/// run time) plus `byteOffset` (compile time, a multiple of 16).
///
/// Only the low word depends on the address, and it is computed in 32 bits:
/// the part from `base` is the same for every k-step of a tile (the
/// compiler computes it once), so each step costs one add of
/// byteOffset >> 4. A shared address is below 256 KB, so the start field
/// never carries into the bits above it.
class WgmmaDescriptors {
public:
  WgmmaDescriptors(DeviceBuilder &d, mlir::Value sharedBuffer);

  /// K-major operand (A, or B = K^T): 8-row core-matrix groups are 1024 bytes
  /// apart; consecutive k-steps advance the address by 32 inside an atom.
  mlir::Value kMajor(mlir::Value base, int64_t byteOffset = 0);
  /// MN-major operand read as the transpose of a Box128B tile of
  /// `tile.rows` rows: boxes of 64 columns are `rows * 128` bytes apart.
  mlir::Value mnMajor(const SmemTile &tile, mlir::Value base,
                      int64_t byteOffset = 0);

private:
  mlir::Value make(mlir::Value base, int64_t byteOffset, int64_t lbo,
                   int64_t sbo);
  DeviceBuilder &d;
  /// The low 32 bits of the shared buffer's shared-window address.
  mlir::Value sharedLo;
};

} // namespace mla::gpu_codegen

#endif // MLA_GPUCODEGEN_SMEMTILE_H
