//===- Fp8RowChunks.cpp - KV-tile chunks of staged fp8 cache rows ---------===//

#include "Fp8RowChunks.h"

#include "mla/GPUCodegen/Fp8Dequant.h"
#include "llvm/ADT/bit.h"

using namespace mlir;
using namespace mla::gpu_codegen;
namespace abi = mla::gpu;

Fp8RowChunks::Fp8RowChunks(DeviceBuilder &d, const abi::DecodeShape &shape,
                           Value smem, Type halfType)
    : d(d), shape(shape), smem(smem), halfType(halfType),
      rowBytes(shape.cacheRowBytes()),
      rawAlign(std::min<int64_t>(8, int64_t(1) << llvm::countr_zero(
                                        uint64_t(shape.cacheRowBytes())))) {
  assert(shape.fp8() && "the rows of an fp8 cache format");
}

bool Fp8RowChunks::splitsRope() const {
  return shape.kvFormat != abi::CacheFormat::FP8E4M3;
}

Value Fp8RowChunks::codesAt(Value row, Value first) {
  return d.load(VectorType::get({2}, d.i32),
                d.gepBytes(smem, d.add(row, first)), rawAlign);
}

Value Fp8RowChunks::scaleAt(Value row, Value byteOff) {
  return d.load(d.f32, d.gepBytes(smem, d.add(row, byteOff)), 4);
}

Value Fp8RowChunks::eightCodes(Value c) { return d.mul(c, d.c32(8)); }

Value Fp8RowChunks::fp8Chunk(Value row, Value first, Value scale) {
  return dequantE4M3x8(d, codesAt(row, first), scale, halfType);
}

Value Fp8RowChunks::latent(Value row, Value c) {
  const int64_t D = shape.rowDim(), L = shape.latentDim;
  switch (shape.kvFormat) {
  case abi::CacheFormat::FP8E4M3:
    return convertE4M3x8(d, codesAt(row, eightCodes(c)), halfType);
  case abi::CacheFormat::FP8E4M3Token:
    // D codes, then the f32 scales of the latent (s0) and the RoPE (s1).
    return fp8Chunk(row, eightCodes(c), scaleAt(row, d.c32(D)));
  case abi::CacheFormat::FP8DsMla: {
    // L codes, an f32 scale per 128 of them, then R bf16 values.
    Value tile = d.divu(c, d.c32(abi::kDsMlaTile / 8));
    return fp8Chunk(row, eightCodes(c),
                    scaleAt(row, d.add(d.c32(L), d.mul(tile, d.c32(4)))));
  }
  default:
    llvm_unreachable("chunks of a cache that is not fp8");
  }
}

Value Fp8RowChunks::rope(Value row, Value c) {
  const int64_t D = shape.rowDim(), L = shape.latentDim, Lc = L / 8;
  switch (shape.kvFormat) {
  case abi::CacheFormat::FP8E4M3Token:
    return fp8Chunk(row, eightCodes(c), scaleAt(row, d.c32(D + 4)));
  case abi::CacheFormat::FP8DsMla: {
    const int64_t ropeOff = abi::dsMlaRopeOffset(L);
    const int64_t ropeAlign = std::min<int64_t>(
        16, int64_t(1) << llvm::countr_zero(uint64_t(rowBytes | ropeOff)));
    Value off = d.add(d.c32(ropeOff - 16 * Lc), d.mul(c, d.c32(16)));
    Value raw = d.load(VectorType::get({4}, d.i32),
                       d.gepBytes(smem, d.add(row, off)), ropeAlign);
    return convertBF16x8(d, raw, halfType);
  }
  default:
    llvm_unreachable("RoPE chunks of a format whose RoPE part is not apart");
  }
}
