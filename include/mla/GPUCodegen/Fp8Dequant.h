//===- Fp8Dequant.h - float8 E4M3 cache rows to f32/bf16/f16 ----*- C++ -*-===//
//
// The decoders of the fp8 cache row formats (#mla.cache_layout: fp8_e4m3,
// fp8_e4m3_token, fp8_ds_mla) shared by the kernels that read such caches.
// Both give the f32 values of the CPU lowering
// (lib/Conversion/MLAToLinalg/LoweringUtils.cpp), NaN codes included:
//
//  * decodeE4M3: one code at a time with integer operations, the CPU
//    lowering's algorithm (gather_cache, where the copy is HBM-bound);
//  * dequantE4M3x8: eight codes with the sm_89+ `cvt.rn.f16x2.e4m3x2`
//    (exact: every E4M3 value is an f16), times the scale in f32 and one
//    rounding to bf16/f16: the decode's shared-memory dequantisation, where
//    the conversion sits between the load and the MMAs of every KV block.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_GPUCODEGEN_FP8DEQUANT_H
#define MLA_GPUCODEGEN_FP8DEQUANT_H

#include "mla/GPUCodegen/DeviceBuilder.h"

namespace mla::gpu_codegen {

/// float8 E4M3FN code (i8) -> f32.
mlir::Value decodeE4M3(DeviceBuilder &d, mlir::Value byte);

/// bf16 bits (i16) -> f32.
mlir::Value decodeBF16(DeviceBuilder &d, mlir::Value bits);

/// Eight E4M3 codes (`raw`: vector<2xi32>, code 0 in the low byte of word
/// 0) times `scale` (f32), rounded to `halfType` (bf16 or f16): one 16-byte
/// chunk of a KV tile as vector<4xi32>, element 0 in the low half of word 0.
mlir::Value dequantE4M3x8(DeviceBuilder &d, mlir::Value raw, mlir::Value scale,
                          mlir::Type halfType);

/// Eight bf16 values (`raw`: vector<4xi32>) as `halfType`: `raw` itself for
/// bf16, else each value widened to f32 and rounded to f16.
mlir::Value convertBF16x8(DeviceBuilder &d, mlir::Value raw,
                          mlir::Type halfType);

} // namespace mla::gpu_codegen

#endif // MLA_GPUCODEGEN_FP8DEQUANT_H
