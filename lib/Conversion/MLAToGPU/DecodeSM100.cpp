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
// DecodeSM100Emitter writes the kernel as a sequence of short blocks in that
// order; the tcgen05 instructions and descriptors come from
// mla/GPUCodegen/Tcgen05.h.
//
//===----------------------------------------------------------------------===//

#include "Fp8RowChunks.h"
#include "mla/Conversion/MLAToGPU/MLAToGPU.h"
#include "mla/GPUCodegen/DeviceBuilder.h"
#include "mla/GPUCodegen/Tcgen05.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>

using namespace mlir;
namespace abi = mla::gpu;
namespace tc = mla::gpu_codegen::tcgen05;

namespace {

/// Column of TMEM where the scores start (O halves use columns [0, L/2)).
constexpr int64_t kScoreColumn = 256;
constexpr int64_t kTmemColumns = 512;
constexpr int64_t kThreads = 128;
constexpr int64_t kRows = 64;

/// DeviceBuilder plus the non-ftz base-2 exponential/logarithm intrinsics
/// this kernel uses.
struct KernelBuilder : mla::gpu_codegen::DeviceBuilder {
  explicit KernelBuilder(ImplicitLocOpBuilder &b) : DeviceBuilder(b) {}

  Value ex2(Value x) { return callIntrinsic("llvm.nvvm.ex2.approx.f32", x); }
  Value lg2(Value x) { return callIntrinsic("llvm.nvvm.lg2.approx.f", x); }
};

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

/// The kernel parameters, in KernelABI.h's decode-partial order.
struct KernelArgs {
  Value q, cache, blockTable, seqLens, splitBounds, partialOut, partialLse;
  Value numB, maxPages, numS, softmaxScale;
  /// fp8_e4m3: the per-tensor scale (f32, read once); null otherwise.
  Value kvScale;
};

/// Pointers into the CTA's shared memory.
struct SharedTiles {
  /// `raw`: an fp8 cache's ring of raw blocks (null for bf16/f16).
  Value q, kv, p, mbar, slot, raw;
};

/// What one KV block does to this thread's online-softmax row: the new
/// running max and sum, the factor that rescales O, and the probabilities.
struct SoftmaxStep {
  Value m, l, alpha;
  SmallVector<Value> p;
};

/// Emits the kernel as a sequence of blocks; each block reads the values
/// earlier ones left in members and sets its own.
class DecodeSM100Emitter {
public:
  DecodeSM100Emitter(ImplicitLocOpBuilder &builder,
                     const abi::DecodeShape &shape,
                     const abi::DecodeTiling &tiling)
      : kb(builder), shape(shape), tiling(tiling), D(shape.rowDim()),
        L(shape.latentDim), Lh(shape.latentDim / 2), KB(tiling.kvBlock),
        rawStageBytes(
            shape.fp8() ? llvm::alignTo(KB * shape.cacheRowBytes(), 128) : 0) {}

  mlir::gpu::GPUFuncOp emit(StringRef name);

private:
  KernelBuilder kb;
  const abi::DecodeShape &shape;
  const abi::DecodeTiling &tiling;
  int64_t D, L, Lh, KB;
  /// Bytes of one raw block of an fp8 cache in the ring (0 for bf16/f16).
  int64_t rawStageBytes;
  Type elemTy;
  KernelArgs args;
  SharedTiles smem;

  // Thread geometry and the piece of the sequence this CTA attends to.
  Value tid, warp, lane, blockB, blockS, rowBase, zero;
  Value start, causalBase, endCta, numBlocks, isWarp0, isThread0;
  // This thread's row: lanes < 16 own row 16w+lane (scores, max, sum and
  // the first O half), lanes >= 16 the same row's second O half.
  Value half, rowLane, rowLocal, row, rowEnd;
  // TMEM addresses and the MMA operands that do not change per block.
  Value tbase, tWarp, tScores, tOLow, tOHigh, descQ, descP;
  Value scoreScale, negInf, one;
  int64_t idescQK = 0, idescPV = 0;

  // Blocks, in emission order.
  mlir::gpu::GPUFuncOp createFunction(StringRef name);
  void setUpThreadGeometry();
  void carveSharedMemory(LLVM::GlobalOp dynSmem);
  void computePieceBounds();
  void startTmemAndStaging();
  void computeRowLimits();
  void prepareMmaOperands();
  SmallVector<Value> processKVBlock(Value blk, ValueRange carried);
  void prefetchKVBlock(Value blk);
  void issueScoreMmas(Value kvAddr);
  SoftmaxStep softmaxStep(Value blk, Value m, Value l);
  void storeP(ArrayRef<Value> p);
  void rescaleO(Value alpha, Value blk);
  void issuePVMmas(Value kvAddr, Value blk);
  void writeResults(Value m, Value l);
  void writeOutput(Value rowC, Value rowValid, Value hasData, Value inv);
  void writeLse(Value rowValid, Value hasData, Value mRow, Value lRow);
  void releaseTmem();

  // Staging of Q and KV rows with cp.async.
  void copyRowsToTile(
      Value tile, int64_t rows,
      function_ref<std::pair<Value, Value>(Value r, Value cg)> source);
  /// `rows` x `chunksPerRow` 16-byte cp.async copies: chunk cg of row r to
  /// `dst(r, cg)`, from `source(r, cg)` (its address and whether it exists;
  /// if not, zero-filled).
  void
  copyChunks(int64_t rows, int64_t chunksPerRow,
             function_ref<Value(Value r, Value cg)> dst,
             function_ref<std::pair<Value, Value>(Value r, Value cg)> source);
  /// `body(r, cg)` for the `rows` x `chunksPerRow` chunks, the CTA's threads
  /// taking them in turn (a loop over rounds, each round one chunk per
  /// thread).
  void forEachChunk(int64_t rows, int64_t chunksPerRow,
                    function_ref<void(Value r, Value cg)> body);
  void loadQ();
  /// The cache row (i64) of KV position `pos` and whether it is in the piece
  /// (< endCta); a position past it reads the row of endCta - 1, so
  /// block_table is only read inside the piece.
  std::pair<Value, Value> cacheRowOf(Value pos, Value pageSize);
  void loadKVBlock(Value block);
  /// An fp8 cache: block `block`'s raw rows into its ring slot.
  void loadRawBlock(Value block);
  /// An fp8 cache: the byte offset of block `blk`'s ring slot from smem.raw.
  Value rawSlot(Value blk) {
    return kb.mul(kb.remu(blk, kb.c32(tiling.stages)), kb.c32(rawStageBytes));
  }
  /// An fp8 cache: block `blk`'s raw rows dequantised into the KV tile
  /// (Fp8RowChunks), then published to the tensor cores.
  void dequantiseBlock(Value blk);

  Value smemAddr(Value ptr) {
    return LLVM::PtrToIntOp::create(kb.b, kb.i32, ptr);
  }
  Value smemAt(Value base, Value byteOffset) {
    return kb.gepBytes(base, byteOffset);
  }
  Value kvStage(Value stage) {
    return smemAt(smem.kv, kb.mul(stage, kb.c32(KB * D * 2)));
  }
  /// The KV tile block `blk` is read from: its ring stage, or an fp8
  /// cache's one dequantised tile.
  Value kvTileOf(Value blk) {
    return shape.fp8() ? smem.kv : kvStage(kb.remu(blk, kb.c32(tiling.stages)));
  }
  Value extractF32(Value vec, int64_t i) {
    return LLVM::BitcastOp::create(kb.b, kb.f32, kb.extract(vec, i));
  }
  Value shflIdx(Value v, Value srcLane) {
    return NVVM::ShflOp::create(kb.b, v.getType(), kb.c32(-1), v, srcLane,
                                kb.c32(0x1f), NVVM::ShflKind::idx, UnitAttr());
  }
};

//===----------------------------------------------------------------------===//
// Staging
//===----------------------------------------------------------------------===//

void DecodeSM100Emitter::copyRowsToTile(
    Value tile, int64_t rows,
    function_ref<std::pair<Value, Value>(Value r, Value cg)> source) {
  // Each thread copies 16-byte chunks (8 elements) into the core-matrix
  // layout.
  copyChunks(
      rows, D / 8,
      [&](Value r, Value cg) {
        return smemAt(tile,
                      tc::coreMatrixOffset(kb, r, kb.mul(cg, kb.c32(8)), D));
      },
      source);
}

void DecodeSM100Emitter::copyChunks(
    int64_t rows, int64_t chunksPerRow, function_ref<Value(Value, Value)> dst,
    function_ref<std::pair<Value, Value>(Value, Value)> source) {
  forEachChunk(rows, chunksPerRow, [&](Value r, Value cg) {
    auto [src, valid] = source(r, cg);
    Value to = dst(r, cg);
    kb.cpAsync16(to, src, kb.select(valid, kb.c32(16), kb.c32(0)));
  });
}

void DecodeSM100Emitter::forEachChunk(
    int64_t rows, int64_t chunksPerRow,
    function_ref<void(Value r, Value cg)> body) {
  int64_t total = rows * chunksPerRow;
  kb.forLoop(kb.c32(0), kb.c32((total + kThreads - 1) / kThreads), kb.c32(1),
             {}, [&](Value it, ValueRange) {
               Value idx = kb.add(kb.mul(it, kb.c32(kThreads)), tid);
               kb.ifThen(kb.slt(idx, kb.c32(total)), [&] {
                 Value r = kb.divu(idx, kb.c32(chunksPerRow));
                 Value cg = kb.remu(idx, kb.c32(chunksPerRow));
                 body(r, cg);
               });
               return SmallVector<Value>{};
             });
}

void DecodeSM100Emitter::loadQ() {
  // Row r of the tile is row rowBase + r of request b: q + ((b*Sq*N + row) *
  // D); rows past Sq*N are zero-filled.
  int64_t rowsTotal = shape.queryRows * shape.numHeads;
  copyRowsToTile(smem.q, kRows, [&](Value r, Value cg) {
    Value qRow = kb.add(rowBase, r);
    Value valid = kb.slt(qRow, kb.c32(rowsTotal));
    Value rowC = kb.select(valid, qRow, kb.c32(0));
    Value elem =
        kb.add(kb.mul(kb.add(kb.mul(kb.toI64(blockB), kb.c64(rowsTotal)),
                             kb.toI64(rowC)),
                      kb.c64(D)),
               kb.toI64(kb.mul(cg, kb.c32(8))));
    return std::make_pair(kb.gep(args.q, elemTy, elem), valid);
  });
}

std::pair<Value, Value> DecodeSM100Emitter::cacheRowOf(Value pos,
                                                       Value pageSize) {
  Value valid = kb.slt(pos, endCta);
  Value posC = kb.select(valid, pos, kb.sub(endCta, kb.c32(1)));
  Value entry = kb.add(kb.mul(blockB, args.maxPages), kb.divu(posC, pageSize));
  Value page = kb.load(kb.i32, kb.gep(args.blockTable, kb.i32, entry), 4);
  Value cacheRow = kb.add(kb.mul(kb.toI64(page), kb.c64(shape.pageSize)),
                          kb.toI64(kb.remu(posC, pageSize)));
  return {cacheRow, valid};
}

void DecodeSM100Emitter::loadKVBlock(Value block) {
  if (shape.fp8())
    return loadRawBlock(block);
  // Token t of the block is position start + block*KB + t; tokens at or past
  // endCta are zero-filled so that masked P entries (exactly 0) never meet a
  // NaN in V, and their address is that of position endCta-1, which lies in
  // the piece, so block_table is only read inside the piece.
  Value dstBase = kvStage(kb.remu(block, kb.c32(tiling.stages)));
  Value first = kb.add(start, kb.mul(block, kb.c32(KB)));
  Value pageSize = kb.c32(shape.pageSize);
  copyRowsToTile(dstBase, KB, [&](Value t, Value cg) {
    auto [cacheRow, valid] = cacheRowOf(kb.add(first, t), pageSize);
    Value elem =
        kb.add(kb.mul(cacheRow, kb.c64(D)), kb.toI64(kb.mul(cg, kb.c32(8))));
    return std::make_pair(kb.gep(args.cache, elemTy, elem), valid);
  });
}

void DecodeSM100Emitter::loadRawBlock(Value block) {
  // As loadKVBlock, byte rows of the cache (whole 16-byte chunks:
  // checkDecodeTiling) copied as they are into the block's ring slot.
  const int64_t rowBytes = shape.cacheRowBytes();
  Value slot = rawSlot(block);
  Value first = kb.add(start, kb.mul(block, kb.c32(KB)));
  Value pageSize = kb.c32(shape.pageSize);
  copyChunks(
      KB, rowBytes / 16,
      [&](Value t, Value cg) {
        return smemAt(smem.raw, kb.add(slot, kb.add(kb.mul(t, kb.c32(rowBytes)),
                                                    kb.mul(cg, kb.c32(16)))));
      },
      [&](Value t, Value cg) {
        auto [cacheRow, valid] = cacheRowOf(kb.add(first, t), pageSize);
        Value byte = kb.add(kb.mul(cacheRow, kb.c64(rowBytes)),
                            kb.toI64(kb.mul(cg, kb.c32(16))));
        return std::make_pair(kb.gep(args.cache, kb.i8, byte), valid);
      });
}

void DecodeSM100Emitter::dequantiseBlock(Value blk) {
  // Tokens past the piece were zero-filled, and zero codes, scales and bf16
  // values decode to zeros: no NaN of an unused slot reaches the tile.
  const int64_t rowBytes = shape.cacheRowBytes(), Lc = L / 8;
  mla::gpu_codegen::Fp8RowChunks rows(kb, shape, smem.raw, elemTy);
  Value slot = rawSlot(blk);
  // Chunks [c0, c1) of every token, `chunk` converting one.
  auto convert = [&](int64_t c0, int64_t c1,
                     function_ref<Value(Value, Value)> chunk) {
    forEachChunk(KB, c1 - c0, [&](Value t, Value cg) {
      Value c = kb.add(cg, kb.c32(c0));
      Value row = kb.add(slot, kb.mul(t, kb.c32(rowBytes)));
      Value v = chunk(row, c);
      Value off = tc::coreMatrixOffset(kb, t, kb.mul(c, kb.c32(8)), D);
      kb.store(v, smemAt(smem.kv, off), 16);
    });
  };
  auto latent = [&](Value row, Value c) { return rows.latent(row, c); };
  if (!rows.splitsRope()) {
    convert(0, D / 8, latent);
  } else {
    convert(0, Lc, latent);
    convert(Lc, D / 8, [&](Value row, Value c) { return rows.rope(row, c); });
  }
  tc::publishSharedToTensorCores(kb);
}

//===----------------------------------------------------------------------===//
// Prologue
//===----------------------------------------------------------------------===//

mlir::gpu::GPUFuncOp DecodeSM100Emitter::createFunction(StringRef name) {
  SmallVector<Type> params(7, kb.ptrGlobal);
  params.append(3, kb.i32);
  params.push_back(kb.f32);
  // fp8_e4m3's kv_scale (KernelABI.h: the 12th parameter).
  const bool kvScale = shape.kvFormat == abi::CacheFormat::FP8E4M3;
  if (kvScale)
    params.push_back(kb.ptrGlobal);
  assert(int64_t(params.size()) == abi::decodePartialNumParams(shape) &&
         "KernelABI.h's decode-partial parameters");
  auto fn = mla::gpu_codegen::createKernel(kb.b, name, params, kThreads);
  ValueRange a = fn.getArguments();
  args = {a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10]};
  if (kvScale)
    args.kvScale = kb.load(kb.f32, a[11], 4);
  elemTy = shape.elem == abi::ElemType::BF16 ? Type(kb.b.getBF16Type())
                                             : Type(kb.b.getF16Type());
  return fn;
}

void DecodeSM100Emitter::setUpThreadGeometry() {
  tid = kb.threadIdX();
  warp = kb.divu(tid, kb.c32(32));
  lane = kb.remu(tid, kb.c32(32));
  Value blockX = kb.blockIdX();
  blockS = kb.blockIdY();
  blockB = kb.blockIdZ();
  rowBase = kb.mul(blockX, kb.c32(kRows));
}

void DecodeSM100Emitter::carveSharedMemory(LLVM::GlobalOp dynSmem) {
  // From a 128-byte aligned base: Q, the KV stages, P, the mbarrier and the
  // tcgen05.alloc slot.
  Value raw =
      LLVM::AddressOfOp::create(kb.b, kb.ptrShared, dynSmem.getSymName());
  Value rawAddr = smemAddr(raw);
  Value pad =
      kb.sub(kb.andi(kb.add(rawAddr, kb.c32(127)), kb.c32(~127)), rawAddr);
  Value base = smemAt(raw, pad);
  int64_t qBytes = kRows * D * 2;
  // An fp8 cache: one dequantised KV tile, then (past the sync words) the
  // ring of raw blocks (KernelABI.cpp's decodeSharedBytesSM100).
  int64_t kvBytes = (shape.fp8() ? 1 : tiling.stages) * KB * D * 2;
  int64_t pBytes = kRows * KB * 2;
  smem.q = base;
  smem.kv = smemAt(base, kb.c32(qBytes));
  smem.p = smemAt(base, kb.c32(qBytes + kvBytes));
  smem.mbar = smemAt(base, kb.c32(qBytes + kvBytes + pBytes));
  smem.slot = smemAt(base, kb.c32(qBytes + kvBytes + pBytes + 8));
  if (shape.fp8())
    smem.raw = smemAt(
        base, kb.c32(llvm::alignTo(qBytes + kvBytes + pBytes + 16, 128)));
}

void DecodeSM100Emitter::computePieceBounds() {
  // The piece [start, end) of request b, clamped to [0, seq_len); causal
  // rows additionally stop at seq_len - Sq + i, so the CTA needs positions
  // up to that of its last query token.
  Value seqLen = kb.load(kb.i32, kb.gep(args.seqLens, kb.i32, blockB), 4);
  Value boundIdx = kb.add(kb.mul(blockB, kb.add(args.numS, kb.c32(1))), blockS);
  Value lo = kb.load(kb.i32, kb.gep(args.splitBounds, kb.i32, boundIdx), 4);
  Value hi = kb.load(
      kb.i32, kb.gep(args.splitBounds, kb.i32, kb.add(boundIdx, kb.c32(1))), 4);
  zero = kb.c32(0);
  start = kb.minsi(kb.maxsi(lo, zero), seqLen);
  Value end = kb.maxsi(kb.minsi(kb.maxsi(hi, zero), seqLen), start);
  causalBase = kb.sub(seqLen, kb.c32(shape.queryRows));
  endCta = end;
  if (shape.causal) {
    Value lastRow = kb.minsi(kb.add(rowBase, kb.c32(kRows - 1)),
                             kb.c32(shape.queryRows * shape.numHeads - 1));
    Value lastToken = kb.divu(lastRow, kb.c32(shape.numHeads));
    endCta = kb.maxsi(
        kb.minsi(end, kb.add(kb.add(causalBase, lastToken), kb.c32(1))), start);
  }
  numBlocks =
      kb.divs(kb.add(kb.sub(endCta, start), kb.c32(KB - 1)), kb.c32(KB));
}

void DecodeSM100Emitter::startTmemAndStaging() {
  // TMEM allocation (warp 0), mbarrier init (thread 0), Q and the first
  // stages-1 KV blocks in flight.
  isWarp0 = kb.eq(warp, zero);
  isThread0 = kb.eq(tid, zero);
  kb.ifThen(isWarp0, [&] {
    tc::allocTmem(kb, smem.slot, kTmemColumns);
    tc::relinquishAllocPermit(kb);
  });
  kb.ifThen(isThread0, [&] {
    NVVM::MBarrierInitOp::create(kb.b, smem.mbar, kb.c32(1), Value());
  });
  loadQ();
  kb.cpAsyncCommit();
  for (int64_t s = 0; s + 1 < tiling.stages; ++s) {
    kb.ifThen(kb.slt(kb.c32(s), numBlocks), [&] { loadKVBlock(kb.c32(s)); });
    kb.cpAsyncCommit();
  }
  tc::syncThreads(kb);
  tbase = kb.load(kb.i32, smem.slot, 4);
  // Warp w reads TMEM sub-partition w (lanes 32w..32w+31).
  tWarp = kb.add(tbase, kb.shl(kb.mul(warp, kb.c32(32)), kb.c32(16)));
}

void DecodeSM100Emitter::computeRowLimits() {
  half = kb.divu(lane, kb.c32(16));
  rowLane = kb.remu(lane, kb.c32(16));
  rowLocal = kb.add(kb.mul(warp, kb.c32(16)), rowLane);
  row = kb.add(rowBase, rowLocal);
  rowEnd = endCta;
  if (shape.causal) {
    Value token = kb.divu(row, kb.c32(shape.numHeads));
    rowEnd = kb.minsi(endCta, kb.add(kb.add(causalBase, token), kb.c32(1)));
  }
}

void DecodeSM100Emitter::prepareMmaOperands() {
  float log2e = 1.4426950408889634f;
  scoreScale = kb.fmul(args.softmaxScale, kb.f(log2e));
  // fp8_e4m3: K = kv_scale * codes (the tile holds the codes' values).
  if (args.kvScale)
    scoreScale = kb.fmul(scoreScale, args.kvScale);
  negInf = kb.f(-INFINITY);
  one = kb.f(1.0);
  bool bf16 = shape.elem == abi::ElemType::BF16;
  idescQK = tc::instrDescriptorF16(bf16, /*bMnMajor=*/false, kRows, KB);
  idescPV = tc::instrDescriptorF16(bf16, /*bMnMajor=*/true, kRows, Lh);
  // Q and P are K-major A operands in the core-matrix layout.
  descQ = tc::smemDescriptor(kb, smemAddr(smem.q), 128, 16 * D);
  descP = tc::smemDescriptor(kb, smemAddr(smem.p), 128, 16 * KB);
  tScores = kb.add(tbase, kb.c32(kScoreColumn));
  tOLow = tbase;
  tOHigh = kb.add(tbase, kb.c32(16 << 16));
}

//===----------------------------------------------------------------------===//
// One KV block
//===----------------------------------------------------------------------===//

SmallVector<Value> DecodeSM100Emitter::processKVBlock(Value blk,
                                                      ValueRange carried) {
  Value m = carried[0], l = carried[1], phase = carried[2];
  prefetchKVBlock(blk);
  if (shape.fp8())
    dequantiseBlock(blk);
  Value kvAddr = smemAddr(kvTileOf(blk));
  issueScoreMmas(kvAddr);
  tc::waitCommitted(kb, smem.mbar, phase);
  phase = kb.bitXor(phase, kb.c32(1));
  SoftmaxStep step = softmaxStep(blk, m, l);
  storeP(step.p);
  rescaleO(step.alpha, blk);
  tc::publishSharedToTensorCores(kb);
  issuePVMmas(kvAddr, blk);
  tc::waitCommitted(kb, smem.mbar, phase);
  phase = kb.bitXor(phase, kb.c32(1));
  return {step.m, step.l, phase};
}

void DecodeSM100Emitter::prefetchKVBlock(Value blk) {
  // Prefetch block blk+stages-1 into the stage block blk-1 used; its PV MMAs
  // completed in the previous iteration.
  Value pf = kb.add(blk, kb.c32(tiling.stages - 1));
  kb.ifThen(kb.slt(pf, numBlocks), [&] { loadKVBlock(pf); });
  kb.cpAsyncCommit();
  kb.cpAsyncWait(tiling.stages - 1);
  tc::publishSharedToTensorCores(kb);
}

void DecodeSM100Emitter::issueScoreMmas(Value kvAddr) {
  // S = Q K^T: (L+R)/16 MMAs of 64 x KB x 16, the KV block as a K-major B.
  Value descK = tc::smemDescriptor(kb, kvAddr, 128, 16 * D);
  kb.ifThen(isThread0, [&] {
    kb.forLoop(kb.c32(0), kb.c32(D / 16), kb.c32(1), {},
               [&](Value ks, ValueRange) {
                 // 16 channels = two core matrices = 256 bytes.
                 Value step = kb.zext64(kb.mul(ks, kb.c32(16)));
                 tc::mmaF16(kb, tc::tmemPointer(kb, tScores),
                            kb.add(descQ, step), kb.add(descK, step), idescQK,
                            kb.cmp(arith::CmpIPredicate::ne, ks, zero));
                 return SmallVector<Value>{};
               });
    tc::commit(kb, smem.mbar);
  });
}

SoftmaxStep DecodeSM100Emitter::softmaxStep(Value blk, Value m, Value l) {
  // Online softmax in base 2 on this thread's score row.
  Value sVec = tc::load32x32b(kb, kb.add(tWarp, kb.c32(kScoreColumn)), KB);
  tc::waitLoads(kb);
  Value first = kb.add(start, kb.mul(blk, kb.c32(KB)));
  SmallVector<Value> x(KB), valid(KB);
  Value blockMax = negInf;
  for (int64_t j = 0; j < KB; ++j) {
    valid[j] = kb.slt(kb.add(first, kb.c32(j)), rowEnd);
    x[j] =
        kb.select(valid[j], kb.fmul(extractF32(sVec, j), scoreScale), negInf);
    blockMax = kb.maximumf(blockMax, x[j]);
  }
  SoftmaxStep step;
  step.m = kb.maximumf(m, blockMax);
  Value mUse = kb.select(kb.fcmp(arith::CmpFPredicate::OEQ, step.m, negInf),
                         kb.f(0.0), step.m);
  step.alpha = kb.ex2(kb.fsub(m, mUse));
  Value sum = kb.f(0.0);
  step.p.resize(KB);
  for (int64_t j = 0; j < KB; ++j) {
    step.p[j] = kb.select(valid[j], kb.ex2(kb.fsub(x[j], mUse)), kb.f(0.0));
    sum = kb.fadd(sum, step.p[j]);
  }
  step.l = kb.fadd(kb.fmul(l, step.alpha), sum);
  return step;
}

void DecodeSM100Emitter::storeP(ArrayRef<Value> p) {
  // P row to shared memory, eight 16-bit values per core-matrix row.
  kb.ifThen(kb.slt(lane, kb.c32(16)), [&] {
    Type vecTy = VectorType::get({8}, elemTy);
    Type vecF = VectorType::get({8}, kb.f32);
    for (int64_t j = 0; j < KB; j += 8) {
      Value v = LLVM::UndefOp::create(kb.b, vecF);
      for (int64_t e = 0; e < 8; ++e)
        v = kb.insert(v, p[j + e], e);
      Value packed = arith::TruncFOp::create(kb.b, vecTy, v);
      Value off = tc::coreMatrixOffset(kb, rowLocal, kb.c32(j), KB);
      kb.store(packed, smemAt(smem.p, off), 16);
    }
  });
}

void DecodeSM100Emitter::rescaleO(Value alpha, Value blk) {
  // Rescale O rows whose max moved (O is undefined before block 0, whose PV
  // MMAs overwrite it).
  Value alphaRow = shflIdx(alpha, rowLane);
  Value moved = kb.fcmp(arith::CmpFPredicate::UNE, alphaRow, one);
  Value anyMoved = NVVM::VoteSyncOp::create(kb.b, kb.i1, kb.c32(-1), moved,
                                            NVVM::VoteSyncKind::any);
  Value rescale =
      kb.andi(anyMoved, kb.cmp(arith::CmpIPredicate::sgt, blk, zero));
  kb.ifThen(rescale, [&] {
    kb.forLoop(
        kb.c32(0), kb.c32(Lh / 32), kb.c32(1), {}, [&](Value c, ValueRange) {
          Value addr = kb.add(tWarp, kb.mul(c, kb.c32(32)));
          Value o = tc::load32x32b(kb, addr, 32);
          tc::waitLoads(kb);
          Type vf = VectorType::get({32}, kb.f32);
          Value of = LLVM::BitcastOp::create(kb.b, vf, o);
          Value splat = LLVM::UndefOp::create(kb.b, vf);
          for (int64_t e = 0; e < 32; ++e)
            splat = kb.insert(splat, alphaRow, e);
          Value scaled = kb.fmul(of, splat);
          tc::store32x32b(kb, addr,
                          LLVM::BitcastOp::create(kb.b, o.getType(), scaled));
          return SmallVector<Value>{};
        });
    tc::waitStores(kb);
  });
}

void DecodeSM100Emitter::issuePVMmas(Value kvAddr, Value blk) {
  // O += P V for both halves: KB/16 MMAs of 64 x L/2 x 16 each, the same KV
  // block as an MN-major B (LBO steps token groups, SBO channel groups).
  Value descVLow = tc::smemDescriptor(kb, kvAddr, 16 * D, 128);
  Value descVHigh = tc::smemDescriptor(
      kb, kb.add(kvAddr, kb.c32((Lh / 8) * 128)), 16 * D, 128);
  kb.ifThen(isThread0, [&] {
    kb.forLoop(
        kb.c32(0), kb.c32(KB / 16), kb.c32(1), {}, [&](Value ks, ValueRange) {
          // 16 tokens of P: two core matrices (256 bytes); of V: two token
          // groups (2 * 16*D bytes).
          Value stepP = kb.zext64(kb.mul(ks, kb.c32(16)));
          Value stepV = kb.zext64(kb.mul(ks, kb.c32(2 * D)));
          Value acc = kb.ori(kb.cmp(arith::CmpIPredicate::ne, ks, zero),
                             kb.cmp(arith::CmpIPredicate::sgt, blk, zero));
          Value a = kb.add(descP, stepP);
          tc::mmaF16(kb, tc::tmemPointer(kb, tOLow), a, kb.add(descVLow, stepV),
                     idescPV, acc);
          tc::mmaF16(kb, tc::tmemPointer(kb, tOHigh), a,
                     kb.add(descVHigh, stepV), idescPV, acc);
          return SmallVector<Value>{};
        });
    tc::commit(kb, smem.mbar);
  });
}

//===----------------------------------------------------------------------===//
// Epilogue
//===----------------------------------------------------------------------===//

void DecodeSM100Emitter::writeResults(Value m, Value l) {
  // out = O / l (0 where the row saw nothing), lse = ln(sum e^s).
  Value mRow = shflIdx(m, rowLane);
  Value lRow = shflIdx(l, rowLane);
  Value hasData = kb.andi(kb.slt(zero, numBlocks),
                          kb.fcmp(arith::CmpFPredicate::UNE, lRow, kb.f(0.0)));
  // fp8_e4m3: V = kv_scale * codes, into the normaliser.
  Value inv = kb.select(
      hasData,
      arith::DivFOp::create(kb.b, args.kvScale ? args.kvScale : one, lRow),
      kb.f(0.0));
  int64_t rowsTotal = shape.queryRows * shape.numHeads;
  Value rowValid = kb.slt(row, kb.c32(rowsTotal));
  Value rowC = kb.select(rowValid, row, zero);
  writeOutput(rowC, rowValid, hasData, inv);
  writeLse(rowValid, hasData, mRow, lRow);
}

void DecodeSM100Emitter::writeOutput(Value rowC, Value rowValid, Value hasData,
                                     Value inv) {
  // partial_out[s, b, row, half*L/2 ...] with row = i*N + n.
  int64_t rowsTotal = shape.queryRows * shape.numHeads;
  Value outElem = kb.add(
      kb.mul(kb.add(kb.mul(kb.toI64(kb.add(kb.mul(blockS, args.numB), blockB)),
                           kb.c64(rowsTotal)),
                    kb.toI64(rowC)),
             kb.c64(L)),
      kb.toI64(kb.mul(half, kb.c32(Lh))));
  Value outRow = kb.gep(args.partialOut, kb.f32, outElem);
  Type vf4 = VectorType::get({4}, kb.f32);
  kb.forLoop(zero, kb.c32(Lh / 32), kb.c32(1), {}, [&](Value c, ValueRange) {
    Value col = kb.mul(c, kb.c32(32));
    Value o = tc::load32x32b(kb, kb.add(tWarp, col), 32);
    tc::waitLoads(kb);
    kb.ifThen(rowValid, [&] {
      for (int64_t e = 0; e < 32; e += 4) {
        Value v = LLVM::UndefOp::create(kb.b, vf4);
        for (int64_t k = 0; k < 4; ++k) {
          Value x =
              kb.select(hasData, kb.fmul(extractF32(o, e + k), inv), kb.f(0.0));
          v = kb.insert(v, x, k);
        }
        Value dst = kb.gep(outRow, kb.f32, kb.toI64(kb.add(col, kb.c32(e))));
        kb.store(v, dst, 16);
      }
    });
    return SmallVector<Value>{};
  });
}

void DecodeSM100Emitter::writeLse(Value rowValid, Value hasData, Value mRow,
                                  Value lRow) {
  // partial_lse[s, b, n, i] = (m + log2 l) * ln 2.
  kb.ifThen(kb.andi(rowValid, kb.slt(lane, kb.c32(16))), [&] {
    Value token = kb.divu(row, kb.c32(shape.numHeads));
    Value head = kb.remu(row, kb.c32(shape.numHeads));
    Value lseElem = kb.add(
        kb.mul(
            kb.add(kb.mul(kb.toI64(kb.add(kb.mul(blockS, args.numB), blockB)),
                          kb.c64(shape.numHeads)),
                   kb.toI64(head)),
            kb.c64(shape.queryRows)),
        kb.toI64(token));
    Value lseVal =
        kb.fmul(kb.fadd(mRow, kb.lg2(lRow)), kb.f(0.6931471805599453));
    kb.store(kb.select(hasData, lseVal, negInf),
             kb.gep(args.partialLse, kb.f32, lseElem), 4);
  });
}

void DecodeSM100Emitter::releaseTmem() {
  tc::fenceBeforeThreadSync(kb);
  kb.barrier();
  kb.ifThen(isWarp0, [&] {
    tc::fenceAfterThreadSync(kb);
    tc::deallocTmem(kb, tbase, kTmemColumns);
  });
}

mlir::gpu::GPUFuncOp DecodeSM100Emitter::emit(StringRef name) {
  LLVM::GlobalOp dynSmem = getDynamicSmem(kb.b, kb.b.getLoc());
  OpBuilder::InsertionGuard guard(kb.b);
  mlir::gpu::GPUFuncOp fn = createFunction(name);
  setUpThreadGeometry();
  carveSharedMemory(dynSmem);
  computePieceBounds();
  startTmemAndStaging();
  computeRowLimits();
  prepareMmaOperands();
  SmallVector<Value> init{negInf, kb.f(0.0), zero};
  SmallVector<Value> fin = kb.forLoop(zero, numBlocks, kb.c32(1), init,
                                      [&](Value blk, ValueRange carried) {
                                        return processKVBlock(blk, carried);
                                      });
  // An empty piece never waited for its Q copies.
  kb.cpAsyncWait(0);
  writeResults(fin[0], fin[1]);
  releaseTmem();
  mlir::gpu::ReturnOp::create(kb.b);
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
