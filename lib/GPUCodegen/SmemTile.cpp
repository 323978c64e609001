//===- SmemTile.cpp - shared-memory tile layouts --------------------------===//

#include "mla/GPUCodegen/SmemTile.h"

#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mla::gpu_codegen;

SmemTile SmemTile::linear(int64_t base, int64_t rows, int64_t rowBytes) {
  return {SmemSwizzle::Linear, base, rows, rowBytes};
}

SmemTile SmemTile::chunkXor(int64_t base, int64_t rows, int64_t dataBytes) {
  return {SmemSwizzle::ChunkXor, base, rows,
          paddedRowBytes(SmemSwizzle::ChunkXor, dataBytes)};
}

SmemTile SmemTile::box128B(int64_t base, int64_t rows) {
  return {SmemSwizzle::Box128B, base, rows, 128};
}

int64_t SmemTile::paddedRowBytes(SmemSwizzle swizzle, int64_t dataBytes) {
  // The xor of the ChunkXor layout reaches chunk 7 of every 128-byte group.
  return swizzle == SmemSwizzle::ChunkXor ? llvm::alignTo(dataBytes, 128)
                                          : dataBytes;
}

Value SmemTile::byteOffset(DeviceBuilder &d, Value row, Value chunk) const {
  switch (swizzle) {
  case SmemSwizzle::Linear:
    return d.add(d.mul(row, d.c32(rowBytes)), d.mul(chunk, d.c32(16)));
  case SmemSwizzle::ChunkXor:
    return d.add(d.mul(row, d.c32(rowBytes)),
                 d.mul(d.bitXor(chunk, d.bitAnd(row, d.c32(7))), d.c32(16)));
  case SmemSwizzle::Box128B: {
    Value sw = d.bitXor(d.bitAnd(chunk, d.c32(7)), d.bitAnd(row, d.c32(7)));
    return d.add(d.mul(d.divu(chunk, d.c32(8)), d.c32(rows * 128)),
                 d.add(d.mul(row, d.c32(128)), d.mul(sw, d.c32(16))));
  }
  }
  llvm_unreachable("unknown shared-memory swizzle");
}

Value SmemTile::elementOffset(DeviceBuilder &d, Value row, Value col,
                              int64_t elemBytes) const {
  int64_t perChunk = 16 / elemBytes;
  switch (swizzle) {
  case SmemSwizzle::Linear:
    return d.add(d.mul(row, d.c32(rowBytes)), d.mul(col, d.c32(elemBytes)));
  case SmemSwizzle::ChunkXor:
    llvm_unreachable("no kernel addresses ChunkXor tiles by element");
  case SmemSwizzle::Box128B:
    assert(rowBytes == 128 && "elementOffset of a multi-box tile");
    return d.add(d.mul(row, d.c32(128)),
                 d.add(d.mul(d.bitXor(d.divu(col, d.c32(perChunk)),
                                      d.bitAnd(row, d.c32(7))),
                             d.c32(16)),
                       d.mul(d.remu(col, d.c32(perChunk)), d.c32(elemBytes))));
  }
  llvm_unreachable("unknown shared-memory swizzle");
}

int64_t SmemTile::kSliceOffset(int64_t kk) const {
  assert(swizzle == SmemSwizzle::Box128B && "k slices of a Box128B tile");
  return (kk / 4) * (rows * 128) + (kk % 4) * 32;
}

WgmmaDescriptors::WgmmaDescriptors(DeviceBuilder &d, Value sharedBuffer)
    : d(d),
      sharedLo(arith::TruncIOp::create(
          d.b, d.i32, LLVM::PtrToIntOp::create(d.b, d.i64, sharedBuffer))) {}

Value WgmmaDescriptors::make(Value base, int64_t byteOffset, int64_t lbo,
                             int64_t sbo) {
  assert(byteOffset % 16 == 0 && "wgmma operands start at 16-byte multiples");
  ImplicitLocOpBuilder &b = d.b;
  // The run-time part: (address >> 4) & 0x3FFF with the LBO field above it.
  Value start = arith::AndIOp::create(
      b, arith::ShRUIOp::create(b, d.add(sharedLo, base), d.c32(4)),
      d.c32(0x3FFF));
  Value lo = arith::OrIOp::create(b, start, d.c32((lbo >> 4) << 16));
  if (byteOffset != 0)
    lo = d.add(lo, d.c32(byteOffset >> 4));
  int64_t hi = (sbo >> 4) | (int64_t(1) << 30);
  return arith::OrIOp::create(b, arith::ExtUIOp::create(b, d.i64, lo),
                              d.c64(hi << 32))
      .getResult();
}

Value WgmmaDescriptors::kMajor(Value base, int64_t byteOffset) {
  return make(base, byteOffset, 16, 1024);
}

Value WgmmaDescriptors::mnMajor(const SmemTile &tile, Value base,
                                int64_t byteOffset) {
  assert(tile.swizzle == SmemSwizzle::Box128B && "wgmma reads Box128B tiles");
  return make(base, byteOffset, tile.rows * 128, 1024);
}
