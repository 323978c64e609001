//===- DecodeSM90WarpSpecialised.cpp - the TMA-fed sm_90a decode ----------===//

#include "DecodeSM90WarpSpecialised.h"

#include "mla/GPUCodegen/Cluster.h"
#include "mla/GPUCodegen/Fp8Dequant.h"
#include "mla/GPUCodegen/InlinePTX.h"
#include "mla/GPUCodegen/OnlineSoftmax.h"
#include "mla/GPUCodegen/RegisterBudget.h"
#include "mla/GPUCodegen/Tma.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mla::gpu_codegen;
using namespace mla::gpu_codegen::sm90;
namespace abi = mla::gpu;

namespace {
constexpr int64_t kBoxBytes = 128;
/// The persistent producer's registers (its consumers get 232): at 24 it
/// spilled the piece's state around every box's TMA issue (session 10).
constexpr int64_t kPersistentProducerRegisters = 40;
} // namespace

/// `v` through one inline-asm `mov` (`op`, register constraint `reg`).
static Value opaqueMov(ImplicitLocOpBuilder &b, Value v, StringRef op,
                       StringRef reg) {
  std::string asmText = (op + " $0, $1;").str();
  std::string constraints = ("=" + reg + "," + reg).str();
  return LLVM::InlineAsmOp::create(
             b, v.getType(), ValueRange{v}, asmText, constraints,
             /*has_side_effects=*/true,
             /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
             LLVM::AsmDialectAttr(), ArrayAttr())
      .getResult(0);
}

Value mla::gpu_codegen::sm90::opaqueI32(ImplicitLocOpBuilder &b, Value v) {
  return opaqueMov(b, v, "mov.b32", "r");
}

Value mla::gpu_codegen::sm90::opaqueSharedPointer(ImplicitLocOpBuilder &b,
                                                  Value p) {
  Value bits = LLVM::PtrToIntOp::create(b, b.getI64Type(), p);
  return LLVM::IntToPtrOp::create(b, p.getType(),
                                  opaqueMov(b, bits, "mov.b64", "l"));
}

WarpSpecialisedDecode::WarpSpecialisedDecode(DecodeSM90Kernel &k)
    : WarpSpecialisedDecode(k, {{0, k.D / 64, kConsumerThreads}}) {}

WarpSpecialisedDecode::WarpSpecialisedDecode(DecodeSM90Kernel &k,
                                             SmallVector<ReleaseGroup> groups)
    : k(k), d(k.d), e4m3(abi::decodeSeesawReadsE4M3(k.shape, k.tiling)),
      scaleTiles(abi::decodeSeesawScaleTiles(k.shape, k.tiling)),
      boxColumns(e4m3 ? 128 : 64), numBoxes(llvm::divideCeil(k.D, boxColumns)),
      stageBytes(numBoxes * k.Bk * kBoxBytes + (scaleTiles ? k.Bk * 16 : 0)),
      barrierOff(e4m3 ? k.lay.barrierOff
                      : k.lay.redOff + llvm::alignTo(k.M * k.wn * 4, 128)),
      persistent(k.tiling.persistent), multicast(k.tiling.multicast),
      groups(std::move(groups)) {}

MBarrier WarpSpecialisedDecode::barrier(Value index) {
  return MBarrier(d, k.sm(barrierOff, d.mul(index, d.c32(8))));
}

MBarrier WarpSpecialisedDecode::full(Value slot, int64_t box) {
  return barrier(d.add(d.mul(slot, d.c32(numBoxes)), d.c32(1 + box)));
}

MBarrier WarpSpecialisedDecode::empty(Value slot, int64_t group) {
  return barrier(d.add(slot, d.c32(1 + k.St * (numBoxes + group))));
}

int64_t WarpSpecialisedDecode::barrierCount() const {
  return (persistent ? 2 : 1) + k.St * (numBoxes + int64_t(groups.size()));
}

MBarrier WarpSpecialisedDecode::qEmpty() {
  return barrier(d.c32(barrierCount() - 1));
}

int64_t WarpSpecialisedDecode::flagOffset() const {
  return barrierOff + 8 * barrierCount();
}

Value WarpSpecialisedDecode::ringIndex(Value n) {
  return ringBase ? d.add(ringBase, n) : n;
}

Value WarpSpecialisedDecode::slot(Value n) {
  // A piece's blocks are a multiple of the ring depth (forEachPiece), so
  // ringBase is too and the slot is the piece's own block index's: kept off
  // ringBase, the slot's barrier addresses stay on the uniform datapath.
  return d.remu(n, d.c32(k.St));
}

Value WarpSpecialisedDecode::phase(Value n) {
  return d.bitAnd(d.divu(ringIndex(n), d.c32(k.St)), d.c32(1));
}

Value WarpSpecialisedDecode::slotBytes(Value n) {
  return d.mul(slot(n), d.c32(stageBytes));
}

void WarpSpecialisedDecode::declare(StringRef name) {
  Type g = d.ptrGlobal, i32 = d.i32;
  Type map = LLVM::LLVMPointerType::get(k.b.getContext());
  SmallVector<Type> types = {g, g, g, g, g, g, g, i32, i32, i32, d.f32};
  // kv_scale before the maps (KernelABI.h's order).
  const bool kvScale = k.shape.kvFormat == abi::CacheFormat::FP8E4M3;
  if (kvScale)
    types.push_back(g);
  SmallVector<bool> byValue(types.size(), false);
  types.append({map, map});
  byValue.append({true, true});
  // fp8_ds_mla's scale map after the cache's (KernelABI.h).
  if (scaleTiles) {
    types.push_back(map);
    byValue.push_back(true);
  }
  // The seesaw build's in-kernel combine: counters, out, lse (KernelABI.h);
  // the persistent build's schedule and cu_splits.
  if (k.tiling.seesaw) {
    types.append({g, g, g});
    byValue.append({false, false, false});
  }
  if (persistent) {
    types.append({g, g});
    byValue.append({false, false});
  }
  assert(types.size() == size_t(abi::decodeKernelNumParams(abi::Chip::SM90a,
                                                           k.shape, k.tiling)));
  LLVM::LLVMFuncOp kernel = createGridConstantKernel(
      k.b, name, types, byValue, abi::decodeThreadsPerCta(k.tiling));
  if (multicast)
    setClusterShape(kernel, abi::decodeClusterCtas(k.tiling));
  Block *entry = k.b.getInsertionBlock();
  k.qPtr = entry->getArgument(0), k.cache = entry->getArgument(1),
  k.blockTable = entry->getArgument(2), k.seqLens = entry->getArgument(3),
  k.bounds = entry->getArgument(4), k.pout = entry->getArgument(5),
  k.plse = entry->getArgument(6), k.batch = entry->getArgument(7),
  k.maxPages = entry->getArgument(8), k.numSplits = entry->getArgument(9);
  k.scaleLog2 =
      d.fmul(entry->getArgument(10), d.f(mla::gpu_codegen::softmax::kLog2e));
  unsigned maps = abi::kDecodePartialNumParams + (kvScale ? 1 : 0);
  if (kvScale) {
    // K = kv_scale * codes into the scores' scale, V = kv_scale * codes
    // into the written rows (as DecodeSM90Kernel::begin does).
    Value kvScale =
        d.load(d.f32, entry->getArgument(abi::kDecodePartialNumParams), 4);
    k.scaleLog2 = d.fmul(k.scaleLog2, kvScale);
    k.outScale = kvScale;
  }
  qMap = entry->getArgument(maps), kvMap = entry->getArgument(maps + 1);
  unsigned combine = maps + 2;
  if (scaleTiles)
    scaleMap = entry->getArgument(combine++);
  if (k.tiling.seesaw)
    k.counters = entry->getArgument(combine),
    k.finalOut = entry->getArgument(combine + 1),
    k.finalLse = entry->getArgument(combine + 2);
  if (persistent)
    schedule = entry->getArgument(combine + 3),
    cuSplits = entry->getArgument(combine + 4);
}

void WarpSpecialisedDecode::awaitRelease(Value n, int64_t box) {
  for (size_t g = 1; g < groups.size(); ++g)
    if (groups[g].firstBox == box)
      empty(slot(n), g).waitParity(d.bitXor(phase(n), d.c32(1)));
}

void WarpSpecialisedDecode::loadBlock(Value n, Value row, bool evictFirst,
                                      Boxes boxes) {
  Value slot = this->slot(n);
  TmaDescriptor desc(d, kvMap);
  Value slotOff = d.mul(slot, d.c32(stageBytes));
  // Made per block: a policy live across the loop would take two of the
  // producer's 24 registers.
  Value kvPolicy = evictFirst ? ptx::createPolicyEvictFirst(k.b) : Value();
  // fp8_ds_mla: the RoPE box holds the row's bf16 values (from byte
  // dsMlaRopeOffset), and the rows' scales come with it, through the scale
  // map: both are released with P (after both P V).
  const int64_t ropeBox = k.L / boxColumns;
  // Multicast: both CTAs of the cluster receive each box.
  Value mask = boxes == Boxes::All ? Value() : d.c16(0b11);
  for (int64_t c = 0; c < numBoxes; ++c) {
    awaitRelease(n, c);
    MBarrier bar = full(slot, c);
    bool scales = scaleTiles && c == ropeBox;
    bar.arriveExpectTx(d.c32(k.Bk * kBoxBytes + (scales ? k.Bk * 16 : 0)));
    if (boxes != Boxes::All && (c % 2 == 0) != (boxes == Boxes::Even))
      continue;
    Value box = k.sm(k.lay.kv.base + c * k.Bk * kBoxBytes, slotOff);
    int64_t column = scales ? abi::dsMlaRopeOffset(k.L) : c * boxColumns;
    desc.loadTile(box, bar, {d.c32(column), d.c32(0), row}, kvPolicy, mask);
    if (scales)
      TmaDescriptor(d, scaleMap)
          .loadTile(k.sm(k.lay.kv.base, d.add(slotOff, rowScalesOff())), bar,
                    {d.c32(k.L), d.c32(0), row}, kvPolicy);
  }
}

Value WarpSpecialisedDecode::rowScalesOff() {
  return d.c32(numBoxes * k.Bk * kBoxBytes);
}

Value WarpSpecialisedDecode::rowScale(Value slotOff, Value row, Value tile) {
  Value at = d.add(d.add(slotOff, rowScalesOff()),
                   d.add(d.mul(row, d.c32(16)), d.mul(tile, d.c32(4))));
  return d.load(d.f32, k.sm(k.lay.kv.base, at), 4);
}

void WarpSpecialisedDecode::prefetchMaps() {
  TmaDescriptor(d, qMap).prefetch();
  TmaDescriptor(d, kvMap).prefetch();
  if (scaleMap)
    TmaDescriptor(d, scaleMap).prefetch();
}

void WarpSpecialisedDecode::loadQ() {
  // Q rows past the request are the next request's (never stored) or past
  // the tensor (zero-filled by the TMA unit).
  MBarrier q = barrier(d.c32(0));
  q.arriveExpectTx(d.c32(k.M * k.D * 2));
  TmaDescriptor qDesc(d, qMap);
  Value qRow = d.add(d.mul(k.bb, d.c32(k.rows)), k.r0);
  for (int64_t c = 0; c < k.D / 64; ++c)
    qDesc.loadTile(k.sm(k.lay.q.base + c * k.M * kBoxBytes, d.c32(0)), q,
                   {d.c32(c * 64), d.c32(0), qRow});
}

Value WarpSpecialisedDecode::firstRowOf(Value n) {
  return k.pageOf(n, [&](Value phys) {
    Value start = k.blockStart(n);
    return d.add(d.mul(phys, d.c32(k.page)), d.remu(start, d.c32(k.page)));
  });
}

void WarpSpecialisedDecode::produce(Value blocks) {
  d.ifThen(d.eq(k.tid, d.c32(0)), [&] { produceBlocks(blocks); });
  if (scaleTiles)
    d.ifThen(d.eq(d.divu(k.tid, d.c32(32)), d.c32(1)),
             [&] { produceScaleMaxima(blocks); });
}

void WarpSpecialisedDecode::produceScaleMaxima(Value blocks) {
  const int64_t ropeBox = k.L / boxColumns;
  Value lane = d.remu(k.tid, d.c32(32));
  d.forLoop(d.c32(0), blocks, d.c32(1), {}, [&](Value n, ValueRange) {
    full(slot(n), ropeBox).waitParity(phase(n));
    Value start = k.blockStart(n), slotOff = slotBytes(n);
    // Lane l takes tokens l, l + 32, ...: zero outside the piece (any
    // bytes there) and for a NaN (max(NaN, 0) = 0).
    SmallVector<Value> m(scaleTiles, d.f(0.0f));
    for (int64_t t0 = 0; t0 < k.Bk; t0 += 32) {
      Value tok = d.add(lane, d.c32(t0));
      Value valid = insidePiece(d.add(start, tok));
      for (int64_t j = 0; j < scaleTiles; ++j) {
        Value sc = d.fmin(d.fmax(rowScale(slotOff, tok, d.c32(j)), d.f(0.0f)),
                          d.f(0x1p100f));
        m[j] = d.fmax(m[j], d.select(valid, sc, d.f(0.0f)));
      }
    }
    for (int64_t mask = 1; mask < 32; mask *= 2)
      for (int64_t j = 0; j < scaleTiles; ++j)
        m[j] = d.fmax(m[j], d.shflXor(m[j], mask));
    d.ifThen(d.eq(lane, d.c32(0)), [&] {
      for (int64_t j = 0; j < scaleTiles; ++j)
        d.store(m[j], blockTileMaxAt(slot(n), j), 4);
      maximaReady(slot(n)).arrive();
    });
    return SmallVector<Value>{};
  });
}

MBarrier WarpSpecialisedDecode::maximaReady(Value slot) {
  // Past the maxima (St slots of scaleTiles floats) in the 128-byte
  // scale-maximum scratch (DecodeSM90Layout::scaleMaxOff).
  int64_t base = k.lay.scaleMaxOff + llvm::alignTo(k.St * scaleTiles * 4, 8);
  return MBarrier(d, k.sm(base, d.mul(slot, d.c32(8))));
}

Value WarpSpecialisedDecode::blockTileMaxAt(Value slot, int64_t tile) {
  return k.sm(k.lay.scaleMaxOff + 4 * tile, d.mul(slot, d.c32(4 * scaleTiles)));
}

void WarpSpecialisedDecode::producePieces(int64_t blockMultiple) {
  d.ifThen(d.eq(k.tid, d.c32(0)), [&] {
    forEachPiece(blockMultiple, [&](Value index, Value blocks) {
      produceBlocks(blocks, index);
    });
  });
}

void WarpSpecialisedDecode::produceBlocks(Value blocks, Value index) {
  // The persistent build's Q: the first piece's at once; a later piece's
  // once the consumers have left the last piece's epilogue, which reuses
  // the Q tile, behind the piece's first `stages` blocks (their slots were
  // freed by the last piece's final blocks).
  Value later, stages = d.c32(k.St);
  auto loadLaterQ = [&](Value when) {
    d.ifThen(d.andi(later, when), [&] {
      // Piece index - 1's epilogue completed phase index - 1.
      qEmpty().waitParity(d.bitXor(d.bitAnd(index, d.c32(1)), d.c32(1)));
      loadQ();
    });
  };
  if (index) {
    later = d.slt(d.c32(0), index);
    d.ifThen(d.eq(index, d.c32(0)), [&] { loadQ(); });
  }
  // Block n's first cache row was looked up in the iteration before, so
  // the block table's latency overlaps the wait for a free slot instead of
  // following it.
  Value first = firstRowOf(d.c32(0));
  auto beforeBlock = [&](Value n) {
    if (index)
      loadLaterQ(d.eq(n, stages));
  };
  // One block loop per cache hint (kEvictFirstMaxBlocks): one loop with a
  // branch per box, or with the policy live through it, was 2.4-4% slower at
  // N = 128 (session 18). The multicast build's loops are per rank too.
  auto loops = [&](Boxes boxes) {
    d.ifThenElse(
        d.sle(blocks, d.c32(kEvictFirstMaxBlocks)),
        [&] { loadBlocks(blocks, first, true, boxes, beforeBlock); },
        [&] { loadBlocks(blocks, first, false, boxes, beforeBlock); });
  };
  if (multicast)
    d.ifThenElse(
        d.eq(rank, d.c32(0)), [&] { loops(Boxes::Even); },
        [&] { loops(Boxes::Odd); });
  else
    loops(Boxes::All);
  if (index)
    loadLaterQ(d.sle(blocks, stages));
}

void WarpSpecialisedDecode::loadBlocks(
    Value blocks, Value first, bool evictFirst, Boxes boxes,
    llvm::function_ref<void(Value n)> beforeBlock) {
  d.forLoop(d.c32(0), blocks, d.c32(1), {first},
            [&](Value n, ValueRange carried) {
              beforeBlock(n);
              Value row = carried[0];
              Value next = firstRowOf(d.add(n, d.c32(1)));
              // A fresh barrier's previous phase (parity 1) counts as complete,
              // so the first round does not wait.
              empty(slot(n), 0).waitParity(d.bitXor(phase(n), d.c32(1)));
              d.ifThenElse(
                  d.slt(n, k.numBlocks),
                  [&] { loadBlock(n, row, evictFirst, boxes); },
                  // A block past the piece loads nothing.
                  [&] {
                    for (int64_t c = 0; c < numBoxes; ++c) {
                      awaitRelease(n, c);
                      full(slot(n), c).arrive();
                    }
                  });
              return SmallVector<Value>{next};
            });
}

void WarpSpecialisedDecode::beginConsumer() {
  ctid = d.sub(k.tid, d.c32(128));
  k.warp = d.divu(ctid, d.c32(32)), k.lane = d.remu(ctid, d.c32(32));
  k.wi = d.remu(k.warp, d.c32(4)), k.wj = d.divu(k.warp, d.c32(4));
  k.gq = d.divu(k.lane, d.c32(4)), k.tq = d.remu(k.lane, d.c32(4));
  k.computeRowLimits();
  // Over fp8_e4m3 the consumers stage Q themselves (stageQAsE4M3Pair).
  if (!e4m3)
    barrier(d.c32(0)).waitParity(qParity ? qParity : d.c32(0));
}

void WarpSpecialisedDecode::releasePeer(Value slot, int64_t group) {
  if (!multicast)
    return;
  // The warp's wgmma wait (aligned: the whole warp passes it together)
  // came before, so its lane 0 speaks for the 32 threads.
  d.ifThen(d.eq(k.lane, d.c32(0)), [&] {
    MBarrier bar = empty(slot, group);
    arriveOnPeer(d, bar, d.bitXor(rank, d.c32(1)), 32);
  });
}

void WarpSpecialisedDecode::namedSync(int64_t id, int64_t threads) {
  NVVM::BarrierOp::create(k.b, TypeRange{}, d.c32(id), d.c32(threads),
                          NVVM::BarrierReductionAttr(), Value());
}

void WarpSpecialisedDecode::namedArrive(int64_t id, int64_t threads) {
  NVVM::BarrierArriveOp::create(k.b, d.c32(id), d.c32(threads));
}

WgmmaAccum WarpSpecialisedDecode::issueScores(WarpgroupMma &mma, int64_t tokens,
                                              Value qBase, Value n,
                                              Value kBase) {
  const SmemTile &q = k.lay.q, &kv = k.lay.kv;
  WgmmaDescriptors descs(d, k.smem);
  // The first step does not accumulate: undefined inputs need no register
  // copies after the fence (copies of one zero register there made ptxas
  // inject a warpgroup.arrive, C7519).
  WgmmaAccum acc = WgmmaAccum::splat(tokens, d.poison(d.f32));
  for (int64_t kk = 0; kk < k.D / 16; ++kk) {
    // Four k-steps per box: the first waits for the box, then fences (the
    // wait wrote registers; without the fence ptxas injects one, C7519).
    if (kk % 4 == 0) {
      full(slot(n), kk / 4).waitParity(phase(n));
      mma.fence();
    }
    Value aDesc = descs.kMajor(qBase, q.kSliceOffset(kk));
    Value bDesc = descs.kMajor(kBase, kv.base + kv.kSliceOffset(kk));
    acc = mma.step(acc, aDesc, bDesc, kk > 0, /*transB=*/false);
  }
  return acc;
}

WgmmaAccum WarpSpecialisedDecode::issuePV(WarpgroupMma &mma, ArrayRef<Value> o,
                                          Value pOff, Value slotOff, Value vBox,
                                          ArrayRef<Value> pRegs) {
  const SmemTile &kv = k.lay.kv;
  const SmemTile p = SmemTile::box128B(0, k.M);
  WgmmaDescriptors descs(d, k.smem);
  Value vBase = d.add(slotOff, d.mul(vBox, d.c32(kv.rows * kBoxBytes)));
  WgmmaAccum acc{SmallVector<Value>(o.begin(), o.end())};
  // A k-step is 16 tokens.
  assert((pRegs.empty() || int64_t(pRegs.size()) == k.Bk / 4) &&
         "four packed pairs per 16-token k slice");
  for (int64_t kk = 0; kk < k.Bk / 16; ++kk) {
    Value aDesc =
        pRegs.empty() ? descs.kMajor(pOff, p.kSliceOffset(kk)) : Value();
    Value bDesc = descs.mnMajor(kv, vBase, kv.base + kk * 16 * kv.rowBytes);
    acc = aDesc ? mma.step(acc, aDesc, bDesc,
                           /*accumulate=*/true, /*transB=*/true)
                : mma.stepRegA(acc, pRegs.slice(4 * kk, 4), bDesc,
                               /*accumulate=*/true, /*transB=*/true);
  }
  return acc;
}

WgmmaAccum WarpSpecialisedDecode::issueScoresE4M3(WarpgroupMma &mma,
                                                  Value qBase, Value n,
                                                  Value kBase) {
  return issueE4M3Steps(mma, WgmmaAccum::splat(k.Bk, d.poison(d.f32)), qBase, n,
                        kBase, 0, k.D / 32);
}

WgmmaAccum WarpSpecialisedDecode::issueE4M3Steps(WarpgroupMma &mma,
                                                 WgmmaAccum acc, Value qBase,
                                                 Value n, Value kBase,
                                                 int64_t first, int64_t end) {
  WgmmaDescriptors descs(d, k.smem);
  for (int64_t kk = first; kk < end; ++kk) {
    // Four k-steps per 128-byte box (DecodeSM90Kernel::issueScores' waits).
    if (kk % 4 == 0) {
      full(slot(n), kk / 4).waitParity(phase(n));
      mma.fence();
    }
    Value bDesc = descs.kMajor(
        kBase, k.lay.kv.base + (kk / 4) * k.Bk * kBoxBytes + (kk % 4) * 32);
    for (int part = 0; part < 2; ++part) {
      auto [box, byte] = k.e4m3QPlace(32 * kk, part);
      Value aDesc = descs.kMajor(qBase, box * k.M * kBoxBytes + byte);
      acc = mma.step(acc, aDesc, bDesc, kk > 0 || part > 0, /*transB=*/false);
    }
  }
  return acc;
}

void WarpSpecialisedDecode::convertDsMlaRope(Value n, Value kBase,
                                             int slotIndex, Value thread,
                                             int64_t threads,
                                             function_ref<void()> sync) {
  // perRow threads share each row of the RoPE box once it has landed.
  const int64_t box = k.L / boxColumns, perRow = threads / k.Bk;
  const int64_t units = kBoxBytes / 16 / perRow, tiles = scaleTiles;
  assert(k.L % boxColumns == 0 && perRow * k.Bk == threads && units > 0 &&
         tiles >= 2 && "whole rows per thread group, whole units per thread");
  full(slot(n), box).waitParity(phase(n));
  Value rows = d.add(kBase, d.c32(k.lay.kv.base + box * k.Bk * kBoxBytes));
  Value row = d.divu(thread, d.c32(perRow));
  Value part = d.remu(thread, d.c32(perRow));
  // The row's tile scales, clamped to [2^-100, 2^100] (a row outside the
  // piece may hold any bytes; its scores are masked).
  SmallVector<Value> s, inv;
  for (int64_t j = 0; j < tiles; ++j) {
    s.push_back(d.fmin(d.fmax(rowScale(kBase, row, d.c32(j)), d.f(0x1p-100f)),
                       d.f(0x1p100f)));
    inv.push_back(d.rcpApprox(s[j]));
  }
  // Each thread rewrites its own units: RoPE / s(t, last).
  for (int64_t u = 0; u < units; ++u) {
    Value unit = d.add(d.mul(part, d.c32(units)), d.c32(u));
    Value at = k.sm(0, d.add(rows, k.lay.kv.byteOffset(d, row, unit)));
    Value raw = d.load(VectorType::get({4}, d.i32), at, 16);
    d.store(convertBF16x8(d, raw, k.b.getBF16Type(), inv[tiles - 1]), at, 16);
  }
  // tileFactor(j): s(t, j) / s(t, j + 1) for j < tiles - 1, then s(t, last).
  d.ifThen(d.eq(part, d.c32(0)), [&] {
    for (int64_t j = 0; j < tiles; ++j) {
      Value f = j + 1 < tiles ? d.fmul(s[j], inv[j + 1]) : s[j];
      d.store(f, tileFactorAt(slotIndex, row, j), 4);
    }
  });
  fenceProxyAsyncShared(d);
  sync();
}

Value WarpSpecialisedDecode::tileFactorAt(int slotIndex, Value row, int64_t j) {
  return k.sm(k.lay.tileFactorOff + slotIndex * k.Bk * 16 + 4 * j,
              d.mul(row, d.c32(16)));
}

WgmmaAccum WarpSpecialisedDecode::issueRopeBF16(WarpgroupMma &mma,
                                                WgmmaAccum acc, Value qBase,
                                                Value kBase) {
  WgmmaDescriptors descs(d, k.smem);
  const int64_t box = k.L / boxColumns;
  const int64_t qBox = k.e4m3QPlace(k.L, 0).first;
  for (int64_t kk = 0; kk < k.shape.ropeDim / 16; ++kk) {
    Value aDesc = descs.kMajor(qBase, qBox * k.M * kBoxBytes + kk * 32);
    Value bDesc =
        descs.kMajor(kBase, k.lay.kv.base + box * k.Bk * kBoxBytes + kk * 32);
    acc = mma.step(acc, aDesc, bDesc, /*accumulate=*/true, /*transB=*/false);
  }
  return acc;
}

Value WarpSpecialisedDecode::reachesOutsidePiece(Value start) {
  return d.ori(d.slt(start, k.lo), d.slt(k.kvEnd, d.add(start, d.c32(k.Bk))));
}

Value WarpSpecialisedDecode::insidePiece(Value pos) {
  return d.andi(d.sge(pos, k.lo), d.slt(pos, k.kvEnd));
}

void WarpSpecialisedDecode::convertV(Value n, int64_t firstBox, int64_t boxes,
                                     Value thread, int64_t threads,
                                     bool waitBoxes, ArrayRef<Value> invSigma) {
  const int64_t units = k.Bk * 8 * boxes;
  assert(threads % 64 == 0 && units % threads == 0 && k.Bk % 8 == 0 &&
         "every thread converts the same units of whole 8-row groups");
  if (waitBoxes) {
    for (int64_t c = firstBox; c < firstBox + boxes; ++c)
      full(slot(n), c).waitParity(phase(n));
    // fp8_ds_mla's row scales come with the RoPE box.
    if (!invSigma.empty())
      full(slot(n), k.L / boxColumns).waitParity(phase(n));
  }
  const SmemTile &kv = k.lay.kv;
  const SmemTile v = SmemTile::box128B(k.lay.vOff, k.Bk);
  Value rawSlot = d.add(slotBytes(n), d.c32(kv.base));
  // Index idx = thread + threads * i is unit u of row r of a raw box (512
  // units: 64 rows of 8): each 16 consecutive indices cover rows a and a ^ 5
  // of an 8-row group (a = 0..3), their units 0-3 in the first eight (one
  // 16-byte access phase: a's, then a ^ 5's) and 4-7 in the next. The rows'
  // swizzles differ by 5, so in each phase the raw loads (units U ^ r % 8)
  // and the even and odd f16 chunk stores (2 (u % 4) (+1) ^ r % 8) meet
  // eight different bank groups, and no thread reorders its chunks.
  Value p = d.remu(thread, d.c32(8));
  Value unit =
      d.add(d.remu(p, d.c32(4)),
            d.mul(d.remu(d.divu(thread, d.c32(8)), d.c32(2)), d.c32(4)));
  Value pairRow = d.remu(d.divu(thread, d.c32(16)), d.c32(4));
  Value rowInGroup =
      d.select(d.sge(p, d.c32(4)), d.bitXor(pairRow, d.c32(5)), pairRow);
  Value start = k.blockStart(n);
  // A unit's token and raw-tile box.
  auto tokenOf = [&](int64_t i) {
    Value idx = d.add(thread, d.c32(i * threads));
    Value group = d.remu(d.divu(idx, d.c32(64)), d.c32(k.Bk / 8));
    return d.add(d.mul(group, d.c32(8)), rowInGroup);
  };
  auto boxOf = [&](int64_t i) { return firstBox + (i * threads) / (k.Bk * 8); };
  // One unit's masking, conversion (and fp8_ds_mla scaling) and stores.
  auto convertUnit = [&](Value raw, Value tok, int64_t box, bool masked) {
    if (masked) {
      Value valid = insidePiece(d.add(start, tok));
      raw = d.select(valid, raw,
                     LLVM::ZeroOp::create(k.b, VectorType::get({4}, d.i32)));
    }
    auto [even, odd] = convertE4M3x16ToF16(d, raw);
    if (!invSigma.empty()) {
      // Tile `box`'s scale of the row over the warpgroup's running
      // maximum: in [0, 1] (0 for a NaN), exact enough in f16.
      Value f = d.fmul(rowScale(slotBytes(n), tok, d.c32(box)),
                       invSigma[box - firstBox]);
      f = d.fmin(d.fmax(f, d.f(0.0f)), d.f(1.0f));
      even = scaleF16x8(d, even, f);
      odd = scaleF16x8(d, odd, f);
    }
    Value chunk = d.add(d.c32(16 * box), d.mul(unit, d.c32(2)));
    d.store(even, k.sm(v.base, v.byteOffset(d, tok, chunk)), 16);
    d.store(odd, k.sm(v.base, v.byteOffset(d, tok, d.add(chunk, d.c32(1)))),
            16);
  };
  // The loads of a batch go out before its conversions: the compiler cannot
  // hoist a shared load over a shared store it cannot tell apart, and one
  // load per conversion waits on each. fp8_ds_mla's conversions hold more
  // registers (the row scales), so its batches are smaller.
  const int64_t perThread = units / threads;
  const int64_t batch = std::min<int64_t>(invSigma.empty() ? 4 : 2, perThread);
  auto convert = [&](bool masked) {
    for (int64_t i0 = 0; i0 < perThread; i0 += batch) {
      const int64_t count = std::min(batch, perThread - i0);
      SmallVector<Value> raws, toks;
      for (int64_t i = i0; i < i0 + count; ++i) {
        Value tok = tokenOf(i);
        int64_t box = boxOf(i);
        toks.push_back(tok);
        raws.push_back(d.load(VectorType::get({4}, d.i32),
                              k.sm(box * k.Bk * kBoxBytes,
                                   d.add(rawSlot, kv.byteOffset(d, tok, unit))),
                              16));
      }
      for (int64_t j = 0; j < count; ++j)
        convertUnit(raws[j], toks[j], boxOf(i0 + j), masked);
    }
  };
  // Only a block reaching outside the piece needs the mask (a uniform
  // branch, as zeroInvalidV).
  d.ifThenElse(
      reachesOutsidePiece(start), [&] { convert(true); },
      [&] { convert(false); });
}

void WarpSpecialisedDecode::zeroInvalidV(Value n, int64_t firstChunk,
                                         int64_t chunks, Value thread,
                                         int64_t threads,
                                         function_ref<void()> then) {
  Value start = k.blockStart(n);
  d.ifThen(reachesOutsidePiece(start), [&] {
    Value zero = LLVM::ZeroOp::create(k.b, VectorType::get({4}, d.i32));
    Value slotOff = slotBytes(n);
    forEachStrided(d, thread, threads, k.Bk * chunks, [&](Value idx) {
      Value tok = d.divu(idx, d.c32(chunks));
      Value pos = d.add(start, tok);
      d.ifThen(d.ori(d.slt(pos, k.lo), d.sge(pos, k.kvEnd)), [&] {
        Value chunk = d.remu(idx, d.c32(chunks));
        if (firstChunk != 0)
          chunk = d.add(chunk, d.c32(firstChunk));
        Value off = k.lay.kv.byteOffset(d, tok, chunk);
        d.store(zero, k.sm(k.lay.kv.base, d.add(slotOff, off)), 16);
      });
    });
    if (then)
      then();
  });
}

void WarpSpecialisedDecode::initBarriers() {
  barrier(d.c32(0)).init(1);
  for (int64_t st = 0; st < k.St; ++st) {
    for (int64_t c = 0; c < numBoxes; ++c)
      full(d.c32(st), c).init(1);
    // The multicast build: the peer CTA's consumers count too.
    for (auto [g, group] : llvm::enumerate(groups))
      empty(d.c32(st), g).init(group.arrivals * (multicast ? 2 : 1));
  }
  if (persistent)
    qEmpty().init(kConsumerThreads);
  if (scaleTiles) {
    assert(llvm::alignTo(k.St * scaleTiles * 4, 8) + 8 * k.St <= 128 &&
           "the maxima and their barriers fit the scale-maximum scratch");
    for (int64_t st = 0; st < k.St; ++st)
      maximaReady(d.c32(st)).init(1);
  }
}

/// numBlocks, at least one, rounded up to a multiple of `multiple`.
static Value paddedBlocks(DeviceBuilder &d, Value numBlocks, int64_t multiple) {
  Value blocks = d.maxsi(numBlocks, d.c32(1));
  if (multiple > 1)
    blocks = d.mul(d.divu(d.add(blocks, d.c32(multiple - 1)), d.c32(multiple)),
                   d.c32(multiple));
  return blocks;
}

void WarpSpecialisedDecode::forEachPiece(
    int64_t blockMultiple, function_ref<void(Value, Value)> body) {
  // Schedule row blockIdx.y (SplitPlanner.h's ScheduleColumn): requests
  // beginReq..endReq, the first from beginPos as piece beginSplit, the last
  // up to endPos; an idle part has endReq < beginReq.
  Value row = d.mul(d.blockIdY(), d.c32(plan::kScheduleRowSize));
  auto column = [&](int c) {
    return d.load(d.i32, d.gep(schedule, d.i32, d.add(row, d.c32(c))), 4);
  };
  Value beginReq = column(plan::kBeginReq), beginPos = column(plan::kBeginPos),
        endReq = column(plan::kEndReq), endPos = column(plan::kEndPos),
        beginSplit = column(plan::kBeginSplit);
  // Requests outside [0, B) are never touched, whatever the schedule says.
  assert(blockMultiple % k.St == 0 && "ringBase stays a multiple of stages");
  Value endExcl = d.minsi(d.add(endReq, d.c32(1)), k.batch);
  Value begin = d.maxsi(beginReq, d.c32(0));
  d.forLoop(begin, d.maxsi(endExcl, begin), d.c32(1), {d.c32(0)},
            [&](Value req, ValueRange carried) {
              Value base = carried[0];
              Value isFirst = d.eq(req, beginReq), isLast = d.eq(req, endReq);
              k.bb = req;
              k.split = d.select(isFirst, beginSplit, d.c32(0));
              Value pieces =
                  d.sub(d.load(d.i32,
                               d.gep(cuSplits, d.i32, d.add(req, d.c32(1))), 4),
                        d.load(d.i32, d.gep(cuSplits, d.i32, req), 4));
              k.numSplits = pieces;
              k.computeQueryRows();
              k.seq = d.load(d.i32, d.gep(k.seqLens, d.i32, req), 4);
              k.computePieceIn(d.select(isFirst, beginPos, d.c32(0)),
                               d.select(isLast, endPos, k.seq));
              Value blocks = paddedBlocks(d, k.numBlocks, blockMultiple);
              ringBase = base;
              body(d.sub(req, begin), blocks);
              ringBase = Value();
              return SmallVector<Value>{d.add(base, blocks)};
            });
}

void WarpSpecialisedDecode::releaseQ() {
  fenceProxyAsyncShared(d);
  qEmpty().arrive();
}

void WarpSpecialisedDecode::emit(StringRef name, int64_t blockMultiple,
                                 function_ref<void(Value)> consume) {
  assert(flagOffset() + 4 <=
             abi::decodeSharedBytes(abi::Chip::SM90a, k.shape, k.tiling) &&
         "the layout fits the shared memory KernelABI.h launches with");
  declare(name);
  k.smem = dynamicSharedBase(k.b);
  k.tid = d.threadIdX();
  k.r0 = d.mul(d.blockIdX(), d.c32(k.M));
  if (persistent)
    return emitPersistent(blockMultiple, consume);
  k.split = d.blockIdY(), k.bb = d.blockIdZ();
  if (multicast)
    rank = clusterCtaRank(d);
  // The barriers, and the Q tile's load, which needs only the CTA's
  // coordinates: it is in flight while every thread reads the piece's
  // bounds (dependent global loads) below.
  d.ifThen(d.eq(k.tid, d.c32(0)), [&] {
    prefetchMaps();
    initBarriers();
    if (!e4m3)
      loadQ();
  });
  k.computeQueryRows();
  k.computePiece();
  // At least one block (a fully masked one for an empty piece).
  Value blocks = paddedBlocks(d, k.numBlocks, blockMultiple);
  // The multicast build: no CTA loads into, or arrives on, a peer whose
  // barriers are not initialised yet.
  if (multicast)
    clusterSync(d);
  else
    d.barrier();
  splitWarpgroupRoles(
      d, k.tid, [&] { produce(blocks); }, [&] { consume(blocks); });
  // Nor does a CTA exit while its peer may still arrive on its barriers.
  if (multicast)
    clusterSync(d);
  LLVM::ReturnOp::create(k.b, ValueRange{});
}

void WarpSpecialisedDecode::emitPersistent(int64_t blockMultiple,
                                           function_ref<void(Value)> consume) {
  assert(!e4m3 && "the persistent build reads bf16/f16 caches");
  d.ifThen(d.eq(k.tid, d.c32(0)), [&] {
    prefetchMaps();
    initBarriers();
  });
  d.barrier();
  splitWarpgroupRoles(
      d, k.tid, [&] { producePieces(blockMultiple); },
      [&] {
        forEachPiece(blockMultiple, [&](Value index, Value blocks) {
          // The shared-memory base derived again per piece: taken from
          // outside the piece loop, ptxas keeps it in a vector register
          // and moves every wgmma descriptor word with R2UR (docs/GPU.md).
          // So is the thread index: else ptxas hoists every per-thread
          // address of the epilogue out of the piece loop, and they spill.
          Value smem = k.smem, tid = k.tid;
          k.smem = opaqueSharedPointer(k.b, smem);
          k.tid = opaqueI32(k.b, tid);
          qParity = d.bitAnd(index, d.c32(1));
          consume(blocks);
          qParity = Value();
          k.smem = smem, k.tid = tid;
        });
      },
      kPersistentProducerRegisters);
  LLVM::ReturnOp::create(k.b, ValueRange{});
}
