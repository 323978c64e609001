//===- LoweringUtils.h - shared helpers of the CPU lowering -----*- C++ -*-===//
//
// Scalar codecs for the cache row formats (e4m3, bf16, little-endian f32
// inside byte rows) and small builders for index arithmetic, shared by the
// op-family lowerings in this directory.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_LIB_CONVERSION_MLATOLINALG_LOWERINGUTILS_H
#define MLA_LIB_CONVERSION_MLATOLINALG_LOWERINGUTILS_H

#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mlir/IR/Builders.h"

namespace mla {
namespace lowering {

/// The widest row the attention lowerings hold in one `vector` (q, k, v and
/// output rows): far above any MLA head (DeepSeek-V3's L+R is 576), and low
/// enough that LLVM's vector lowering, which counts elements in 32 bits and
/// unrolls by element, is never handed a width it cannot represent.
constexpr int64_t kMaxRowVectorWidth = 1 << 14;

/// An index constant.
mlir::Value cIdx(mlir::OpBuilder &b, mlir::Location loc, int64_t v);
/// An f32 constant.
mlir::Value cF32(mlir::OpBuilder &b, mlir::Location loc, double v);
/// An i32 constant.
mlir::Value cI32(mlir::OpBuilder &b, mlir::Location loc, int32_t v);
/// Casts an i32 (or index) value to index.
mlir::Value toIndex(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v);
/// `tensor.extract` of an i32 element as index.
mlir::Value extractIndex(mlir::OpBuilder &b, mlir::Location loc,
                         mlir::Value tensor, mlir::ValueRange indices);
/// Size of dimension `dim` of a tensor as an index value (static or not).
mlir::Value dimSize(mlir::OpBuilder &b, mlir::Location loc, mlir::Value tensor,
                    int64_t dim);
/// Positions a causal query row sees, bottom-right aligned: row `row` of
/// `queryRows` over `len` positions sees [0, len - queryRows + row], i.e.
/// `len - queryRows + row + 1` of them. Signed; <= 0 when it sees nothing.
mlir::Value causalVisible(mlir::OpBuilder &b, mlir::Location loc,
                          mlir::Value len, mlir::Value queryRows,
                          mlir::Value row);
/// The global positions [0, n) that DCP rank `rank` of `world` owns in runs
/// of `interleave` tokens (mla::dcp::ownedTokens as IR; n is a signed index,
/// n <= 0 owns nothing).
mlir::Value dcpOwnedTokens(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::Value n, int64_t world, int64_t rank,
                           int64_t interleave);
/// Converts a float value to f32 (extf/truncf as needed).
mlir::Value toF32(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v);
/// Converts an f32 value to float type `ty`.
mlir::Value fromF32(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v,
                    mlir::Type ty);

/// float8 E4M3FN byte (i8) -> f32. 0x7F/0xFF are NaN; subnormals included.
mlir::Value decodeE4M3(mlir::OpBuilder &b, mlir::Location loc,
                       mlir::Value byte);
/// f32 -> float8 E4M3FN byte (i8): round to nearest even, finite values
/// beyond +-448 saturate to +-448, NaN stays NaN.
mlir::Value encodeE4M3(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x);
/// bf16 bit pattern (i32 holding 16 bits) -> f32.
mlir::Value decodeBF16Bits(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::Value bits);
/// f32 -> bf16 bit pattern in the low 16 bits of an i32 (nearest even).
mlir::Value encodeBF16Bits(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::Value x);

/// Reads a little-endian f32 from bytes `[off, off+4)` of the last
/// dimension of an i8 tensor at `prefix` (the leading indices).
mlir::Value loadF32LE(mlir::OpBuilder &b, mlir::Location loc, mlir::Value bytes,
                      mlir::ValueRange prefix, mlir::Value off);
/// Reads the unsigned byte at `indices` of an i8 tensor as i32.
mlir::Value loadByte(mlir::OpBuilder &b, mlir::Location loc, mlir::Value bytes,
                     mlir::ValueRange indices);

/// Element `d` (0 <= d < L+R) of the row at [page, slot] of `cache`,
/// dequantised to f32 as `layout` says. `latentDim` is L.
mlir::Value loadCacheElement(mlir::OpBuilder &b, mlir::Location loc,
                             mlir::Value cache, CacheLayoutAttr layout,
                             int64_t latentDim, mlir::Value page,
                             mlir::Value slot, mlir::Value d);

/// The whole page `page` of `cache` as an f32 tensor [page_size, L+R].
mlir::Value loadCachePage(mlir::OpBuilder &b, mlir::Location loc,
                          mlir::Value cache, CacheLayoutAttr layout,
                          int64_t latentDim, int64_t rowDim, mlir::Value page);

/// The latent width L of a cache of `layout` whose logical rows are
/// `rowDim` wide and stored rows `storedRow` wide (needed for fp8_ds_mla
/// when no operand carries L).
int64_t inferLatentDim(CacheLayoutAttr layout, int64_t rowDim,
                       int64_t storedRow);

} // namespace lowering
} // namespace mla

#endif // MLA_LIB_CONVERSION_MLATOLINALG_LOWERINGUTILS_H
