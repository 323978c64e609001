//===- DecodeSM90Kernel.cpp - the shared half of the sm_90a decode --------===//

#include "DecodeSM90Kernel.h"

#include "Fp8RowChunks.h"

#include "CombineRow.h"

#include "mla/GPUCodegen/Fp8Dequant.h"
#include "mla/GPUCodegen/LastArrival.h"
#include "mla/GPUCodegen/OnlineSoftmax.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mla::gpu_codegen;
using namespace mla::gpu_codegen::sm90;
namespace abi = mla::gpu;

DecodeSM90Layout DecodeSM90Layout::get(const abi::DecodeShape &shape,
                                       const abi::DecodeTiling &tiling) {
  const int64_t M = tiling.rowsPerCta, Bk = tiling.kvBlock;
  const int64_t rowData = shape.rowDim() * 2;
  // An fp8 cache: one KV tile (none when the MMAs read the raw blocks);
  // the ring of raw blocks follows the scratch.
  const int64_t kvTiles = abi::decodeReadsRawFp8(shape, tiling) ? 0
                          : shape.fp8()                         ? 1
                                                                : tiling.stages;
  const int64_t rawSlot = llvm::alignTo(Bk * shape.cacheRowBytes(), 128);
  const int64_t redBytes = llvm::alignTo(M * tiling.warpsN * 4, 128);
  DecodeSM90Layout lay;
  if (abi::decodeSeesawReadsE4M3(shape, tiling)) {
    // Q's two E4M3 parts (the bytes of a bf16 Q tile), the ring of raw
    // 128-byte boxes (over fp8_ds_mla each slot ends with its rows' scales),
    // the f16 V tile, the scratch, over fp8_ds_mla each slot's per-token
    // tile factors and the scale-maximum scratch, then the mbarriers
    // (KernelABI.cpp).
    const int64_t boxes = llvm::divideCeil(shape.rowDim(), 128);
    const bool dsMla = abi::decodeSeesawScaleTiles(shape, tiling) > 0;
    const int64_t slotBytes = boxes * Bk * 128 + (dsMla ? Bk * 16 : 0);
    const int64_t kvOff = llvm::alignTo(M * rowData, 1024);
    lay.q = SmemTile::box128B(0, M);
    lay.kv = SmemTile::box128B(kvOff, Bk);
    lay.ring = {tiling.stages, slotBytes};
    lay.vOff = kvOff + tiling.stages * slotBytes;
    lay.redOff = lay.vOff + llvm::alignTo(Bk * shape.latentDim * 2, 1024);
    lay.barrierOff = lay.redOff + redBytes;
    if (dsMla) {
      lay.tileFactorOff = lay.barrierOff;
      lay.scaleMaxOff =
          lay.tileFactorOff + llvm::alignTo(tiling.stages * Bk * 16, 128);
      lay.barrierOff = lay.scaleMaxOff + 128;
    }
    return lay;
  }
  if (tiling.wgmma) {
    // Every section 1024-byte aligned: the 128B swizzle repeats every
    // 8 rows x 128 bytes and wgmma descriptors address it from there.
    int64_t kvOff = llvm::alignTo(M * rowData, 1024);
    int64_t pOff = kvOff + llvm::alignTo(kvTiles * Bk * rowData, 1024);
    lay.q = SmemTile::box128B(0, M);
    lay.kv = SmemTile::box128B(kvOff, Bk);
    lay.p = SmemTile::box128B(pOff, M);
    lay.ring = {tiling.stages, Bk * rowData};
    // The seesaw build keeps P in the KV slots (DecodeSM90Seesaw.cpp).
    lay.redOff = pOff + (tiling.seesaw ? 0 : llvm::alignTo(M * Bk * 2, 1024));
    if (shape.fp8()) {
      lay.rawOff = lay.redOff + redBytes;
      lay.ring = {tiling.stages, rawSlot};
    }
    return lay;
  }
  // P rows are padded by 16 bytes so that ldmatrix rows of P spread banks.
  int64_t rowBytes = SmemTile::paddedRowBytes(SmemSwizzle::ChunkXor, rowData);
  // A raw fp8_ds_mla decode stores P once per scale tile: tile j's rows
  // are rows jM.. of the P tile.
  int64_t pRowBytes = Bk * 2 + 16;
  const int64_t scaleTiles = abi::decodeRawScaleTiles(shape, tiling);
  int64_t pRows = std::max<int64_t>(1, scaleTiles) * M;
  int64_t kvOff = llvm::alignTo(M * rowBytes, 128);
  int64_t pOff = kvOff + llvm::alignTo(kvTiles * Bk * rowBytes, 128);
  lay.q = SmemTile::chunkXor(0, M, rowData);
  lay.kv = SmemTile::chunkXor(kvOff, Bk, rowData);
  lay.p = SmemTile::linear(pOff, pRows, pRowBytes);
  lay.ring = {tiling.stages, Bk * rowBytes};
  lay.redOff = pOff + llvm::alignTo(pRows * pRowBytes, 128);
  // The scale tiles' running maxima (f32 each) follow the scratch.
  lay.scaleMaxOff = lay.redOff + redBytes;
  if (shape.fp8()) {
    lay.rawOff = lay.scaleMaxOff + (scaleTiles > 0 ? 128 : 0);
    lay.ring = {tiling.stages, rawSlot};
    // The bulk-copy ring's barriers (abi::decodeReadsRawFp8) follow it.
    lay.barrierOff = lay.rawOff + tiling.stages * rawSlot;
  }
  return lay;
}

DecodeSM90Kernel::DecodeSM90Kernel(ImplicitLocOpBuilder &b,
                                   const abi::DecodeShape &shape,
                                   const abi::DecodeTiling &tiling)
    : b(b), d(b), shape(shape), tiling(tiling),
      lay(DecodeSM90Layout::get(shape, tiling)), N(shape.numHeads),
      Sq(shape.queryRows), L(shape.latentDim), D(shape.rowDim()),
      page(shape.pageSize), M(tiling.rowsPerCta), wn(tiling.warpsN),
      Bk(tiling.kvBlock), St(tiling.stages),
      T(abi::decodeThreadsPerCta(tiling)), rows(N * Sq), Dc(D / 8), Lw(L / wn),
      ntO(Lw / 8), Tw(Bk / wn), ntS(Tw / 8),
      bf16(shape.elem == abi::ElemType::BF16 &&
           shape.kvFormat != abi::CacheFormat::FP8E4M3 &&
           !abi::decodeReadsRawFp8(shape, tiling) &&
           !abi::decodeSeesawReadsE4M3(shape, tiling)),
      rawFp8(abi::decodeReadsRawFp8(shape, tiling)),
      scaleTiles(abi::decodeRawScaleTiles(shape, tiling)) {
  halfType = bf16 ? Type(b.getBF16Type()) : Type(b.getF16Type());
  outType = shape.elem == abi::ElemType::BF16 ? Type(b.getBF16Type())
                                              : Type(b.getF16Type());
}

void DecodeSM90Kernel::begin(StringRef name, WarpGrid grid) {
  Type g = d.ptrGlobal, i32 = d.i32;
  SmallVector<Type> params = {g, g, g, g, g, g, g, i32, i32, i32, d.f32};
  // Optional parameters in KernelABI.h's order: kv_scale, then the varlen
  // query_start_loc and T.
  if (shape.kvFormat == abi::CacheFormat::FP8E4M3)
    params.push_back(g); // kv_scale
  if (shape.varlen)
    params.append({g, i32});
  bool combines = abi::decodeMergesAsLastPiece(abi::Chip::SM90a, shape, tiling);
  if (combines)
    params.append({g, g, g}); // counters, out, lse
  assert(params.size() ==
         size_t(abi::decodeKernelNumParams(abi::Chip::SM90a, shape, tiling)));
  fn = createKernel(b, name, params, T);
  fn->setAttr("nvvm.minctasm", b.getI32IntegerAttr(1));
  qPtr = fn.getArgument(0), cache = fn.getArgument(1),
  blockTable = fn.getArgument(2), seqLens = fn.getArgument(3),
  bounds = fn.getArgument(4), pout = fn.getArgument(5),
  plse = fn.getArgument(6), batch = fn.getArgument(7),
  maxPages = fn.getArgument(8), numSplits = fn.getArgument(9);
  scaleLog2 = d.fmul(fn.getArgument(10), d.f(softmax::kLog2e));
  if (shape.kvFormat == abi::CacheFormat::FP8E4M3) {
    // K = kv_scale * codes: the scale goes into the scores' scale, and
    // V = kv_scale * codes into the output (writeOutput), so the KV tile
    // holds the codes' exact values. The LSE is that of the scaled scores.
    Value kvScale =
        d.load(d.f32, fn.getArgument(abi::kDecodePartialNumParams), 4);
    scaleLog2 = d.fmul(scaleLog2, kvScale);
    outScale = kvScale;
  }
  if (combines) {
    unsigned first = params.size() - abi::kDecodeCombineNumParams;
    counters = fn.getArgument(first), finalOut = fn.getArgument(first + 1),
    finalLse = fn.getArgument(first + 2);
  }

  smem = dynamicSharedBase(b);
  tid = d.threadIdX();
  warp = d.divu(tid, d.c32(32)), lane = d.remu(tid, d.c32(32));
  bool groups = grid == WarpGrid::Warpgroups;
  wi = groups ? d.remu(warp, d.c32(4)) : d.divu(warp, d.c32(wn));
  wj = groups ? d.divu(warp, d.c32(4)) : d.remu(warp, d.c32(wn));
  gq = d.divu(lane, d.c32(4)), tq = d.remu(lane, d.c32(4));
  r0 = d.mul(d.blockIdX(), d.c32(M));
  split = d.blockIdY(), bb = d.blockIdZ();
  computeQueryRows();
  if (shape.varlen)
    exitPastRequestRows();
  computePiece();
  computeRowLimits();
}

void DecodeSM90Kernel::computeQueryRows() {
  if (!shape.varlen) {
    qRows = d.c32(Sq);
    reqRows = d.c32(rows);
    tokenBase = d.mul(bb, d.c32(Sq));
    tokensPerSplit = d.mul(batch, d.c32(Sq));
    return;
  }
  // query_start_loc and T follow the shared parameters and fp8_e4m3's
  // kv_scale (KernelABI.h's order).
  unsigned first = abi::kDecodePartialNumParams +
                   (shape.kvFormat == abi::CacheFormat::FP8E4M3 ? 1 : 0);
  Value qsl = fn.getArgument(first);
  tokensPerSplit = fn.getArgument(first + 1);
  tokenBase = d.load(d.i32, d.gep(qsl, d.i32, bb), 4);
  Value next = d.load(d.i32, d.gep(qsl, d.i32, d.add(bb, d.c32(1))), 4);
  Value count = d.sub(next, tokenBase);
  // A malformed request (the host rules and the device plan flag it) is
  // empty here, so no token outside [0, T) is read or written.
  Value ok = d.andi(d.andi(d.sge(tokenBase, d.c32(0)), d.sge(count, d.c32(0))),
                    d.andi(d.sge(d.c32(Sq), count),
                           d.sge(d.sub(tokensPerSplit, count), tokenBase)));
  qRows = d.select(ok, count, d.c32(0));
  tokenBase = d.select(ok, tokenBase, d.c32(0));
  reqRows = d.mul(qRows, d.c32(N));
}

void DecodeSM90Kernel::exitPastRequestRows() {
  // The whole CTA leaves before its first barrier, so the condition is
  // uniform over the CTA.
  Block *entry = b.getInsertionBlock();
  Region *body = entry->getParent();
  Block *exit = b.createBlock(body, body->end());
  mlir::gpu::ReturnOp::create(b);
  Block *rest = b.createBlock(body, body->end());
  b.setInsertionPointToEnd(entry);
  LLVM::CondBrOp::create(b, d.sge(r0, reqRows), exit, rest);
  b.setInsertionPointToStart(rest);
}

void DecodeSM90Kernel::computePiece() {
  Type i32 = d.i32;
  seq = d.load(i32, d.gep(seqLens, i32, bb), 4);
  Value bIdx = d.add(d.mul(bb, d.add(numSplits, d.c32(1))), split);
  computePieceIn(d.load(i32, d.gep(bounds, i32, bIdx), 4),
                 d.load(i32, d.gep(bounds, i32, d.add(bIdx, d.c32(1))), 4));
}

void DecodeSM90Kernel::computePieceIn(Value pieceLo, Value pieceHi) {
  Value zero = d.c32(0);
  hi = d.maxsi(d.minsi(pieceHi, seq), zero);
  lo = d.minsi(d.maxsi(pieceLo, zero), hi);
  kvEnd = hi;
  if (shape.causal) {
    Value lastRow = d.sub(d.minsi(d.add(r0, d.c32(M)), reqRows), d.c32(1));
    Value iMax = d.divu(d.maxsi(lastRow, zero), d.c32(N));
    kvEnd = d.minsi(hi, d.add(d.sub(seq, qRows), d.add(iMax, d.c32(1))));
  }
  kvEnd = d.maxsi(kvEnd, lo);
  blk0 = d.mul(d.divu(lo, d.c32(Bk)), d.c32(Bk));
  // A CTA past the request's rows (a varlen request shorter than Sq) reads
  // no block and writes nothing.
  numBlocks = d.select(
      d.andi(d.slt(lo, kvEnd), d.slt(r0, reqRows)),
      d.divu(d.add(d.sub(kvEnd, blk0), d.c32(Bk - 1)), d.c32(Bk)), zero);
}

void DecodeSM90Kernel::computeRowLimits() {
  for (int h = 0; h < 2; ++h) {
    rowLocal[h] = d.add(d.mul(wi, d.c32(16)), d.add(gq, d.c32(8 * h)));
    rowGlobal[h] = d.add(r0, rowLocal[h]);
    rowLimit[h] = kvEnd;
    if (shape.causal) {
      Value iq = d.divu(rowGlobal[h], d.c32(N));
      rowLimit[h] =
          d.minsi(kvEnd, d.add(d.sub(seq, qRows), d.add(iq, d.c32(1))));
    }
  }
}

Value DecodeSM90Kernel::sm(int64_t base, Value byteOffset) {
  return d.gepBytes(smem, d.add(d.c32(base), byteOffset));
}

Value DecodeSM90Kernel::blockStart(Value k) {
  return d.add(blk0, d.mul(k, d.c32(Bk)));
}

void DecodeSM90Kernel::stageQ() {
  if (halfType != outType)
    return stageQInF16();
  // Rows past the request's q_b*N are zero-filled.
  Value qReqBase = qRequestBase();
  forEachStrided(d, tid, T, M * Dc, [&](Value idx) {
    Value rr = d.divu(idx, d.c32(Dc)), ch = d.remu(idx, d.c32(Dc));
    Value r = d.add(r0, rr);
    Value valid = d.slt(r, reqRows);
    Value src = qChunkSource(qReqBase, r, ch);
    Value size = zeroFillSize(d, valid);
    d.cpAsync16(sm(lay.q.base, lay.q.byteOffset(d, rr, ch)), src, size);
  });
}

Value DecodeSM90Kernel::qRequestBase() {
  return d.mul(d.toI64(d.mul(tokenBase, d.c32(N))), d.c64(D));
}

Value DecodeSM90Kernel::qChunkSource(Value qReqBase, Value r, Value chunk) {
  Value rc = d.maxsi(d.minsi(r, d.sub(reqRows, d.c32(1))), d.c32(0));
  return d.gep(qPtr, outType,
               d.add(qReqBase, d.add(d.mul(d.toI64(rc), d.c64(D)),
                                     d.toI64(d.mul(chunk, d.c32(8))))));
}

DecodeSM90Kernel::QInRegisters
DecodeSM90Kernel::loadQChunks(Value thread, int64_t threads,
                              function_ref<void()> sync) {
  auto v4 = VectorType::get({4}, d.i32);
  Value qReqBase = qRequestBase();
  const int64_t count = M * Dc, rounds = llvm::divideCeil(count, threads);
  // Every round's 16 bytes (zeros past the request's rows) in registers.
  QInRegisters q;
  Value zero = LLVM::ZeroOp::create(b, v4), e = d.c32(0);
  for (int64_t it = 0; it < rounds; ++it) {
    Value idx = d.add(thread, d.c32(it * threads));
    Value inRange = d.slt(idx, d.c32(count));
    idx = d.minsi(idx, d.c32(count - 1));
    Value rr = d.divu(idx, d.c32(Dc)), ch = d.remu(idx, d.c32(Dc));
    Value r = d.add(r0, rr);
    Value valid = d.andi(inRange, d.slt(r, reqRows));
    Value src = qChunkSource(qReqBase, r, ch);
    Value v = d.select(valid, d.load(v4, src, 16), zero);
    e = d.maxsi(e, maxExponentBF16x8(d, v));
    q.chunks.push_back(v), q.inRange.push_back(inRange);
    q.offset.push_back(
        d.select(inRange, lay.q.byteOffset(d, rr, ch), d.c32(-1)));
    q.row.push_back(rr), q.chunk.push_back(ch);
  }
  // The CTA's largest exponent: the warp's, then every warp's through the
  // row-reduction scratch (free until the first block's barrier).
  for (int off = 16; off > 0; off /= 2)
    e = d.maxsi(e, d.shflXor(e, off));
  Value slot0 = d.gepBytes(smem, d.c32(lay.redOff));
  d.store(e, d.gep(slot0, d.i32, d.divu(thread, d.c32(32))), 4);
  sync();
  for (int64_t w = 0; w < threads / 32; ++w)
    e = d.maxsi(e, d.load(d.i32, d.gep(slot0, d.i32, d.c32(w)), 4));
  q.maxExponent = e;
  return q;
}

/// 2^(biased - 127) as f32, `biased` (i32) in [1, 254].
static Value pow2OfBiased(DeviceBuilder &d, Value biased) {
  return arith::BitcastOp::create(d.b, d.f32, d.shl(biased, d.c32(23)));
}

void DecodeSM90Kernel::stageQInF16() {
  QInRegisters q = loadQChunks(tid, T, [&] { d.barrier(); });
  // max|q| < 2^(e - 126); with e clamped to [15, 254], q * 2^(141 - e) is
  // below 2^15 and the factors' f32 exponents 268 - e and e - 14 are normal.
  Value e = d.minsi(d.maxsi(q.maxExponent, d.c32(15)), d.c32(254));
  Value down = pow2OfBiased(d, d.sub(d.c32(268), e));
  scaleLog2 = d.fmul(scaleLog2, pow2OfBiased(d, d.sub(e, d.c32(14))));
  // A raw fp8_ds_mla decode keeps the RoPE columns in bf16 (its cache's
  // RoPE values are bf16): chunks from L/8 go there.
  const bool bf16Rope = rawFp8 && shape.kvFormat == abi::CacheFormat::FP8DsMla;
  for (auto [i, v, off] : llvm::enumerate(q.chunks, q.offset))
    d.ifThen(d.sge(off, d.c32(0)), [&, i = i, v = v, off = off] {
      Value rr = q.row[i], ch = q.chunk[i];
      auto latent = [&, v = v] {
        Value f16 = convertBF16x8(d, v, halfType, down);
        if (rawFp8)
          storeQChunkForRawK(f16, rr, ch);
        else
          d.store(f16, sm(lay.q.base, off), 16);
      };
      if (!bf16Rope)
        return latent();
      d.ifThen(d.slt(ch, d.c32(L / 8)), latent);
      d.ifThen(d.sge(ch, d.c32(L / 8)), [&, v = v] {
        storeQChunkForRawRope(convertBF16x8(d, v, b.getBF16Type(), down), rr,
                              ch);
      });
    });
  if (tiling.wgmma)
    fenceProxyAsyncShared(d); // st.shared before the wgmmas read Q
}

std::pair<int64_t, int64_t> DecodeSM90Kernel::e4m3QPlace(int64_t col,
                                                         int part) const {
  assert(L % 128 == 0 && D - L == 64 && "R = 64: one shared RoPE box");
  if (col < L)
    return {(part ? L / 128 + 1 : 0) + col / 128, col % 128};
  return {L / 128, col - L + 64 * part};
}

void DecodeSM90Kernel::stageQAsE4M3Pair(Value thread, int64_t threads,
                                        function_ref<void()> sync) {
  QInRegisters q = loadQChunks(thread, threads, sync);
  // max|q| < 2^(e - 126); with e clamped to [8, 254], q * 2^(134 - e) is
  // below 2^8 (E4M3 reaches 448) and the factors' f32 exponents 261 - e and
  // e - 7 are normal.
  Value e = d.minsi(d.maxsi(q.maxExponent, d.c32(8)), d.c32(254));
  Value down = pow2OfBiased(d, d.sub(d.c32(261), e));
  scaleLog2 = d.fmul(scaleLog2, pow2OfBiased(d, d.sub(e, d.c32(7))));
  // Over fp8_ds_mla the RoPE columns stay bf16 (times the same power of
  // two, exactly): one bf16 box, which the RoPE part's bf16 wgmmas read
  // against the cache's bf16 RoPE (WarpSpecialisedDecode::convertDsMlaRope).
  const bool ropeInBF16 = shape.kvFormat == abi::CacheFormat::FP8DsMla;
  for (auto [i, v] : llvm::enumerate(q.chunks)) {
    Value pair = q.inRange[i];
    if (ropeInBF16) {
      Value rope = d.sge(q.chunk[i], d.c32(L / 8));
      pair = d.andi(pair, d.slt(q.chunk[i], d.c32(L / 8)));
      d.ifThen(d.andi(q.inRange[i], rope), [&, i = i, v = v] {
        Value unit =
            d.add(d.c32(8 * e4m3QPlace(L, 0).first - L / 8), q.chunk[i]);
        d.store(convertBF16x8(d, v, b.getBF16Type(), down),
                sm(lay.q.base, lay.q.byteOffset(d, q.row[i], unit)), 16);
      });
    }
    d.ifThen(pair, [&, i = i, v = v] {
      auto [hi, lo] = splitBF16x8ToE4M3Pair(d, v, down);
      storeQChunkAsE4M3Pair(hi, lo, q.row[i], q.chunk[i]);
    });
  }
  fenceProxyAsyncShared(d); // st.shared before the wgmmas read Q
}

void DecodeSM90Kernel::storeQChunkAsE4M3Pair(Value hi, Value lo, Value rr,
                                             Value ch) {
  // Chunk ch's eight codes of each part: half a 16-byte unit of the part's
  // box (e4m3QPlace of its first column), the unit swizzled as every
  // Box128B chunk.
  Value latent = d.slt(ch, d.c32(L / 8));
  Value col = d.mul(ch, d.c32(8));
  for (int part = 0; part < 2; ++part) {
    int64_t latentBox0 = e4m3QPlace(0, part).first;
    int64_t ropeByte0 = e4m3QPlace(L, part).second;
    Value box =
        d.select(latent, d.add(d.c32(latentBox0), d.divu(col, d.c32(128))),
                 d.c32(L / 128));
    Value byte = d.select(latent, d.remu(col, d.c32(128)),
                          d.add(d.sub(col, d.c32(L)), d.c32(ropeByte0)));
    Value unit = d.add(d.mul(box, d.c32(8)), d.divu(byte, d.c32(16)));
    Value at = d.add(lay.q.byteOffset(d, rr, unit), d.remu(byte, d.c32(16)));
    d.store(part ? lo : hi, sm(lay.q.base, at), 8);
  }
}

void DecodeSM90Kernel::storeQChunkForRawK(Value f16, Value rr, Value ch) {
  // Source chunk s of a 64-column group holds the f16 pairs 4s..4s+3; pair
  // p goes to k-step j = (p % 8) / 2 of the group, half h = p % 2 (columns
  // 8h..8h+7 of the step), word p / 8: so chunk s's word w lands in the
  // group's chunk 4(s % 2) + w, word s / 2 (the k order of rawKFragments).
  Value s = d.remu(ch, d.c32(8));
  for (int64_t w = 0; w < 4; ++w) {
    Value dst = d.add(d.sub(ch, s),
                      d.add(d.mul(d.remu(s, d.c32(2)), d.c32(4)), d.c32(w)));
    Value at = d.add(lay.q.byteOffset(d, rr, dst),
                     d.mul(d.divu(s, d.c32(2)), d.c32(4)));
    d.store(d.extract(f16, w), sm(lay.q.base, at), 4);
  }
}

void DecodeSM90Kernel::storeQChunkForRawRope(Value bf16, Value rr, Value ch) {
  // Rope chunk s's word p goes to chunk L/8 + 4(s / 4) + p, word s % 4.
  Value s = d.sub(ch, d.c32(L / 8));
  Value first = d.add(d.c32(L / 8), d.mul(d.divu(s, d.c32(4)), d.c32(4)));
  Value word = d.mul(d.remu(s, d.c32(4)), d.c32(4));
  for (int64_t p = 0; p < 4; ++p) {
    Value at = d.add(lay.q.byteOffset(d, rr, d.add(first, d.c32(p))), word);
    d.store(d.extract(bf16, p), sm(lay.q.base, at), 4);
  }
}

Value DecodeSM90Kernel::pageOf(Value k, function_ref<Value(Value)> use) {
  // A block never straddles a page.
  auto ifOp = scf::IfOp::create(b, TypeRange{d.i32}, d.slt(k, numBlocks),
                                /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  Value pageIdx = d.divu(blockStart(k), d.c32(page));
  Value phys = d.load(
      d.i32, d.gep(blockTable, d.i32, d.add(d.mul(bb, maxPages), pageIdx)), 4);
  scf::YieldOp::create(b, use ? use(phys) : phys);
  b.setInsertionPointToStart(ifOp.elseBlock());
  scf::YieldOp::create(b, d.c32(0));
  return ifOp.getResult(0);
}

void DecodeSM90Kernel::issueBlock(Value k, Value phys) {
  d.ifThen(d.slt(k, numBlocks), [&] {
    Value start = blockStart(k);
    Value firstRow = d.add(d.mul(d.toI64(phys), d.c64(page)),
                           d.toI64(d.remu(start, d.c32(page))));
    Value stage = lay.ring.slotOffset(d, k);
    if (rawFp8)
      return issueRawBlockBulk(k, start, firstRow, stage);
    if (shape.fp8())
      return issueRawBlock(start, firstRow, stage);
    Value rowBase = d.mul(firstRow, d.c64(D));
    forEachStrided(d, tid, T, Bk * Dc, [&](Value idx) {
      Value tok = d.divu(idx, d.c32(Dc)), ch = d.remu(idx, d.c32(Dc));
      Value valid = d.slt(d.add(start, tok), kvEnd);
      Value src = d.gep(cache, halfType,
                        d.add(rowBase, d.toI64(d.add(d.mul(tok, d.c32(D)),
                                                     d.mul(ch, d.c32(8))))));
      Value size = zeroFillSize(d, valid);
      d.cpAsync16(sm(lay.kv.base, d.add(stage, lay.kv.byteOffset(d, tok, ch))),
                  src, size);
    });
  });
}

Value DecodeSM90Kernel::rawBlockValidBytes(Value start) {
  return d.mul(d.minsi(d.sub(kvEnd, start), d.c32(Bk)),
               d.c32(shape.cacheRowBytes()));
}

void DecodeSM90Kernel::issueRawBlock(Value start, Value firstRow, Value stage) {
  // The block's rows are one contiguous byte range (a block never straddles
  // a page); 16-byte chunks that start past the piece's last row are
  // zero-filled: with rows of whole chunks those zeros are the tokens'
  // values, and dequantSlice zeroes the tokens of other rows itself.
  const int64_t rowBytes = shape.cacheRowBytes();
  Value base = d.mul(firstRow, d.c64(rowBytes));
  Value validBytes = rawBlockValidBytes(start);
  forEachStrided(d, tid, T, Bk * rowBytes / 16, [&](Value idx) {
    Value off = d.mul(idx, d.c32(16));
    Value src = d.gep(cache, d.i8, d.add(base, d.toI64(off)));
    Value dst = sm(lay.rawOff, d.add(stage, off));
    d.cpAsync16(dst, src, zeroFillSize(d, d.slt(off, validBytes)));
  });
}

void DecodeSM90Kernel::issueRawBlockBulk(Value k, Value start, Value firstRow,
                                         Value stage) {
  // One bulk copy of the block's rows up to the piece's end (a block never
  // straddles a page), issued by thread 0. The bytes past the piece (the
  // last block only) are zeroed by every thread instead, as issueRawBlock's
  // zero-fill does: zero codes, scales and bf16 decode to zeros, where a
  // stale byte or one never written might be a NaN's (times p = 0).
  const int64_t rowBytes = shape.cacheRowBytes(), blockBytes = Bk * rowBytes;
  Value validBytes = rawBlockValidBytes(start);
  Value slot = d.add(d.c32(lay.rawOff), stage);
  d.ifThen(d.slt(validBytes, d.c32(blockBytes)), [&] {
    Value zero = LLVM::ZeroOp::create(b, VectorType::get({4}, d.i32));
    d.forLoop(
        llvm::divideCeil(blockBytes / 16, T), {}, [&](Value round, ValueRange) {
          Value off = d.mul(d.add(tid, d.mul(round, d.c32(T))), d.c32(16));
          d.ifThen(
              d.andi(d.sge(off, validBytes), d.slt(off, d.c32(blockBytes))),
              [&] { d.store(zero, d.gepBytes(smem, d.add(slot, off)), 16); });
          return SmallVector<Value>{};
        });
  });
  d.ifThen(d.eq(tid, d.c32(0)), [&] {
    Value src = d.gep(cache, d.i8, d.mul(firstRow, d.c64(rowBytes)));
    rawRing().issue(d, smem, k, slot, src, validBytes);
  });
}

BulkStageRing DecodeSM90Kernel::rawRing() const {
  return {lay.ring, lay.barrierOff};
}

DecodeSM90Kernel::BlockHead DecodeSM90Kernel::beginBlock(Value k, Value page,
                                                         bool asyncProxy,
                                                         bool dequantise) {
  // The next refill's page is read a step ahead: its load's latency passes
  // under this block's wait and compute instead of before the copies.
  Value nextPage = pageOf(d.add(k, d.c32(lay.ring.stages)));
  if (rawFp8)
    rawRing().wait(d, smem, k);
  else
    lay.ring.waitOldest(d);
  if (asyncProxy && !shape.fp8())
    fenceProxyAsyncShared(d); // cp.async wrote through the generic proxy
  // Also orders the previous block's P V reads of the KV tile (every token)
  // before this block's dequantisation overwrites it.
  d.barrier();
  if (rawFp8)
    issueBlock(d.add(k, d.c32(lay.ring.stages - 1)), page);
  else
    lay.ring.refill(d, k, [&](Value next) { issueBlock(next, page); });
  if (!shape.fp8() || rawFp8)
    return {lay.ring.slotOffset(d, k), nextPage};
  if (dequantise) {
    dequantSlice(k, 0, Dc);
    sliceBarrier(asyncProxy);
  }
  return {d.c32(0), nextPage};
}

void DecodeSM90Kernel::sliceBarrier(bool asyncProxy) {
  if (asyncProxy)
    fenceProxyAsyncShared(d); // the KV tile was stored by st.shared
  // Named barrier 1 + wj over the warps of token slice wj (id 0 is the CTA
  // barrier). The id is a constant under a warp-uniform branch: with an id
  // in a register ptxas reserves all 16 barriers of the CTA.
  for (int64_t j = 0; j < wn; ++j)
    d.ifThen(d.eq(wj, d.c32(j)), [&] {
      NVVM::BarrierOp::create(b, TypeRange{}, d.c32(1 + j),
                              d.c32(sliceThreads()),
                              NVVM::BarrierReductionAttr(), Value());
    });
}

void DecodeSM90Kernel::storeKvChunks(Value k, int64_t c0, int64_t c1,
                                     function_ref<Value(Value, Value)> chunk) {
  Value slot = d.add(d.c32(lay.rawOff), lay.ring.slotOffset(d, k));
  Value tok0 = d.mul(wj, d.c32(Tw));
  Value gtid = d.add(d.mul(wi, d.c32(32)), lane);
  // Whole 16-byte rows: issueRawBlock zero-filled every byte of a token past
  // the piece, and zero codes, scales and bf16 decode to zeros. Other rows
  // share a chunk with the next row's bytes (a NaN of an unused slot), so
  // those tokens are zeroed here.
  Value valid, zero;
  if (shape.cacheRowBytes() % 16 != 0) {
    valid = d.sub(d.sub(kvEnd, blockStart(k)), tok0); // tokens of the slice
    zero = LLVM::ZeroOp::create(b, VectorType::get({4}, d.i32));
  }
  const int64_t chunks = c1 - c0, count = Tw * chunks, G = sliceThreads();
  const int64_t rowBytes = shape.cacheRowBytes();
  const int64_t tokLanes = G / 8;
  if (c0 % 8 == 0 && chunks % 8 == 0 && Tw % tokLanes == 0) {
    // Thread (tokLane, chunkLane) converts chunks c0 + chunkLane + 8i of
    // tokens tokLane + tokLanes * t: a chunk's raw and tile offsets are the
    // token's plus constants, where a flat index would cost a division by
    // the chunk count and a swizzle per chunk, more than the conversion.
    Value chunkLane = d.remu(gtid, d.c32(8));
    Value tokLane = d.divu(gtid, d.c32(8));
    Value cLane = d.add(chunkLane, d.c32(c0));
    d.forLoop(Tw / tokLanes, {}, [&](Value t, ValueRange) {
      Value tok = d.add(tokLane, d.mul(t, d.c32(tokLanes)));
      Value tokInTile = d.add(tok0, tok);
      Value row = d.add(slot, d.mul(tokInTile, d.c32(rowBytes)));
      Value dst0 = lay.kv.byteOffset(d, tokInTile, cLane);
      // `unroll` chunks per iteration, all converted before any is stored:
      // their shared loads overlap instead of forming one chain.
      const int64_t steps = chunks / 8;
      const int64_t unroll = steps % 3 == 0 ? 3 : steps % 2 == 0 ? 2 : 1;
      d.forLoop(steps / unroll, {}, [&](Value i0, ValueRange) {
        SmallVector<Value> vs, dsts;
        for (int64_t u = 0; u < unroll; ++u) {
          Value i = d.add(d.mul(i0, d.c32(unroll)), d.c32(u));
          Value v = chunk(row, d.add(cLane, d.mul(i, d.c32(8))));
          if (valid)
            v = d.select(d.slt(tok, valid), v, zero);
          vs.push_back(v);
          dsts.push_back(
              d.add(dst0, d.mul(i, d.c32(lay.kv.eightChunkStride()))));
        }
        for (int64_t u = 0; u < unroll; ++u)
          d.store(vs[u], sm(lay.kv.base, dsts[u]), 16);
        return SmallVector<Value>{};
      });
      return SmallVector<Value>{};
    });
    return;
  }
  auto body = [&](Value idx) {
    Value tok = d.divu(idx, d.c32(chunks));
    Value c = d.add(d.remu(idx, d.c32(chunks)), d.c32(c0));
    Value tokInTile = d.add(tok0, tok);
    Value row = d.add(slot, d.mul(tokInTile, d.c32(rowBytes)));
    Value v = chunk(row, c);
    if (valid)
      v = d.select(d.slt(tok, valid), v, zero);
    d.store(v, sm(lay.kv.base, lay.kv.byteOffset(d, tokInTile, c)), 16);
  };
  // A loop rather than forEachStrided's unrolled rounds: unrolled, every
  // round's loads are hoisted together and the O accumulators spill.
  d.forLoop(llvm::divideCeil(count, G), {}, [&](Value round, ValueRange) {
    Value idx = d.add(gtid, d.mul(round, d.c32(G)));
    if (count % G == 0)
      body(idx);
    else
      d.ifThen(d.slt(idx, d.c32(count)), [&] { body(idx); });
    return SmallVector<Value>{};
  });
}

void DecodeSM90Kernel::dequantSlice(Value k, int64_t c0, int64_t c1) {
  const int64_t Lc = L / 8;
  Fp8RowChunks rows(d, shape, smem, halfType);
  auto latent = [&](Value row, Value c) { return rows.latent(row, c); };
  if (!rows.splitsRope())
    return storeKvChunks(k, c0, c1, latent);
  // The latent chunks [c0, min(c1, L/8)), then the RoPE chunks
  // [max(c0, L/8), c1).
  if (c0 < std::min(c1, Lc))
    storeKvChunks(k, c0, std::min(c1, Lc), latent);
  if (std::max(c0, Lc) < c1)
    storeKvChunks(k, std::max(c0, Lc), c1,
                  [&](Value row, Value c) { return rows.rope(row, c); });
}

Value DecodeSM90Kernel::stageQAndPrefill() {
  if (rawFp8) {
    // The bulk ring's barriers, initialised before anyone waits; the first
    // blocks' copies are in flight while Q is staged through registers
    // (stageQInF16: its loads, the CTA's exponent and the f16 stores), so no
    // cp.async group is left either.
    assert(halfType != outType && "a raw ring with Q staged by cp.async");
    d.ifThen(d.eq(tid, d.c32(0)), [&] { rawRing().init(d, smem); });
    d.barrier();
    for (int64_t k = 0; k + 1 < lay.ring.stages; ++k)
      issueBlock(d.c32(k), pageOf(d.c32(k)));
    stageQ();
    return pageOf(d.c32(lay.ring.stages - 1));
  }
  // Group 0 = Q + block 0; groups 1..St-2 = the next blocks.
  stageQ();
  lay.ring.prefill(d, [&](Value k) { issueBlock(k, pageOf(k)); });
  return pageOf(d.c32(lay.ring.stages - 1));
}

SmallVector<Value> DecodeSM90Kernel::runBlocks(
    Value firstPage, bool asyncProxy, bool dequantise,
    function_ref<SmallVector<Value>(Value, Value, ValueRange)> step) {
  SmallVector<Value> inits = initialState();
  inits.push_back(firstPage);
  SmallVector<Value> last =
      d.forLoop(d.c32(0), numBlocks, d.c32(1), inits,
                [&](Value kIdx, ValueRange carried) {
                  BlockHead head =
                      beginBlock(kIdx, carried.back(), asyncProxy, dequantise);
                  SmallVector<Value> next =
                      step(kIdx, head.tile, carried.drop_back());
                  next.push_back(head.nextPage);
                  return next;
                });
  last.pop_back();
  return last;
}

/// The floor of a scale tile's running maximum: an all-zero tile keeps
/// p * 0 / sigma at 0 (not NaN), and sigma_old / sigma_new stays finite.
static constexpr float kMinScaleMax = 1e-30f;

SmallVector<Value> DecodeSM90Kernel::initialState() {
  SmallVector<Value> inits;
  Value fzero = d.f(0.0f), ninf = d.negInf();
  for (int64_t j = 0; j < ntO * 4; ++j)
    inits.push_back(fzero);
  inits.append({ninf, ninf, fzero, fzero});
  if (scaleTiles > 0)
    inits.push_back(d.f(kMinScaleMax));
  return inits;
}

Value DecodeSM90Kernel::redSlot(int h, Value j) {
  Value slot = d.add(d.mul(rowLocal[h], d.c32(wn)), j);
  return d.gepBytes(smem, d.add(d.c32(lay.redOff), d.mul(slot, d.c32(4))));
}

void DecodeSM90Kernel::maskAndPublishRowMax(MutableArrayRef<MmaAccum> s,
                                            Value start) {
  Value rowMax[2] = {d.negInf(), d.negInf()};
  for (int64_t q = 0; q < ntS; ++q)
    for (int e = 0; e < 4; ++e) {
      int h = e / 2;
      Value pos = d.add(start, scoreToken(q, e % 2));
      Value valid = d.andi(d.sge(pos, lo), d.slt(pos, rowLimit[h]));
      s[q].regs[e] = softmax::scaleAndMask(d, s[q].regs[e], valid, scaleLog2);
      rowMax[h] = softmax::max(d, rowMax[h], s[q].regs[e]);
    }
  for (int h = 0; h < 2; ++h) {
    rowMax[h] = softmax::quadMax(d, rowMax[h]);
    d.store(rowMax[h], redSlot(h, wj), 4);
  }
  d.barrier();
}

Value DecodeSM90Kernel::blockRowMax(int h) {
  Value blockMax = d.negInf();
  for (int64_t j = 0; j < wn; ++j)
    blockMax =
        softmax::max(d, blockMax, d.load(d.f32, redSlot(h, d.c32(j)), 4));
  return blockMax;
}

void DecodeSM90Kernel::storeProbabilities(ArrayRef<MmaAccum> s, Value mUse[2],
                                          Value l[2],
                                          const RawBlockScales *scales) {
  // With scale tiles: P of tile j is p * s_tj / sigma_j (softmaxBlock).
  SmallVector<Value> invSigma;
  for (int64_t j = 0; scales && j < scaleTiles; ++j)
    invSigma.push_back(d.rcpApprox(
        d.load(d.f32, d.gepBytes(smem, d.c32(lay.scaleMaxOff + 4 * j)), 4)));
  for (int64_t q = 0; q < ntS; ++q) {
    Value pv[4];
    for (int e = 0; e < 4; ++e) {
      pv[e] = softmax::probability(d, s[q].regs[e], mUse[e / 2]);
      l[e / 2] = d.fadd(l[e / 2], pv[e]);
    }
    for (int64_t j = 0; j < (scales ? scaleTiles : 1); ++j) {
      Value f[2];
      for (int x = 0; x < 2; ++x)
        f[x] = scales ? d.fmul(scales->tok[(2 * q + x) * scaleTiles + j],
                               invSigma[j])
                      : Value();
      for (int h = 0; h < 2; ++h) {
        Value p[2] = {pv[2 * h], pv[2 * h + 1]};
        if (scales)
          p[0] = d.fmul(p[0], f[0]), p[1] = d.fmul(p[1], f[1]);
        Value row = d.add(rowLocal[h], d.c32(j * M));
        if (!scoreColumnsApart()) {
          Value off = lay.p.elementOffset(d, row, pColumn(scoreToken(q, 0)), 2);
          d.store(d.pack2(p[0], p[1], halfType), sm(lay.p.base, off), 4);
          continue;
        }
        for (int x = 0; x < 2; ++x) {
          Value off = lay.p.elementOffset(d, row, scoreToken(q, x), 2);
          d.store(arith::TruncFOp::create(b, halfType, p[x]),
                  sm(lay.p.base, off), 2);
        }
      }
    }
  }
}

Value DecodeSM90Kernel::publishScaleMax(Value stage, Value sigmaOld) {
  // Lane l reads the scales of tokens l, l + 32, ... (clamped to the
  // block), zero for tokens past the piece (issueRawBlock's zero fill).
  const int64_t rowBytes = shape.cacheRowBytes();
  Value sigma = sigmaOld;
  for (int64_t i = 0; i < (Bk + 31) / 32; ++i) {
    Value tok = d.minsi(d.add(lane, d.c32(32 * i)), d.c32(Bk - 1));
    Value at = d.add(d.add(stage, d.mul(tok, d.c32(rowBytes))),
                     d.add(d.c32(L), d.mul(wj, d.c32(4))));
    sigma = d.fmax(sigma, d.load(d.f32, sm(lay.rawOff, at), 4));
  }
  for (int off = 16; off > 0; off /= 2)
    sigma = d.fmax(sigma, d.shflXor(sigma, off));
  d.ifThen(d.andi(d.eq(lane, d.c32(0)), d.eq(wi, d.c32(0))), [&] {
    d.store(
        sigma,
        d.gepBytes(smem, d.add(d.c32(lay.scaleMaxOff), d.mul(wj, d.c32(4)))),
        4);
  });
  return sigma;
}

bool DecodeSM90Kernel::scoreColumnsApart() const { return scaleTiles > 0; }

Value DecodeSM90Kernel::scoreToken(int64_t q, int x) {
  Value slice = d.add(d.mul(wj, d.c32(Tw)), d.c32(8 * q));
  if (scoreColumnsApart())
    return d.add(slice, d.add(tq, d.c32(4 * x)));
  return d.add(slice, d.add(d.mul(tq, d.c32(2)), d.c32(x)));
}

Value DecodeSM90Kernel::pColumn(Value col) {
  if (!rawFp8 || scoreColumnsApart())
    return col;
  // Token t = 16i + 4c + e (e even) -> 16i + 8(e / 2) + 2c.
  Value t = d.remu(col, d.c32(16));
  Value c = d.divu(t, d.c32(4)), half = d.remu(d.divu(t, d.c32(2)), d.c32(2));
  return d.add(d.sub(col, t), d.add(d.mul(half, d.c32(8)), d.mul(c, d.c32(2))));
}

Value DecodeSM90Kernel::outColumn(int64_t j, int64_t x) {
  Value slice = d.mul(wj, d.c32(Lw));
  if (!rawFp8)
    return d.add(slice, d.add(d.mul(tq, d.c32(2)), d.c32(8 * j + x)));
  Value slot = d.add(d.mul(tq, d.c32(2)), d.c32(x));
  return d.add(slice, d.add(d.mul(slot, d.c32(Lw / 8)), d.c32(j)));
}

SmallVector<Value>
DecodeSM90Kernel::softmaxBlock(MutableArrayRef<MmaAccum> s, Value start,
                               ValueRange carried,
                               const RawBlockScales *scales) {
  SmallVector<Value> o(carried.begin(), carried.begin() + ntO * 4);
  // The tiles' running maxima go out before maskAndPublishRowMax's barrier.
  Value sigmaOld, sigmaNew;
  if (scales) {
    sigmaOld = carried[ntO * 4 + 4];
    sigmaNew = publishScaleMax(scales->stage, sigmaOld);
  }
  maskAndPublishRowMax(s, start);
  Value mNew[2], mUse[2], alpha[2], lNew[2];
  for (int h = 0; h < 2; ++h) {
    Value blockMax = blockRowMax(h);
    softmax::Rescale r = softmax::rescale(d, carried[ntO * 4 + h],
                                          carried[ntO * 4 + 2 + h], blockMax);
    mNew[h] = r.mNew, mUse[h] = r.mUse, alpha[h] = r.alpha, lNew[h] = r.l;
    // O changes unit from sigma_old to sigma_new.
    if (scales)
      alpha[h] = d.fmul(alpha[h], d.fmul(sigmaOld, d.rcpApprox(sigmaNew)));
  }
  storeProbabilities(s, mUse, lNew, scales);
  for (int64_t j = 0; j < ntO; ++j)
    for (int e = 0; e < 4; ++e)
      o[j * 4 + e] = d.fmul(o[j * 4 + e], alpha[e / 2]);
  o.append({mNew[0], mNew[1], lNew[0], lNew[1]});
  if (scales)
    o.push_back(sigmaNew);
  return o;
}

void DecodeSM90Kernel::finish(ValueRange state) {
  lay.ring.drain(d);
  // Row sums: the quad, then the warps_n warps sharing the rows.
  d.barrier();
  for (int h = 0; h < 2; ++h) {
    Value l = softmax::quadSum(d, state[ntO * 4 + 2 + h]);
    d.store(l, redSlot(h, wj), 4);
  }
  d.barrier();
  Value lRow[2];
  for (int h = 0; h < 2; ++h) {
    lRow[h] = d.f(0.0f);
    for (int64_t j = 0; j < wn; ++j)
      lRow[h] = d.fadd(lRow[h], d.load(d.f32, redSlot(h, d.c32(j)), 4));
  }
  // With scale tiles O is in units of its tile's running maximum.
  if (scaleTiles > 0)
    outScale = state[ntO * 4 + 4];
  writeOutput(state, lRow);
  // The flag reuses the row-reduction scratch, whose row sums every thread
  // has read by now.
  if (counters)
    mergeAsLastPiece(mergesPieces(),
                     {tid, T, [&] { d.barrier(); }, lay.redOff});
  mlir::gpu::ReturnOp::create(b);
}

Value DecodeSM90Kernel::mergesPieces() {
  Value given = d.cmp(arith::CmpIPredicate::ne,
                      LLVM::PtrToIntOp::create(b, d.i64, counters), d.c64(0));
  return d.andi(given, d.slt(d.c32(1), numSplits));
}

Value DecodeSM90Kernel::rowBlockCounter() {
  Value block = d.add(d.mul(bb, d.c32(abi::decodeRowBlocks(shape, tiling))),
                      d.blockIdX());
  return d.gep(counters, d.i32, block);
}

void DecodeSM90Kernel::mergeBlockRows(Value first, int64_t step, Value lane) {
  CombineRow row(b, d, shape,
                 {pout, plse, finalOut, finalLse, batch, numSplits});
  // The warp's rows first + step * j merge kMergeRowsInFlight at a time: one
  // row at a time, a warp waited for memory (the LSEs, then each piece) eight
  // times over, about 12 us per merging CTA (docs/gpu-runs.md, session 19).
  const int64_t batch = kMergeRowsInFlight;
  const int64_t batches = llvm::divideCeil(llvm::divideCeil(M, step), batch);
  d.forLoop(d.c32(0), d.c32(batches), d.c32(1), {}, [&](Value t, ValueRange) {
    Value base = d.add(first, d.mul(t, d.c32(batch * step)));
    SmallVector<Value> rs, valid;
    for (int64_t j = 0; j < batch; ++j) {
      Value local = d.add(base, d.c32(j * step));
      Value request = d.add(r0, local);
      rs.push_back(request);
      valid.push_back(
          d.andi(d.slt(local, d.c32(M)), d.slt(request, d.c32(rows))));
    }
    row.emitRows(bb, rs, valid, lane);
    return SmallVector<Value>{};
  });
}

void DecodeSM90Kernel::mergeAsLastPiece(Value when, const MergeFrame &f) {
  d.ifThen(when, [&] {
    // Every thread's partial stores come before the count, and every read
    // of the other pieces' after it.
    f.sync();
    Value flag = sm(f.flagOffset, d.c32(0));
    d.ifThen(d.eq(f.thread, d.c32(0)), [&] {
      Value last = lastArrival(d, rowBlockCounter(), numSplits);
      d.store(d.select(last, d.c32(1), d.c32(0)), flag, 4);
    });
    f.sync();
    Value merges =
        d.cmp(arith::CmpIPredicate::ne, d.load(d.i32, flag, 4), d.c32(0));
    d.ifThen(merges, [&] {
      mergeBlockRows(d.divu(f.thread, d.c32(32)), f.threads / 32,
                     d.remu(f.thread, d.c32(32)));
    });
  });
}

void DecodeSM90Kernel::writeOutput(ValueRange state, Value lRow[2],
                                   const RowStaging *staging) {
  // With one piece per request the piece's rows are the final ones:
  // partial_out and partial_lse are then out and lse (KernelABI.h), so the
  // rows go out in the activation type and no combine runs. The condition is
  // uniform over the grid: one branch around all the stores.
  // The persistent build's pieces always get the workspace: the final rows
  // of a one-piece request go to out and lse (split 0 of those layouts).
  Value final = d.eq(numSplits, d.c32(1));
  d.ifThenElse(
      final,
      [&] {
        Value partial[3] = {pout, plse, split};
        if (tiling.persistent)
          pout = finalOut, plse = finalLse, split = d.c32(0);
        if (staging)
          writeRowsStaged(state, lRow, *staging);
        else
          writeRows(state, lRow, /*final=*/true);
        pout = partial[0], plse = partial[1], split = partial[2];
      },
      [&] { writeRows(state, lRow, /*final=*/false); });
}

void DecodeSM90Kernel::writeRows(ValueRange state, Value lRow[2], bool final) {
  auto v2 = VectorType::get({2}, d.f32);
  Value sb = d.add(d.mul(split, batch), bb);
  // The partial row of (split, token, head): [S, B, Sq, N] rows, or varlen
  // [S, T, N].
  Value splitRow0 =
      d.mul(d.add(d.mul(split, tokensPerSplit), tokenBase), d.c32(N));
  for (int h = 0; h < 2; ++h) {
    softmax::Normaliser norm = softmax::normaliser(d, lRow[h]);
    d.ifThen(d.slt(rowGlobal[h], reqRows), [&] {
      Value partialRow = d.add(splitRow0, rowGlobal[h]);
      Value outRow = d.mul(d.toI64(partialRow), d.c64(L));
      Value inv = outScale ? d.fmul(norm.inv, outScale) : norm.inv;
      for (int64_t q = 0; q < ntO; ++q) {
        // Two adjacent columns: elements 0 and 1 of tile q, or with rawFp8
        // element x of tiles j and j + 1.
        int64_t j = rawFp8 ? q - q % 2 : q, x = rawFp8 ? q % 2 : 0;
        auto elem = [&](int64_t n) {
          int64_t e = rawFp8 ? (j + n) * 4 + 2 * h + x : j * 4 + 2 * h + n;
          return d.fmul(state[e], inv);
        };
        Value x0 = elem(0), x1 = elem(1);
        Value at = d.add(outRow, d.toI64(outColumn(j, x)));
        if (final) {
          d.store(d.pack2(x0, x1, outType), d.gep(pout, outType, at), 4);
          continue;
        }
        Value v = LLVM::UndefOp::create(b, v2);
        v = LLVM::InsertElementOp::create(b, v, x0, d.c32(0));
        v = LLVM::InsertElementOp::create(b, v, x1, d.c32(1));
        d.store(v, d.gep(pout, d.f32, at), 8);
      }
      writeLse(state, lRow, h, partialRow, norm.nonEmpty, sb);
    });
  }
}

void DecodeSM90Kernel::writeLse(ValueRange state, Value lRow[2], int h,
                                Value partialRow, Value nonEmpty, Value sb) {
  Value zero = d.c32(0);
  d.ifThen(d.andi(d.eq(wj, zero), d.eq(tq, zero)), [&] {
    Value lse = softmax::naturalLse(d, state[ntO * 4 + h], lRow[h], nonEmpty);
    Value iq = d.divu(rowGlobal[h], d.c32(N)),
          n = d.remu(rowGlobal[h], d.c32(N));
    // Uniform [S, B, N, Sq]; varlen [S, T, N], one lse per partial row.
    Value idx =
        shape.varlen
            ? partialRow
            : d.add(d.mul(d.add(d.mul(sb, d.c32(N)), n), d.c32(Sq)), iq);
    d.store(lse, d.gep(plse, d.f32, idx), 4);
  });
}

void DecodeSM90Kernel::writeRowsStaged(ValueRange state, Value lRow[2],
                                       const RowStaging &st) {
  assert(L % 64 == 0 && !rawFp8 && "16-byte chunks in swizzle groups of 8");
  Value firstChunk = d.mul(wj, d.c32(Lw / 8));
  Value nonEmpty[2];
  stageRows(state, lRow, st, firstChunk, nonEmpty);
  st.sync();
  storeStagedRows(state, lRow, st, firstChunk, nonEmpty);
}

Value DecodeSM90Kernel::stagedChunk(Value row, Value chunk) {
  Value swizzled = d.bitXor(chunk, d.remu(row, d.c32(8)));
  return d.add(d.mul(row, d.c32(L * 2)), d.mul(swizzled, d.c32(16)));
}

void DecodeSM90Kernel::stageRows(ValueRange state, Value lRow[2],
                                 const RowStaging &st, Value firstChunk,
                                 Value nonEmpty[2]) {
  for (int h = 0; h < 2; ++h) {
    softmax::Normaliser norm = softmax::normaliser(d, lRow[h]);
    nonEmpty[h] = norm.nonEmpty;
    Value inv = outScale ? d.fmul(norm.inv, outScale) : norm.inv;
    for (int64_t j = 0; j < ntO; ++j) {
      Value x0 = d.fmul(state[j * 4 + 2 * h], inv);
      Value x1 = d.fmul(state[j * 4 + 2 * h + 1], inv);
      Value chunk = d.add(firstChunk, d.c32(j));
      Value swizzled = d.bitXor(chunk, d.remu(rowLocal[h], d.c32(8)));
      Value off = d.add(d.mul(rowLocal[h], d.c32(L * 2)),
                        d.add(d.mul(swizzled, d.c32(16)), d.mul(tq, d.c32(4))));
      d.store(d.pack2(x0, x1, outType), sm(st.base, off), 4);
    }
  }
}

void DecodeSM90Kernel::storeStagedRows(ValueRange state, Value lRow[2],
                                       const RowStaging &st, Value firstChunk,
                                       Value nonEmpty[2]) {
  // A warp per row: its lanes store the slice's chunks of the row, 16 bytes
  // each, one contiguous segment per warp instruction.
  const int64_t sliceChunks = Lw / 8;
  auto v4 = VectorType::get({4}, d.i32);
  Value warp = d.divu(st.thread, d.c32(32)),
        lane = d.remu(st.thread, d.c32(32));
  Value splitRow0 =
      d.mul(d.add(d.mul(split, tokensPerSplit), tokenBase), d.c32(N));
  Value sb = d.add(d.mul(split, batch), bb);
  d.forLoop(
      warp, d.c32(M), d.c32(st.threads / 32), {}, [&](Value row, ValueRange) {
        Value global = d.add(r0, row);
        d.ifThen(d.slt(global, reqRows), [&] {
          Value outRow = d.mul(d.toI64(d.add(splitRow0, global)), d.c64(L));
          for (int64_t c = 0; c < sliceChunks; c += 32) {
            Value chunk = d.add(firstChunk, d.add(lane, d.c32(c)));
            auto store = [&] {
              Value v = d.load(v4, sm(st.base, stagedChunk(row, chunk)), 16);
              Value at = d.add(outRow, d.toI64(d.mul(chunk, d.c32(8))));
              d.store(v, d.gep(pout, outType, at), 16);
            };
            if (c + 32 <= sliceChunks)
              store();
            else
              d.ifThen(d.slt(d.add(lane, d.c32(c)), d.c32(sliceChunks)), store);
          }
        });
        return SmallVector<Value>{};
      });
  for (int h = 0; h < 2; ++h)
    d.ifThen(d.slt(rowGlobal[h], reqRows), [&] {
      writeLse(state, lRow, h, d.add(splitRow0, rowGlobal[h]), nonEmpty[h], sb);
    });
}
