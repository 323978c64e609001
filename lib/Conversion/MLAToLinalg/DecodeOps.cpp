//===- DecodeOps.cpp - CPU lowering of decode, decode_partial, combine ----===//
//
// mla.decode becomes decode_partial + combine (mla-split-kv's patterns).
// decode_partial walks each request's pages once per split: a page is
// dequantised to an f32 tile, and every query row folds the tile's visible
// tokens into its running (max, sum, acc) state with a per-token online softmax
// (natural exponent, max-subtracted). Only positions inside the row's range are
// visited, so NaN or garbage in unused slots, unused pages and masked causal
// positions never reaches a result. Rows are whole-width `vector`s of f32 (L
// and L+R static), which LLVM splits into native registers.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"
#include "mla/Contract/HostCalls.h"
#include "mla/Conversion/MLAToLinalg/MLAToLinalg.h"
#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mla/Dialect/MLA/Transforms/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include <limits>

using namespace mlir;
using namespace mla;
using namespace mla::lowering;

static constexpr double kNegInf = -std::numeric_limits<double>::infinity();

namespace {

/// Builds an scf.for over [lb, ub) carrying `iters`; `body` returns the
/// values to yield.
static ValueRange forLoop(
    OpBuilder &b, Location loc, Value lb, Value ub, ValueRange iters,
    function_ref<SmallVector<Value>(OpBuilder &, Location, Value, ValueRange)>
        body) {
  auto loop = scf::ForOp::create(
      b, loc, lb, ub, cIdx(b, loc, 1), iters,
      [&](OpBuilder &nb, Location nloc, Value iv, ValueRange args) {
        scf::YieldOp::create(nb, nloc, body(nb, nloc, iv, args));
      });
  return loop.getResults();
}

static Value readRow(OpBuilder &b, Location loc, Value tensor,
                     ValueRange indices, int64_t width) {
  auto vecTy = VectorType::get({width}, b.getF32Type());
  return vector::TransferReadOp::create(
      b, loc, vecTy, tensor, indices, cF32(b, loc, 0.0), ArrayRef<bool>{true});
}

static Value writeRow(OpBuilder &b, Location loc, Value vec, Value tensor,
                      ValueRange indices) {
  return vector::TransferWriteOp::create(b, loc, vec, tensor, indices,
                                         ArrayRef<bool>{true})
      .getResult();
}

struct LowerDecodePartial : public OpRewritePattern<DecodePartialOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(DecodePartialOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto poTy = op.getPartialOut().getType();
    auto cacheTy = op.getCache().getType();
    // A varlen q [T, N, L+R] is walked like [B, Sq, N, L+R] with Sq its
    // largest query length; each request's loops stop at its own q_b.
    DecodeQueryDims dims = op.getQueryDims();
    bool varlen = op.isVarlen();
    int64_t rowDim = dims.rowDim,
            latentDim = poTy.getDimSize(poTy.getRank() - 1);
    int64_t sq = dims.queryRows, heads = dims.numHeads;
    CacheLayoutAttr layout = op.getLayout();
    Value cache = op.getCache();
    // A page size the planner chose (mla-select-layout) fixes a dynamic page
    // dimension: view the cache with it, so tiles have static shapes.
    int64_t pageSize = cacheTy.getDimSize(1);
    if (ShapedType::isDynamic(pageSize) && layout.getPageSize() &&
        !ShapedType::isDynamic(rowDim) && !ShapedType::isDynamic(latentDim)) {
      pageSize = *layout.getPageSize();
      auto staticTy = RankedTensorType::get(
          {cacheTy.getDimSize(0), pageSize,
           layout.getRowWidth(latentDim, rowDim - latentDim)},
          cacheTy.getElementType());
      cache = tensor::CastOp::create(rewriter, loc, staticTy, cache);
    }
    if (ShapedType::isDynamic(rowDim) || ShapedType::isDynamic(latentDim) ||
        ShapedType::isDynamic(sq) || ShapedType::isDynamic(heads) ||
        ShapedType::isDynamic(pageSize))
      // No other pattern can lower the op, so say why instead of leaving
      // only "failed to legalize".
      return op.emitOpError("the CPU decode lowering needs static Sq, N, L, "
                            "L+R and a page size (from the cache type or the "
                            "layout)");
    if (rowDim > kMaxRowVectorWidth)
      return op.emitOpError()
             << "the CPU decode lowering holds a row of L+R = " << rowDim
             << " in a vector of at most " << kMaxRowVectorWidth << " elements";
    int64_t splits = op.getNumSplits();
    bool causal = op.getCausal();
    Type f32 = rewriter.getF32Type();
    Value q = op.getQ();
    Value blockTable = op.getBlockTable(), seqLens = op.getSeqLens();
    Value splitBounds = op.getSplitBounds();
    DcpShardAttr shard = op.getShardAttr();
    double scale = op.getSoftmaxScale().convertToDouble();

    // The split dimension has no counterpart in q: its extent is
    // num_splits. The others are q's [B, Sq, N] (varlen [T, N]) in each
    // result's order.
    auto resultDims = [&](RankedTensorType ty, ArrayRef<int64_t> qDims) {
      SmallVector<Value> dyn;
      for (int64_t d = 0; d < ty.getRank(); ++d)
        if (ty.isDynamicDim(d))
          dyn.push_back(d == 0 ? cIdx(rewriter, loc, splits)
                               : dimSize(rewriter, loc, q, qDims[d - 1]));
      return dyn;
    };
    auto plTy = op.getPartialLse().getType();
    SmallVector<Value> poDyn = resultDims(poTy, {0, 1, 2});
    SmallVector<Value> plDyn =
        varlen ? resultDims(plTy, {0, 1}) : resultDims(plTy, {0, 2, 1});
    Value poInit = tensor::EmptyOp::create(rewriter, loc, poTy, poDyn);
    Value plInit = tensor::EmptyOp::create(rewriter, loc, plTy, plDyn);

    Value c0 = cIdx(rewriter, loc, 0);
    Value qsl = op.getQueryStartLoc();
    Value batch = varlen ? dimSize(rewriter, loc, blockTable, 0)
                         : dimSize(rewriter, loc, q, 0);
    auto stateTy = RankedTensorType::get({sq, heads}, f32);
    auto accTy = RankedTensorType::get({sq, heads, latentDim}, f32);
    auto qbTy = RankedTensorType::get({sq, heads, rowDim}, f32);

    ValueRange results = forLoop(
        rewriter, loc, c0, batch, {poInit, plInit},
        [&](OpBuilder &b, Location l, Value bIv, ValueRange outs) {
          // A varlen request's tokens [first, first + rows); rows is
          // clamped to [0, Sq] (the argument rules reject anything else).
          Value first, rows = cIdx(b, l, sq);
          if (varlen) {
            first = extractIndex(b, l, qsl, {bIv});
            Value next = extractIndex(
                b, l, qsl, {arith::AddIOp::create(b, l, bIv, cIdx(b, l, 1))});
            rows = arith::MinSIOp::create(
                b, l,
                arith::MaxSIOp::create(
                    b, l, arith::SubIOp::create(b, l, next, first), c0),
                rows);
          }
          // The request's query rows in f32, pre-multiplied by the scale.
          Value qb = tensor::GenerateOp::create(
              b, l, qbTy, ValueRange{},
              [&](OpBuilder &nb, Location nl, ValueRange ivs) {
                tensor::YieldOp::create(
                    nb, nl,
                    varlen ? readVarlenQuery(nb, nl, q, first, rows, ivs, scale)
                           : readQuery(nb, nl, q, {bIv, ivs[0], ivs[1], ivs[2]},
                                       scale));
              });
          // A DCP shard's pieces cut the rank's local positions; seq_lens
          // stay global for the causal limits.
          Value globalLen = extractIndex(b, l, seqLens, {bIv});
          Value len = globalLen;
          if (shard)
            len = dcpOwnedTokens(b, l, globalLen, shard.getWorldSize(),
                                 shard.getRank(), shard.getInterleave());
          Value nSplits = cIdx(b, l, splits);
          Value chunk = arith::CeilDivUIOp::create(b, l, len, nSplits);
          return llvm::to_vector(forLoop(
              b, l, c0, nSplits, outs,
              [&](OpBuilder &b, Location l, Value sIv, ValueRange outs) {
                Value start, end;
                if (splitBounds) {
                  // Planned pieces, clamped to the request so a stale or
                  // hostile plan cannot read past seq_lens[b].
                  Value next = arith::AddIOp::create(b, l, sIv, cIdx(b, l, 1));
                  start = arith::MinUIOp::create(
                      b, l, extractIndex(b, l, splitBounds, {bIv, sIv}), len);
                  end = arith::MaxUIOp::create(
                      b, l,
                      arith::MinUIOp::create(
                          b, l, extractIndex(b, l, splitBounds, {bIv, next}),
                          len),
                      start);
                } else {
                  start = arith::MinUIOp::create(
                      b, l, arith::MulIOp::create(b, l, sIv, chunk), len);
                  end = arith::MinUIOp::create(
                      b, l, arith::AddIOp::create(b, l, start, chunk), len);
                }
                auto st =
                    foldSplit(b, l, qb, bIv, globalLen, start, end, stateTy,
                              accTy, cache, layout, blockTable, latentDim,
                              rowDim, pageSize, rows, heads, causal, shard);
                return writeSplit(b, l, st, outs[0], outs[1], sIv, bIv, rows,
                                  heads, first);
              }));
        });
    rewriter.replaceOp(op, results);
    return success();
  }

  /// q[idx] in f32 times `scale`.
  static Value readQuery(OpBuilder &b, Location l, Value q, ValueRange idx,
                         double scale) {
    Value v = tensor::ExtractOp::create(b, l, q, idx);
    return arith::MulFOp::create(b, l, toF32(b, l, v), cF32(b, l, scale));
  }

  /// Element (i, n, k) of a varlen request's query rows: q[first + i, n, k]
  /// for i < rows, else 0 (never read: the last request's padding rows lie
  /// past T).
  static Value readVarlenQuery(OpBuilder &b, Location l, Value q, Value first,
                               Value rows, ValueRange ivs, double scale) {
    Value inside =
        arith::CmpIOp::create(b, l, arith::CmpIPredicate::ult, ivs[0], rows);
    auto ifOp = scf::IfOp::create(
        b, l, inside,
        [&](OpBuilder &tb, Location tl) {
          Value t = arith::AddIOp::create(tb, tl, first, ivs[0]);
          scf::YieldOp::create(
              tb, tl, readQuery(tb, tl, q, {t, ivs[1], ivs[2]}, scale));
        },
        [&](OpBuilder &eb, Location el) {
          scf::YieldOp::create(eb, el, cF32(eb, el, 0.0));
        });
    return ifOp.getResult(0);
  }

  /// Online-softmax state (running max, sum and output) of the first `rows`
  /// query rows of request `bIv` over local positions [start, end); `len` is
  /// the request's global length (what causal limits count).
  static SmallVector<Value>
  foldSplit(OpBuilder &b, Location l, Value qb, Value bIv, Value len,
            Value start, Value end, RankedTensorType stateTy,
            RankedTensorType accTy, Value cache, CacheLayoutAttr layout,
            Value blockTable, int64_t latentDim, int64_t rowDim,
            int64_t pageSize, Value rows, int64_t heads, bool causal,
            DcpShardAttr shard) {
    Value mInit =
        linalg::FillOp::create(
            b, l, cF32(b, l, kNegInf),
            tensor::EmptyOp::create(b, l, stateTy, ValueRange{}).getResult())
            .getResult(0);
    Value lInit =
        linalg::FillOp::create(
            b, l, cF32(b, l, 0.0),
            tensor::EmptyOp::create(b, l, stateTy, ValueRange{}).getResult())
            .getResult(0);
    Value accInit =
        linalg::FillOp::create(
            b, l, cF32(b, l, 0.0),
            tensor::EmptyOp::create(b, l, accTy, ValueRange{}).getResult())
            .getResult(0);
    Value ps = cIdx(b, l, pageSize);
    Value firstPage = arith::DivUIOp::create(b, l, start, ps);
    Value endPage = arith::CeilDivUIOp::create(b, l, end, ps);
    Value c0 = cIdx(b, l, 0);
    return llvm::to_vector(forLoop(
        b, l, firstPage, endPage, {mInit, lInit, accInit},
        [&](OpBuilder &b, Location l, Value pIv, ValueRange st) {
          Value page = extractIndex(b, l, blockTable, {bIv, pIv});
          Value tile = loadTile(b, l, cache, layout, latentDim, rowDim, page);
          Value base = arith::MulIOp::create(b, l, pIv, ps);
          Value j0 = arith::SubIOp::create(
              b, l, arith::MaxUIOp::create(b, l, start, base), base);
          Value j1 = arith::SubIOp::create(
              b, l,
              arith::MinUIOp::create(b, l, end,
                                     arith::AddIOp::create(b, l, base, ps)),
              base);
          return llvm::to_vector(forLoop(
              b, l, c0, rows, st,
              [&](OpBuilder &b, Location l, Value iIv, ValueRange st) {
                // Causal row i sees global positions [0, len - rows + i]
                // (on a DCP rank: the local positions among them); clamp
                // the row's end into [j0, j1] (signed: a short request can
                // make the limit negative).
                Value jEnd = j1;
                if (causal) {
                  Value visible = causalVisible(b, l, len, rows, iIv);
                  if (shard)
                    visible =
                        dcpOwnedTokens(b, l, visible, shard.getWorldSize(),
                                       shard.getRank(), shard.getInterleave());
                  Value limit = arith::SubIOp::create(b, l, visible, base);
                  jEnd = arith::MaxSIOp::create(
                      b, l, arith::MinSIOp::create(b, l, j1, limit), j0);
                }
                return llvm::to_vector(forLoop(
                    b, l, c0, cIdx(b, l, heads), st,
                    [&](OpBuilder &b, Location l, Value nIv, ValueRange st) {
                      return foldRow(b, l, qb, tile, j0, jEnd, iIv, nIv, st,
                                     latentDim, rowDim);
                    }));
              }));
        }));
  }

  /// Page `page` of the cache as an f32 [page_size, L+R] tile: a view for
  /// f32 caches, a dequantised copy otherwise.
  static Value loadTile(OpBuilder &b, Location l, Value cache,
                        CacheLayoutAttr layout, int64_t latentDim,
                        int64_t rowDim, Value page) {
    auto cacheTy = cast<RankedTensorType>(cache.getType());
    if (cacheTy.getElementType().isF32()) {
      auto tileTy = RankedTensorType::get(
          {cacheTy.getDimSize(1), cacheTy.getDimSize(2)}, b.getF32Type());
      SmallVector<OpFoldResult> offsets = {page, b.getIndexAttr(0),
                                           b.getIndexAttr(0)};
      SmallVector<OpFoldResult> sizes = {b.getIndexAttr(1),
                                         b.getIndexAttr(cacheTy.getDimSize(1)),
                                         b.getIndexAttr(cacheTy.getDimSize(2))};
      SmallVector<OpFoldResult> strides(3, b.getIndexAttr(1));
      return tensor::ExtractSliceOp::create(b, l, tileTy, cache, offsets, sizes,
                                            strides);
    }
    return loadCachePage(b, l, cache, layout, latentDim, rowDim, page);
  }

  /// Folds tile rows [j0, jEnd) into query row (i, n):
  /// m' = max(m, s), acc' = acc * e^(m - m') + e^(s - m') * v, same for l.
  static SmallVector<Value> foldRow(OpBuilder &b, Location l, Value qb,
                                    Value tile, Value j0, Value jEnd, Value iIv,
                                    Value nIv, ValueRange st, int64_t latentDim,
                                    int64_t rowDim) {
    Value mT = st[0], lT = st[1], accT = st[2];
    Value qRow = readRow(b, l, qb, {iIv, nIv, cIdx(b, l, 0)}, rowDim);
    Value m0 = tensor::ExtractOp::create(b, l, mT, ValueRange{iIv, nIv});
    Value l0 = tensor::ExtractOp::create(b, l, lT, ValueRange{iIv, nIv});
    Value acc0 = readRow(b, l, accT, {iIv, nIv, cIdx(b, l, 0)}, latentDim);
    Value c0 = cIdx(b, l, 0);
    ValueRange folded = forLoop(
        b, l, j0, jEnd, {m0, l0, acc0},
        [&](OpBuilder &b, Location l, Value jIv, ValueRange s) {
          Value kRow = readRow(b, l, tile, {jIv, c0}, rowDim);
          Value prod = arith::MulFOp::create(b, l, qRow, kRow);
          Value score = vector::ReductionOp::create(
              b, l, vector::CombiningKind::ADD, prod);
          Value mNew = arith::MaximumFOp::create(b, l, s[0], score);
          Value alpha = math::ExpOp::create(
              b, l, arith::SubFOp::create(b, l, s[0], mNew));
          Value p = math::ExpOp::create(
              b, l, arith::SubFOp::create(b, l, score, mNew));
          Value lNew = arith::AddFOp::create(
              b, l, arith::MulFOp::create(b, l, s[1], alpha), p);
          auto vecTy = VectorType::get({latentDim}, b.getF32Type());
          Value vRow = readRow(b, l, tile, {jIv, c0}, latentDim);
          Value accNew = vector::FMAOp::create(
              b, l, vector::BroadcastOp::create(b, l, vecTy, p), vRow,
              arith::MulFOp::create(
                  b, l, s[2], vector::BroadcastOp::create(b, l, vecTy, alpha)));
          return SmallVector<Value>{mNew, lNew, accNew};
        });
    Value mOut =
        tensor::InsertOp::create(b, l, folded[0], mT, ValueRange{iIv, nIv});
    Value lOut =
        tensor::InsertOp::create(b, l, folded[1], lT, ValueRange{iIv, nIv});
    Value accOut = writeRow(b, l, folded[2], accT, {iIv, nIv, c0});
    return {mOut, lOut, accOut};
  }

  /// Normalises the split's state into partial_out[s, b] and
  /// partial_lse[s, b] (varlen: the request's tokens first .. first+rows-1
  /// of partial_out[s] and partial_lse[s]): out = acc / l and
  /// lse = m + log(l), or 0 and -inf for a row that saw no token. A NaN sum
  /// (NaN or Inf in q or in a visible row) counts as seen (UGT), so the row
  /// comes out NaN, not empty.
  static SmallVector<Value> writeSplit(OpBuilder &b, Location l,
                                       ArrayRef<Value> st, Value po, Value pl,
                                       Value sIv, Value bIv, Value rows,
                                       int64_t heads, Value first) {
    Value mT = st[0], lT = st[1], accT = st[2];
    int64_t latentDim = cast<RankedTensorType>(accT.getType()).getDimSize(2);
    auto vecTy = VectorType::get({latentDim}, b.getF32Type());
    Value c0 = cIdx(b, l, 0);
    return llvm::to_vector(forLoop(
        b, l, c0, rows, {po, pl},
        [&](OpBuilder &b, Location l, Value iIv, ValueRange outs) {
          return llvm::to_vector(forLoop(
              b, l, c0, cIdx(b, l, heads), outs,
              [&](OpBuilder &b, Location l, Value nIv, ValueRange outs) {
                Value m =
                    tensor::ExtractOp::create(b, l, mT, ValueRange{iIv, nIv});
                Value sum =
                    tensor::ExtractOp::create(b, l, lT, ValueRange{iIv, nIv});
                Value acc = readRow(b, l, accT, {iIv, nIv, c0}, latentDim);
                Value seen = arith::CmpFOp::create(
                    b, l, arith::CmpFPredicate::UGT, sum, cF32(b, l, 0.0));
                Value safeSum =
                    arith::SelectOp::create(b, l, seen, sum, cF32(b, l, 1.0));
                Value inv =
                    arith::DivFOp::create(b, l, cF32(b, l, 1.0), safeSum);
                Value out = arith::MulFOp::create(
                    b, l, acc, vector::BroadcastOp::create(b, l, vecTy, inv));
                out = arith::SelectOp::create(
                    b, l, seen, out,
                    arith::ConstantOp::create(
                        b, l, vecTy, DenseElementsAttr::get(vecTy, 0.0f)));
                Value lse = arith::SelectOp::create(
                    b, l, seen,
                    arith::AddFOp::create(b, l, m,
                                          math::LogOp::create(b, l, safeSum)),
                    cF32(b, l, kNegInf));
                if (first) {
                  Value t = arith::AddIOp::create(b, l, first, iIv);
                  return SmallVector<Value>{
                      writeRow(b, l, out, outs[0], {sIv, t, nIv, c0}),
                      tensor::InsertOp::create(b, l, lse, outs[1],
                                               ValueRange{sIv, t, nIv})};
                }
                Value po =
                    writeRow(b, l, out, outs[0], {sIv, bIv, iIv, nIv, c0});
                Value pl = tensor::InsertOp::create(
                    b, l, lse, outs[1], ValueRange{sIv, bIv, nIv, iIv});
                return SmallVector<Value>{po, pl};
              }));
        }));
  }
};

/// combine: a max-then-weighted-sum over the split dimension, written as
/// linalg.generic ops so every (b, i, n) row is independent.
struct LowerCombine : public OpRewritePattern<CombineOp> {
  LowerCombine(MLIRContext *ctx) : OpRewritePattern(ctx) {
    // Token-packed partials become a request-major combine, which this
    // pattern then lowers: one level of recursion.
    setHasBoundedRewriteRecursion();
  }

  LogicalResult matchAndRewrite(CombineOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    Value po = op.getPartialOut(), pl = op.getPartialLse();
    if (op.getPartialOut().getType().getRank() == 4)
      return rewritePacked(op, rewriter);
    auto outTy = op.getOut().getType();
    auto lseTy = op.getLse().getType();
    Type f32 = rewriter.getF32Type();

    auto emptyLike = [&](RankedTensorType ty, Value src,
                         ArrayRef<int64_t> srcDims) {
      SmallVector<Value> dyn;
      for (int64_t d = 0; d < ty.getRank(); ++d)
        if (ty.isDynamicDim(d))
          dyn.push_back(dimSize(rewriter, loc, src, srcDims[d]));
      return tensor::EmptyOp::create(rewriter, loc, ty, dyn).getResult();
    };

    // Dims: s, b, n, i for the lse-shaped reductions.
    AffineExpr s, bb, n, i, lat;
    bindDims(ctx, s, bb, n, i);
    auto lseIn = AffineMap::get(4, 0, {s, bb, n, i}, ctx);
    auto lseOut = AffineMap::get(4, 0, {bb, n, i}, ctx);
    SmallVector<utils::IteratorType> redIters = {
        utils::IteratorType::reduction, utils::IteratorType::parallel,
        utils::IteratorType::parallel, utils::IteratorType::parallel};
    auto f32LseTy = RankedTensorType::get(lseTy.getShape(), f32);
    Value neg = cF32(rewriter, loc, kNegInf);
    Value zero = cF32(rewriter, loc, 0.0);

    // m = max_s lse_s.
    Value mInit = linalg::FillOp::create(rewriter, loc, neg,
                                         emptyLike(f32LseTy, pl, {1, 2, 3}))
                      .getResult(0);
    Value m =
        linalg::GenericOp::create(
            rewriter, loc, f32LseTy, pl, mInit,
            ArrayRef<AffineMap>{lseIn, lseOut}, redIters,
            [&](OpBuilder &b, Location l, ValueRange args) {
              linalg::YieldOp::create(b, l,
                                      ValueRange{arith::MaximumFOp::create(
                                          b, l, args[0], args[1])});
            })
            .getResult(0);

    // Weight of a split: 0 when it saw nothing (guards -inf - -inf).
    auto weight = [&](OpBuilder &b, Location l, Value lse, Value mx) {
      Value empty = arith::CmpFOp::create(b, l, arith::CmpFPredicate::OEQ, lse,
                                          cF32(b, l, kNegInf));
      Value w = math::ExpOp::create(b, l, arith::SubFOp::create(b, l, lse, mx));
      return arith::SelectOp::create(b, l, empty, cF32(b, l, 0.0), w)
          .getResult();
    };

    // sum_s w_s.
    Value sumInit = linalg::FillOp::create(rewriter, loc, zero,
                                           emptyLike(f32LseTy, pl, {1, 2, 3}))
                        .getResult(0);
    auto mIn = AffineMap::get(4, 0, {bb, n, i}, ctx);
    Value sum =
        linalg::GenericOp::create(
            rewriter, loc, f32LseTy, ValueRange{pl, m}, sumInit,
            ArrayRef<AffineMap>{lseIn, mIn, lseOut}, redIters,
            [&](OpBuilder &b, Location l, ValueRange args) {
              Value w = weight(b, l, args[0], args[1]);
              linalg::YieldOp::create(
                  b, l, ValueRange{arith::AddFOp::create(b, l, args[2], w)});
            })
            .getResult(0);

    // lse = m + log(sum), -inf when nothing was seen. A NaN sum (a split
    // poisoned by NaN) counts as seen (UGT) so NaN reaches out and lse.
    auto ident3 = AffineMap::getMultiDimIdentityMap(3, ctx);
    SmallVector<utils::IteratorType> par3(3, utils::IteratorType::parallel);
    Value lse =
        linalg::GenericOp::create(
            rewriter, loc, lseTy, ValueRange{m, sum},
            emptyLike(lseTy, pl, {1, 2, 3}),
            ArrayRef<AffineMap>{ident3, ident3, ident3}, par3,
            [&](OpBuilder &b, Location l, ValueRange args) {
              Value seen = arith::CmpFOp::create(
                  b, l, arith::CmpFPredicate::UGT, args[1], cF32(b, l, 0.0));
              Value v = arith::AddFOp::create(
                  b, l, args[0], math::LogOp::create(b, l, args[1]));
              linalg::YieldOp::create(b, l,
                                      ValueRange{arith::SelectOp::create(
                                          b, l, seen, v, cF32(b, l, kNegInf))});
            })
            .getResult(0);

    // out = sum_s w_s o_s / sum_s w_s over dims (s, b, i, n, l).
    AffineExpr s5, b5, i5, n5;
    bindDims(ctx, s5, b5, i5, n5, lat);
    auto poIn = AffineMap::get(5, 0, {s5, b5, i5, n5, lat}, ctx);
    auto plIn = AffineMap::get(5, 0, {s5, b5, n5, i5}, ctx);
    auto rowIn = AffineMap::get(5, 0, {b5, n5, i5}, ctx);
    auto outMap = AffineMap::get(5, 0, {b5, i5, n5, lat}, ctx);
    SmallVector<utils::IteratorType> outIters = {
        utils::IteratorType::reduction, utils::IteratorType::parallel,
        utils::IteratorType::parallel, utils::IteratorType::parallel,
        utils::IteratorType::parallel};
    auto f32OutTy = RankedTensorType::get(outTy.getShape(), f32);
    Value accInit =
        linalg::FillOp::create(rewriter, loc, zero,
                               emptyLike(f32OutTy, po, {1, 2, 3, 4}))
            .getResult(0);
    Value acc =
        linalg::GenericOp::create(
            rewriter, loc, f32OutTy, ValueRange{po, pl, m}, accInit,
            ArrayRef<AffineMap>{poIn, plIn, rowIn, outMap}, outIters,
            [&](OpBuilder &b, Location l, ValueRange args) {
              Value w = weight(b, l, args[1], args[2]);
              // A zero weight must not turn a NaN-free 0 * x into
              // anything but 0, so select instead of multiplying.
              Value c = arith::MulFOp::create(b, l, w, args[0]);
              Value isZero = arith::CmpFOp::create(
                  b, l, arith::CmpFPredicate::OEQ, w, cF32(b, l, 0.0));
              c = arith::SelectOp::create(b, l, isZero, cF32(b, l, 0.0), c);
              linalg::YieldOp::create(
                  b, l, ValueRange{arith::AddFOp::create(b, l, args[3], c)});
            })
            .getResult(0);
    auto ident4 = AffineMap::getMultiDimIdentityMap(4, ctx);
    AffineExpr b4, i4, n4, l4;
    bindDims(ctx, b4, i4, n4, l4);
    auto sumIn = AffineMap::get(4, 0, {b4, n4, i4}, ctx);
    SmallVector<utils::IteratorType> par4(4, utils::IteratorType::parallel);
    Value out =
        linalg::GenericOp::create(
            rewriter, loc, outTy, ValueRange{acc, sum},
            emptyLike(outTy, po, {1, 2, 3, 4}),
            ArrayRef<AffineMap>{ident4, sumIn, ident4}, par4,
            [&](OpBuilder &b, Location l, ValueRange args) {
              Value seen = arith::CmpFOp::create(
                  b, l, arith::CmpFPredicate::UGT, args[1], cF32(b, l, 0.0));
              Value v = arith::DivFOp::create(b, l, args[0], args[1]);
              v = arith::SelectOp::create(b, l, seen, v, cF32(b, l, 0.0));
              linalg::YieldOp::create(
                  b, l, ValueRange{fromF32(b, l, v, args[2].getType())});
            })
            .getResult(0);
    rewriter.replaceOp(op, {out, lse});
    return success();
  }

  /// Token-packed partials [S, T, N, L] / [S, T, N] are the request-major
  /// form with B = T and Sq = 1: combine [S, T, 1, N, L] / [S, T, N, 1] and
  /// drop the unit dimension again.
  static LogicalResult rewritePacked(CombineOp op, PatternRewriter &rewriter) {
    Location loc = op.getLoc();
    auto unitAt = [](RankedTensorType ty, int64_t pos) {
      SmallVector<int64_t> shape(ty.getShape());
      shape.insert(shape.begin() + pos, 1);
      return RankedTensorType::get(shape, ty.getElementType());
    };
    auto poTy = op.getPartialOut().getType();
    auto plTy = op.getPartialLse().getType();
    auto outTy = op.getOut().getType();
    auto lseTy = op.getLse().getType();
    SmallVector<ReassociationIndices> po5 = {{0}, {1, 2}, {3}, {4}};
    SmallVector<ReassociationIndices> pl4 = {{0}, {1}, {2, 3}};
    SmallVector<ReassociationIndices> out4 = {{0, 1}, {2}, {3}};
    SmallVector<ReassociationIndices> lse3 = {{0}, {1, 2}};
    Value po = tensor::ExpandShapeOp::create(rewriter, loc, unitAt(poTy, 2),
                                             op.getPartialOut(), po5);
    Value pl = tensor::ExpandShapeOp::create(rewriter, loc, unitAt(plTy, 3),
                                             op.getPartialLse(), pl4);
    auto combine = CombineOp::create(rewriter, loc, unitAt(outTy, 1),
                                     unitAt(lseTy, 2), po, pl);
    Value out = tensor::CollapseShapeOp::create(rewriter, loc, outTy,
                                                combine.getOut(), out4);
    Value lse = tensor::CollapseShapeOp::create(rewriter, loc, lseTy,
                                                combine.getLse(), lse3);
    rewriter.replaceOp(op, {out, lse});
    return success();
  }
};

/// plan_splits: a call of the host split planner (mla/Contract/HostCalls.h)
/// on the seq_lens buffer, filling a fresh bounds buffer.
struct LowerPlanSplits : public OpRewritePattern<PlanSplitsOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(PlanSplitsOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type i32 = rewriter.getI32Type(), i64 = rewriter.getI64Type();
    auto lensDyn = MemRefType::get({ShapedType::kDynamic}, i32);
    auto boundsDyn =
        MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic}, i32);
    auto fnTy =
        rewriter.getFunctionType({lensDyn, boundsDyn, i64, i64, i64, i64}, {});
    auto module = op->getParentOfType<ModuleOp>();
    if (!module.lookupSymbol(kPlanSplitBoundsFn)) {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(module.getBody());
      auto fn = func::FuncOp::create(rewriter, loc, kPlanSplitBoundsFn, fnTy);
      fn.setPrivate();
      fn->setAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName(),
                  rewriter.getUnitAttr());
    }

    auto lensTy = op.getSeqLens().getType();
    auto boundsTy = op.getBounds().getType();
    Value lens = bufferization::ToBufferOp::create(
        rewriter, loc, MemRefType::get(lensTy.getShape(), i32), op.getSeqLens(),
        rewriter.getUnitAttr());
    SmallVector<Value> dyn;
    for (int64_t d = 0; d < 2; ++d)
      if (boundsTy.isDynamicDim(d))
        dyn.push_back(d == 0 ? dimSize(rewriter, loc, op.getSeqLens(), 0)
                             : Value());
    if (llvm::is_contained(dyn, Value()))
      return op.emitOpError("the CPU lowering needs a static piece capacity");
    Value bounds = memref::AllocOp::create(
        rewriter, loc, MemRefType::get(boundsTy.getShape(), i32), dyn);
    SplitPlanAttr plan = op.getPlan();
    auto cst = [&](int64_t v) -> Value {
      return arith::ConstantOp::create(rewriter, loc,
                                       rewriter.getI64IntegerAttr(v));
    };
    func::CallOp::create(
        rewriter, loc, kPlanSplitBoundsFn, TypeRange{},
        ValueRange{memref::CastOp::create(rewriter, loc, lensDyn, lens),
                   memref::CastOp::create(rewriter, loc, boundsDyn, bounds),
                   cst(static_cast<int64_t>(plan.getPolicy())),
                   cst(plan.getNumSmParts()),
                   cst(op.getNumHeadsAttr().getInt()),
                   cst(op.getQueryRowsAttr().getInt())});
    rewriter.replaceOpWithNewOp<bufferization::ToTensorOp>(
        op, boundsTy, bounds, rewriter.getUnitAttr(), rewriter.getUnitAttr());
    return success();
  }
};

/// dcp_combine is combine with ranks for pieces: the gathered states are
/// already in combine's split-major layout.
struct LowerDcpCombine : public OpRewritePattern<DcpCombineOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(DcpCombineOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<CombineOp>(
        op, op.getOut().getType(), op.getLse().getType(), op.getGatheredOut(),
        op.getGatheredLse());
    return success();
  }
};

/// One process is one rank: with world_size 1 the gather is the rank's own
/// state with a unit rank axis. Larger worlds need a transport, which the
/// in-process CPU executor does not have.
struct LowerDcpAllGather : public OpRewritePattern<DcpAllGatherOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(DcpAllGatherOp op,
                                PatternRewriter &rewriter) const override {
    int64_t world = op.getWorldSizeAttr().getInt();
    if (world != 1)
      return op.emitOpError()
             << "world_size " << world
             << " needs a collective transport, which the CPU lowering does "
                "not have: run multi-rank DCP through mla.dcp (Python, "
                "torch.distributed or multiprocessing), or lower the "
                "single-process form (mla-dcp without rank)";
    SmallVector<Value> gathered;
    Value states[] = {op.getOut(), op.getLse()};
    for (auto [src, ty] : llvm::zip(states, op.getResultTypes())) {
      auto srcTy = cast<RankedTensorType>(src.getType());
      SmallVector<ReassociationIndices> groups = {{0, 1}};
      for (int64_t d = 1; d < srcTy.getRank(); ++d)
        groups.push_back({d + 1});
      gathered.push_back(tensor::ExpandShapeOp::create(
          rewriter, op.getLoc(), cast<RankedTensorType>(ty), src, groups));
    }
    rewriter.replaceOp(op, gathered);
    return success();
  }
};

} // namespace

void mla::populateMLADecodeToLinalgPatterns(RewritePatternSet &patterns) {
  // Decodes nobody split (mla-split-kv) go through the same rewrite first.
  populateSplitKVPatterns(patterns);
  patterns.add<LowerDecodePartial, LowerCombine, LowerPlanSplits,
               LowerDcpCombine, LowerDcpAllGather>(patterns.getContext());
}
