//===- Segments.cpp - finding a row's segment in varlen offsets -----------===//

#include "mla/GPUCodegen/Segments.h"

#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mla::gpu_codegen;

Value mla::gpu_codegen::upperBound(DeviceBuilder &d, Value offsets, Value size,
                                   Value x) {
  // [lo, hi) brackets the answer; each step halves it.
  ImplicitLocOpBuilder &b = d.b;
  Type i32 = d.i32;
  auto loop =
      scf::WhileOp::create(b, TypeRange{i32, i32}, ValueRange{d.c32(0), size});
  OpBuilder::InsertionGuard guard(b);
  Block *before = b.createBlock(&loop.getBefore(), {}, {i32, i32},
                                {b.getLoc(), b.getLoc()});
  scf::ConditionOp::create(
      b, d.slt(before->getArgument(0), before->getArgument(1)),
      before->getArguments());
  Block *after =
      b.createBlock(&loop.getAfter(), {}, {i32, i32}, {b.getLoc(), b.getLoc()});
  Value lo = after->getArgument(0), hi = after->getArgument(1);
  Value mid = d.shru(d.add(lo, hi), d.c32(1));
  Value atMost = d.sle(d.load(i32, d.gep(offsets, i32, mid), 4), x);
  scf::YieldOp::create(b, ValueRange{d.select(atMost, d.add(mid, d.c32(1)), lo),
                                     d.select(atMost, hi, mid)});
  return loop.getResult(0);
}
