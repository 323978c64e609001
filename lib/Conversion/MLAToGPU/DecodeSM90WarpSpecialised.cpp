//===- DecodeSM90WarpSpecialised.cpp - the TMA-fed sm_90a decode ----------===//

#include "DecodeSM90WarpSpecialised.h"

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
constexpr int64_t kBoxColumns = 64, kBoxBytes = 128;
} // namespace

Value mla::gpu_codegen::sm90::opaqueI32(ImplicitLocOpBuilder &b, Value v) {
  return LLVM::InlineAsmOp::create(
             b, v.getType(), ValueRange{v}, "mov.b32 $0, $1;", "=r,r",
             /*has_side_effects=*/true,
             /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
             LLVM::AsmDialectAttr(), ArrayAttr())
      .getResult(0);
}

WarpSpecialisedDecode::WarpSpecialisedDecode(DecodeSM90Kernel &k)
    : WarpSpecialisedDecode(k, {{0, k.D / kBoxColumns, kConsumerThreads}}) {}

WarpSpecialisedDecode::WarpSpecialisedDecode(DecodeSM90Kernel &k,
                                             SmallVector<ReleaseGroup> groups)
    : k(k), d(k.d), stageBytes(k.Bk * k.D * 2), numBoxes(k.D / kBoxColumns),
      barrierOff(k.lay.redOff + llvm::alignTo(k.M * k.wn * 4, 128)),
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

Value WarpSpecialisedDecode::slot(Value n) { return d.remu(n, d.c32(k.St)); }

Value WarpSpecialisedDecode::phase(Value n) {
  return d.bitAnd(d.divu(n, d.c32(k.St)), d.c32(1));
}

Value WarpSpecialisedDecode::slotBytes(Value n) {
  return d.mul(slot(n), d.c32(stageBytes));
}

void WarpSpecialisedDecode::declare(StringRef name) {
  Type g = d.ptrGlobal, i32 = d.i32;
  Type map = LLVM::LLVMPointerType::get(k.b.getContext());
  SmallVector<Type> types = {g, g, g, g, g, g, g, i32, i32, i32, d.f32};
  SmallVector<bool> byValue(types.size(), false);
  types.append({map, map});
  byValue.append({true, true});
  // The seesaw build's in-kernel combine: counters, out, lse (KernelABI.h).
  if (k.tiling.seesaw) {
    types.append({g, g, g});
    byValue.append({false, false, false});
  }
  assert(types.size() == size_t(abi::decodeKernelNumParams(abi::Chip::SM90a,
                                                           k.shape, k.tiling)));
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
  if (k.tiling.seesaw)
    k.counters = entry->getArgument(13), k.finalOut = entry->getArgument(14),
    k.finalLse = entry->getArgument(15);
}

void WarpSpecialisedDecode::awaitRelease(Value n, int64_t box) {
  for (size_t g = 1; g < groups.size(); ++g)
    if (groups[g].firstBox == box)
      empty(slot(n), g).waitParity(d.bitXor(phase(n), d.c32(1)));
}

void WarpSpecialisedDecode::loadBlock(Value n, Value row) {
  Value slot = this->slot(n);
  TmaDescriptor desc(d, kvMap);
  Value slotOff = d.mul(slot, d.c32(stageBytes));
  for (int64_t c = 0; c < numBoxes; ++c) {
    awaitRelease(n, c);
    MBarrier bar = full(slot, c);
    bar.arriveExpectTx(d.c32(k.Bk * kBoxBytes));
    Value box = k.sm(k.lay.kv.base + c * k.Bk * kBoxBytes, slotOff);
    desc.loadTile(box, bar, {d.c32(c * kBoxColumns), d.c32(0), row});
  }
}

void WarpSpecialisedDecode::loadQ() {
  // Q rows past the request are the next request's (never stored) or past
  // the tensor (zero-filled by the TMA unit).
  MBarrier q = barrier(d.c32(0));
  q.arriveExpectTx(d.c32(k.M * k.D * 2));
  TmaDescriptor qDesc(d, qMap);
  Value qRow = d.add(d.mul(k.bb, d.c32(k.rows)), k.r0);
  for (int64_t c = 0; c < numBoxes; ++c)
    qDesc.loadTile(k.sm(k.lay.q.base + c * k.M * kBoxBytes, d.c32(0)), q,
                   {d.c32(c * kBoxColumns), d.c32(0), qRow});
}

void WarpSpecialisedDecode::produce(Value blocks) {
  d.ifThen(d.eq(k.tid, d.c32(0)), [&] {
    d.forLoop(d.c32(0), blocks, d.c32(1), {}, [&](Value n, ValueRange) {
      // A fresh barrier's previous phase (parity 1) counts as complete, so
      // the first round does not wait.
      empty(slot(n), 0).waitParity(d.bitXor(phase(n), d.c32(1)));
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
        loadBlock(n, row);
        // A block past the piece loads nothing.
        k.b.setInsertionPointToStart(ifOp.elseBlock());
        for (int64_t c = 0; c < numBoxes; ++c) {
          awaitRelease(n, c);
          full(slot(n), c).arrive();
        }
      }
      return SmallVector<Value>{};
    });
  });
}

void WarpSpecialisedDecode::beginConsumer() {
  ctid = d.sub(k.tid, d.c32(128));
  k.warp = d.divu(ctid, d.c32(32)), k.lane = d.remu(ctid, d.c32(32));
  k.wi = d.remu(k.warp, d.c32(4)), k.wj = d.divu(k.warp, d.c32(4));
  k.gq = d.divu(k.lane, d.c32(4)), k.tq = d.remu(k.lane, d.c32(4));
  k.computeRowLimits();
  barrier(d.c32(0)).waitParity(d.c32(0));
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
                                          Value pOff, Value slotOff,
                                          Value vBox) {
  const SmemTile &kv = k.lay.kv;
  const SmemTile p = SmemTile::box128B(0, k.M);
  WgmmaDescriptors descs(d, k.smem);
  Value vBase = d.add(slotOff, d.mul(vBox, d.c32(kv.rows * kBoxBytes)));
  WgmmaAccum acc{SmallVector<Value>(o.begin(), o.end())};
  // A k-step is 16 tokens.
  for (int64_t kk = 0; kk < k.Bk / 16; ++kk) {
    Value aDesc = descs.kMajor(pOff, p.kSliceOffset(kk));
    Value bDesc = descs.mnMajor(kv, vBase, kv.base + kk * 16 * kv.rowBytes);
    acc = mma.step(acc, aDesc, bDesc,
                   /*accumulate=*/true, /*transB=*/true);
  }
  return acc;
}

void WarpSpecialisedDecode::zeroInvalidV(Value n, int64_t firstChunk,
                                         int64_t chunks, Value thread,
                                         int64_t threads,
                                         function_ref<void()> then) {
  Value start = k.blockStart(n);
  Value partial =
      d.ori(d.slt(start, k.lo), d.slt(k.kvEnd, d.add(start, d.c32(k.Bk))));
  d.ifThen(partial, [&] {
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

void WarpSpecialisedDecode::emit(StringRef name, int64_t blockMultiple,
                                 function_ref<void(Value)> consume) {
  declare(name);
  k.smem = dynamicSharedBase(k.b);
  k.tid = d.threadIdX();
  k.r0 = d.mul(d.blockIdX(), d.c32(k.M));
  k.split = d.blockIdY(), k.bb = d.blockIdZ();
  // The barriers, and the Q tile's load, which needs only the CTA's
  // coordinates: it is in flight while every thread reads the piece's
  // bounds (dependent global loads) below.
  d.ifThen(d.eq(k.tid, d.c32(0)), [&] {
    barrier(d.c32(0)).init(1);
    for (int64_t st = 0; st < k.St; ++st) {
      for (int64_t c = 0; c < numBoxes; ++c)
        full(d.c32(st), c).init(1);
      for (auto [g, group] : llvm::enumerate(groups))
        empty(d.c32(st), g).init(group.arrivals);
    }
    loadQ();
  });
  k.computeQueryRows();
  k.computePiece();
  // At least one block (a fully masked one for an empty piece).
  Value blocks = d.maxsi(k.numBlocks, d.c32(1));
  if (blockMultiple > 1)
    blocks = d.mul(
        d.divu(d.add(blocks, d.c32(blockMultiple - 1)), d.c32(blockMultiple)),
        d.c32(blockMultiple));
  d.barrier();
  splitWarpgroupRoles(
      d, k.tid, [&] { produce(blocks); }, [&] { consume(blocks); });
  LLVM::ReturnOp::create(k.b, ValueRange{});
}
