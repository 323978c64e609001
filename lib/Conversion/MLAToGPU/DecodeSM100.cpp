//===- DecodeSM100.cpp - mla_decode_partial for sm_100a (tcgen05) ---------===//
//
// The Blackwell decode partial kernel: both GEMMs run on the 5th-generation
// tensor cores (tcgen05.mma, kind::f16, cta_group::1) with their accumulators
// in tensor memory (TMEM); the online softmax runs in registers.
//
// One CTA = one warpgroup (128 threads), 64 query rows, one split-KV piece.
//
//   TMEM (128 lanes x 512 columns of 32 bits, all allocated):
//     O[:, 0:L/2]   64 x L/2 f32 at lane offset 0,  columns [0, L/2)
//     O[:, L/2:L]   64 x L/2 f32 at lane offset 16, columns [0, L/2)
//     S             64 x kv_block f32 at lane offset 0, columns [256, ...)
//   An M = 64 MMA writes row 16w+i to lane 32w+i (+16 with lane offset 16),
//   so one 32x32b tcgen05.ld by warp w gives thread t < 16 row 16w+t of the
//   first O half (and of S) and thread t >= 16 row 16w+t-16 of the second.
//   This is how a 64 x 512 f32 output and the scores fit in one CTA's TMEM
//   without 2-CTA MMAs.
//
//   Shared memory (dynamic, no swizzle, every operand in the canonical
//   "8 rows x 16 bytes core matrix" layout, core matrices row-group-major):
//     Q tile [64 x (L+R)], `stages` KV blocks [kv_block x (L+R)], P tile
//     [64 x kv_block] bf16/f16, one mbarrier, the tcgen05.alloc slot.
//   A KV block serves as K (K-major B of QK^T: LBO steps channel groups,
//   SBO token groups) and, unchanged, as V (MN-major B of PV: LBO steps
//   token groups, SBO channel groups), so it is loaded once.
//
// Per KV block: cp.async prefetch of block k+stages-1; thread 0 issues the
// (L+R)/16 QK^T MMAs and commits them to the mbarrier; every thread loads its
// score row (tcgen05.ld), masks with select, updates the base-2 running max
// and sum, writes P (bf16/f16) to shared memory and, when some row's max
// moved, rescales its O row in TMEM (ld, multiply, st); thread 0 then issues
// the PV MMAs for both O halves and commits. The epilogue divides by the sum
// and writes partial_out / partial_lse (natural log).
//
//===----------------------------------------------------------------------===//

#include "GpuCodegenUtils.h"
#include "mla/Conversion/MLAToGPU/MLAToGPU.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/SymbolTable.h"

#include <cmath>

using namespace mlir;
namespace abi = mla::gpu;

namespace {

/// Column of TMEM where the scores start (O halves use columns [0, L/2)).
constexpr int64_t kScoreColumn = 256;
constexpr int64_t kTmemColumns = 512;
constexpr int64_t kThreads = 128;
constexpr int64_t kRows = 64;

/// DeviceBuilder plus the tcgen05 pointer and the non-ftz base-2
/// exponential/logarithm intrinsics this kernel uses.
struct KernelBuilder : mla::gpu_codegen::DeviceBuilder {
  explicit KernelBuilder(ImplicitLocOpBuilder &b)
      : DeviceBuilder(b), loc(b.getLoc()) {}
  Location loc;

  Value ex2(Value x) { return callIntrinsic("llvm.nvvm.ex2.approx.f32", x); }
  Value lg2(Value x) { return callIntrinsic("llvm.nvvm.lg2.approx.f", x); }

  /// A TMEM address (lane << 16 | column) as the pointer tcgen05 ops take.
  Value tmem(Value addr) {
    return LLVM::IntToPtrOp::create(
        b, LLVM::LLVMPointerType::get(b.getContext(), 6), addr);
  }
};

/// A tcgen05 shared-memory matrix descriptor without swizzling: start
/// address, leading and stride byte offsets (all >> 4), bit 46 set (the
/// sm_100 descriptor version), base offset 0, relative LBO mode.
Value smemDescriptor(KernelBuilder &kb, Value smemAddr, int64_t lbo,
                     int64_t sbo) {
  uint64_t fixed = (uint64_t(lbo >> 4) << 16) | (uint64_t(sbo >> 4) << 32) |
                   (uint64_t(1) << 46);
  Value start = kb.zext64(
      kb.divu(kb.andi(smemAddr, kb.c32(0x3FFFF)), kb.c32(16)));
  return kb.ori(start, kb.c64(static_cast<int64_t>(fixed)));
}

/// The kind::f16 instruction descriptor: f32 accumulator, bf16 or f16 A and
/// B, A K-major, B K-major or MN-major, N >> 3 at bit 17, M >> 4 at bit 24.
int64_t instrDescriptor(abi::ElemType elem, bool bMnMajor, int64_t m,
                        int64_t n) {
  int64_t ab = elem == abi::ElemType::BF16 ? 1 : 0;
  return (int64_t(1) << 4) | (ab << 7) | (ab << 10) |
         (int64_t(bMnMajor) << 16) | ((n >> 3) << 17) | ((m >> 4) << 24);
}

/// Byte offset of element (row, col) of a row-major [rows x cols] 16-bit
/// tile stored as 8x(16 bytes) core matrices, row groups outermost.
Value coreMatrixOffset(KernelBuilder &kb, Value row, Value col, int64_t cols) {
  Value c8 = kb.c32(8);
  Value cm = kb.add(kb.mul(kb.divu(row, c8), kb.c32(cols / 8)),
                    kb.divu(col, c8));
  return kb.add(kb.add(kb.mul(cm, kb.c32(128)),
                       kb.mul(kb.remu(row, c8), kb.c32(16))),
                kb.mul(kb.remu(col, c8), kb.c32(2)));
}

/// The dynamic shared memory symbol of the gpu.module (created once).
LLVM::GlobalOp getDynamicSmem(OpBuilder &builder, Location loc) {
  Operation *module = builder.getInsertionBlock()->getParentOp();
  StringRef name = "mla_sm100_dynamic_smem";
  if (auto existing = dyn_cast_or_null<LLVM::GlobalOp>(
          SymbolTable::lookupSymbolIn(module, name)))
    return existing;
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(&module->getRegion(0).front());
  auto type = LLVM::LLVMArrayType::get(builder.getI8Type(), 0);
  return LLVM::GlobalOp::create(builder, loc, type, /*isConstant=*/false,
                                LLVM::Linkage::External, name, Attribute(),
                                /*alignment=*/128, /*addrSpace=*/3);
}

class DecodeSM100Emitter {
public:
  DecodeSM100Emitter(ImplicitLocOpBuilder &builder,
                     const abi::DecodeShape &shape,
                     const abi::DecodeTiling &tiling)
      : kb(builder), shape(shape), tiling(tiling), D(shape.rowDim()),
        L(shape.latentDim), Lh(shape.latentDim / 2), KB(tiling.kvBlock) {}

  mlir::gpu::GPUFuncOp emit(StringRef name);

private:
  KernelBuilder kb;
  const abi::DecodeShape &shape;
  const abi::DecodeTiling &tiling;
  int64_t D, L, Lh, KB;

  // Values shared by the phases of the kernel body.
  Value tid, warp, lane, blockB, blockS, rowBase;
  Value q, cache, blockTable, partialOut, partialLse, numB, maxPages, numS;
  Value smemQ, smemKV, smemP, mbar, slot;
  Value start, endCta, numBlocks;
  Type elemTy;

  Value smemAddr(Value ptr) {
    return LLVM::PtrToIntOp::create(kb.b, kb.loc, kb.i32, ptr);
  }
  Value smemAt(Value base, Value byteOffset) {
    return kb.gepBytes(base, byteOffset);
  }
  Value kvStage(Value stage) {
    return smemAt(smemKV, kb.mul(stage, kb.c32(KB * D * 2)));
  }
  void loadQ();
  void loadKVBlock(Value block);
  void barrier() { kb.barrier(); }
  void tcFence(NVVM::Tcgen05FenceKind kind) {
    NVVM::Tcgen05FenceOp::create(kb.b, kb.loc, kind);
  }
  /// Blocks until the tcgen05 work committed for `phase` has completed.
  void waitMma(Value phase) {
    NVVM::MBarrierTryWaitParityOp::create(kb.b, kb.loc, mbar, phase,
                                          kb.c32(0x989680));
    tcFence(NVVM::Tcgen05FenceKind::AFTER_THREAD_SYNC);
  }
  /// Lets shared-memory writes of the generic proxy (st.shared, cp.async)
  /// be read by the tensor cores, then synchronises the CTA.
  void publishSmem() {
    NVVM::FenceProxyOp::create(
        kb.b, kb.loc, NVVM::ProxyKind::async_shared,
        NVVM::SharedSpaceAttr::get(kb.b.getContext(),
                                   NVVM::SharedSpace::shared_cta));
    tcFence(NVVM::Tcgen05FenceKind::BEFORE_THREAD_SYNC);
    barrier();
    tcFence(NVVM::Tcgen05FenceKind::AFTER_THREAD_SYNC);
  }
  void mma(Value d, Value aDesc, Value bDesc, int64_t idesc, Value accumulate) {
    NVVM::Tcgen05MMAOp::create(
        kb.b, kb.loc, NVVM::Tcgen05MMAKind::F16, NVVM::CTAGroupKind::CTA_1,
        NVVM::Tcgen05MMACollectorOp::DISCARD, /*aShift=*/false, d, aDesc,
        bDesc, kb.c32(idesc), accumulate, Value(), Value());
  }
  Value tmemLoad(Value addr, int64_t num) {
    Type t = VectorType::get({num}, kb.i32);
    return NVVM::Tcgen05LdOp::create(kb.b, kb.loc, t, /*pack=*/false,
                                     NVVM::Tcgen05LdStShape::SHAPE_32X32B,
                                     kb.tmem(addr), Value());
  }
  Value extractF32(Value vec, int64_t i) {
    return LLVM::BitcastOp::create(kb.b, kb.f32, kb.extract(vec, i));
  }
  Value shflIdx(Value v, Value srcLane) {
    return NVVM::ShflOp::create(kb.b, kb.loc, v.getType(), kb.c32(-1), v,
                                srcLane, kb.c32(0x1f), NVVM::ShflKind::idx,
                                UnitAttr());
  }
};

void DecodeSM100Emitter::loadQ() {
  // Row r of the tile is row rowBase + r of request b: q + ((b*Sq*N + row) *
  // D); rows past Sq*N are zero-filled (src-size 0).
  int64_t chunksPerRow = D / 8;
  int64_t total = kRows * chunksPerRow;
  int64_t rowsTotal = shape.queryRows * shape.numHeads;
  kb.forLoop(kb.c32(0), kb.c32((total + kThreads - 1) / kThreads), kb.c32(1),
          {}, [&](Value it, ValueRange) {
            Value idx = kb.add(kb.mul(it, kb.c32(kThreads)), tid);
            kb.ifThen(kb.slt(idx, kb.c32(total)), [&] {
              Value r = kb.divu(idx, kb.c32(chunksPerRow));
              Value cg = kb.remu(idx, kb.c32(chunksPerRow));
              Value row = kb.add(rowBase, r);
              Value valid = kb.slt(row, kb.c32(rowsTotal));
              Value rowC = kb.select(valid, row, kb.c32(0));
              Value elem = kb.add(
                  kb.mul(kb.add(kb.mul(kb.toI64(blockB), kb.c64(rowsTotal)),
                                kb.toI64(rowC)),
                         kb.c64(D)),
                  kb.toI64(kb.mul(cg, kb.c32(8))));
              Value src = kb.gep(q, elemTy, elem);
              Value dst = smemAt(
                  smemQ, coreMatrixOffset(kb, r, kb.mul(cg, kb.c32(8)), D));
              Value size = kb.select(valid, kb.c32(16), kb.c32(0));
              NVVM::CpAsyncOp::create(kb.b, kb.loc, dst, src, 16,
                                      NVVM::LoadCacheModifierKind::CG, size);
            });
            return SmallVector<Value>{};
          });
}

void DecodeSM100Emitter::loadKVBlock(Value block) {
  // Token t of the block is position start + block*KB + t; tokens at or past
  // endCta are zero-filled so that masked P entries (exactly 0) never meet a
  // NaN in V, and their address is that of position endCta-1, which lies in
  // the piece, so block_table is only read inside the piece.
  int64_t chunksPerRow = D / 8;
  int64_t total = KB * chunksPerRow;
  Value dstBase = kvStage(kb.remu(block, kb.c32(tiling.stages)));
  Value first = kb.add(start, kb.mul(block, kb.c32(KB)));
  Value pageSize = kb.c32(shape.pageSize);
  kb.forLoop(kb.c32(0), kb.c32((total + kThreads - 1) / kThreads), kb.c32(1),
          {}, [&](Value it, ValueRange) {
            Value idx = kb.add(kb.mul(it, kb.c32(kThreads)), tid);
            kb.ifThen(kb.slt(idx, kb.c32(total)), [&] {
              Value t = kb.divu(idx, kb.c32(chunksPerRow));
              Value cg = kb.remu(idx, kb.c32(chunksPerRow));
              Value pos = kb.add(first, t);
              Value valid = kb.slt(pos, endCta);
              Value posC = kb.select(valid, pos, kb.sub(endCta, kb.c32(1)));
              Value entry = kb.add(kb.mul(blockB, maxPages),
                                   kb.divu(posC, pageSize));
              Value page = kb.load(kb.i32,
                                   kb.gep(blockTable, kb.i32, entry), 4);
              Value cacheRow =
                  kb.add(kb.mul(kb.toI64(page), kb.c64(shape.pageSize)),
                         kb.toI64(kb.remu(posC, pageSize)));
              Value elem = kb.add(kb.mul(cacheRow, kb.c64(D)),
                                  kb.toI64(kb.mul(cg, kb.c32(8))));
              Value src = kb.gep(cache, elemTy, elem);
              Value dst = smemAt(
                  dstBase, coreMatrixOffset(kb, t, kb.mul(cg, kb.c32(8)), D));
              Value size = kb.select(valid, kb.c32(16), kb.c32(0));
              NVVM::CpAsyncOp::create(kb.b, kb.loc, dst, src, 16,
                                      NVVM::LoadCacheModifierKind::CG, size);
            });
            return SmallVector<Value>{};
          });
}

mlir::gpu::GPUFuncOp DecodeSM100Emitter::emit(StringRef name) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  LLVM::GlobalOp dynSmem = getDynamicSmem(b, loc);

  SmallVector<Type> params(7, kb.ptrGlobal);
  params.append(3, kb.i32);
  OpBuilder::InsertionGuard guard(b);
  auto fn = mla::gpu_codegen::createKernel(kb.b, name, params, kThreads);
  ValueRange args = fn.getArguments();
  q = args[0];
  cache = args[1];
  blockTable = args[2];
  Value seqLens = args[3], splitBounds = args[4];
  partialOut = args[5];
  partialLse = args[6];
  numB = args[7];
  maxPages = args[8];
  numS = args[9];
  elemTy = shape.elem == abi::ElemType::BF16 ? Type(b.getBF16Type())
                                             : Type(b.getF16Type());

  tid = kb.threadIdX();
  warp = kb.divu(tid, kb.c32(32));
  lane = kb.remu(tid, kb.c32(32));
  Value blockX = kb.blockIdX();
  blockS = kb.blockIdY();
  blockB = kb.blockIdZ();
  rowBase = kb.mul(blockX, kb.c32(kRows));

  // Shared memory carve-up from a 128-byte aligned base.
  Value raw = LLVM::AddressOfOp::create(b, loc, kb.ptrShared,
                                        dynSmem.getSymName());
  Value rawAddr = smemAddr(raw);
  Value pad = kb.sub(kb.andi(kb.add(rawAddr, kb.c32(127)), kb.c32(~127)),
                     rawAddr);
  Value base = smemAt(raw, pad);
  int64_t qBytes = kRows * D * 2;
  int64_t kvBytes = tiling.stages * KB * D * 2;
  int64_t pBytes = kRows * KB * 2;
  smemQ = base;
  smemKV = smemAt(base, kb.c32(qBytes));
  smemP = smemAt(base, kb.c32(qBytes + kvBytes));
  mbar = smemAt(base, kb.c32(qBytes + kvBytes + pBytes));
  slot = smemAt(base, kb.c32(qBytes + kvBytes + pBytes + 8));

  // The piece [start, end) of request b, clamped to [0, seq_len); causal
  // rows additionally stop at seq_len - Sq + i, so the CTA needs positions
  // up to that of its last query token.
  Value seqLen = kb.load(kb.i32, kb.gep(seqLens, kb.i32, blockB), 4);
  Value boundIdx = kb.add(kb.mul(blockB, kb.add(numS, kb.c32(1))), blockS);
  Value lo = kb.load(kb.i32, kb.gep(splitBounds, kb.i32, boundIdx), 4);
  Value hi = kb.load(kb.i32,
                     kb.gep(splitBounds, kb.i32,
                            kb.add(boundIdx, kb.c32(1))),
                     4);
  Value zero = kb.c32(0);
  start = kb.minsi(kb.maxsi(lo, zero), seqLen);
  Value end = kb.maxsi(kb.minsi(kb.maxsi(hi, zero), seqLen), start);
  Value causalBase = kb.sub(seqLen, kb.c32(shape.queryRows));
  endCta = end;
  if (shape.causal) {
    Value lastRow = kb.minsi(kb.add(rowBase, kb.c32(kRows - 1)),
                            kb.c32(shape.queryRows * shape.numHeads - 1));
    Value lastToken = kb.divu(lastRow, kb.c32(shape.numHeads));
    endCta = kb.maxsi(
        kb.minsi(end, kb.add(kb.add(causalBase, lastToken), kb.c32(1))),
        start);
  }
  numBlocks = kb.divs(kb.add(kb.sub(endCta, start), kb.c32(KB - 1)),
                      kb.c32(KB));

  // TMEM allocation (warp 0), mbarrier init (thread 0), Q and the first
  // stages-1 KV blocks in flight.
  Value isWarp0 = kb.eq(warp, zero);
  Value isThread0 = kb.eq(tid, zero);
  kb.ifThen(isWarp0, [&] {
    NVVM::Tcgen05AllocOp::create(b, loc, slot, kb.c32(kTmemColumns));
    NVVM::Tcgen05RelinquishAllocPermitOp::create(b, loc);
  });
  kb.ifThen(isThread0,
            [&] { NVVM::MBarrierInitOp::create(b, loc, mbar, kb.c32(1), Value()); });
  loadQ();
  NVVM::CpAsyncCommitGroupOp::create(b, loc);
  for (int64_t s = 0; s + 1 < tiling.stages; ++s) {
    kb.ifThen(kb.slt(kb.c32(s), numBlocks), [&] { loadKVBlock(kb.c32(s)); });
    NVVM::CpAsyncCommitGroupOp::create(b, loc);
  }
  tcFence(NVVM::Tcgen05FenceKind::BEFORE_THREAD_SYNC);
  barrier();
  tcFence(NVVM::Tcgen05FenceKind::AFTER_THREAD_SYNC);
  Value tbase = kb.load(kb.i32, slot, 4);
  // Warp w reads TMEM sub-partition w (lanes 32w..32w+31).
  Value tWarp = kb.add(tbase, kb.shl(kb.mul(warp, kb.c32(32)), kb.c32(16)));

  // Per-thread row: lanes < 16 own row 16w+lane (scores, max, sum and the
  // first O half), lanes >= 16 the same row's second O half.
  Value half = kb.divu(lane, kb.c32(16));
  Value rowLane = kb.remu(lane, kb.c32(16));
  Value rowLocal = kb.add(kb.mul(warp, kb.c32(16)), rowLane);
  Value row = kb.add(rowBase, rowLocal);
  Value rowEnd = endCta;
  if (shape.causal) {
    Value token = kb.divu(row, kb.c32(shape.numHeads));
    rowEnd = kb.minsi(endCta, kb.add(kb.add(causalBase, token), kb.c32(1)));
  }

  float log2e = 1.4426950408889634f;
  Value scoreScale = kb.f(shape.scale * log2e);
  Value negInf = kb.f(-INFINITY);
  Value one = kb.f(1.0);
  int64_t idescQK = instrDescriptor(shape.elem, false, kRows, KB);
  int64_t idescPV = instrDescriptor(shape.elem, true, kRows, Lh);
  Value descQ = smemDescriptor(kb, smemAddr(smemQ), 128, 16 * D);
  Value descP = smemDescriptor(kb, smemAddr(smemP), 128, 16 * KB);
  Value tScores = kb.add(tbase, kb.c32(kScoreColumn));
  Value tOLow = tbase;
  Value tOHigh = kb.add(tbase, kb.c32(16 << 16));

  SmallVector<Value> init{negInf, kb.f(0.0), zero};
  SmallVector<Value> fin = kb.forLoop(
      zero, numBlocks, kb.c32(1), init, [&](Value blk, ValueRange it) {
        Value m = it[0], l = it[1], phase = it[2];
        // Prefetch block blk+stages-1 into the stage block blk-1 used; its
        // PV MMAs completed in the previous iteration.
        Value pf = kb.add(blk, kb.c32(tiling.stages - 1));
        kb.ifThen(kb.slt(pf, numBlocks), [&] { loadKVBlock(pf); });
        NVVM::CpAsyncCommitGroupOp::create(b, loc);
        NVVM::CpAsyncWaitGroupOp::create(b, loc, tiling.stages - 1);
        publishSmem();

        // S = Q K^T: (L+R)/16 MMAs of 64 x KB x 16.
        Value kv = kvStage(kb.remu(blk, kb.c32(tiling.stages)));
        Value kvAddr = smemAddr(kv);
        Value descK = smemDescriptor(kb, kvAddr, 128, 16 * D);
        kb.ifThen(isThread0, [&] {
          kb.forLoop(kb.c32(0), kb.c32(D / 16), kb.c32(1), {},
                  [&](Value ks, ValueRange) {
                    // 16 channels = two core matrices = 256 bytes.
                    Value step = kb.zext64(kb.mul(ks, kb.c32(16)));
                    mma(kb.tmem(tScores), kb.add(descQ, step),
                        kb.add(descK, step), idescQK,
                        kb.cmp(arith::CmpIPredicate::ne, ks, zero));
                    return SmallVector<Value>{};
                  });
          NVVM::Tcgen05CommitOp::create(b, loc, mbar, Value());
        });
        waitMma(phase);
        phase = kb.bitXor(phase, kb.c32(1));

        // Online softmax in base 2 on this thread's score row.
        Value sVec = tmemLoad(kb.add(tWarp, kb.c32(kScoreColumn)), KB);
        NVVM::Tcgen05WaitOp::create(b, loc, NVVM::Tcgen05WaitKind::LOAD);
        Value first = kb.add(start, kb.mul(blk, kb.c32(KB)));
        SmallVector<Value> x(KB), valid(KB);
        Value blockMax = negInf;
        for (int64_t j = 0; j < KB; ++j) {
          valid[j] = kb.slt(kb.add(first, kb.c32(j)), rowEnd);
          x[j] = kb.select(valid[j], kb.fmul(extractF32(sVec, j), scoreScale),
                           negInf);
          blockMax = kb.maximumf(blockMax, x[j]);
        }
        Value mNew = kb.maximumf(m, blockMax);
        Value mUse = kb.select(kb.fcmp(arith::CmpFPredicate::OEQ, mNew, negInf),
                               kb.f(0.0), mNew);
        Value alpha = kb.ex2(kb.fsub(m, mUse));
        Value sum = kb.f(0.0);
        SmallVector<Value> p(KB);
        for (int64_t j = 0; j < KB; ++j) {
          p[j] = kb.select(valid[j], kb.ex2(kb.fsub(x[j], mUse)),
                           kb.f(0.0));
          sum = kb.fadd(sum, p[j]);
        }
        Value lNew = kb.fadd(kb.fmul(l, alpha), sum);

        // P row to shared memory, eight 16-bit values per core-matrix row.
        kb.ifThen(kb.slt(lane, kb.c32(16)), [&] {
          Type vecTy = VectorType::get({8}, elemTy);
          Type vecF = VectorType::get({8}, kb.f32);
          for (int64_t j = 0; j < KB; j += 8) {
            Value v = LLVM::UndefOp::create(b, loc, vecF);
            for (int64_t e = 0; e < 8; ++e)
              v = LLVM::InsertElementOp::create(b, loc, v, p[j + e],
                                                kb.c32(e));
            Value packed = arith::TruncFOp::create(b, loc, vecTy, v);
            Value off = coreMatrixOffset(kb, rowLocal, kb.c32(j), KB);
            kb.store(packed, smemAt(smemP, off), 16);
          }
        });

        // Rescale O rows whose max moved (O is undefined before block 0,
        // whose PV MMAs overwrite it).
        Value alphaRow = shflIdx(alpha, rowLane);
        Value moved = kb.fcmp(arith::CmpFPredicate::UNE, alphaRow, one);
        Value anyMoved = NVVM::VoteSyncOp::create(b, loc, kb.i1, kb.c32(-1),
                                                  moved, NVVM::VoteSyncKind::any);
        Value rescale = kb.andi(anyMoved, kb.cmp(arith::CmpIPredicate::sgt,
                                                 blk, zero));
        kb.ifThen(rescale, [&] {
          kb.forLoop(kb.c32(0), kb.c32(Lh / 32), kb.c32(1), {},
                  [&](Value c, ValueRange) {
                    Value addr = kb.add(tWarp, kb.mul(c, kb.c32(32)));
                    Value o = tmemLoad(addr, 32);
                    NVVM::Tcgen05WaitOp::create(b, loc,
                                                NVVM::Tcgen05WaitKind::LOAD);
                    Type vf = VectorType::get({32}, kb.f32);
                    Value of = LLVM::BitcastOp::create(b, loc, vf, o);
                    Value splat = LLVM::UndefOp::create(b, loc, vf);
                    for (int64_t e = 0; e < 32; ++e)
                      splat = LLVM::InsertElementOp::create(b, loc, splat,
                                                            alphaRow,
                                                            kb.c32(e));
                    Value scaled = kb.fmul(of, splat);
                    Value back = LLVM::BitcastOp::create(b, loc, o.getType(),
                                                         scaled);
                    NVVM::Tcgen05StOp::create(
                        b, loc, /*unpack=*/false,
                        NVVM::Tcgen05LdStShape::SHAPE_32X32B, kb.tmem(addr),
                        back, Value());
                    return SmallVector<Value>{};
                  });
          NVVM::Tcgen05WaitOp::create(b, loc, NVVM::Tcgen05WaitKind::STORE);
        });
        publishSmem();

        // O += P V for both halves: KB/16 MMAs of 64 x L/2 x 16 each.
        Value descVLow = smemDescriptor(kb, kvAddr, 16 * D, 128);
        Value descVHigh = smemDescriptor(
            kb, kb.add(kvAddr, kb.c32((Lh / 8) * 128)), 16 * D, 128);
        kb.ifThen(isThread0, [&] {
          kb.forLoop(kb.c32(0), kb.c32(KB / 16), kb.c32(1), {},
                  [&](Value ks, ValueRange) {
                    // 16 tokens of P: two core matrices (256 bytes); of V:
                    // two token groups (2 * 16*D bytes).
                    Value stepP = kb.zext64(kb.mul(ks, kb.c32(16)));
                    Value stepV = kb.zext64(kb.mul(ks, kb.c32(2 * D)));
                    Value acc = kb.ori(kb.cmp(arith::CmpIPredicate::ne, ks, zero),
                                       kb.cmp(arith::CmpIPredicate::sgt, blk,
                                              zero));
                    Value a = kb.add(descP, stepP);
                    mma(kb.tmem(tOLow), a, kb.add(descVLow, stepV), idescPV,
                        acc);
                    mma(kb.tmem(tOHigh), a, kb.add(descVHigh, stepV), idescPV,
                        acc);
                    return SmallVector<Value>{};
                  });
          NVVM::Tcgen05CommitOp::create(b, loc, mbar, Value());
        });
        waitMma(phase);
        phase = kb.bitXor(phase, kb.c32(1));
        return SmallVector<Value>{mNew, lNew, phase};
      });

  // An empty piece never waited for its Q copies.
  NVVM::CpAsyncWaitGroupOp::create(b, loc, 0);

  // Epilogue: out = O / l (0 where the row saw nothing), lse = ln(sum e^s).
  Value mRow = shflIdx(fin[0], rowLane);
  Value lRow = shflIdx(fin[1], rowLane);
  Value hasData = kb.andi(kb.slt(zero, numBlocks),
                          kb.fcmp(arith::CmpFPredicate::OGT, lRow,
                                  kb.f(0.0)));
  Value inv = kb.select(hasData, arith::DivFOp::create(b, loc, one, lRow),
                        kb.f(0.0));
  int64_t rowsTotal = shape.queryRows * shape.numHeads;
  Value rowValid = kb.slt(row, kb.c32(rowsTotal));
  Value rowC = kb.select(rowValid, row, zero);
  // partial_out[s, b, row, half*L/2 ...] with row = i*N + n.
  Value outElem = kb.add(
      kb.mul(kb.add(kb.mul(kb.toI64(kb.add(kb.mul(blockS, numB), blockB)),
                           kb.c64(rowsTotal)),
                    kb.toI64(rowC)),
             kb.c64(L)),
      kb.toI64(kb.mul(half, kb.c32(Lh))));
  Value outRow = kb.gep(partialOut, kb.f32, outElem);
  Type vf4 = VectorType::get({4}, kb.f32);
  kb.forLoop(zero, kb.c32(Lh / 32), kb.c32(1), {}, [&](Value c, ValueRange) {
    Value col = kb.mul(c, kb.c32(32));
    Value o = tmemLoad(kb.add(tWarp, col), 32);
    NVVM::Tcgen05WaitOp::create(b, loc, NVVM::Tcgen05WaitKind::LOAD);
    kb.ifThen(rowValid, [&] {
      for (int64_t e = 0; e < 32; e += 4) {
        Value v = LLVM::UndefOp::create(b, loc, vf4);
        for (int64_t k = 0; k < 4; ++k) {
          Value x = kb.select(hasData, kb.fmul(extractF32(o, e + k), inv),
                              kb.f(0.0));
          v = LLVM::InsertElementOp::create(b, loc, v, x, kb.c32(k));
        }
        Value dst = kb.gep(outRow, kb.f32,
                           kb.toI64(kb.add(col, kb.c32(e))));
        kb.store(v, dst, 16);
      }
    });
    return SmallVector<Value>{};
  });
  // partial_lse[s, b, n, i] = (m + log2 l) * ln 2.
  kb.ifThen(kb.andi(rowValid, kb.slt(lane, kb.c32(16))), [&] {
    Value token = kb.divu(row, kb.c32(shape.numHeads));
    Value head = kb.remu(row, kb.c32(shape.numHeads));
    Value lseElem = kb.add(
        kb.mul(kb.add(kb.mul(kb.toI64(kb.add(kb.mul(blockS, numB), blockB)),
                             kb.c64(shape.numHeads)),
                      kb.toI64(head)),
               kb.c64(shape.queryRows)),
        kb.toI64(token));
    Value lseVal = kb.fmul(kb.fadd(mRow, kb.lg2(lRow)),
                           kb.f(0.6931471805599453));
    kb.store(kb.select(hasData, lseVal, negInf),
             kb.gep(partialLse, kb.f32, lseElem), 4);
  });

  tcFence(NVVM::Tcgen05FenceKind::BEFORE_THREAD_SYNC);
  barrier();
  kb.ifThen(isWarp0, [&] {
    tcFence(NVVM::Tcgen05FenceKind::AFTER_THREAD_SYNC);
    NVVM::Tcgen05DeallocOp::create(b, loc, kb.tmem(tbase),
                                   kb.c32(kTmemColumns));
  });
  mlir::gpu::ReturnOp::create(b, loc);
  return fn;
}

} // namespace

namespace mla::gpu_codegen {

FailureOr<mlir::gpu::GPUFuncOp>
emitDecodePartialSM100(OpBuilder &builder, Location loc, StringRef name,
                       const abi::DecodeShape &shape,
                       const abi::DecodeTiling &tiling) {
  std::string why = abi::checkDecodeTiling(abi::Chip::SM100a, shape, tiling);
  if (!why.empty())
    return emitError(loc) << "sm_100a decode: " << why;
  ImplicitLocOpBuilder b(loc, builder);
  return DecodeSM100Emitter(b, shape, tiling).emit(name);
}

} // namespace mla::gpu_codegen
