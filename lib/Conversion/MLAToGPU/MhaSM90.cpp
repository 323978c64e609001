//===- MhaSM90.cpp - FlashAttention-3-structured mla.mha for sm_90a -------===//
//
// The tensor-core build of `mla_mha` (contract in mla/Contract/PrefillABI.h).
// One CTA owns one head and a 128-row tile of one request's queries:
//
//  * warpgroup 0 (the producer) shrinks to 24 registers
//    (splitWarpgroupRoles); one thread loads
//    the Q tile and then, block by block, the K and V blocks of 128 keys by
//    TMA into rings of kMhaStages slots. K and V slots each have a "full"
//    and an "empty" mbarrier, so QK^T starts before V has landed and a K
//    slot is refilled as soon as both consumers' QK^T has read it.
//  * warpgroups 1 and 2 (the consumers) grow to 240 registers and own 64
//    query rows each: S = Q K^T by wgmma from the swizzled tiles, the masks
//    (bottom-right causal, key count) only on the blocks that need them, a
//    base-2 online softmax in registers, and O += P V with P converted in
//    registers to the A operand of a register-A wgmma.
//
// The consumers overlap as FlashAttention-3 does. Within a warpgroup, block
// n's QK^T and block n-1's P V are issued together and the softmax of block
// n runs while P V is still in flight (o is rescaled after it lands).
// Between the two warpgroups, a ping-pong of named barrier turns
// (WarpgroupPingPong) has one issue its GEMMs while the other computes its
// softmax.
//
// Rows that see no key keep m = -inf and l = 0 and store out 0, lse -inf.
//
//===----------------------------------------------------------------------===//

#include "MhaSM90.h"

#include "mla/GPUCodegen/DeviceBuilder.h"
#include "mla/GPUCodegen/MBarrier.h"
#include "mla/GPUCodegen/OnlineSoftmax.h"
#include "mla/GPUCodegen/RegisterBudget.h"
#include "mla/GPUCodegen/SmemTile.h"
#include "mla/GPUCodegen/Tma.h"
#include "mla/GPUCodegen/WarpgroupPingPong.h"
#include "mla/GPUCodegen/Wgmma.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include <optional>

using namespace mlir;
using namespace mla::gpu_codegen;
namespace abi = mla::gpu;

namespace {

constexpr int64_t kM = abi::kMhaTileM, kN = abi::kMhaTileN,
                  kStages = abi::kMhaStages;
constexpr int64_t kBoxBytes = 128; // one swizzled row of kMhaBoxColumns
constexpr int64_t kConsumerThreads = 256;

/// What this CTA computes: its request's offsets and lengths, its first
/// query row m0 (within the request), and the key blocks it walks.
struct Work {
  mlir::Value found, qStart, qLen, kStart, kLen, m0;
  /// Key blocks to walk, and the keys every row of the tile sees (blocks
  /// that end past it need the mask).
  mlir::Value numBlocks, unmaskedKeys;
};

/// The running state of a consumer thread: its n/2 output accumulators;
/// for its two rows (l/4 and l/4 + 8 of its warp's 16) the base-2 max and
/// the thread's partial sum; and the previous block's P as register-A
/// fragments (its P V is issued one iteration later).
struct RowState {
  WgmmaAccum o;
  std::array<mlir::Value, 2> m, l;
  SmallVector<Value> p;

  SmallVector<Value> flatten() const {
    SmallVector<Value> v(o.regs);
    v.append({m[0], m[1], l[0], l[1]});
    v.append(p);
    return v;
  }
  static RowState unflatten(ValueRange v, int64_t numO) {
    RowState s;
    ValueRange regs = v.take_front(numO);
    s.o.regs.assign(regs.begin(), regs.end());
    s.m = {v[numO], v[numO + 1]};
    s.l = {v[numO + 2], v[numO + 3]};
    ValueRange p = v.drop_front(numO + 4);
    s.p.assign(p.begin(), p.end());
    return s;
  }
};

class MhaSM90Kernel {
public:
  MhaSM90Kernel(ImplicitLocOpBuilder &b, const abi::MhaShape &shape, Type elem)
      : b(b), d(b), s(shape), elem(elem), lay(abi::mhaSmemLayout(shape)),
        qTile(SmemTile::box128B(lay.q, kM)),
        kTile(SmemTile::box128B(lay.k, kN)),
        vTile(SmemTile::box128B(lay.v, kN)) {}

  void emit(StringRef name);

private:
  void declare(StringRef name);
  Work locate();
  /// Barrier `index` (0 = Q full, then per stage K full, V full, K empty,
  /// V empty).
  MBarrier barrier(Value index);
  MBarrier qFull() { return barrier(d.c32(0)); }
  MBarrier kFull(Value stage) { return ring(0, stage); }
  MBarrier vFull(Value stage) { return ring(1, stage); }
  MBarrier kEmpty(Value stage) { return ring(2, stage); }
  MBarrier vEmpty(Value stage) { return ring(3, stage); }
  MBarrier ring(int64_t kind, Value stage) {
    return barrier(d.add(stage, d.c32(1 + kind * kStages)));
  }
  void initBarriers();

  void produce(const Work &w);
  /// Loads the `width`-column rows [row, row + rows) of one head through
  /// `map` into consecutive 64-column boxes at `dst` (byte offset, i32).
  void loadBoxes(Value map, Value dst, MBarrier bar, Value row, int64_t width,
                 int64_t rows);

  void consume(const Work &w);
  /// Block 0: S, then its softmax (nothing to rescale yet).
  RowState firstBlock(const Work &w, const RowState &init);
  /// Block n >= 1: S_n and P_{n-1} V_{n-1} issued together, S_n's softmax
  /// while P V runs, then o rescaled.
  RowState nextBlock(const Work &w, Value n, const RowState &state);
  /// The last block's P V.
  WgmmaAccum lastPV(const Work &w, const RowState &state);
  /// Issues S = Q K^T for the block in K slot `stage` (no commit).
  WgmmaAccum issueScores(WarpgroupMma &mma, Value stage);
  /// Issues o += P V for the block in V slot `stage` (no commit).
  WgmmaAccum issuePV(WarpgroupMma &mma, const WgmmaAccum &o, ArrayRef<Value> p,
                     Value stage);
  WgmmaAccum mask(const Work &w, Value block, const WgmmaAccum &scores);
  /// Folds the block's scores into (m, l) and replaces p with the block's
  /// probabilities; returns each row's factor for o and whether either
  /// row's max moved (it moves only by more than softmax::kLazySlack:
  /// conditional rescaling, as in FlashAttention-4).
  struct Fold {
    Value alpha[2];
    Value moved;
  };
  Fold softmaxFold(const WgmmaAccum &scores, RowState &state);
  void store(const Work &w, const RowState &state);
  Value phase(Value n) { return d.bitAnd(d.divu(n, d.c32(kStages)), d.c32(1)); }
  Value slot(Value n) { return d.remu(n, d.c32(kStages)); }

  /// Row (within the request) of this thread's half `h`, i32.
  Value row(const Work &w, int64_t h) {
    return d.add(w.m0, d.add(rowInTile, d.c32(8 * h)));
  }
  /// Keys [0, limit) row `r` sees.
  Value keyLimit(const Work &w, Value r);

  ImplicitLocOpBuilder &b;
  DeviceBuilder d;
  const abi::MhaShape &s;
  Type elem;
  abi::MhaSmemLayout lay;
  SmemTile qTile, kTile, vTile;

  Value qMap, kMap, vMap, cuQ, cuK, out, lse, batch, tokens;
  Value smem, tid, head;
  // Consumers only: warpgroup (0/1), lane, row l/4 of the warp's 16 in the
  // 128-row tile, and the turns of the two warpgroups.
  Value wg, lane, rowInTile;
  std::optional<WarpgroupPingPong> turns;
};

} // namespace

void MhaSM90Kernel::declare(StringRef name) {
  Type g = d.ptrGlobal;
  Type p = LLVM::LLVMPointerType::get(b.getContext());
  createGridConstantKernel(
      b, name, {p, p, p, g, g, g, g, d.i32, d.i32},
      {true, true, true, false, false, false, false, false, false},
      abi::kMhaWgmmaThreads);
  Block *entry = b.getInsertionBlock();
  qMap = entry->getArgument(0), kMap = entry->getArgument(1),
  vMap = entry->getArgument(2), cuQ = entry->getArgument(3),
  cuK = entry->getArgument(4), out = entry->getArgument(5),
  lse = entry->getArgument(6), batch = entry->getArgument(7),
  tokens = entry->getArgument(8);
}

Work MhaSM90Kernel::locate() {
  auto at = [&](Value offsets, Value i) {
    return d.load(d.i32, d.gep(offsets, d.i32, i), 4);
  };
  // Segments: 0 is the rows before cu_seqlens_q[0], 1..B the requests,
  // B + 1 the rows from cu_seqlens_q[B] to T. The two gaps see no key, so
  // their tiles only store out 0 and lse -inf.
  Value last = d.add(batch, d.c32(1));
  auto clampB = [&](Value i) { return d.minsi(d.maxsi(i, d.c32(0)), batch); };
  auto segStart = [&](Value sg) {
    return d.select(d.eq(sg, d.c32(0)), d.c32(0),
                    at(cuQ, clampB(d.sub(sg, d.c32(1)))));
  };
  auto segEnd = [&](Value sg) {
    return d.select(d.eq(sg, last), tokens, at(cuQ, clampB(sg)));
  };
  // Tile x of the grid is tile `rem` of the first segment whose tile count
  // exceeds what the segments before it used; each segment's tiles go
  // last-first, so the longest causal tiles start earliest.
  SmallVector<Value> init = {d.blockIdX(), d.c32(0), d.c32(0), d.cbool(false)};
  SmallVector<Value> r = d.forLoop(
      d.c32(0), d.add(last, d.c32(1)), d.c32(1), init,
      [&](Value sg, ValueRange c) {
        Value len = d.sub(segEnd(sg), segStart(sg));
        Value count = d.divu(d.add(len, d.c32(kM - 1)), d.c32(kM));
        Value hit = d.andi(d.eq(c[3], d.cbool(false)), d.slt(c[0], count));
        Value found = d.ori(c[3], hit);
        return SmallVector<Value>{
            d.select(found, c[0], d.sub(c[0], count)), d.select(hit, sg, c[1]),
            d.select(hit, d.sub(d.sub(count, d.c32(1)), c[0]), c[2]), found};
      });
  Work w;
  w.found = r[3];
  Value sg = r[1];
  w.qStart = segStart(sg);
  w.qLen = d.sub(segEnd(sg), w.qStart);
  Value isRequest = d.andi(d.sge(sg, d.c32(1)), d.sle(sg, batch));
  Value req = d.minsi(d.maxsi(d.sub(sg, d.c32(1)), d.c32(0)),
                      d.maxsi(d.sub(batch, d.c32(1)), d.c32(0)));
  w.kStart = at(cuK, req);
  w.kLen = d.select(isRequest,
                    d.sub(at(cuK, clampB(d.add(req, d.c32(1)))), w.kStart),
                    d.c32(0));
  w.m0 = d.mul(r[2], d.c32(kM));
  Value keys = w.kLen;
  w.unmaskedKeys = w.kLen;
  if (s.causal) {
    // Bottom-right: row i sees keys [0, k_len - q_len + i].
    Value shift = d.sub(w.kLen, w.qLen);
    Value lastRow = d.minsi(d.add(w.m0, d.c32(kM)), w.qLen);
    keys = d.minsi(d.maxsi(d.add(shift, lastRow), d.c32(0)), w.kLen);
    w.unmaskedKeys =
        d.minsi(d.maxsi(d.add(shift, d.add(w.m0, d.c32(1))), d.c32(0)), w.kLen);
  }
  // At least one block, fully masked when the tile sees no key: the
  // consumers' pipeline then has no branch around its wgmmas (ptxas
  // serialises every wgmma of a kernel that issues some on a divergent
  // path, C7520).
  w.numBlocks =
      d.maxsi(d.divu(d.add(keys, d.c32(kN - 1)), d.c32(kN)), d.c32(1));
  return w;
}

MBarrier MhaSM90Kernel::barrier(Value index) {
  Value offset = d.add(d.c32(lay.barriers), d.mul(index, d.c32(8)));
  return MBarrier(d, d.gepBytes(smem, offset));
}

void MhaSM90Kernel::initBarriers() {
  d.ifThen(d.eq(tid, d.c32(0)), [&] {
    qFull().init(1);
    for (int64_t st = 0; st < kStages; ++st) {
      kFull(d.c32(st)).init(1);
      vFull(d.c32(st)).init(1);
      kEmpty(d.c32(st)).init(kConsumerThreads);
      vEmpty(d.c32(st)).init(kConsumerThreads);
    }
  });
  d.barrier();
}

void MhaSM90Kernel::loadBoxes(Value map, Value dst, MBarrier bar, Value row,
                              int64_t width, int64_t rows) {
  TmaDescriptor desc(d, map);
  for (int64_t c = 0; c < width / abi::kMhaBoxColumns; ++c) {
    Value box = d.gepBytes(smem, d.add(dst, d.c32(c * rows * kBoxBytes)));
    desc.loadTile(box, bar, {d.c32(c * abi::kMhaBoxColumns), head, row});
  }
}

void MhaSM90Kernel::produce(const Work &w) {
  d.ifThen(d.eq(tid, d.c32(0)), [&] {
    MBarrier q = qFull();
    q.arriveExpectTx(d.c32(kM * s.qkDim * 2));
    loadBoxes(qMap, d.c32(lay.q), q, d.add(w.qStart, w.m0), s.qkDim, kM);
    d.forLoop(d.c32(0), w.numBlocks, d.c32(1), {}, [&](Value n, ValueRange) {
      Value stage = d.remu(n, d.c32(kStages));
      Value round = d.divu(n, d.c32(kStages));
      // A fresh barrier's "previous phase" (parity 1) counts as
      // complete, so the first round does not wait.
      Value free = d.bitXor(d.bitAnd(round, d.c32(1)), d.c32(1));
      Value key = d.add(w.kStart, d.mul(n, d.c32(kN)));
      MBarrier kb = kFull(stage), vb = vFull(stage);
      kEmpty(stage).waitParity(free);
      kb.arriveExpectTx(d.c32(lay.kStageBytes));
      loadBoxes(kMap, d.add(d.c32(lay.k), d.mul(stage, d.c32(lay.kStageBytes))),
                kb, key, s.qkDim, kN);
      vEmpty(stage).waitParity(free);
      vb.arriveExpectTx(d.c32(lay.vStageBytes));
      loadBoxes(vMap, d.add(d.c32(lay.v), d.mul(stage, d.c32(lay.vStageBytes))),
                vb, key, s.vDim, kN);
      return SmallVector<Value>{};
    });
  });
}

WgmmaAccum MhaSM90Kernel::issueScores(WarpgroupMma &mma, Value stage) {
  WgmmaDescriptors descs(d, smem);
  WgmmaAccum acc = WgmmaAccum::splat(kN, d.f(0.0f));
  Value qRows = d.mul(wg, d.c32(64 * kBoxBytes));
  Value kSlot = d.mul(stage, d.c32(lay.kStageBytes));
  for (int64_t kk = 0; kk < s.qkDim / 16; ++kk) {
    Value a = descs.kMajor(qRows, qTile.base + qTile.kSliceOffset(kk));
    Value bk = descs.kMajor(kSlot, kTile.base + kTile.kSliceOffset(kk));
    acc = mma.step(acc, a, bk, kk > 0, /*transB=*/false);
  }
  return acc;
}

WgmmaAccum MhaSM90Kernel::issuePV(WarpgroupMma &mma, const WgmmaAccum &o,
                                  ArrayRef<Value> p, Value stage) {
  WgmmaDescriptors descs(d, smem);
  Value vSlot = d.mul(stage, d.c32(lay.vStageBytes));
  WgmmaAccum acc = o;
  for (int64_t kk = 0; kk < kN / 16; ++kk) {
    // Keys 16kk.. are rows 16kk.. of every box: V read MN-major.
    Value bv = descs.mnMajor(vTile, vSlot, vTile.base + kk * 16 * kBoxBytes);
    acc = mma.stepRegA(acc, p.slice(4 * kk, 4), bv,
                       /*accumulate=*/true, /*transB=*/true);
  }
  return acc;
}

Value MhaSM90Kernel::keyLimit(const Work &w, Value r) {
  if (!s.causal)
    return w.kLen;
  return d.minsi(d.add(d.sub(w.kLen, w.qLen), d.add(r, d.c32(1))), w.kLen);
}

WgmmaAccum MhaSM90Kernel::mask(const Work &w, Value block,
                               const WgmmaAccum &sc) {
  Value blockEnd = d.mul(d.add(block, d.c32(1)), d.c32(kN));
  Value needed = d.slt(w.unmaskedKeys, blockEnd);
  SmallVector<Type> types(sc.regs.size(), d.f32);
  auto ifOp = scf::IfOp::create(b, types, needed, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    Value col0 = d.add(d.mul(block, d.c32(kN)),
                       d.mul(d.bitAnd(lane, d.c32(3)), d.c32(2)));
    std::array<Value, 2> limit = {keyLimit(w, row(w, 0)),
                                  keyLimit(w, row(w, 1))};
    SmallVector<Value> masked;
    for (auto [i, v] : llvm::enumerate(sc.regs)) {
      int64_t j = i / 4, e = i % 4;
      Value col = d.add(col0, d.c32(8 * j + (e & 1)));
      masked.push_back(
          d.select(d.slt(col, limit[(e >> 1) & 1]), v, d.negInf()));
    }
    scf::YieldOp::create(b, masked);
    b.setInsertionPointToStart(ifOp.elseBlock());
    scf::YieldOp::create(b, sc.regs);
  }
  return {SmallVector<Value>(ifOp.getResults())};
}

MhaSM90Kernel::Fold MhaSM90Kernel::softmaxFold(const WgmmaAccum &sc,
                                               RowState &st) {
  float scaleLog2 = s.scale * softmax::kLog2e;
  WgmmaAccum p;
  p.regs.resize(sc.regs.size());
  Fold fold;
  Value mOld[2] = {st.m[0], st.m[1]};
  Value scale = d.f(scaleLog2);
  for (int64_t h = 0; h < 2; ++h) {
    SmallVector<Value> row;
    for (size_t i = 0; i < sc.regs.size(); ++i)
      if (int64_t((i % 4) >> 1) == h)
        row.push_back(sc.regs[i]);
    Value rowMax = softmax::quadMax(
        d, softmax::treeReduce(d, row, softmax::Combiner::Max));
    softmax::Rescale r =
        softmax::rescaleTo(d, st.m[h], st.l[h],
                           softmax::lazyMax(d, st.m[h], d.fmul(rowMax, scale),
                                            softmax::kLazySlack));
    SmallVector<Value> probs;
    for (size_t i = 0; i < sc.regs.size(); ++i) {
      if (int64_t((i % 4) >> 1) != h)
        continue;
      p.regs[i] = softmax::scaledProbability(d, sc.regs[i], scale, r.mUse);
      probs.push_back(p.regs[i]);
    }
    st.m[h] = r.mNew;
    st.l[h] =
        d.fadd(r.l, softmax::treeReduce(d, probs, softmax::Combiner::Sum));
    fold.alpha[h] = r.alpha;
  }
  fold.moved = softmax::maxMoved(d, mOld, st.m.data());
  st.p.clear();
  for (int64_t kk = 0; kk < kN / 16; ++kk)
    llvm::append_range(st.p, p.aFragments(d, kk, elem));
  return fold;
}

RowState MhaSM90Kernel::firstBlock(const Work &w, const RowState &init) {
  Value zero = d.c32(0);
  kFull(zero).waitParity(zero);
  turns->waitTurn();
  WarpgroupMma mma(d, kN, elem.isBF16());
  mma.fence();
  WgmmaAccum sc = issueScores(mma, zero);
  mma.commit();
  turns->passTurn();
  mma.wait(0);
  kEmpty(zero).arrive();
  RowState st = init;
  softmaxFold(mask(w, zero, sc), st);
  return st;
}

RowState MhaSM90Kernel::nextBlock(const Work &w, Value n,
                                  const RowState &state) {
  Value prev = d.sub(n, d.c32(1));
  kFull(slot(n)).waitParity(phase(n));
  turns->waitTurn();
  WarpgroupMma sMma(d, kN, elem.isBF16()), oMma(d, s.vDim, elem.isBF16());
  sMma.fence();
  WgmmaAccum sc = issueScores(sMma, slot(n));
  sMma.commit();
  vFull(slot(prev)).waitParity(phase(prev));
  RowState st = state;
  // The descriptor arithmetic since the last fence wrote registers.
  oMma.fence();
  st.o = issuePV(oMma, state.o, state.p, slot(prev));
  oMma.commit();
  turns->passTurn();
  sMma.wait(1);
  kEmpty(slot(n)).arrive();
  Fold fold = softmaxFold(mask(w, n, sc), st);
  oMma.wait(0);
  vEmpty(slot(prev)).arrive();
  softmax::rescaleIf(d, st.o.regs, fold.alpha, fold.moved);
  return st;
}

WgmmaAccum MhaSM90Kernel::lastPV(const Work &w, const RowState &st) {
  Value last = d.sub(w.numBlocks, d.c32(1));
  vFull(slot(last)).waitParity(phase(last));
  WarpgroupMma mma(d, s.vDim, elem.isBF16());
  mma.fence();
  WgmmaAccum o = issuePV(mma, st.o, st.p, slot(last));
  mma.commitAndWait();
  vEmpty(slot(last)).arrive();
  return o;
}

void MhaSM90Kernel::store(const Work &w, const RowState &st) {
  Value quad = d.bitAnd(lane, d.c32(3));
  for (int64_t h = 0; h < 2; ++h) {
    Value l = softmax::quadSum(d, st.l[h]);
    softmax::Normaliser norm = softmax::normaliser(d, l);
    Value r = row(w, h);
    d.ifThen(d.slt(r, w.qLen), [&] {
      Value t = d.zext64(d.add(w.qStart, r));
      Value rowBase = d.mul(d.add(d.mul(t, d.c64(s.numHeads)), d.zext64(head)),
                            d.c64(s.vDim));
      for (int64_t j = 0; j < s.vDim / 8; ++j) {
        Value lo = d.fmul(st.o.regs[4 * j + 2 * h], norm.inv);
        Value hi = d.fmul(st.o.regs[4 * j + 2 * h + 1], norm.inv);
        Value col = d.add(d.c32(8 * j), d.mul(quad, d.c32(2)));
        Value at = d.gep(out, elem, d.add(rowBase, d.zext64(col)));
        d.store(d.pack2(lo, hi, elem), at, 4);
      }
      d.ifThen(d.eq(quad, d.c32(0)), [&] {
        Value idx = d.add(d.mul(d.zext64(head), d.zext64(tokens)), t);
        d.store(softmax::naturalLse(d, st.m[h], l, norm.nonEmpty),
                d.gep(lse, d.f32, idx), 4);
      });
    });
  }
}

void MhaSM90Kernel::consume(const Work &w) {
  Value ctid = d.sub(tid, d.c32(128));
  wg = d.divu(ctid, d.c32(128));
  lane = d.bitAnd(tid, d.c32(31));
  Value warp = d.bitAnd(d.divu(ctid, d.c32(32)), d.c32(3));
  rowInTile = d.add(d.mul(wg, d.c32(64)),
                    d.add(d.mul(warp, d.c32(16)), d.divu(lane, d.c32(4))));
  turns.emplace(d, wg, /*firstId=*/1);
  qFull().waitParity(d.c32(0));
  RowState init;
  init.o = WgmmaAccum::splat(s.vDim, d.f(0.0f));
  init.m = {d.negInf(), d.negInf()};
  init.l = {d.f(0.0f), d.f(0.0f)};
  init.p.assign(kN / 16 * 4, d.c32(0));
  int64_t numO = s.vDim / 2;
  turns->start();
  RowState st = firstBlock(w, init);
  st = RowState::unflatten(
      d.forLoop(d.c32(1), w.numBlocks, d.c32(1), st.flatten(),
                [&](Value n, ValueRange carried) {
                  return nextBlock(w, n, RowState::unflatten(carried, numO))
                      .flatten();
                }),
      numO);
  st.o = lastPV(w, st);
  // Warpgroup 1 passed one turn more than warpgroup 0 waited for.
  d.ifThen(d.eq(wg, d.c32(0)), [&] { turns->waitTurn(); });
  store(w, st);
}

void MhaSM90Kernel::emit(StringRef name) {
  declare(name);
  smem = dynamicSharedBase(b);
  tid = d.threadIdX();
  head = d.blockIdY();
  Work w = locate();
  // found is uniform over the CTA: spare CTAs leave before any barrier.
  d.ifThen(w.found, [&] {
    initBarriers();
    splitWarpgroupRoles(d, tid, [&] { produce(w); }, [&] { consume(w); });
  });
  LLVM::ReturnOp::create(b, ValueRange{});
}

void mla::gpu_codegen::sm90::emitMhaSM90(ImplicitLocOpBuilder &b,
                                         StringRef name,
                                         const abi::MhaShape &shape,
                                         Type elem) {
  assert((elem.isBF16() || elem.isF16()) && "wgmma takes bf16 or f16");
  MhaSM90Kernel(b, shape, elem).emit(name);
}
