//===- Fp8Dequant.cpp - float8 E4M3 cache rows to f32/bf16/f16 ------------===//

#include "mla/GPUCodegen/Fp8Dequant.h"

#include "mla/GPUCodegen/InlinePTX.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

#include <array>
#include <limits>

using namespace mlir;
using namespace mla::gpu_codegen;

static Value bitsToF32(DeviceBuilder &d, Value bits) {
  return arith::BitcastOp::create(d.b, d.f32, bits);
}

Value mla::gpu_codegen::decodeE4M3(DeviceBuilder &d, Value byte) {
  ImplicitLocOpBuilder &b = d.b;
  Value u = arith::ExtUIOp::create(b, d.i32, byte);
  Value sign = d.shl(d.bitAnd(u, d.c32(0x80)), d.c32(24));
  Value exp = d.bitAnd(d.shru(u, d.c32(3)), d.c32(0xF));
  Value man = d.bitAnd(u, d.c32(7));
  Value normal =
      bitsToF32(d, d.ori(d.ori(sign, d.shl(d.add(exp, d.c32(120)), d.c32(23))),
                         d.shl(man, d.c32(20))));
  Value sub =
      d.fmul(arith::UIToFPOp::create(b, d.f32, man), d.f(1.0f / 512.0f));
  sub = d.select(d.cmp(arith::CmpIPredicate::ne, sign, d.c32(0)),
                 arith::NegFOp::create(b, sub), sub);
  Value val = d.select(d.eq(exp, d.c32(0)), sub, normal);
  Value isNan = d.eq(d.bitAnd(u, d.c32(0x7F)), d.c32(0x7F));
  return d.select(isNan, d.f(std::numeric_limits<float>::quiet_NaN()), val);
}

Value mla::gpu_codegen::decodeBF16(DeviceBuilder &d, Value bits) {
  return bitsToF32(d,
                   d.shl(arith::ExtUIOp::create(d.b, d.i32, bits), d.c32(16)));
}

/// The two f16 of an f16x2 word (i32) as f32.
static std::pair<Value, Value> unpackF16x2(DeviceBuilder &d, Value word) {
  ImplicitLocOpBuilder &b = d.b;
  auto v2h = VectorType::get({2}, b.getF16Type());
  auto v2f = VectorType::get({2}, d.f32);
  Value halves = LLVM::BitcastOp::create(b, v2h, word);
  Value wide = arith::ExtFOp::create(b, v2f, halves);
  return {d.extract(wide, 0), d.extract(wide, 1)};
}

Value mla::gpu_codegen::convertE4M3x8(DeviceBuilder &d, Value raw,
                                      Type halfType) {
  Value out = d.poison(VectorType::get({4}, d.i32));
  for (int64_t w = 0; w < 2; ++w) {
    auto [lo, hi] = ptx::cvtE4M3x4ToF16x2(d.b, d.extract(raw, w));
    for (auto [k, pair] : llvm::enumerate(std::array<Value, 2>{lo, hi})) {
      Value word = pair;
      if (halfType.isBF16()) {
        // f16 -> f32 is exact; an E4M3 value has 3 significant bits after
        // the leading one, so its f32 has a zero low half and the high half
        // is the bf16. Zeros, signs and NaN carry through unchanged.
        auto [x0, x1] = unpackF16x2(d, pair);
        word =
            ptx::prmtHighHalves(d.b, arith::BitcastOp::create(d.b, d.i32, x0),
                                arith::BitcastOp::create(d.b, d.i32, x1));
      }
      out = d.insert(out, word, 2 * w + k);
    }
  }
  return out;
}

ByteTransposeSelectors
mla::gpu_codegen::ByteTransposeSelectors::get(DeviceBuilder &d,
                                              Value swapRowPairs) {
  // Bytes 0, 1 of the interleavings of rows (0, 1) and (2, 3), i.e. rows
  // 0..3 of one column; swapped pairs hold rows 1, 0 (3, 2) there.
  return {d.select(swapRowPairs, d.c32(0x4501), d.c32(0x5410)),
          d.select(swapRowPairs, d.c32(0x6723), d.c32(0x7632))};
}

std::array<Value, 4>
mla::gpu_codegen::transposeBytes4x4(DeviceBuilder &d,
                                    std::array<Value, 4> words,
                                    const ByteTransposeSelectors &sel) {
  // Words 0-1 and 2-3 interleaved by byte (bytes 0,1 then 2,3 of each),
  // then the halves of those interleavings put side by side.
  Value lo01 = ptx::prmt(d.b, words[0], words[1], 0x5140);
  Value hi01 = ptx::prmt(d.b, words[0], words[1], 0x7362);
  Value lo23 = ptx::prmt(d.b, words[2], words[3], 0x5140);
  Value hi23 = ptx::prmt(d.b, words[2], words[3], 0x7362);
  return {ptx::prmt(d.b, lo01, lo23, sel.even),
          ptx::prmt(d.b, lo01, lo23, sel.odd),
          ptx::prmt(d.b, hi01, hi23, sel.even),
          ptx::prmt(d.b, hi01, hi23, sel.odd)};
}

Value mla::gpu_codegen::dequantE4M3x8(DeviceBuilder &d, Value raw, Value scale,
                                      Type halfType) {
  Value out = d.poison(VectorType::get({4}, d.i32));
  for (int64_t w = 0; w < 2; ++w) {
    auto [lo, hi] = ptx::cvtE4M3x4ToF16x2(d.b, d.extract(raw, w));
    int64_t k = 2 * w;
    for (Value pair : {lo, hi}) {
      auto [x0, x1] = unpackF16x2(d, pair);
      out = d.insert(
          out, d.pack2(d.fmul(x0, scale), d.fmul(x1, scale), halfType), k++);
    }
  }
  return out;
}

/// The two bf16 values of `word` (i32, the first in the low half) as f32.
static std::pair<Value, Value> unpackBF16x2(DeviceBuilder &d, Value word) {
  return {
      bitsToF32(d, d.shl(word, d.c32(16))),
      bitsToF32(d, d.bitAnd(word, d.c32(static_cast<int32_t>(0xFFFF0000u))))};
}

Value mla::gpu_codegen::convertBF16x8(DeviceBuilder &d, Value raw,
                                      Type halfType, Value scale) {
  if (halfType.isBF16() && !scale)
    return raw;
  Value out = d.poison(VectorType::get({4}, d.i32));
  for (int64_t w = 0; w < 4; ++w) {
    auto [lo, hi] = unpackBF16x2(d, d.extract(raw, w));
    if (scale)
      lo = d.fmul(lo, scale), hi = d.fmul(hi, scale);
    out = d.insert(out, d.pack2(lo, hi, halfType), w);
  }
  return out;
}

Value mla::gpu_codegen::maxExponentBF16x8(DeviceBuilder &d, Value raw) {
  Value e = d.c32(0);
  for (int64_t w = 0; w < 4; ++w) {
    Value word = d.extract(raw, w);
    e = d.maxsi(e, d.bitAnd(d.shru(word, d.c32(7)), d.c32(0xFF)));
    e = d.maxsi(e, d.bitAnd(d.shru(word, d.c32(23)), d.c32(0xFF)));
  }
  return e;
}

std::pair<Value, Value>
mla::gpu_codegen::splitBF16x8ToE4M3Pair(DeviceBuilder &d, Value raw,
                                        Value scale) {
  std::array<Value, 8> x;
  for (int64_t w = 0; w < 4; ++w) {
    auto [lo, hi] = unpackBF16x2(d, d.extract(raw, w));
    x[2 * w] = d.fmul(lo, scale), x[2 * w + 1] = d.fmul(hi, scale);
  }
  auto v2 = VectorType::get({2}, d.i32);
  Value hi = d.poison(v2), lo = d.poison(v2);
  for (int64_t w = 0; w < 2; ++w) {
    std::array<Value, 4> part = {x[4 * w], x[4 * w + 1], x[4 * w + 2],
                                 x[4 * w + 3]};
    Value codes = ptx::cvtF32x4ToE4M3x4(d.b, part);
    hi = d.insert(hi, codes, w);
    // hi's values back in f32 (exact), and the remainders (exact: hi is x
    // rounded to fewer bits).
    auto [p01, p23] = ptx::cvtE4M3x4ToF16x2(d.b, codes);
    auto [h0, h1] = unpackF16x2(d, p01);
    auto [h2, h3] = unpackF16x2(d, p23);
    std::array<Value, 4> rest = {d.fsub(part[0], h0), d.fsub(part[1], h1),
                                 d.fsub(part[2], h2), d.fsub(part[3], h3)};
    lo = d.insert(lo, ptx::cvtF32x4ToE4M3x4(d.b, rest), w);
  }
  return {hi, lo};
}

Value mla::gpu_codegen::scaleF16x8(DeviceBuilder &d, Value chunk,
                                   Value factor) {
  auto half2 = VectorType::get({2}, d.b.getF16Type());
  Value f = LLVM::BitcastOp::create(d.b, half2,
                                    d.pack2(factor, factor, d.b.getF16Type()));
  Value out = d.poison(VectorType::get({4}, d.i32));
  for (int64_t w = 0; w < 4; ++w) {
    Value x = LLVM::BitcastOp::create(d.b, half2, d.extract(chunk, w));
    out = d.insert(
        out,
        LLVM::BitcastOp::create(d.b, d.i32, LLVM::FMulOp::create(d.b, x, f)),
        w);
  }
  return out;
}

std::pair<Value, Value> mla::gpu_codegen::convertE4M3x16ToF16(DeviceBuilder &d,
                                                              Value raw) {
  auto v4 = VectorType::get({4}, d.i32);
  Value out[2] = {d.poison(v4), d.poison(v4)};
  for (int64_t w = 0; w < 4; ++w) {
    auto [lo, hi] = ptx::cvtE4M3x4ToF16x2(d.b, d.extract(raw, w));
    out[w / 2] = d.insert(out[w / 2], lo, 2 * (w % 2));
    out[w / 2] = d.insert(out[w / 2], hi, 2 * (w % 2) + 1);
  }
  return {out[0], out[1]};
}
