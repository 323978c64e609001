//===- Fp8Dequant.h - float8 E4M3 cache rows to f32/bf16/f16 ----*- C++ -*-===//
//
// The decoders of the fp8 cache row formats (#mla.cache_layout: fp8_e4m3,
// fp8_e4m3_token, fp8_ds_mla) shared by the kernels that read such caches.
// Both give the f32 values of the CPU lowering
// (lib/Conversion/MLAToLinalg/LoweringUtils.cpp), NaN codes included:
//
//  * decodeE4M3: one code at a time with integer operations, the CPU
//    lowering's algorithm (gather_cache, where the copy is HBM-bound);
//  * convertE4M3x8: eight codes to bf16/f16 with no scale, exactly: the
//    sm_89+ `cvt.rn.f16x2.e4m3x2` (exact: every E4M3 value, subnormals
//    included, is a normal f16), then for bf16 each f16 widened to f32
//    (exact) and the two high halves packed by one `prmt` (exact: E4M3 has
//    3 fraction bits, bf16 7). Signs, zeros and NaN codes carry through.
//    fp8_e4m3 (one per-tensor scale) uses it: the decode folds the scale
//    into the softmax scale and the epilogue, so no multiply per element;
//  * dequantE4M3x8: eight codes times a per-row/per-tile scale, for
//    fp8_e4m3_token and fp8_ds_mla: the code exactly in f32, one f32
//    multiply (relative error <= 2^-24) and one rounding to bf16/f16 (8 and
//    11 significant bits), so |result - code*scale| <= (2^-8 + 2^-24 +
//    2^-32) |code*scale| for bf16 (2^-11 + ... for f16) in the normal range.
//    A product on packed bf16 pairs (mul.rn.bf16x2) would save one
//    instruction per pair but round the scale to bf16 too, doubling that
//    bound.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_GPUCODEGEN_FP8DEQUANT_H
#define MLA_GPUCODEGEN_FP8DEQUANT_H

#include "mla/GPUCodegen/DeviceBuilder.h"

#include <array>

namespace mla::gpu_codegen {

/// float8 E4M3FN code (i8) -> f32.
mlir::Value decodeE4M3(DeviceBuilder &d, mlir::Value byte);

/// bf16 bits (i16) -> f32.
mlir::Value decodeBF16(DeviceBuilder &d, mlir::Value bits);

/// Eight E4M3 codes (`raw`: vector<2xi32>, code 0 in the low byte of word
/// 0) as `halfType` (bf16 or f16), exactly: one 16-byte chunk of a KV tile
/// as vector<4xi32>, element 0 in the low half of word 0.
mlir::Value convertE4M3x8(DeviceBuilder &d, mlir::Value raw,
                          mlir::Type halfType);

/// The last two byte selectors of transposeBytes4x4: with `swapRowPairs`
/// (i1, e.g. lane-dependent) the words come in the row order 1, 0, 3, 2
/// and the selectors put the rows back in order, so a caller may load rows
/// in a lane-dependent order at no cost per transpose.
struct ByteTransposeSelectors {
  mlir::Value even, odd;
  static ByteTransposeSelectors get(DeviceBuilder &d, mlir::Value swapRowPairs);
};

/// The 4x4 byte transpose of four i32 words: byte i of result word j is
/// byte j of row i (six prmt), the rows being `words` in order, or in the
/// order 1, 0, 3, 2 where `sel` says so. Four codes of four cache rows
/// become four columns of four rows each, ready for ptx::cvtE4M3x4ToF16x2.
std::array<mlir::Value, 4> transposeBytes4x4(DeviceBuilder &d,
                                             std::array<mlir::Value, 4> words,
                                             const ByteTransposeSelectors &sel);

/// Eight E4M3 codes (`raw` as for convertE4M3x8) times `scale` (f32), rounded
/// to `halfType` (bf16 or f16): one 16-byte chunk of a KV tile as
/// vector<4xi32>, element 0 in the low half of word 0.
mlir::Value dequantE4M3x8(DeviceBuilder &d, mlir::Value raw, mlir::Value scale,
                          mlir::Type halfType);

/// Eight bf16 values (`raw`: vector<4xi32>) as `halfType`: `raw` itself for
/// bf16 without a scale, else each value widened to f32, times `scale` (f32)
/// if given, and rounded to `halfType` (exact for a power-of-two scale that
/// keeps the value in the type's normal range: bf16 has 8 significant bits,
/// f16 11).
mlir::Value convertBF16x8(DeviceBuilder &d, mlir::Value raw,
                          mlir::Type halfType, mlir::Value scale = {});
/// The largest biased exponent (bits 30..23 of the f32, 0..255) among the
/// eight bf16 values of `raw` (vector<4xi32>), as i32: their magnitude is
/// below 2^(result - 126).
mlir::Value maxExponentBF16x8(DeviceBuilder &d, mlir::Value raw);

/// Eight bf16 values (`raw`: vector<4xi32>) times `scale` (f32, a power of
/// two that keeps them below 2^8) as two E4M3 parts, each vector<2xi32> of
/// eight codes (code 0 in the low byte of word 0): hi = e4m3(x), lo =
/// e4m3(x - hi). A bf16 value has 8 significant bits and hi takes the top
/// four, so hi + lo is x exactly for |x| >= 2^-2 (the remainder's last bit
/// is at least E4M3's subnormal step 2^-9) and within 2^-10 below: products
/// against E4M3 codes summed over both parts are those of the bf16 q.
std::pair<mlir::Value, mlir::Value>
splitBF16x8ToE4M3Pair(DeviceBuilder &d, mlir::Value raw, mlir::Value scale);

/// Sixteen E4M3 codes (`raw`: vector<4xi32>, code 0 in the low byte of word
/// 0) as f16, exactly: two 16-byte chunks (vector<4xi32>), codes 0-7 then
/// 8-15, element 0 in the low half of word 0.
/// Eight f16 values (`chunk`: vector<4xi32>, as convertE4M3x16ToF16 gives
/// them) times `factor` (f32, rounded to f16 once), one mul.f16x2 per word.
mlir::Value scaleF16x8(DeviceBuilder &d, mlir::Value chunk, mlir::Value factor);

std::pair<mlir::Value, mlir::Value> convertE4M3x16ToF16(DeviceBuilder &d,
                                                        mlir::Value raw);

} // namespace mla::gpu_codegen

#endif // MLA_GPUCODEGEN_FP8DEQUANT_H
