//===- DecodeSM90.cpp - mla_decode_partial for sm_90a (mma.sync) ----------===//
//
// One CTA = `rows_per_cta` query rows of one request and one split-KV piece.
// Warps form a (rows_per_cta/16) x warps_n grid (warp (i, j)):
//
//   * The Q tile [rows x (L+R)] and KV blocks [kv_block x (L+R)] are staged
//     in shared memory with 16-byte cp.async copies, `stages` blocks deep.
//     Rows are 16-byte-chunk swizzled (chunk ^ (row & 7)) so ldmatrix reads
//     are bank-conflict free. Positions past the piece are zero-filled
//     (src-size 0): a NaN in an unused slot never enters shared memory.
//   * S = Q K^T: warp (i, j) scores rows 16i..16i+15 against its
//     kv_block/warps_n tokens with mma.sync m16n8k16 (ldmatrix fragments).
//   * Base-2 online softmax: scores are scaled by scale*log2(e) and masked
//     (piece bounds, causal limit per row) to -inf; the block's row maxima of
//     the warps_n warps meet in shared memory; p = ex2(s - m) goes to shared
//     memory as bf16/f16; each thread keeps a partial row sum.
//   * O += P V: warp (i, j) owns output columns [j*L/warps_n, ...) in
//     registers; V fragments are ldmatrix.trans views of the same KV tile.
//   * The end merges the row sums across warps and writes the normalised
//     f32 partial output and the natural-log LSE (-inf for an empty piece).
//
//===----------------------------------------------------------------------===//

#include "GpuCodegenUtils.h"
#include "mla/Conversion/MLAToGPU/MLAToGPU.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
namespace abi = mla::gpu;

namespace {
int64_t alignTo(int64_t v, int64_t a) { return (v + a - 1) / a * a; }
} // namespace

FailureOr<mlir::gpu::GPUFuncOp> mla::gpu_codegen::emitDecodePartialSM90(
    OpBuilder &builder, Location loc, StringRef name,
    const abi::DecodeShape &shape, const abi::DecodeTiling &tiling) {
  std::string why = abi::checkDecodeTiling(abi::Chip::SM90a, shape, tiling);
  if (!why.empty())
    return emitError(loc) << "sm_90a decode kernel: " << why;
  if (tiling.stages < 2)
    return emitError(loc) << "sm_90a decode kernel needs stages >= 2";

  const int64_t N = shape.numHeads, Sq = shape.queryRows, L = shape.latentDim;
  const int64_t D = shape.rowDim(), page = shape.pageSize;
  const int64_t M = tiling.rowsPerCta, wn = tiling.warpsN;
  const int64_t Bk = tiling.kvBlock, St = tiling.stages;
  const int64_t T = abi::decodeThreadsPerCta(tiling);
  const int64_t rows = N * Sq;
  const bool wg = tiling.wgmma;
  // mma.sync: shared rows are padded to whole 128-byte groups so the chunk
  // swizzle (chunk ^ (row & 7)) stays inside the row. wgmma: tiles are
  // 64-column boxes of 128-byte rows with the same swizzle (the canonical
  // 128B-swizzled K-major layout), each section 1024-byte aligned.
  const int64_t Dc = D / 8, rowBytes = wg ? D * 2 : alignTo(D * 2, 128);
  const int64_t Lw = L / wn, ntO = Lw / 8, Tw = Bk / wn, ntS = Tw / 8;
  const int64_t PB = wg ? Bk * 2 : Bk * 2 + 16;
  const int64_t secAlign = wg ? 1024 : 128;
  const int64_t qOff = 0;
  const int64_t kvOff = alignTo(M * rowBytes, secAlign);
  const int64_t pOff = kvOff + alignTo(St * Bk * rowBytes, secAlign);
  const int64_t redOff = pOff + alignTo(M * PB, secAlign);
  const bool bf16 = shape.elem == abi::ElemType::BF16;
  constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;
  const float scaleLog2 = shape.scale * kLog2e;

  ImplicitLocOpBuilder b(loc, builder);
  DeviceBuilder d(b);
  Type halfType = bf16 ? Type(b.getBF16Type()) : Type(b.getF16Type());
  Type g = d.ptrGlobal, i32 = d.i32;
  auto fn = createKernel(b, name, {g, g, g, g, g, g, g, i32, i32, i32}, T);
  fn->setAttr("nvvm.minctasm", b.getI32IntegerAttr(1));
  Value qPtr = fn.getArgument(0), cache = fn.getArgument(1),
        blockTable = fn.getArgument(2), seqLens = fn.getArgument(3),
        bounds = fn.getArgument(4), pout = fn.getArgument(5),
        plse = fn.getArgument(6), batch = fn.getArgument(7),
        maxPages = fn.getArgument(8), numSplits = fn.getArgument(9);

  Value smem = dynamicSharedBase(b);
  auto sm = [&](int64_t base, Value byteOffset) {
    return d.gepBytes(smem, d.add(d.c32(base), byteOffset));
  };
  Value tid = d.threadIdX();
  Value warp = d.divu(tid, d.c32(32)), lane = d.remu(tid, d.c32(32));
  // wgmma: warpgroup j (warps 4j..4j+3) is column/token half j, its warp
  // w % 4 owns rows 16(w%4)..; mma.sync: warp (i, j) = warp i*wn + j.
  Value wi = wg ? d.remu(warp, d.c32(4)) : d.divu(warp, d.c32(wn));
  Value wj = wg ? d.divu(warp, d.c32(4)) : d.remu(warp, d.c32(wn));
  Value gq = d.divu(lane, d.c32(4)), tq = d.remu(lane, d.c32(4));
  Value r0 = d.mul(d.blockIdX(), d.c32(M));
  Value split = d.blockIdY(), bb = d.blockIdZ();

  // The piece [lo, hi) and the last position any row of the tile may see.
  Value seq = d.load(i32, d.gep(seqLens, i32, bb), 4);
  Value bIdx = d.add(d.mul(bb, d.add(numSplits, d.c32(1))), split);
  Value zero = d.c32(0);
  Value hi = d.load(i32, d.gep(bounds, i32, d.add(bIdx, d.c32(1))), 4);
  hi = d.maxsi(d.minsi(hi, seq), zero);
  Value lo = d.load(i32, d.gep(bounds, i32, bIdx), 4);
  lo = d.minsi(d.maxsi(lo, zero), hi);
  Value kvEnd = hi;
  if (shape.causal) {
    Value lastRow = d.sub(d.minsi(d.add(r0, d.c32(M)), d.c32(rows)), d.c32(1));
    Value iMax = d.divu(lastRow, d.c32(N));
    kvEnd = d.minsi(hi, d.add(d.sub(seq, d.c32(Sq)), d.add(iMax, d.c32(1))));
  }
  kvEnd = d.maxsi(kvEnd, lo);
  Value blk0 = d.mul(d.divu(lo, d.c32(Bk)), d.c32(Bk));
  Value numBlocks = d.select(
      d.slt(lo, kvEnd),
      d.divu(d.add(d.sub(kvEnd, blk0), d.c32(Bk - 1)), d.c32(Bk)), zero);

  // Per-thread row limits (rows g and g+8 of the warp's 16-row block).
  Value rowLocal[2], rowGlobal[2], rowLimit[2];
  for (int h = 0; h < 2; ++h) {
    rowLocal[h] = d.add(d.mul(wi, d.c32(16)), d.add(gq, d.c32(8 * h)));
    rowGlobal[h] = d.add(r0, rowLocal[h]);
    rowLimit[h] = kvEnd;
    if (shape.causal) {
      Value iq = d.divu(rowGlobal[h], d.c32(N));
      rowLimit[h] = d.minsi(
          kvEnd, d.add(d.sub(seq, d.c32(Sq)), d.add(iq, d.c32(1))));
    }
  }

  // Swizzled byte offset of 16-byte chunk `chunk` of shared row `row` (of a
  // tile of `tileRows` rows, for the box layout).
  auto swzTile = [&](int64_t tileRows, Value row, Value chunk) {
    Value sw = d.bitXor(d.bitAnd(chunk, d.c32(7)), d.bitAnd(row, d.c32(7)));
    if (wg)
      return d.add(d.mul(d.divu(chunk, d.c32(8)), d.c32(tileRows * 128)),
                   d.add(d.mul(row, d.c32(128)), d.mul(sw, d.c32(16))));
    return d.add(d.mul(row, d.c32(rowBytes)),
                 d.mul(d.bitXor(chunk, d.bitAnd(row, d.c32(7))), d.c32(16)));
  };
  auto swz = [&](Value row, Value chunk) { return swzTile(Bk, row, chunk); };
  Value c16 = d.c32(16);

  // wgmma shared-memory descriptor of the 128B-swizzled tile at dynamic
  // shared byte `offset`: start >> 4 (bits 0-13), LBO >> 4 (16-29), SBO >> 4
  // (32-45), swizzle mode 1 = 128B (bits 62-63).
  Value smemAddr = LLVM::PtrToIntOp::create(b, d.i64, smem);
  auto desc = [&](Value offset, int64_t lbo, int64_t sbo) {
    Value addr = d.add(smemAddr, arith::ExtUIOp::create(b, d.i64, offset));
    Value start = arith::ShRUIOp::create(
        b, arith::AndIOp::create(b, addr, d.c64(0x3FFFF)), d.c64(4));
    int64_t bits = ((lbo >> 4) << 16) | ((sbo >> 4) << 32) | (int64_t(1) << 62);
    return arith::OrIOp::create(b, start, d.c64(bits)).getResult();
  };
  // One wgmma.mma_async m64nNk16 (f32 += bf16/f16 x bf16/f16, A and B from
  // shared memory); `acc` holds the thread's N/2 accumulators. scale-d = 0
  // ignores `acc` (the first k-step of a fresh product).
  auto wgmma = [&](int64_t n, ArrayRef<Value> acc, Value descA, Value descB,
                   bool accumulate, bool transB) {
    int64_t c = n / 2;
    std::string text = "{\n.reg .pred p;\nsetp.ne.b32 p, $" +
                       std::to_string(2 * c + 2) + ", 0;\n" +
                       "wgmma.mma_async.sync.aligned.m64n" + std::to_string(n) +
                       "k16.f32." + (bf16 ? "bf16.bf16" : "f16.f16") + " {";
    std::string cons;
    for (int64_t i = 0; i < c; ++i) {
      text += (i ? ", $" : "$") + std::to_string(i);
      cons += "=f,";
    }
    text += "}, $" + std::to_string(2 * c) + ", $" + std::to_string(2 * c + 1) +
            ", p, 1, 1, 0, " + (transB ? "1" : "0") + ";\n}";
    for (int64_t i = 0; i < c; ++i)
      cons += std::to_string(i) + ",";
    cons += "l,l,r";
    SmallVector<Value> operands(acc.begin(), acc.end());
    operands.append({descA, descB, d.c32(accumulate ? 1 : 0)});
    SmallVector<Type> fields(c, d.f32);
    auto structType = LLVM::LLVMStructType::getLiteral(b.getContext(), fields);
    Value r = LLVM::InlineAsmOp::create(
                  b, structType, operands, text, cons,
                  /*has_side_effects=*/true, /*is_align_stack=*/false,
                  LLVM::tailcallkind::TailCallKind::None,
                  LLVM::AsmDialectAttr(), ArrayAttr())
                  .getResult(0);
    SmallVector<Value> out;
    for (int64_t i = 0; i < c; ++i)
      out.push_back(LLVM::ExtractValueOp::create(b, r, i));
    return out;
  };
  auto proxyFence = [&] {
    NVVM::FenceProxyOp::create(
        b, NVVM::ProxyKindAttr::get(b.getContext(), NVVM::ProxyKind::async_shared),
        NVVM::SharedSpaceAttr::get(b.getContext(), NVVM::SharedSpace::shared_cta));
  };

  // Q tile: rows past the request's N*Sq are zero-filled.
  Value qReqBase = d.mul(d.toI64(d.mul(bb, d.c32(rows))), d.c64(D));
  for (int64_t it = 0; it < (M * Dc + T - 1) / T; ++it) {
    auto body = [&](Value idx) {
      Value rr = d.divu(idx, d.c32(Dc)), ch = d.remu(idx, d.c32(Dc));
      Value r = d.add(r0, rr);
      Value valid = d.slt(r, d.c32(rows));
      Value rc = d.minsi(r, d.c32(rows - 1));
      Value src = d.gep(qPtr, halfType,
                        d.add(qReqBase, d.add(d.mul(d.toI64(rc), d.c64(D)),
                                              d.toI64(d.mul(ch, d.c32(8))))));
      d.cpAsync16(sm(qOff, swzTile(M, rr, ch)), src, d.select(valid, c16, zero));
    };
    Value idx = d.add(tid, d.c32(it * T));
    if ((it + 1) * T <= M * Dc)
      body(idx);
    else
      d.ifThen(d.slt(idx, d.c32(M * Dc)), [&] { body(idx); });
  }

  // KV block k into stage k % St; a block never straddles a page.
  auto issueBlock = [&](Value k) {
    d.ifThen(d.slt(k, numBlocks), [&] {
      Value start = d.add(blk0, d.mul(k, d.c32(Bk)));
      Value pageIdx = d.divu(start, d.c32(page));
      Value phys = d.load(
          i32, d.gep(blockTable, i32, d.add(d.mul(bb, maxPages), pageIdx)), 4);
      Value firstRow = d.add(d.mul(d.toI64(phys), d.c64(page)),
                             d.toI64(d.remu(start, d.c32(page))));
      Value rowBase = d.mul(firstRow, d.c64(D));
      Value stage = d.mul(d.remu(k, d.c32(St)), d.c32(Bk * rowBytes));
      for (int64_t it = 0; it < (Bk * Dc + T - 1) / T; ++it) {
        auto body = [&](Value idx) {
          Value tok = d.divu(idx, d.c32(Dc)), ch = d.remu(idx, d.c32(Dc));
          Value valid = d.slt(d.add(start, tok), kvEnd);
          Value src = d.gep(
              cache, halfType,
              d.add(rowBase, d.toI64(d.add(d.mul(tok, d.c32(D)),
                                           d.mul(ch, d.c32(8))))));
          d.cpAsync16(sm(kvOff, d.add(stage, swz(tok, ch))), src,
                      d.select(valid, c16, zero));
        };
        Value idx = d.add(tid, d.c32(it * T));
        if ((it + 1) * T <= Bk * Dc)
          body(idx);
        else
          d.ifThen(d.slt(idx, d.c32(Bk * Dc)), [&] { body(idx); });
      }
    });
  };
  // Group 0 = Q + block 0; groups 1..St-2 = the next blocks.
  for (int64_t k = 0; k < St - 1; ++k) {
    issueBlock(d.c32(k));
    d.cpAsyncCommit();
  }

  // Lane-invariant parts of the ldmatrix addresses.
  Value l16 = d.remu(lane, d.c32(16)), lHalf = d.divu(lane, d.c32(16));
  Value l8 = d.remu(lane, d.c32(8)), lMat1 = d.remu(d.divu(lane, d.c32(8)), d.c32(2));
  Value qRow = d.add(d.mul(wi, d.c32(16)), l16);
  Value kTokBase = d.add(d.mul(wj, d.c32(Tw)), d.add(l8, d.mul(lHalf, d.c32(8))));
  Value vTokLane = d.add(l8, d.mul(lMat1, d.c32(8)));

  // Carried state: O (ntO tiles x 4), row max (2), partial row sum (2).
  SmallVector<Value> inits;
  Value fzero = d.f(0.0f), ninf = d.negInf();
  for (int64_t j = 0; j < ntO * 4; ++j)
    inits.push_back(fzero);
  inits.append({ninf, ninf, fzero, fzero});

  SmallVector<Value> state = d.forLoop(
      zero, numBlocks, d.c32(1), inits,
      [&](Value k, ValueRange carried) -> SmallVector<Value> {
        SmallVector<Value> o(carried.begin(), carried.begin() + ntO * 4);
        Value mOld[2] = {carried[ntO * 4], carried[ntO * 4 + 1]};
        Value lOld[2] = {carried[ntO * 4 + 2], carried[ntO * 4 + 3]};

        d.cpAsyncWait(St - 2);
        if (wg)
          proxyFence(); // cp.async wrote through the generic proxy
        d.barrier();
        issueBlock(d.add(k, d.c32(St - 1)));
        d.cpAsyncCommit();
        Value stage = d.mul(d.remu(k, d.c32(St)), d.c32(Bk * rowBytes));
        Value start = d.add(blk0, d.mul(k, d.c32(Bk)));

        // S = Q K^T over this warp's Tw tokens.
        SmallVector<std::array<Value, 4>> s(ntS, {fzero, fzero, fzero, fzero});
        if (wg) {
          // Warpgroup j: S[64 x Tw] = Q K_j^T, 16 columns of D per k-step
          // (a 32-byte step inside the 128-byte swizzle atom).
          SmallVector<Value> acc(ntS * 4, fzero);
          NVVM::WgmmaFenceAlignedOp::create(b);
          Value kHalf = d.add(stage, d.mul(wj, d.c32(Tw * 128)));
          for (int64_t kk = 0; kk < D / 16; ++kk) {
            Value aOff = d.c32(qOff + (kk / 4) * (M * 128) + (kk % 4) * 32);
            Value bOff = d.add(kHalf, d.c32(kvOff + (kk / 4) * (Bk * 128) +
                                            (kk % 4) * 32));
            acc = wgmma(Tw, acc, desc(aOff, 16, 1024), desc(bOff, 16, 1024),
                        kk > 0, false);
          }
          NVVM::WgmmaGroupSyncAlignedOp::create(b);
          NVVM::WgmmaWaitGroupSyncOp::create(b, b.getI64IntegerAttr(0));
          for (int64_t q = 0; q < ntS; ++q)
            for (int e = 0; e < 4; ++e)
              s[q][e] = acc[4 * q + e];
        }
        for (int64_t kk = 0; !wg && kk < D / 16; ++kk) {
          auto a = d.ldmatrixX4(
              sm(qOff, swzTile(M, qRow, d.add(lHalf, d.c32(2 * kk)))), false);
          for (int64_t p = 0; p < ntS / 2; ++p) {
            Value tok = d.add(kTokBase, d.c32(16 * p));
            auto bk = d.ldmatrixX4(
                sm(kvOff, d.add(stage, swz(tok, d.add(lMat1, d.c32(2 * kk))))),
                false);
            s[2 * p] = d.mma16816(a, {bk[0], bk[1]}, s[2 * p], bf16);
            s[2 * p + 1] = d.mma16816(a, {bk[2], bk[3]}, s[2 * p + 1], bf16);
          }
        }

        // Scale to base 2 and mask; per-row maxima of this warp's slice.
        Value rowMax[2] = {ninf, ninf};
        Value tokBase = d.add(start, d.add(d.mul(wj, d.c32(Tw)),
                                           d.mul(tq, d.c32(2))));
        for (int64_t q = 0; q < ntS; ++q)
          for (int e = 0; e < 4; ++e) {
            int h = e / 2;
            Value pos = d.add(tokBase, d.c32(8 * q + e % 2));
            Value valid = d.andi(d.sge(pos, lo), d.slt(pos, rowLimit[h]));
            s[q][e] = d.select(valid, d.fmul(s[q][e], d.f(scaleLog2)), ninf);
            rowMax[h] = d.fmax(rowMax[h], s[q][e]);
          }
        Value red = d.c32(redOff);
        for (int h = 0; h < 2; ++h) {
          rowMax[h] = d.fmax(rowMax[h], d.shflXor(rowMax[h], 1));
          rowMax[h] = d.fmax(rowMax[h], d.shflXor(rowMax[h], 2));
          Value slot = d.add(d.mul(rowLocal[h], d.c32(wn)), wj);
          d.store(rowMax[h], d.gepBytes(smem, d.add(red, d.mul(slot, d.c32(4)))), 4);
        }
        d.barrier();

        Value mNew[2], mUse[2], alpha[2], lNew[2];
        for (int h = 0; h < 2; ++h) {
          Value blockMax = ninf;
          for (int64_t j = 0; j < wn; ++j) {
            Value slot = d.add(d.mul(rowLocal[h], d.c32(wn)), d.c32(j));
            blockMax = d.fmax(blockMax,
                              d.load(d.f32, d.gepBytes(smem, d.add(red, d.mul(slot, d.c32(4)))), 4));
          }
          mNew[h] = d.fmax(mOld[h], blockMax);
          // A row that has seen nothing keeps m = -inf; exponentiate
          // against 0 then, so that no -inf - -inf NaN appears.
          mUse[h] = d.select(d.feq(mNew[h], ninf), fzero, mNew[h]);
          alpha[h] = d.exp2(d.fsub(mOld[h], mUse[h]));
          lNew[h] = d.fmul(lOld[h], alpha[h]);
        }
        for (int64_t q = 0; q < ntS; ++q) {
          Value pv[4];
          for (int e = 0; e < 4; ++e) {
            pv[e] = d.exp2(d.fsub(s[q][e], mUse[e / 2]));
            lNew[e / 2] = d.fadd(lNew[e / 2], pv[e]);
          }
          Value col = d.add(d.mul(wj, d.c32(Tw)),
                            d.add(d.c32(8 * q), d.mul(tq, d.c32(2))));
          for (int h = 0; h < 2; ++h) {
            Value off = d.add(d.mul(rowLocal[h], d.c32(PB)), d.mul(col, d.c32(2)));
            if (wg) // 128B-swizzled box: chunk (col*2/16) ^ (row & 7)
              off = d.add(
                  d.mul(rowLocal[h], d.c32(128)),
                  d.add(d.mul(d.bitXor(d.divu(col, d.c32(8)),
                                       d.bitAnd(rowLocal[h], d.c32(7))),
                              c16),
                        d.mul(d.remu(col, d.c32(8)), d.c32(2))));
            d.store(d.pack2(pv[2 * h], pv[2 * h + 1], halfType), sm(pOff, off), 4);
          }
        }
        for (int64_t j = 0; j < ntO; ++j)
          for (int e = 0; e < 4; ++e)
            o[j * 4 + e] = d.fmul(o[j * 4 + e], alpha[e / 2]);
        if (wg)
          proxyFence(); // P was stored through the generic proxy
        d.barrier();

        // O += P V over this warp's output columns.
        if (wg) {
          // Warpgroup j: O[64 x Lw] += P[64 x Bk] V[Bk x Lw], V an MN-major
          // view of the KV tile (boxes of 64 columns, LBO = box stride,
          // SBO = 8 tokens).
          NVVM::WgmmaFenceAlignedOp::create(b);
          Value vBase = d.add(stage, d.mul(wj, d.c32((Lw / 64) * Bk * 128)));
          for (int64_t kk = 0; kk < Bk / 16; ++kk) {
            Value aOff = d.c32(pOff + kk * 32);
            Value bOff = d.add(vBase, d.c32(kvOff + kk * 16 * 128));
            SmallVector<Value> acc = wgmma(Lw, o, desc(aOff, 16, 1024),
                                           desc(bOff, Bk * 128, 1024), true,
                                           true);
            for (int64_t i = 0; i < ntO * 4; ++i)
              o[i] = acc[i];
          }
          NVVM::WgmmaGroupSyncAlignedOp::create(b);
          NVVM::WgmmaWaitGroupSyncOp::create(b, b.getI64IntegerAttr(0));
        }
        for (int64_t kk = 0; !wg && kk < Bk / 16; ++kk) {
          auto a = d.ldmatrixX4(
              sm(pOff, d.add(d.mul(qRow, d.c32(PB)),
                             d.mul(d.add(lHalf, d.c32(2 * kk)), c16))),
              false);
          Value tok = d.add(vTokLane, d.c32(16 * kk));
          for (int64_t p = 0; p < ntO / 2; ++p) {
            Value chunk = d.add(d.add(d.mul(wj, d.c32(Lw / 8)), d.c32(2 * p)), lHalf);
            auto bv = d.ldmatrixX4(sm(kvOff, d.add(stage, swz(tok, chunk))), true);
            for (int t = 0; t < 2; ++t) {
              int64_t j = 2 * p + t;
              auto acc = d.mma16816(a, {bv[2 * t], bv[2 * t + 1]},
                                    {o[j * 4], o[j * 4 + 1], o[j * 4 + 2], o[j * 4 + 3]},
                                    bf16);
              for (int e = 0; e < 4; ++e)
                o[j * 4 + e] = acc[e];
            }
          }
        }
        SmallVector<Value> next(o.begin(), o.end());
        next.append({mNew[0], mNew[1], lNew[0], lNew[1]});
        return next;
      });
  d.cpAsyncWait(0);

  // Row sums: the quad, then the warps_n warps sharing the rows.
  Value red = d.c32(redOff);
  Value lRow[2];
  d.barrier();
  for (int h = 0; h < 2; ++h) {
    Value l = state[ntO * 4 + 2 + h];
    l = d.fadd(l, d.shflXor(l, 1));
    l = d.fadd(l, d.shflXor(l, 2));
    Value slot = d.add(d.mul(rowLocal[h], d.c32(wn)), wj);
    d.store(l, d.gepBytes(smem, d.add(red, d.mul(slot, d.c32(4)))), 4);
  }
  d.barrier();
  for (int h = 0; h < 2; ++h) {
    lRow[h] = fzero;
    for (int64_t j = 0; j < wn; ++j) {
      Value slot = d.add(d.mul(rowLocal[h], d.c32(wn)), d.c32(j));
      lRow[h] = d.fadd(lRow[h], d.load(d.f32, d.gepBytes(smem, d.add(red, d.mul(slot, d.c32(4)))), 4));
    }
  }

  auto v2 = VectorType::get({2}, d.f32);
  Value sb = d.add(d.mul(split, batch), bb);
  for (int h = 0; h < 2; ++h) {
    Value nonEmpty = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT,
                                           lRow[h], fzero);
    Value inv = d.select(nonEmpty, d.fdiv(d.f(1.0f), lRow[h]), fzero);
    d.ifThen(d.slt(rowGlobal[h], d.c32(rows)), [&] {
      Value outRow = d.mul(d.toI64(d.add(d.mul(sb, d.c32(rows)), rowGlobal[h])),
                           d.c64(L));
      Value colBase = d.add(d.mul(wj, d.c32(Lw)), d.mul(tq, d.c32(2)));
      for (int64_t j = 0; j < ntO; ++j) {
        Value v = LLVM::UndefOp::create(b, v2);
        v = LLVM::InsertElementOp::create(b, v, d.fmul(state[j * 4 + 2 * h], inv), d.c32(0));
        v = LLVM::InsertElementOp::create(b, v, d.fmul(state[j * 4 + 2 * h + 1], inv), d.c32(1));
        Value col = d.add(colBase, d.c32(8 * j));
        d.store(v, d.gep(pout, d.f32, d.add(outRow, d.toI64(col))), 8);
      }
      d.ifThen(d.andi(d.eq(wj, zero), d.eq(tq, zero)), [&] {
        Value m = state[ntO * 4 + h];
        Value lse = d.fmul(d.fadd(m, d.log2(lRow[h])), d.f(kLn2));
        lse = d.select(nonEmpty, lse, ninf);
        Value iq = d.divu(rowGlobal[h], d.c32(N)), n = d.remu(rowGlobal[h], d.c32(N));
        Value idx = d.add(d.mul(d.add(d.mul(sb, d.c32(N)), n), d.c32(Sq)), iq);
        d.store(lse, d.gep(plse, d.f32, idx), 4);
      });
    });
  }
  mlir::gpu::ReturnOp::create(b);
  return fn;
}
