//===- Combine.cpp - the mla_combine GPU kernel ---------------------------===//
//
// Merges split-KV partial states (primer section 6): one warp per query row
// of one request, each running CombineRow (CombineRow.h), grid
// (ceil(Sq*N / kCombineRowsPerCta), B).
//
//===----------------------------------------------------------------------===//

#include "CombineRow.h"

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
      : b(b), d(b), shape(shape) {}

  mlir::gpu::GPUFuncOp emit(StringRef name);

private:
  ImplicitLocOpBuilder &b;
  DeviceBuilder d;
  const abi::DecodeShape &shape;
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
  CombineOperands ops{fn.getArgument(0), fn.getArgument(1), fn.getArgument(2),
                      fn.getArgument(3), fn.getArgument(4), fn.getArgument(5)};
  Value tid = d.threadIdX();
  Value warp = d.divu(tid, d.c32(32));
  Value lane = d.remu(tid, d.c32(32));
  Value r = d.add(d.mul(d.blockIdX(), d.c32(warps)), warp);
  d.ifThen(d.slt(r, d.c32(shape.numHeads * shape.queryRows)),
           [&] { CombineRow(b, d, shape, ops).emit(d.blockIdY(), r, lane); });
  mlir::gpu::ReturnOp::create(b);
  return fn;
}

CombineRow::CombineRow(ImplicitLocOpBuilder &b, DeviceBuilder &d,
                       const abi::DecodeShape &shape,
                       const CombineOperands &operands)
    : b(b), d(d), N(shape.numHeads), Sq(shape.queryRows), L(shape.latentDim),
      rows(N * Sq), stripes((L + 127) / 128), v4(VectorType::get({4}, d.f32)),
      ops(operands) {
  halfType = shape.elem == abi::ElemType::BF16 ? Type(b.getBF16Type())
                                               : Type(b.getF16Type());
}

void CombineRow::emit(Value bb, Value r, Value lane) {
  emitRows(bb, {r}, {}, lane);
}

void CombineRow::emitRows(Value bb, ArrayRef<Value> rs, ArrayRef<Value> valid,
                          Value lane) {
  this->bb = bb, this->lane = lane;
  SmallVector<Row> batch;
  for (auto [j, r] : llvm::enumerate(rs)) {
    Value at = valid.empty() ? r : d.select(valid[j], r, d.c32(0));
    batch.push_back({at, d.divu(at, d.c32(N)), d.remu(at, d.c32(N)), {}, {}});
  }
  maxLse(batch);
  for (Row &row : batch)
    row.mIsNegInf = d.feq(row.m, d.negInf());

  zero4 = arith::ConstantOp::create(b, v4, b.getZeroAttr(v4));
  col0 = d.mul(lane, d.c32(4));
  const int64_t per = stripes + 1;
  SmallVector<Value> inits;
  for (size_t j = 0; j < batch.size(); ++j) {
    for (int64_t c = 0; c < stripes; ++c)
      inits.push_back(zero4);
    inits.push_back(d.f(0.0f));
  }
  SmallVector<Value> acc =
      d.forLoop(d.c32(0), ops.numSplits, d.c32(1), inits,
                [&](Value s, ValueRange carried) {
                  // Every row's loads of piece s, then the arithmetic.
                  SmallVector<SmallVector<Value>> loads;
                  for (const Row &row : batch)
                    loads.push_back(loadPiece(row, s));
                  SmallVector<Value> next;
                  for (auto [j, row] : llvm::enumerate(batch))
                    llvm::append_range(
                        next, accumulatePiece(row, loads[j],
                                              carried.slice(j * per, per)));
                  return next;
                });
  for (auto [j, row] : llvm::enumerate(batch)) {
    ArrayRef<Value> rowAcc = ArrayRef<Value>(acc).slice(j * per, per);
    if (valid.empty())
      storeRow(row, rowAcc);
    else
      d.ifThen(valid[j], [&] { storeRow(row, rowAcc); });
  }
}

Value CombineRow::lseIndex(const Row &row, Value s) {
  return d.add(
      d.mul(d.add(d.mul(d.add(d.mul(s, ops.batch), bb), d.c32(N)), row.n),
            d.c32(Sq)),
      row.i);
}

void CombineRow::maxLse(MutableArrayRef<Row> batch) {
  SmallVector<Value> init(batch.size(), d.negInf());
  SmallVector<Value> m = d.forLoop(
      lane, ops.numSplits, d.c32(32), init,
      [&](Value s, ValueRange acc) -> SmallVector<Value> {
        SmallVector<Value> v, next;
        for (const Row &row : batch)
          v.push_back(
              d.load(d.f32, d.gep(ops.partialLse, d.f32, lseIndex(row, s)), 4));
        for (size_t j = 0; j < batch.size(); ++j)
          next.push_back(softmax::max(d, acc[j], v[j]));
        return next;
      });
  for (auto [j, row] : llvm::enumerate(batch))
    row.m = softmax::xorAllReduce(d, m[j], softmax::Combiner::Max,
                                  {16, 8, 4, 2, 1});
}

SmallVector<Value> CombineRow::loadPiece(const Row &row, Value s) {
  SmallVector<Value> loads = {
      d.load(d.f32, d.gep(ops.partialLse, d.f32, lseIndex(row, s)), 4)};
  // partial_out row ((s*B + b)*rows + r)*L, in i64.
  Value rowBase = d.mul(
      d.toI64(d.add(d.mul(d.add(d.mul(s, ops.batch), bb), d.c32(rows)), row.r)),
      d.c64(L));
  for (int64_t c = 0; c < stripes; ++c) {
    Value col = d.add(col0, d.c32(c * 128));
    Value ptr = d.gep(ops.partialOut, d.f32, d.add(rowBase, d.toI64(col)));
    loads.push_back(loadStripe(ptr, col));
  }
  return loads;
}

SmallVector<Value> CombineRow::accumulatePiece(const Row &row,
                                               ArrayRef<Value> loads,
                                               ValueRange carried) {
  Value w = softmax::naturalWeight(d, loads[0], row.m);
  w = d.select(row.mIsNegInf, d.f(0.0f), w);
  Value w4 = vector::BroadcastOp::create(b, v4, w);
  SmallVector<Value> next;
  for (int64_t c = 0; c < stripes; ++c)
    next.push_back(vector::FMAOp::create(b, w4, loads[1 + c], carried[c]));
  next.push_back(d.fadd(carried[stripes], w));
  return next;
}

Value CombineRow::loadStripe(Value ptr, Value col) {
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

void CombineRow::storeRow(const Row &row, ArrayRef<Value> acc) {
  Value r = row.r, m = row.m;
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
      d.store(h, d.gep(ops.out, halfType, d.add(outRow, d.toI64(col))), 8);
    };
    if (L % 128 == 0)
      storeIt();
    else
      d.ifThen(d.slt(col, d.c32(L)), storeIt);
  }
  d.ifThen(d.eq(lane, d.c32(0)), [&] {
    Value lse = softmax::mergedLse(d, m, sumW, norm.nonEmpty);
    Value idx =
        d.add(d.mul(d.add(d.mul(bb, d.c32(N)), row.n), d.c32(Sq)), row.i);
    d.store(lse, d.gep(ops.lse, d.f32, idx), 4);
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
