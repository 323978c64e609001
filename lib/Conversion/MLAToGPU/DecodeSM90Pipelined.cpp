//===- DecodeSM90Pipelined.cpp - warp-specialised sm_90a decode -----------===//
//
// mla_decode_partial for sm_90a with `tiling.pipelined`: the wgmma kernel's
// tiles and math (DecodeSM90Wgmma.cpp: 64 rows, warpgroup j scores token
// half j of each 64-token block and owns output column half j), fed by TMA
// and overlapped on the warp-specialised frame of
// DecodeSM90WarpSpecialised.h (a producer warpgroup loading Q and the KV
// blocks into a ring of `stages` slots). Per block n + 1 the consumers
// issue S_{n+1} = Q K^T and O += P_n V_n as two wgmma groups, wait for S
// only, and mask it and exchange its row maxima while P V runs on the
// tensor cores; then they wait for P V, release slot n, rescale O and
// publish P_{n+1}. The two warpgroups meet on a named barrier over their
// 256 threads (the producer never joins it): after the row-max exchange,
// before P is overwritten (both P V reads done) and after P is written.
//
// The consumers zero the V columns of every token outside [lo, kvEnd) of a
// block that has one before its P V, so p = 0 never meets a NaN.
//
//===----------------------------------------------------------------------===//

#include "DecodeSM90WarpSpecialised.h"

#include "mla/GPUCodegen/OnlineSoftmax.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

using namespace mlir;
using namespace mla::gpu_codegen;
using namespace mla::gpu_codegen::sm90;
namespace abi = mla::gpu;

namespace {

/// A consumer thread's running state: O (ntO * 4), the row maxima and the
/// partial row sums of its two rows.
struct Running {
  SmallVector<Value> o;
  Value m[2], l[2];
};

class PipelinedDecode {
public:
  PipelinedDecode(DecodeSM90Kernel &k) : k(k), d(k.d), ws(k) {}

  void emit(StringRef name) {
    ws.emit(name, /*blockMultiple=*/1, [&](Value blocks) { consume(blocks); });
  }

private:
  void consume(Value blocks);
  void consumerSync() { ws.namedSync(kConsumerBarrier, kConsumerThreads); }
  /// Issues S = Q K_j^T of block `n` (no commit): token half j.
  WgmmaAccum issueScores(WarpgroupMma &mma, Value qBase, Value n) {
    Value kHalf =
        d.add(ws.slotBytes(n), d.mul(k.wj, d.c32(k.Tw * k.lay.kv.rowBytes)));
    return ws.issueScores(mma, k.Tw, qBase, n, kHalf);
  }
  /// Issues O_j += P V_j of the block in the slot at `slotOff` (no commit):
  /// column half j.
  WgmmaAccum issuePV(WarpgroupMma &mma, ArrayRef<Value> o, Value slotOff) {
    return ws.issuePV(mma, o, d.c32(k.lay.p.base), slotOff,
                      d.mul(k.wj, d.c32(k.Lw / 64)));
  }
  /// Masks and scales S of block `n`, exchanges the row maxima, folds them
  /// into `run` and returns the block's probabilities packed in pairs;
  /// `alpha` gets the factors O still has to be scaled by.
  SmallVector<Value> softmaxBlock(WgmmaAccum &s, Value n, Running &run,
                                  Value alpha[2]);
  /// Zeroes V of the tokens outside [lo, kvEnd) of block `n`, stores P and
  /// makes both visible to the wgmma of either warpgroup.
  void publish(Value n, ArrayRef<Value> packed);
  void finish(Running &run);

  DecodeSM90Kernel &k;
  DeviceBuilder &d;
  WarpSpecialisedDecode ws;
};

} // namespace

SmallVector<Value> PipelinedDecode::softmaxBlock(WgmmaAccum &s, Value n,
                                                 Running &run, Value alpha[2]) {
  namespace sm = mla::gpu_codegen::softmax;
  Value rowMax[2] = {d.negInf(), d.negInf()};
  Value tokBase = d.add(k.blockStart(n),
                        d.add(d.mul(k.wj, d.c32(k.Tw)), d.mul(k.tq, d.c32(2))));
  for (size_t i = 0; i < s.regs.size(); ++i) {
    int h = (i % 4) / 2;
    Value pos = d.add(tokBase, d.c32(8 * (i / 4) + i % 2));
    Value valid = d.andi(d.sge(pos, k.lo), d.slt(pos, k.rowLimit[h]));
    s.regs[i] = sm::scaleAndMask(d, s.regs[i], valid, k.scaleLog2);
    rowMax[h] = sm::max(d, rowMax[h], s.regs[i]);
  }
  for (int h = 0; h < 2; ++h)
    d.store(sm::quadMax(d, rowMax[h]), k.redSlot(h, k.wj), 4);
  consumerSync();
  Value mUse[2];
  for (int h = 0; h < 2; ++h) {
    sm::Rescale r = sm::rescale(d, run.m[h], run.l[h], k.blockRowMax(h));
    run.m[h] = r.mNew, run.l[h] = r.l, mUse[h] = r.mUse, alpha[h] = r.alpha;
  }
  SmallVector<Value> packed;
  for (size_t i = 0; i < s.regs.size(); i += 2) {
    int h = (i % 4) / 2;
    Value p0 = sm::probability(d, s.regs[i], mUse[h]);
    Value p1 = sm::probability(d, s.regs[i + 1], mUse[h]);
    run.l[h] = d.fadd(run.l[h], d.fadd(p0, p1));
    packed.push_back(d.pack2(p0, p1, k.halfType));
  }
  return packed;
}

void PipelinedDecode::publish(Value n, ArrayRef<Value> packed) {
  ws.zeroInvalidV(n, 0, k.L / 8, ws.ctid, kConsumerThreads);
  for (size_t i = 0; i < packed.size(); ++i) {
    int h = i % 2;
    Value col = d.add(d.mul(k.wj, d.c32(k.Tw)),
                      d.add(d.c32(8 * (i / 2)), d.mul(k.tq, d.c32(2))));
    Value off = k.lay.p.elementOffset(d, k.rowLocal[h], col, 2);
    d.store(packed[i], k.sm(k.lay.p.base, off), 4);
  }
  fenceProxyAsyncShared(d);
  consumerSync();
}

void PipelinedDecode::finish(Running &run) {
  namespace sm = mla::gpu_codegen::softmax;
  // The last reads of the scratch were before the last publish's barrier.
  for (int h = 0; h < 2; ++h)
    d.store(sm::quadSum(d, run.l[h]), k.redSlot(h, k.wj), 4);
  consumerSync();
  Value lRow[2];
  for (int h = 0; h < 2; ++h)
    lRow[h] = d.fadd(d.load(d.f32, k.redSlot(h, d.c32(0)), 4),
                     d.load(d.f32, k.redSlot(h, d.c32(1)), 4));
  SmallVector<Value> state(run.o);
  state.append({run.m[0], run.m[1], run.l[0], run.l[1]});
  k.writeOutput(state, lRow);
}

void PipelinedDecode::consume(Value blocks) {
  ws.beginConsumer();
  SmallVector<Value> init = k.initialState();
  Running run;
  run.o.assign(init.begin(), init.begin() + k.ntO * 4);
  run.m[0] = run.m[1] = d.negInf();
  run.l[0] = run.l[1] = d.f(0.0f);
  Value alpha[2];

  // Block 0: S, its softmax, P published (O is still zero).
  Value zero = d.c32(0);
  WarpgroupMma sMma(d, k.Tw, k.bf16), oMma(d, k.Lw, k.bf16);
  WgmmaAccum s = issueScores(sMma, d.c32(k.lay.q.base), zero);
  sMma.commitAndWait();
  publish(zero, softmaxBlock(s, zero, run, alpha));

  // Block n + 1's S and block n's P V in flight together.
  auto flatten = [](const Running &r) {
    SmallVector<Value> v(r.o);
    v.append({r.m[0], r.m[1], r.l[0], r.l[1]});
    return v;
  };
  int64_t numO = k.ntO * 4;
  SmallVector<Value> carried =
      d.forLoop(zero, d.sub(blocks, d.c32(1)), d.c32(1), flatten(run),
                [&](Value n, ValueRange c) {
                  Running r;
                  r.o.assign(c.begin(), c.begin() + numO);
                  r.m[0] = c[numO], r.m[1] = c[numO + 1];
                  r.l[0] = c[numO + 2], r.l[1] = c[numO + 3];
                  Value next = d.add(n, d.c32(1));
                  // Q's 36 descriptors are loop-invariant: hoisted out of
                  // the loop they would hold 72 registers next to O.
                  Value qBase = opaqueI32(k.b, d.c32(k.lay.q.base));
                  WgmmaAccum sNext = issueScores(sMma, qBase, next);
                  sMma.commit();
                  // The descriptor arithmetic since the last fence wrote
                  // registers.
                  oMma.fence();
                  WgmmaAccum o = issuePV(oMma, r.o, ws.slotBytes(n));
                  oMma.commit();
                  sMma.wait(1);
                  SmallVector<Value> packed =
                      softmaxBlock(sNext, next, r, alpha);
                  oMma.wait(0);
                  ws.empty(ws.slot(n), 0).arrive();
                  // Both warpgroups' P V have read P_n.
                  consumerSync();
                  for (size_t i = 0; i < o.regs.size(); ++i)
                    o.regs[i] = d.fmul(o.regs[i], alpha[(i % 4) / 2]);
                  r.o = o.regs;
                  publish(next, packed);
                  return flatten(r);
                });
  run.o.assign(carried.begin(), carried.begin() + numO);
  run.m[0] = carried[numO], run.m[1] = carried[numO + 1];
  run.l[0] = carried[numO + 2], run.l[1] = carried[numO + 3];

  Value last = d.sub(blocks, d.c32(1));
  oMma.fence();
  run.o = issuePV(oMma, run.o, ws.slotBytes(last)).regs;
  oMma.commitAndWait();
  finish(run);
}

void mla::gpu_codegen::sm90::emitDecodeSM90Pipelined(
    OpBuilder &builder, Location loc, StringRef name,
    const abi::DecodeShape &shape, const abi::DecodeTiling &tiling) {
  ImplicitLocOpBuilder b(loc, builder);
  DecodeSM90Kernel k(b, shape, tiling);
  PipelinedDecode(k).emit(name);
}
