//===- LoweringUtils.cpp - shared helpers of the CPU lowering -------------===//
//
// The fp8/bf16 codecs are written with integer bit manipulation in arith so
// they run on any LLVM target without fp8 support, and match the primer's
// rounding exactly (nearest even, saturation at +-448 for e4m3).
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"
#include "mla/Contract/CacheProjectionABI.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mla;

namespace mla::lowering {

Value cIdx(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}
Value cF32(OpBuilder &b, Location loc, double v) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
}
Value cI32(OpBuilder &b, Location loc, int32_t v) {
  return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
}

Value toIndex(OpBuilder &b, Location loc, Value v) {
  if (v.getType().isIndex())
    return v;
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), v);
}

Value extractIndex(OpBuilder &b, Location loc, Value tensor,
                   ValueRange indices) {
  return toIndex(b, loc, tensor::ExtractOp::create(b, loc, tensor, indices));
}

Value dimSize(OpBuilder &b, Location loc, Value tensor, int64_t dim) {
  auto ty = cast<RankedTensorType>(tensor.getType());
  if (!ty.isDynamicDim(dim))
    return cIdx(b, loc, ty.getDimSize(dim));
  return tensor::DimOp::create(b, loc, tensor, dim);
}

Value causalVisible(OpBuilder &b, Location loc, Value len, Value queryRows,
                    Value row) {
  Value seen = arith::AddIOp::create(
      b, loc, len, arith::AddIOp::create(b, loc, row, cIdx(b, loc, 1)));
  return arith::SubIOp::create(b, loc, seen, queryRows);
}

Value dcpOwnedTokens(OpBuilder &b, Location loc, Value n, int64_t world,
                     int64_t rank, int64_t interleave) {
  Value c0 = cIdx(b, loc, 0), run = cIdx(b, loc, interleave);
  Value cycle = cIdx(b, loc, world * interleave);
  n = arith::MaxSIOp::create(b, loc, n, c0);
  Value rest =
      arith::SubIOp::create(b, loc, arith::RemUIOp::create(b, loc, n, cycle),
                            cIdx(b, loc, rank * interleave));
  rest = arith::MinSIOp::create(b, loc,
                                arith::MaxSIOp::create(b, loc, rest, c0), run);
  return arith::AddIOp::create(
      b, loc,
      arith::MulIOp::create(b, loc, arith::DivUIOp::create(b, loc, n, cycle),
                            run),
      rest);
}

Value toF32(OpBuilder &b, Location loc, Value v) {
  Type f32 = b.getF32Type();
  unsigned width = v.getType().getIntOrFloatBitWidth();
  if (v.getType() == f32)
    return v;
  if (width < 32)
    return arith::ExtFOp::create(b, loc, f32, v);
  return arith::TruncFOp::create(b, loc, f32, v);
}

Value fromF32(OpBuilder &b, Location loc, Value v, Type ty) {
  if (ty == v.getType())
    return v;
  if (ty.getIntOrFloatBitWidth() < 32)
    return arith::TruncFOp::create(b, loc, ty, v);
  return arith::ExtFOp::create(b, loc, ty, v);
}

static Value bitcastF32(OpBuilder &b, Location loc, Value i32) {
  return arith::BitcastOp::create(b, loc, b.getF32Type(), i32);
}
static Value bitcastI32(OpBuilder &b, Location loc, Value f32) {
  return arith::BitcastOp::create(b, loc, b.getI32Type(), f32);
}

Value decodeE4M3(OpBuilder &b, Location loc, Value byte) {
  Value u = byte.getType().isInteger(32)
                ? byte
                : arith::ExtUIOp::create(b, loc, b.getI32Type(), byte);
  Value sign = arith::ShLIOp::create(
      b, loc, arith::AndIOp::create(b, loc, u, cI32(b, loc, 0x80)),
      cI32(b, loc, 24));
  Value exp = arith::AndIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, u, cI32(b, loc, 3)),
      cI32(b, loc, 0xF));
  Value man = arith::AndIOp::create(b, loc, u, cI32(b, loc, 7));
  // Normal: rebias the exponent (7 -> 127) and widen the mantissa (3 -> 23).
  Value normalBits = arith::OrIOp::create(
      b, loc,
      arith::OrIOp::create(
          b, loc, sign,
          arith::ShLIOp::create(
              b, loc, arith::AddIOp::create(b, loc, exp, cI32(b, loc, 120)),
              cI32(b, loc, 23))),
      arith::ShLIOp::create(b, loc, man, cI32(b, loc, 20)));
  Value normal = bitcastF32(b, loc, normalBits);
  // Subnormal: m * 2^-9 with the sign applied.
  Value sub = arith::MulFOp::create(
      b, loc, arith::UIToFPOp::create(b, loc, b.getF32Type(), man),
      cF32(b, loc, 1.0 / 512.0));
  Value isNeg = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, sign,
                                      cI32(b, loc, 0));
  sub = arith::SelectOp::create(b, loc, isNeg,
                                arith::NegFOp::create(b, loc, sub), sub);
  Value isSub = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, exp,
                                      cI32(b, loc, 0));
  Value val = arith::SelectOp::create(b, loc, isSub, sub, normal);
  Value isNan = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::eq,
      arith::AndIOp::create(b, loc, u, cI32(b, loc, 0x7F)), cI32(b, loc, 0x7F));
  return arith::SelectOp::create(
      b, loc, isNan, cF32(b, loc, std::numeric_limits<double>::quiet_NaN()),
      val);
}

Value encodeE4M3(OpBuilder &b, Location loc, Value x) {
  Value bits = bitcastI32(b, loc, x);
  Value sign = arith::AndIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, bits, cI32(b, loc, 24)),
      cI32(b, loc, 0x80));
  Value a = math::AbsFOp::create(b, loc, x);
  a = arith::MinimumFOp::create(b, loc, a, cF32(b, loc, 448.0));
  // Subnormal range (|x| < 2^-6): the code is round_even(|x| * 2^9); 8
  // becomes the smallest normal, whose code is also 8.
  Value subCode = arith::FPToUIOp::create(
      b, loc, b.getI32Type(),
      math::RoundEvenOp::create(
          b, loc, arith::MulFOp::create(b, loc, a, cF32(b, loc, 512.0))));
  // Normal range: round the f32 mantissa to 3 bits, nearest even, then
  // rebias the exponent (127 -> 7).
  Value abits = bitcastI32(b, loc, a);
  Value lsb = arith::AndIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, abits, cI32(b, loc, 20)),
      cI32(b, loc, 1));
  Value rounded = arith::AddIOp::create(
      b, loc, abits, arith::AddIOp::create(b, loc, cI32(b, loc, 0x7FFFF), lsb));
  Value normCode = arith::SubIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, rounded, cI32(b, loc, 20)),
      cI32(b, loc, 120 << 3));
  Value isSub = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, a,
                                      cF32(b, loc, 1.0 / 64.0));
  Value code = arith::SelectOp::create(b, loc, isSub, subCode, normCode);
  Value isNan = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, x, x);
  code = arith::SelectOp::create(b, loc, isNan, cI32(b, loc, 0x7F), code);
  code = arith::OrIOp::create(b, loc, code, sign);
  return arith::TruncIOp::create(b, loc, b.getI8Type(), code);
}

Value decodeBF16Bits(OpBuilder &b, Location loc, Value bits) {
  return bitcastF32(b, loc,
                    arith::ShLIOp::create(b, loc, bits, cI32(b, loc, 16)));
}

Value encodeBF16Bits(OpBuilder &b, Location loc, Value x) {
  Value bits = bitcastI32(b, loc, x);
  Value lsb = arith::AndIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, bits, cI32(b, loc, 16)),
      cI32(b, loc, 1));
  Value rounded = arith::ShRUIOp::create(
      b, loc,
      arith::AddIOp::create(
          b, loc, bits,
          arith::AddIOp::create(b, loc, cI32(b, loc, 0x7FFF), lsb)),
      cI32(b, loc, 16));
  Value isNan = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, x, x);
  return arith::SelectOp::create(b, loc, isNan, cI32(b, loc, 0x7FC0), rounded);
}

Value loadByte(OpBuilder &b, Location loc, Value bytes, ValueRange indices) {
  Value v = tensor::ExtractOp::create(b, loc, bytes, indices);
  return arith::ExtUIOp::create(b, loc, b.getI32Type(), v);
}

Value loadF32LE(OpBuilder &b, Location loc, Value bytes, ValueRange prefix,
                Value off) {
  Value acc;
  for (int k = 0; k < 4; ++k) {
    SmallVector<Value> idx(prefix.begin(), prefix.end());
    idx.push_back(arith::AddIOp::create(b, loc, off, cIdx(b, loc, k)));
    Value byte = loadByte(b, loc, bytes, idx);
    if (k)
      byte = arith::ShLIOp::create(b, loc, byte, cI32(b, loc, 8 * k));
    acc = k ? arith::OrIOp::create(b, loc, acc, byte).getResult() : byte;
  }
  return bitcastF32(b, loc, acc);
}

Value loadCacheElement(OpBuilder &b, Location loc, Value cache,
                       CacheLayoutAttr layout, int64_t latentDim, Value page,
                       Value slot, Value d) {
  SmallVector<Value> prefix = {page, slot};
  auto at = [&](Value col) {
    SmallVector<Value> idx = prefix;
    idx.push_back(col);
    return idx;
  };
  auto cacheTy = cast<RankedTensorType>(cache.getType());
  if (!layout.isFp8())
    return toF32(b, loc, tensor::ExtractOp::create(b, loc, cache, at(d)));

  Value latent = cIdx(b, loc, latentDim);
  Value inLatent =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, d, latent);
  switch (layout.getFormat()) {
  case RowFormat::fp8_e4m3: {
    Value v = decodeE4M3(b, loc, loadByte(b, loc, cache, at(d)));
    return arith::MulFOp::create(
        b, loc, v, cF32(b, loc, layout.getScale().getValueAsDouble()));
  }
  case RowFormat::fp8_e4m3_token: {
    // Scales sit after the row: s0 (latent) at D, s1 (RoPE) at D + 4.
    int64_t row = cacheTy.getDimSize(2) - 8;
    Value off = arith::SelectOp::create(b, loc, inLatent, cIdx(b, loc, row),
                                        cIdx(b, loc, row + 4));
    Value s = loadF32LE(b, loc, cache, prefix, off);
    Value v = decodeE4M3(b, loc, loadByte(b, loc, cache, at(d)));
    return arith::MulFOp::create(b, loc, v, s);
  }
  case RowFormat::fp8_ds_mla: {
    // Latent: e4m3 with one f32 scale per 128 entries stored after it.
    // RoPE: bf16 after the scales. Both branches are computed and selected
    // so the result stays a straight-line element function; the RoPE index
    // is clamped so the latent branch never reads past the row.
    int64_t ropeBase = mla::gpu::dsMlaRopeOffset(latentDim);
    Value dLat = arith::MinUIOp::create(b, loc, d, cIdx(b, loc, latentDim - 1));
    Value tile = arith::DivUIOp::create(b, loc, dLat,
                                        cIdx(b, loc, mla::gpu::kDsMlaTile));
    Value sOff = arith::AddIOp::create(
        b, loc, latent, arith::MulIOp::create(b, loc, tile, cIdx(b, loc, 4)));
    Value lat = arith::MulFOp::create(
        b, loc, decodeE4M3(b, loc, loadByte(b, loc, cache, at(dLat))),
        loadF32LE(b, loc, cache, prefix, sOff));
    Value r = arith::SubIOp::create(
        b, loc, arith::MaxUIOp::create(b, loc, d, latent), latent);
    Value lo = arith::AddIOp::create(
        b, loc, cIdx(b, loc, ropeBase),
        arith::MulIOp::create(b, loc, r, cIdx(b, loc, 2)));
    Value hi = arith::AddIOp::create(b, loc, lo, cIdx(b, loc, 1));
    Value bits = arith::OrIOp::create(
        b, loc, loadByte(b, loc, cache, at(lo)),
        arith::ShLIOp::create(b, loc, loadByte(b, loc, cache, at(hi)),
                              cI32(b, loc, 8)));
    Value rope = decodeBF16Bits(b, loc, bits);
    return arith::SelectOp::create(b, loc, inLatent, lat, rope);
  }
  default:
    llvm_unreachable("float formats handled above");
  }
}

Value loadCachePage(OpBuilder &b, Location loc, Value cache,
                    CacheLayoutAttr layout, int64_t latentDim, int64_t rowDim,
                    Value page) {
  auto cacheTy = cast<RankedTensorType>(cache.getType());
  int64_t pageSize = cacheTy.getDimSize(1);
  auto tileTy = RankedTensorType::get({pageSize, rowDim}, b.getF32Type());
  SmallVector<Value> dynSizes;
  if (ShapedType::isDynamic(pageSize))
    dynSizes.push_back(dimSize(b, loc, cache, 1));
  return tensor::GenerateOp::create(
      b, loc, tileTy, dynSizes,
      [&](OpBuilder &nb, Location nloc, ValueRange ivs) {
        Value v = loadCacheElement(nb, nloc, cache, layout, latentDim, page,
                                   ivs[0], ivs[1]);
        tensor::YieldOp::create(nb, nloc, v);
      });
}

int64_t inferLatentDim(CacheLayoutAttr layout, int64_t rowDim,
                       int64_t storedRow) {
  if (layout.getFormat() != RowFormat::fp8_ds_mla)
    return -1;
  // stored = 2D - L + L/32 (see CacheLayoutAttr::getRowWidth).
  return 32 * (2 * rowDim - storedRow) / 31;
}

} // namespace mla::lowering
