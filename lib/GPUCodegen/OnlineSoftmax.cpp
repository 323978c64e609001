//===- OnlineSoftmax.cpp - base-2 online softmax steps --------------------===//

#include "mla/GPUCodegen/OnlineSoftmax.h"

#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mla::gpu_codegen;

Value softmax::scaleAndMask(DeviceBuilder &d, Value s, Value valid,
                            Value scaleLog2) {
  return d.select(valid, d.fmul(s, scaleLog2), d.negInf());
}

Value softmax::max(DeviceBuilder &d, Value x, Value y) {
  return d.fmaximum(x, y);
}

Value softmax::xorAllReduce(DeviceBuilder &d, Value v, Combiner combiner,
                            ArrayRef<int> laneMasks) {
  for (int mask : laneMasks)
    v = combiner == Combiner::Max ? softmax::max(d, v, d.shflXor(v, mask))
                                  : d.fadd(v, d.shflXor(v, mask));
  return v;
}

Value softmax::quadMax(DeviceBuilder &d, Value v) {
  return xorAllReduce(d, v, Combiner::Max, {1, 2});
}

Value softmax::treeReduce(DeviceBuilder &d, ArrayRef<Value> values,
                          Combiner combiner) {
  assert(!values.empty() && "nothing to reduce");
  SmallVector<Value> level(values);
  while (level.size() > 1) {
    SmallVector<Value> next;
    for (size_t i = 0; i + 1 < level.size(); i += 2)
      next.push_back(combiner == Combiner::Max
                         ? softmax::max(d, level[i], level[i + 1])
                         : d.fadd(level[i], level[i + 1]));
    if (level.size() % 2)
      next.push_back(level.back());
    level = std::move(next);
  }
  return level.front();
}

Value softmax::scaledProbability(DeviceBuilder &d, Value s, Value scaleLog2,
                                 Value mUse) {
  return d.exp2(d.fma(s, scaleLog2, d.fsub(d.f(0.0f), mUse)));
}

Value softmax::quadSum(DeviceBuilder &d, Value v) {
  return xorAllReduce(d, v, Combiner::Sum, {1, 2});
}

softmax::Rescale softmax::rescale(DeviceBuilder &d, Value mOld, Value lOld,
                                  Value blockMax) {
  return rescaleTo(d, mOld, lOld, softmax::max(d, mOld, blockMax));
}

softmax::Rescale softmax::rescaleTo(DeviceBuilder &d, Value mOld, Value lOld,
                                    Value mNew) {
  Rescale r;
  r.mNew = mNew;
  r.mUse = usableMax(d, mNew);
  r.alpha = d.exp2(d.fsub(mOld, r.mUse));
  r.l = d.fmul(lOld, r.alpha);
  return r;
}

Value softmax::usableMax(DeviceBuilder &d, Value m) {
  return d.select(d.feq(m, d.negInf()), d.f(0.0f), m);
}

Value softmax::rescaleFactor(DeviceBuilder &d, Value mOld, Value mNew) {
  return d.exp2(d.fsub(mOld, usableMax(d, mNew)));
}

Value softmax::lazyMax(DeviceBuilder &d, Value mOld, Value blockMax,
                       float slack) {
  // UGT: true when either side is NaN, which then reaches m through max.
  Value moves =
      d.fcmp(arith::CmpFPredicate::UGT, blockMax, d.fadd(mOld, d.f(slack)));
  return d.select(moves, softmax::max(d, mOld, blockMax), mOld);
}

Value softmax::maxMoved(DeviceBuilder &d, Value mOld[2], Value mNew[2]) {
  return d.ori(d.fcmp(arith::CmpFPredicate::UNE, mOld[0], mNew[0]),
               d.fcmp(arith::CmpFPredicate::UNE, mOld[1], mNew[1]));
}

void softmax::rescaleIf(DeviceBuilder &d, MutableArrayRef<Value> acc,
                        Value factor[2], Value moved) {
  SmallVector<Type> types(acc.size(), d.f32);
  auto ifOp = scf::IfOp::create(d.b, types, moved, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(d.b);
    d.b.setInsertionPointToStart(ifOp.thenBlock());
    SmallVector<Value> scaled;
    for (size_t i = 0; i < acc.size(); ++i)
      scaled.push_back(d.fmul(acc[i], factor[(i % 4) / 2]));
    scf::YieldOp::create(d.b, scaled);
    d.b.setInsertionPointToStart(ifOp.elseBlock());
    scf::YieldOp::create(d.b, SmallVector<Value>(acc.begin(), acc.end()));
  }
  llvm::copy(ifOp.getResults(), acc.begin());
}

Value softmax::probability(DeviceBuilder &d, Value s, Value mUse) {
  return d.exp2(d.fsub(s, mUse));
}

softmax::Normaliser softmax::normaliser(DeviceBuilder &d, Value l) {
  Normaliser n;
  n.nonEmpty = d.fcmp(arith::CmpFPredicate::UNE, l, d.f(0.0f));
  n.inv = d.select(n.nonEmpty, d.fdiv(d.f(1.0f), l), d.f(0.0f));
  return n;
}

Value softmax::naturalLse(DeviceBuilder &d, Value mBase2, Value l,
                          Value nonEmpty) {
  Value lse = d.fmul(d.fadd(mBase2, d.log2(l)), d.f(kLn2));
  return d.select(nonEmpty, lse, d.negInf());
}

Value softmax::naturalWeight(DeviceBuilder &d, Value lse, Value m) {
  return d.exp2(d.fmul(d.fsub(lse, m), d.f(kLog2e)));
}

Value softmax::mergedLse(DeviceBuilder &d, Value m, Value sum, Value nonEmpty) {
  Value lse = d.fadd(m, d.fmul(d.log2(sum), d.f(kLn2)));
  return d.select(nonEmpty, lse, d.negInf());
}
