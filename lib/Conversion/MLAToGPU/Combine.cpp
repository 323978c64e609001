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

#include "GpuCodegenUtils.h"
#include "mla/Conversion/MLAToGPU/MLAToGPU.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
namespace abi = mla::gpu;

FailureOr<mlir::gpu::GPUFuncOp>
mla::gpu_codegen::emitCombine(OpBuilder &builder, Location loc, StringRef name,
                              const abi::DecodeShape &shape) {
  const int64_t N = shape.numHeads, Sq = shape.queryRows, L = shape.latentDim;
  const int64_t rows = N * Sq;
  if (L % 4 != 0)
    return emitError(loc) << "GPU combine needs L divisible by 4, got " << L;
  constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;
  const int64_t warps = abi::kCombineThreadsPerCta / 32;
  static_assert(abi::kCombineThreadsPerCta / 32 == abi::kCombineRowsPerCta,
                "one warp per row");

  ImplicitLocOpBuilder b(loc, builder);
  DeviceBuilder d(b);
  Type halfType = shape.elem == abi::ElemType::BF16 ? Type(b.getBF16Type())
                                                   : Type(b.getF16Type());
  auto fn = createKernel(b, name,
                         {d.ptrGlobal, d.ptrGlobal, d.ptrGlobal, d.ptrGlobal,
                          d.i32, d.i32},
                         abi::kCombineThreadsPerCta);
  Value pout = fn.getArgument(0), plse = fn.getArgument(1),
        out = fn.getArgument(2), lseOut = fn.getArgument(3),
        batch = fn.getArgument(4), numSplits = fn.getArgument(5);

  Value tid = d.threadIdX();
  Value warp = d.divu(tid, d.c32(32)), lane = d.remu(tid, d.c32(32));
  Value bb = d.blockIdY();
  Value r = d.add(d.mul(d.blockIdX(), d.c32(warps)), warp);
  d.ifThen(d.slt(r, d.c32(rows)), [&] {
    Value i = d.divu(r, d.c32(N)), n = d.remu(r, d.c32(N));
    // lse_s lives at ((s*B + b)*N + n)*Sq + i.
    auto lseIndex = [&](Value s) {
      return d.add(d.mul(d.add(d.mul(d.add(d.mul(s, batch), bb), d.c32(N)), n),
                         d.c32(Sq)),
                   i);
    };
    // Pass 1: the largest LSE over the pieces (lanes stride by 32).
    Value m = d.forLoop(lane, numSplits, d.c32(32), {d.negInf()},
                        [&](Value s, ValueRange acc) -> SmallVector<Value> {
                          Value v = d.load(d.f32, d.gep(plse, d.f32, lseIndex(s)), 4);
                          return {d.fmax(acc[0], v)};
                        })[0];
    for (int off = 16; off >= 1; off /= 2)
      m = d.fmax(m, d.shflXor(m, off));
    Value mIsNegInf = d.feq(m, d.negInf());

    // Pass 2: weighted sum of the partial rows.
    const int64_t stripes = (L + 127) / 128;
    auto v4 = VectorType::get({4}, d.f32);
    SmallVector<Value> inits;
    Value zero4 = arith::ConstantOp::create(b, v4, b.getZeroAttr(v4));
    for (int64_t c = 0; c < stripes; ++c)
      inits.push_back(zero4);
    inits.push_back(d.f(0.0f));
    Value col0 = d.mul(lane, d.c32(4));
    SmallVector<Value> acc = d.forLoop(
        d.c32(0), numSplits, d.c32(1), inits,
        [&](Value s, ValueRange carried) -> SmallVector<Value> {
          Value l = d.load(d.f32, d.gep(plse, d.f32, lseIndex(s)), 4);
          Value w = d.exp2(d.fmul(d.fsub(l, m), d.f(kLog2e)));
          w = d.select(mIsNegInf, d.f(0.0f), w);
          Value w4 = vector::BroadcastOp::create(b, v4, w);
          // partial_out row ((s*B + b)*rows + r)*L, in i64.
          Value rowBase = d.mul(d.toI64(d.add(d.mul(d.add(d.mul(s, batch), bb),
                                                    d.c32(rows)),
                                              r)),
                                d.c64(L));
          SmallVector<Value> next;
          for (int64_t c = 0; c < stripes; ++c) {
            Value col = d.add(col0, d.c32(c * 128));
            Value ptr = d.gep(pout, d.f32, d.add(rowBase, d.toI64(col)));
            Value v;
            if (L % 128 == 0) {
              v = d.load(v4, ptr, 16);
            } else {
              // The last stripe is partial: lanes past L read nothing.
              Value inRange = d.slt(col, d.c32(L));
              auto ifOp = scf::IfOp::create(b, TypeRange{v4}, inRange, true);
              {
                OpBuilder::InsertionGuard guard(b);
                b.setInsertionPointToStart(ifOp.thenBlock());
                scf::YieldOp::create(b, d.load(v4, ptr, 16));
                b.setInsertionPointToStart(ifOp.elseBlock());
                scf::YieldOp::create(b, zero4);
              }
              v = ifOp.getResult(0);
            }
            next.push_back(vector::FMAOp::create(b, w4, v, carried[c]));
          }
          next.push_back(d.fadd(carried[stripes], w));
          return next;
        });
    Value sumW = acc[stripes];
    Value nonEmpty =
        arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, sumW, d.f(0.0f));
    Value inv = d.select(nonEmpty, d.fdiv(d.f(1.0f), sumW), d.f(0.0f));
    Value inv4 = vector::BroadcastOp::create(b, v4, inv);
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
      Value lse = d.fadd(m, d.fmul(d.log2(sumW), d.f(kLn2)));
      lse = d.select(nonEmpty, lse, d.negInf());
      Value idx = d.add(d.mul(d.add(d.mul(bb, d.c32(N)), n), d.c32(Sq)), i);
      d.store(lse, d.gep(lseOut, d.f32, idx), 4);
    });
  });
  mlir::gpu::ReturnOp::create(b);
  return fn;
}
