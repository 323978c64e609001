//===- MhaSM90.cpp - FlashAttention-3-structured mla.mha for sm_90a -------===//
//
// The tensor-core build of `mla_mha` (contract in mla/Contract/PrefillABI.h).
// One CTA owns one head and a 128-row tile of one request's queries:
//
//  * warpgroup 0 (the producer) shrinks to 24 registers; one thread loads
//    the Q tile and then, block by block, the K and V blocks of 128 keys by
//    TMA into a ring of kMhaStages slots. Each slot has a "K full", a "V
//    full" and an "empty" mbarrier, so QK^T starts before V has landed and
//    a slot is refilled as soon as both consumers are done with it.
//  * warpgroups 1 and 2 (the consumers) grow to 240 registers and own 64
//    query rows each: S = Q K^T by wgmma from the swizzled tiles, the masks
//    (bottom-right causal, key count) only on the blocks that need them, a
//    base-2 online softmax in registers, and O += P V with P converted in
//    registers to the A operand of a register-A wgmma.
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
#include "mla/GPUCodegen/Wgmma.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mla::gpu_codegen;
namespace abi = mla::gpu;

namespace {

constexpr int64_t kM = abi::kMhaTileM, kN = abi::kMhaTileN,
                  kStages = abi::kMhaStages;
constexpr int64_t kBoxBytes = 128; // one swizzled row of kMhaBoxColumns
constexpr int64_t kProducerRegisters = 24, kConsumerRegisters = 240;
constexpr int64_t kConsumerThreads = 256;

/// What this CTA computes: its request's offsets and lengths, its first
/// query row m0 (within the request), and the key blocks it walks.
struct Work {
  mlir::Value found, qStart, qLen, kStart, kLen, m0;
  /// Key blocks to walk, and the keys every row of the tile sees (blocks
  /// that end past it need the mask).
  mlir::Value numBlocks, unmaskedKeys;
};

/// The running state of a consumer thread: its n/2 output accumulators and,
/// for its two rows (l/4 and l/4 + 8 of its warp's 16), the base-2 max and
/// the thread's partial sum.
struct RowState {
  WgmmaAccum o;
  std::array<mlir::Value, 2> m, l;

  SmallVector<Value> flatten() const {
    SmallVector<Value> v(o.regs);
    v.append({m[0], m[1], l[0], l[1]});
    return v;
  }
  static RowState unflatten(ValueRange v) {
    RowState s;
    ValueRange regs = v.drop_back(4);
    s.o.regs.assign(regs.begin(), regs.end());
    s.m = {v[v.size() - 4], v[v.size() - 3]};
    s.l = {v[v.size() - 2], v[v.size() - 1]};
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
  /// Barrier `index` (0 = Q full, then K full, V full and empty per stage).
  MBarrier barrier(Value index);
  MBarrier qFull() { return barrier(d.c32(0)); }
  MBarrier kFull(Value stage) { return barrier(d.add(stage, d.c32(1))); }
  MBarrier vFull(Value stage) {
    return barrier(d.add(stage, d.c32(1 + kStages)));
  }
  MBarrier empty(Value stage) {
    return barrier(d.add(stage, d.c32(1 + 2 * kStages)));
  }
  void initBarriers();

  void produce(const Work &w);
  /// Loads the `width`-column rows [row, row + rows) of one head through
  /// `map` into consecutive 64-column boxes at `dst` (byte offset, i32).
  void loadBoxes(Value map, Value dst, MBarrier bar, Value row, int64_t width,
                 int64_t rows);

  void consume(const Work &w);
  RowState step(const Work &w, Value block, const RowState &state);
  WgmmaAccum scores(Value stage);
  WgmmaAccum mask(const Work &w, Value block, const WgmmaAccum &scores);
  /// Folds the block's scores into the state; returns P (unnormalised
  /// probabilities, in the accumulator layout) and rescales o in place.
  WgmmaAccum softmaxStep(const WgmmaAccum &scores, RowState &state);
  void accumulatePV(RowState &state, const WgmmaAccum &p, Value stage);
  void store(const Work &w, const RowState &state);

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
  // Consumers only: warpgroup (0/1), lane, and row l/4 of the warp's 16 in
  // the 128-row tile.
  Value wg, lane, rowInTile;
};

} // namespace

void MhaSM90Kernel::declare(StringRef name) {
  Type g = d.ptrGlobal;
  Type p = LLVM::LLVMPointerType::get(b.getContext());
  createGridConstantKernel(b, name, {p, p, p, g, g, g, g, d.i32, d.i32},
                           {true, true, true, false, false, false, false,
                            false, false},
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
  // Tile y of the grid is tile `rem` of the first segment whose tile count
  // exceeds what the segments before it used; each segment's tiles go
  // last-first, so the longest causal tiles start earliest.
  SmallVector<Value> init = {d.blockIdY(), d.c32(0), d.c32(0),
                             d.cbool(false)};
  SmallVector<Value> r = d.forLoop(
      d.c32(0), d.add(last, d.c32(1)), d.c32(1), init,
      [&](Value sg, ValueRange c) {
        Value len = d.sub(segEnd(sg), segStart(sg));
        Value count = d.divu(d.add(len, d.c32(kM - 1)), d.c32(kM));
        Value hit = d.andi(d.eq(c[3], d.cbool(false)), d.slt(c[0], count));
        Value found = d.ori(c[3], hit);
        return SmallVector<Value>{
            d.select(found, c[0], d.sub(c[0], count)),
            d.select(hit, sg, c[1]),
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
    w.unmaskedKeys = d.minsi(
        d.maxsi(d.add(shift, d.add(w.m0, d.c32(1))), d.c32(0)), w.kLen);
  }
  w.numBlocks = d.divu(d.add(keys, d.c32(kN - 1)), d.c32(kN));
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
      empty(d.c32(st)).init(kConsumerThreads);
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
  decreaseRegisters(d, kProducerRegisters);
  d.ifThen(d.eq(tid, d.c32(0)), [&] {
    MBarrier q = qFull();
    q.arriveExpectTx(d.c32(kM * s.qkDim * 2));
    loadBoxes(qMap, d.c32(lay.q), q, d.add(w.qStart, w.m0), s.qkDim, kM);
    d.forLoop(d.c32(0), w.numBlocks, d.c32(1), {},
              [&](Value n, ValueRange) {
                Value stage = d.remu(n, d.c32(kStages));
                Value round = d.divu(n, d.c32(kStages));
                // A fresh barrier's "previous phase" (parity 1) counts as
                // complete, so the first round does not wait.
                empty(stage).waitParity(
                    d.bitXor(d.bitAnd(round, d.c32(1)), d.c32(1)));
                Value key = d.add(w.kStart, d.mul(n, d.c32(kN)));
                MBarrier kb = kFull(stage), vb = vFull(stage);
                kb.arriveExpectTx(d.c32(lay.kStageBytes));
                loadBoxes(kMap,
                          d.add(d.c32(lay.k),
                                d.mul(stage, d.c32(lay.kStageBytes))),
                          kb, key, s.qkDim, kN);
                vb.arriveExpectTx(d.c32(lay.vStageBytes));
                loadBoxes(vMap,
                          d.add(d.c32(lay.v),
                                d.mul(stage, d.c32(lay.vStageBytes))),
                          vb, key, s.vDim, kN);
                return SmallVector<Value>{};
              });
  });
}

WgmmaAccum MhaSM90Kernel::scores(Value stage) {
  WgmmaDescriptors descs(d, smem);
  WarpgroupMma mma(d, kN, elem.isBF16());
  WgmmaAccum acc = WgmmaAccum::splat(kN, d.f(0.0f));
  Value qRows = d.mul(wg, d.c32(64 * kBoxBytes));
  Value kSlot = d.mul(stage, d.c32(lay.kStageBytes));
  mma.fence();
  for (int64_t kk = 0; kk < s.qkDim / 16; ++kk) {
    Value a = d.add(qRows, d.c32(qTile.base + qTile.kSliceOffset(kk)));
    Value bk = d.add(kSlot, d.c32(kTile.base + kTile.kSliceOffset(kk)));
    acc = mma.step(acc, descs.kMajor(a), descs.kMajor(bk), kk > 0,
                   /*transB=*/false);
  }
  mma.commitAndWait();
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

WgmmaAccum MhaSM90Kernel::softmaxStep(const WgmmaAccum &sc, RowState &st) {
  float scaleLog2 = s.scale * softmax::kLog2e;
  WgmmaAccum p;
  p.regs.resize(sc.regs.size());
  for (int64_t h = 0; h < 2; ++h) {
    Value rowMax = d.negInf();
    for (size_t i = 0; i < sc.regs.size(); ++i)
      if (((i % 4) >> 1) == static_cast<size_t>(h))
        rowMax = softmax::max(d, rowMax, sc.regs[i]);
    rowMax = softmax::quadMax(d, rowMax);
    softmax::Rescale r = softmax::rescale(
        d, st.m[h], st.l[h], d.fmul(rowMax, d.f(scaleLog2)));
    Value sum = r.l;
    for (size_t i = 0; i < sc.regs.size(); ++i) {
      if (((i % 4) >> 1) != static_cast<size_t>(h))
        continue;
      p.regs[i] = softmax::probability(
          d, d.fmul(sc.regs[i], d.f(scaleLog2)), r.mUse);
      sum = d.fadd(sum, p.regs[i]);
    }
    for (size_t i = 0; i < st.o.regs.size(); ++i)
      if (((i % 4) >> 1) == static_cast<size_t>(h))
        st.o.regs[i] = d.fmul(st.o.regs[i], r.alpha);
    st.m[h] = r.mNew;
    st.l[h] = sum;
  }
  return p;
}

void MhaSM90Kernel::accumulatePV(RowState &st, const WgmmaAccum &p,
                                 Value stage) {
  WgmmaDescriptors descs(d, smem);
  WarpgroupMma mma(d, s.vDim, elem.isBF16());
  Value vSlot = d.add(d.mul(stage, d.c32(lay.vStageBytes)), d.c32(vTile.base));
  // Every fragment is converted before the fence: a register write between
  // two wgmmas makes ptxas serialise them (C7519).
  SmallVector<SmallVector<Value, 4>> a;
  SmallVector<Value> descB;
  for (int64_t kk = 0; kk < kN / 16; ++kk) {
    a.push_back(p.aFragments(d, kk, elem));
    // Keys 16kk.. are rows 16kk.. of every box: V read MN-major.
    descB.push_back(
        descs.mnMajor(vTile, d.add(vSlot, d.c32(kk * 16 * kBoxBytes))));
  }
  mma.fence();
  for (int64_t kk = 0; kk < kN / 16; ++kk)
    st.o = mma.stepRegA(st.o, a[kk], descB[kk], /*accumulate=*/true,
                        /*transB=*/true);
  mma.commitAndWait();
}

RowState MhaSM90Kernel::step(const Work &w, Value n, const RowState &state) {
  Value stage = d.remu(n, d.c32(kStages));
  Value parity = d.bitAnd(d.divu(n, d.c32(kStages)), d.c32(1));
  kFull(stage).waitParity(parity);
  WgmmaAccum sc = mask(w, n, scores(stage));
  RowState next = state;
  WgmmaAccum p = softmaxStep(sc, next);
  vFull(stage).waitParity(parity);
  accumulatePV(next, p, stage);
  empty(stage).arrive();
  return next;
}

void MhaSM90Kernel::store(const Work &w, const RowState &st) {
  Value quad = d.bitAnd(lane, d.c32(3));
  for (int64_t h = 0; h < 2; ++h) {
    Value l = softmax::quadSum(d, st.l[h]);
    softmax::Normaliser norm = softmax::normaliser(d, l);
    Value r = row(w, h);
    d.ifThen(d.slt(r, w.qLen), [&] {
      Value t = d.zext64(d.add(w.qStart, r));
      Value rowBase = d.mul(
          d.add(d.mul(t, d.c64(s.numHeads)), d.zext64(head)), d.c64(s.vDim));
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
  increaseRegisters(d, kConsumerRegisters);
  Value ctid = d.sub(tid, d.c32(128));
  wg = d.divu(ctid, d.c32(128));
  lane = d.bitAnd(tid, d.c32(31));
  Value warp = d.bitAnd(d.divu(ctid, d.c32(32)), d.c32(3));
  rowInTile = d.add(d.mul(wg, d.c32(64)),
                    d.add(d.mul(warp, d.c32(16)), d.divu(lane, d.c32(4))));
  qFull().waitParity(d.c32(0));
  RowState init;
  init.o = WgmmaAccum::splat(s.vDim, d.f(0.0f));
  init.m = {d.negInf(), d.negInf()};
  init.l = {d.f(0.0f), d.f(0.0f)};
  SmallVector<Value> fin = d.forLoop(
      d.c32(0), w.numBlocks, d.c32(1), init.flatten(),
      [&](Value n, ValueRange carried) {
        return step(w, n, RowState::unflatten(carried)).flatten();
      });
  store(w, RowState::unflatten(fin));
}

void MhaSM90Kernel::emit(StringRef name) {
  declare(name);
  smem = dynamicSharedBase(b);
  tid = d.threadIdX();
  head = d.blockIdX();
  Work w = locate();
  // found is uniform over the CTA: spare CTAs leave before any barrier.
  d.ifThen(w.found, [&] {
    initBarriers();
    Value producer = d.slt(tid, d.c32(128));
    auto ifOp = scf::IfOp::create(b, producer, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    produce(w);
    b.setInsertionPointToStart(ifOp.elseBlock());
    consume(w);
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
