//===- Combine.cpp - the mla_combine GPU kernel ---------------------------===//
//
// Merges split-KV partial states (primer section 6). One warp per query row
// (token i, head n) of one request: the lanes find the largest partial LSE,
// then every lane accumulates `exp(lse_s - m) * partial_out[s]` over four
// adjacent columns per 128-column stripe with 16-byte loads, and writes the
// normalised row in the output element type plus `m + log(sum_s w_s)`.
// Pieces with lse = -inf weigh nothing; all empty gives out = 0,
// lse = -inf.
//
//===----------------------------------------------------------------------===//

#include "mla/Conversion/MLAToGPU/MLAToGPU.h"
#include "mla/GPUCodegen/DeviceBuilder.h"
#include "mla/GPUCodegen/OnlineSoftmax.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mla::gpu_codegen;
namespace abi = mla::gpu;

namespace {

class CombineKernel {
public:
  CombineKernel(ImplicitLocOpBuilder &b, const abi::DecodeShape &shape)
      : b(b), d(b), N(shape.numHeads), Sq(shape.queryRows), L(shape.latentDim),
        rows(N * Sq), stripes((L + 127) / 128),
        v4(VectorType::get({4}, d.f32)) {
    halfType = shape.elem == abi::ElemType::BF16 ? Type(b.getBF16Type())
                                                 : Type(b.getF16Type());
  }

  mlir::gpu::GPUFuncOp emit(StringRef name);

private:
  /// Everything for row `r` of the request.
  void emitRow();
  /// lse_s lives at ((s*B + b)*N + n)*Sq + i.
  Value lseIndex(Value s);
  /// The largest LSE over the pieces (lanes stride by 32, then the warp).
  Value maxLse();
  /// One piece's weighted contribution to the carried stripes and sum.
  SmallVector<Value> accumulatePiece(Value s, ValueRange carried, Value m,
                                     Value mIsNegInf);
  /// The lane's four columns at `col` of a partial row (0 past L).
  Value loadStripe(Value ptr, Value col);
  void storeRow(ArrayRef<Value> acc, Value m);

  ImplicitLocOpBuilder &b;
  DeviceBuilder d;
  const int64_t N, Sq, L, rows, stripes;
  VectorType v4;
  Type halfType;
  Value pout, plse, out, lseOut, batch, numSplits;
  Value lane, bb, r, i, n, col0, zero4;
};

} // namespace

mlir::gpu::GPUFuncOp CombineKernel::emit(StringRef name) {
  const int64_t warps = abi::kCombineThreadsPerCta / 32;
  static_assert(abi::kCombineThreadsPerCta / 32 == abi::kCombineRowsPerCta,
                "one warp per row");
  auto fn = createKernel(
      b, name,
      {d.ptrGlobal, d.ptrGlobal, d.ptrGlobal, d.ptrGlobal, d.i32, d.i32},
      abi::kCombineThreadsPerCta);
  pout = fn.getArgument(0), plse = fn.getArgument(1), out = fn.getArgument(2),
  lseOut = fn.getArgument(3), batch = fn.getArgument(4),
  numSplits = fn.getArgument(5);

  Value tid = d.threadIdX();
  Value warp = d.divu(tid, d.c32(32));
  lane = d.remu(tid, d.c32(32));
  bb = d.blockIdY();
  r = d.add(d.mul(d.blockIdX(), d.c32(warps)), warp);
  d.ifThen(d.slt(r, d.c32(rows)), [&] { emitRow(); });
  mlir::gpu::ReturnOp::create(b);
  return fn;
}

Value CombineKernel::lseIndex(Value s) {
  return d.add(
      d.mul(d.add(d.mul(d.add(d.mul(s, batch), bb), d.c32(N)), n), d.c32(Sq)),
      i);
}

Value CombineKernel::maxLse() {
  Value m = d.forLoop(lane, numSplits, d.c32(32), {d.negInf()},
                      [&](Value s, ValueRange acc) -> SmallVector<Value> {
                        Value v =
                            d.load(d.f32, d.gep(plse, d.f32, lseIndex(s)), 4);
                        return {softmax::max(d, acc[0], v)};
                      })[0];
  return softmax::xorAllReduce(d, m, softmax::Combiner::Max, {16, 8, 4, 2, 1});
}

void CombineKernel::emitRow() {
  i = d.divu(r, d.c32(N)), n = d.remu(r, d.c32(N));
  Value m = maxLse();
  Value mIsNegInf = d.feq(m, d.negInf());

  SmallVector<Value> inits;
  zero4 = arith::ConstantOp::create(b, v4, b.getZeroAttr(v4));
  for (int64_t c = 0; c < stripes; ++c)
    inits.push_back(zero4);
  inits.push_back(d.f(0.0f));
  col0 = d.mul(lane, d.c32(4));
  SmallVector<Value> acc = d.forLoop(
      d.c32(0), numSplits, d.c32(1), inits, [&](Value s, ValueRange carried) {
        return accumulatePiece(s, carried, m, mIsNegInf);
      });
  storeRow(acc, m);
}

SmallVector<Value> CombineKernel::accumulatePiece(Value s, ValueRange carried,
                                                  Value m, Value mIsNegInf) {
  Value l = d.load(d.f32, d.gep(plse, d.f32, lseIndex(s)), 4);
  Value w = softmax::naturalWeight(d, l, m);
  w = d.select(mIsNegInf, d.f(0.0f), w);
  Value w4 = vector::BroadcastOp::create(b, v4, w);
  // partial_out row ((s*B + b)*rows + r)*L, in i64.
  Value rowBase =
      d.mul(d.toI64(d.add(d.mul(d.add(d.mul(s, batch), bb), d.c32(rows)), r)),
            d.c64(L));
  SmallVector<Value> next;
  for (int64_t c = 0; c < stripes; ++c) {
    Value col = d.add(col0, d.c32(c * 128));
    Value ptr = d.gep(pout, d.f32, d.add(rowBase, d.toI64(col)));
    Value v = loadStripe(ptr, col);
    next.push_back(vector::FMAOp::create(b, w4, v, carried[c]));
  }
  next.push_back(d.fadd(carried[stripes], w));
  return next;
}

Value CombineKernel::loadStripe(Value ptr, Value col) {
  if (L % 128 == 0)
    return d.load(v4, ptr, 16);
  // The last stripe is partial: lanes past L read nothing.
  Value inRange = d.slt(col, d.c32(L));
  auto ifOp = scf::IfOp::create(b, TypeRange{v4}, inRange, true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  scf::YieldOp::create(b, d.load(v4, ptr, 16));
  b.setInsertionPointToStart(ifOp.elseBlock());
  scf::YieldOp::create(b, zero4);
  return ifOp.getResult(0);
}

void CombineKernel::storeRow(ArrayRef<Value> acc, Value m) {
  Value sumW = acc[stripes];
  softmax::Normaliser norm = softmax::normaliser(d, sumW);
  Value inv4 = vector::BroadcastOp::create(b, v4, norm.inv);
  Value outRow = d.mul(d.toI64(d.add(d.mul(bb, d.c32(rows)), r)), d.c64(L));
  auto h4 = VectorType::get({4}, halfType);
  for (int64_t c = 0; c < stripes; ++c) {
    Value col = d.add(col0, d.c32(c * 128));
    auto storeIt = [&] {
      Value v = arith::MulFOp::create(b, acc[c], inv4);
      Value h = arith::TruncFOp::create(b, h4, v);
      d.store(h, d.gep(out, halfType, d.add(outRow, d.toI64(col))), 8);
    };
    if (L % 128 == 0)
      storeIt();
    else
      d.ifThen(d.slt(col, d.c32(L)), storeIt);
  }
  d.ifThen(d.eq(lane, d.c32(0)), [&] {
    Value lse = softmax::mergedLse(d, m, sumW, norm.nonEmpty);
    Value idx = d.add(d.mul(d.add(d.mul(bb, d.c32(N)), n), d.c32(Sq)), i);
    d.store(lse, d.gep(lseOut, d.f32, idx), 4);
  });
}

FailureOr<mlir::gpu::GPUFuncOp>
mla::gpu_codegen::emitCombine(OpBuilder &builder, Location loc, StringRef name,
                              const abi::DecodeShape &shape) {
  if (shape.latentDim % 4 != 0)
    return emitError(loc) << "GPU combine needs L divisible by 4, got "
                          << shape.latentDim;
  ImplicitLocOpBuilder b(loc, builder);
  return CombineKernel(b, shape).emit(name);
}
