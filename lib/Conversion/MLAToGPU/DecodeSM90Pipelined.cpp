//===- DecodeSM90Pipelined.cpp - warp-specialised sm_90a decode -----------===//
//
// mla_decode_partial for sm_90a with `tiling.pipelined`: the wgmma kernel's
// tiles and math (DecodeSM90Wgmma.cpp: 64 rows, warpgroup j scores token
// half j of each 64-token block and owns output column half j), fed by TMA
// and overlapped. 384 threads:
//
//  * warpgroup 0 (the producer) shrinks to 24 registers; one thread loads
//    the Q tile once and then the request's KV blocks, each as
//    (L+R)/64 boxes of 64 tokens x 64 columns through a 2-D tensor map of
//    the cache ([pages * page, L+R]), into a ring of `stages` slots. Each
//    box completes its own "full" mbarrier, so QK^T's k-steps on a box
//    start as soon as it lands; one "empty" mbarrier per slot counts the
//    consumers' release. The physical row of a block is
//    block_table[b][start / page] * page + start % page: a block never
//    straddles a page. An empty piece still gets one (unloaded) block, so
//    the consumers' wgmmas never sit behind a branch (ptxas C7520).
//  * warpgroups 1 and 2 (the consumers) grow to 240 registers. Per block
//    n + 1 they issue S_{n+1} = Q K^T and O += P_n V_n as two wgmma groups,
//    wait for S only, and mask it and exchange its row maxima while P V
//    runs on the tensor cores; then they wait for P V, release slot n,
//    rescale O and publish P_{n+1}. The two warpgroups meet on a named
//    barrier over their 256 threads (the producer never joins it): after
//    the row-max exchange, before P is overwritten (both P V reads done)
//    and after P is written.
//
// The cache rows a TMA box brings in past seq_len may hold anything (NaN in
// unused slots): the consumers zero the V columns of every token outside
// [lo, kvEnd) of a block that has one before its P V, so p = 0 never meets
// a NaN; the scores of those tokens are masked by select.
//
//===----------------------------------------------------------------------===//

#include "DecodeSM90Kernel.h"

#include "mla/GPUCodegen/MBarrier.h"
#include "mla/GPUCodegen/OnlineSoftmax.h"
#include "mla/GPUCodegen/RegisterBudget.h"
#include "mla/GPUCodegen/Tma.h"
#include "mla/GPUCodegen/Wgmma.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mla::gpu_codegen;
using namespace mla::gpu_codegen::sm90;
namespace abi = mla::gpu;

namespace {

constexpr int64_t kConsumerThreads = 256;
constexpr int64_t kBoxColumns = 64, kBoxBytes = 128;
/// Named barrier of the two consumer warpgroups (0 is __syncthreads).
constexpr int64_t kConsumerBarrier = 1;

/// `v` through an asm `mov` the compiler may not hoist or fold: values
/// derived from it are computed where it is.
Value opaqueI32(ImplicitLocOpBuilder &b, Value v) {
  return LLVM::InlineAsmOp::create(
             b, v.getType(), ValueRange{v}, "mov.b32 $0, $1;", "=r,r",
             /*has_side_effects=*/true,
             /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
             LLVM::AsmDialectAttr(), ArrayAttr())
      .getResult(0);
}

/// A consumer thread's running state: O (ntO * 4), the row maxima and the
/// partial row sums of its two rows.
struct Running {
  SmallVector<Value> o;
  Value m[2], l[2];
};

class PipelinedDecode {
public:
  PipelinedDecode(DecodeSM90Kernel &k)
      : k(k), d(k.d), stageBytes(k.Bk * k.D * 2), numBoxes(k.D / kBoxColumns),
        barrierOff(k.lay.redOff + llvm::alignTo(k.M * k.wn * 4, 128)) {}

  void emit(StringRef name);

private:
  void declare(StringRef name);
  /// Barrier 0 is "Q full"; then a "full" barrier per ring slot and box,
  /// then an "empty" barrier per slot.
  MBarrier barrier(Value index) {
    return MBarrier(d, k.sm(barrierOff, d.mul(index, d.c32(8))));
  }
  MBarrier full(Value slot, int64_t box) {
    return barrier(d.add(d.mul(slot, d.c32(numBoxes)), d.c32(1 + box)));
  }
  MBarrier empty(Value slot) {
    return barrier(d.add(slot, d.c32(1 + k.St * numBoxes)));
  }
  Value slot(Value n) { return d.remu(n, d.c32(k.St)); }
  Value phase(Value n) { return d.bitAnd(d.divu(n, d.c32(k.St)), d.c32(1)); }
  Value slotBytes(Value n) { return d.mul(slot(n), d.c32(stageBytes)); }

  void produce(Value blocks);
  /// Loads the block at cache row `row` into ring slot `slot`, each box
  /// signalling its own full barrier.
  void loadBlock(Value slot, Value row);

  void consume(Value blocks);
  void consumerSync();
  /// Issues S = Q K_j^T of block `n` (no commit), each box's k-steps once
  /// that box has landed; the Q tile is at byte `qBase`.
  WgmmaAccum issueScores(WarpgroupMma &mma, Value qBase, Value n);
  /// Issues O_j += P V_j of the block in the slot at `slotOff` (no commit).
  WgmmaAccum issuePV(WarpgroupMma &mma, ArrayRef<Value> o, Value slotOff);
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
  const int64_t stageBytes, numBoxes, barrierOff;
  Value qMap, kvMap, ctid;
};

} // namespace

void PipelinedDecode::declare(StringRef name) {
  Type g = d.ptrGlobal, i32 = d.i32;
  Type map = LLVM::LLVMPointerType::get(k.b.getContext());
  SmallVector<Type> types = {g, g, g, g, g, g, g, i32, i32, i32, d.f32};
  SmallVector<bool> byValue(types.size(), false);
  types.append({map, map});
  byValue.append({true, true});
  createGridConstantKernel(k.b, name, types, byValue,
                           abi::decodeThreadsPerCta(k.tiling));
  Block *entry = k.b.getInsertionBlock();
  k.qPtr = entry->getArgument(0), k.cache = entry->getArgument(1),
  k.blockTable = entry->getArgument(2), k.seqLens = entry->getArgument(3),
  k.bounds = entry->getArgument(4), k.pout = entry->getArgument(5),
  k.plse = entry->getArgument(6), k.batch = entry->getArgument(7),
  k.maxPages = entry->getArgument(8), k.numSplits = entry->getArgument(9);
  k.scaleLog2 =
      d.fmul(entry->getArgument(10), d.f(mla::gpu_codegen::softmax::kLog2e));
  qMap = entry->getArgument(11), kvMap = entry->getArgument(12);
}

void PipelinedDecode::loadBlock(Value slot, Value row) {
  TmaDescriptor desc(d, kvMap);
  Value slotOff = d.mul(slot, d.c32(stageBytes));
  for (int64_t c = 0; c < numBoxes; ++c) {
    MBarrier bar = full(slot, c);
    bar.arriveExpectTx(d.c32(k.Bk * kBoxBytes));
    Value box = k.sm(k.lay.kv.base + c * k.Bk * kBoxBytes, slotOff);
    desc.loadTile(box, bar, {d.c32(c * kBoxColumns), d.c32(0), row});
  }
}

void PipelinedDecode::produce(Value blocks) {
  d.ifThen(d.eq(k.tid, d.c32(0)), [&] {
    // Q rows past the request are the next request's (never stored) or
    // past the tensor (zero-filled by the TMA unit).
    MBarrier q = barrier(d.c32(0));
    q.arriveExpectTx(d.c32(k.M * k.D * 2));
    TmaDescriptor qDesc(d, qMap);
    Value qRow = d.add(d.mul(k.bb, d.c32(k.rows)), k.r0);
    for (int64_t c = 0; c < numBoxes; ++c)
      qDesc.loadTile(k.sm(k.lay.q.base + c * k.M * kBoxBytes, d.c32(0)), q,
                     {d.c32(c * kBoxColumns), d.c32(0), qRow});
    d.forLoop(d.c32(0), blocks, d.c32(1), {}, [&](Value n, ValueRange) {
      // A fresh barrier's previous phase (parity 1) counts as complete, so
      // the first round does not wait.
      empty(slot(n)).waitParity(d.bitXor(phase(n), d.c32(1)));
      auto ifOp = scf::IfOp::create(k.b, d.slt(n, k.numBlocks),
                                    /*withElseRegion=*/true);
      {
        OpBuilder::InsertionGuard guard(k.b);
        k.b.setInsertionPointToStart(ifOp.thenBlock());
        Value start = k.blockStart(n);
        Value page = d.divu(start, d.c32(k.page));
        Value phys = d.load(
            d.i32,
            d.gep(k.blockTable, d.i32, d.add(d.mul(k.bb, k.maxPages), page)),
            4);
        Value row =
            d.add(d.mul(phys, d.c32(k.page)), d.remu(start, d.c32(k.page)));
        loadBlock(slot(n), row);
        // The placeholder block of an empty piece loads nothing.
        k.b.setInsertionPointToStart(ifOp.elseBlock());
        for (int64_t c = 0; c < numBoxes; ++c)
          full(slot(n), c).arrive();
      }
      return SmallVector<Value>{};
    });
  });
}

void PipelinedDecode::consumerSync() {
  NVVM::BarrierOp::create(k.b, TypeRange{}, d.c32(kConsumerBarrier),
                          d.c32(kConsumerThreads), NVVM::BarrierReductionAttr(),
                          Value());
}

WgmmaAccum PipelinedDecode::issueScores(WarpgroupMma &mma, Value qBase,
                                        Value n) {
  const SmemTile &q = k.lay.q, &kv = k.lay.kv;
  WgmmaDescriptors descs(d, k.smem);
  // The first step does not accumulate: undefined inputs need no register
  // copies after the fence (copies of one zero register there made ptxas
  // inject a warpgroup.arrive, C7519).
  WgmmaAccum acc = WgmmaAccum::splat(k.Tw, d.poison(d.f32));
  // Token half j: rows Tw*j.. of every 64-column box of the slot.
  Value kHalf = d.add(slotBytes(n), d.mul(k.wj, d.c32(k.Tw * kBoxBytes)));
  for (int64_t kk = 0; kk < k.D / 16; ++kk) {
    // Four k-steps per box: the first waits for the box, then fences (the
    // wait wrote registers; without the fence ptxas injects one, C7519).
    if (kk % 4 == 0) {
      full(slot(n), kk / 4).waitParity(phase(n));
      mma.fence();
    }
    Value aOff = d.add(qBase, d.c32(q.kSliceOffset(kk)));
    Value bOff = d.add(kHalf, d.c32(kv.base + kv.kSliceOffset(kk)));
    acc = mma.step(acc, descs.kMajor(aOff), descs.kMajor(bOff), kk > 0,
                   /*transB=*/false);
  }
  return acc;
}

WgmmaAccum PipelinedDecode::issuePV(WarpgroupMma &mma, ArrayRef<Value> o,
                                    Value slotOff) {
  const SmemTile &p = k.lay.p, &kv = k.lay.kv;
  WgmmaDescriptors descs(d, k.smem);
  // Column half j: boxes Lw/64 * j.. of the slot; a k-step is 16 tokens.
  Value vBase = d.add(
      slotOff, d.mul(k.wj, d.c32((k.Lw / kBoxColumns) * kv.rows * kBoxBytes)));
  WgmmaAccum acc{SmallVector<Value>(o.begin(), o.end())};
  for (int64_t kk = 0; kk < k.Bk / 16; ++kk) {
    Value aOff = d.c32(p.base + p.kSliceOffset(kk));
    Value bOff = d.add(vBase, d.c32(kv.base + kk * 16 * kv.rowBytes));
    acc = mma.step(acc, descs.kMajor(aOff), descs.mnMajor(kv, bOff),
                   /*accumulate=*/true, /*transB=*/true);
  }
  return acc;
}

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
  Value start = k.blockStart(n);
  Value partial =
      d.ori(d.slt(start, k.lo), d.slt(k.kvEnd, d.add(start, d.c32(k.Bk))));
  d.ifThen(partial, [&] {
    Value zero = LLVM::ZeroOp::create(k.b, VectorType::get({4}, d.i32));
    Value slotOff = slotBytes(n);
    int64_t chunks = k.L / 8;
    forEachStrided(d, ctid, kConsumerThreads, k.Bk * chunks, [&](Value idx) {
      Value tok = d.divu(idx, d.c32(chunks));
      Value pos = d.add(start, tok);
      d.ifThen(d.ori(d.slt(pos, k.lo), d.sge(pos, k.kvEnd)), [&] {
        Value off = k.lay.kv.byteOffset(d, tok, d.remu(idx, d.c32(chunks)));
        d.store(zero, k.sm(k.lay.kv.base, d.add(slotOff, off)), 16);
      });
    });
  });
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
  ctid = d.sub(k.tid, d.c32(128));
  k.warp = d.divu(ctid, d.c32(32)), k.lane = d.remu(ctid, d.c32(32));
  k.wi = d.remu(k.warp, d.c32(4)), k.wj = d.divu(k.warp, d.c32(4));
  k.gq = d.divu(k.lane, d.c32(4)), k.tq = d.remu(k.lane, d.c32(4));
  k.computeRowLimits();
  barrier(d.c32(0)).waitParity(d.c32(0));
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
                  WgmmaAccum o = issuePV(oMma, r.o, slotBytes(n));
                  oMma.commit();
                  sMma.wait(1);
                  SmallVector<Value> packed =
                      softmaxBlock(sNext, next, r, alpha);
                  oMma.wait(0);
                  empty(slot(n)).arrive();
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
  run.o = issuePV(oMma, run.o, slotBytes(last)).regs;
  oMma.commitAndWait();
  finish(run);
}

void PipelinedDecode::emit(StringRef name) {
  declare(name);
  k.smem = dynamicSharedBase(k.b);
  k.tid = d.threadIdX();
  k.r0 = d.mul(d.blockIdX(), d.c32(k.M));
  k.split = d.blockIdY(), k.bb = d.blockIdZ();
  k.computeQueryRows();
  k.computePiece();
  // At least one block (a fully masked one for an empty piece).
  Value blocks = d.maxsi(k.numBlocks, d.c32(1));
  d.ifThen(d.eq(k.tid, d.c32(0)), [&] {
    barrier(d.c32(0)).init(1);
    for (int64_t st = 0; st < k.St; ++st) {
      for (int64_t c = 0; c < numBoxes; ++c)
        full(d.c32(st), c).init(1);
      empty(d.c32(st)).init(kConsumerThreads);
    }
  });
  d.barrier();
  splitWarpgroupRoles(
      d, k.tid, [&] { produce(blocks); }, [&] { consume(blocks); });
  LLVM::ReturnOp::create(k.b, ValueRange{});
}

void mla::gpu_codegen::sm90::emitDecodeSM90Pipelined(
    OpBuilder &builder, Location loc, StringRef name,
    const abi::DecodeShape &shape, const abi::DecodeTiling &tiling) {
  ImplicitLocOpBuilder b(loc, builder);
  DecodeSM90Kernel k(b, shape, tiling);
  PipelinedDecode(k).emit(name);
}
