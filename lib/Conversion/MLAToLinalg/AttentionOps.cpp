//===- AttentionOps.cpp - varlen MHA and the LSE merge --------------------===//
//
// Lowers mla.mha (variable-length multi-head attention with LSE, the prefill
// kernel of primer section 7) and mla.merge_states (the two-way LSE merge of
// section 6).
//
// mha walks requests, heads and query rows with scf.for loops whose
// iter_args carry the output tensors, and does the work per key with 1-D
// vector ops over whole head rows: one vector.transfer_read per K or V row,
// a reassociable vector.reduction for the score and a vector.fma for the
// weighted V sum, so the CPU path runs DeepSeek-sized prefills (hundreds of
// tokens x 128 heads) in seconds. The softmax is the two-pass stable one:
// scores and their maximum first (kept in a scratch tensor with a slot per
// row of k), then exp(s - max) weights. Loops are ordered request,
// head, row so the K/V rows of one head stay in cache across query rows.
//
// merge_states is two linalg.generics in destination-passing style over
// (out_a, lse_a): per (head, token) the normalised weights of both sides and
// the merged LSE, then per output element the weighted sum. A merge into a
// loop-carried state therefore bufferizes in place.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"
#include "mla/Conversion/MLAToLinalg/MLAToLinalg.h"
#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/PatternMatch.h"
#include <limits>

using namespace mlir;
using namespace mla;
using namespace mla::lowering;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// A tensor of `sizes` and `elementType` filled with `value`.
Value filled(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes,
             Type elementType, double value) {
  Value empty = tensor::EmptyOp::create(b, loc, sizes, elementType);
  Value cst =
      arith::ConstantOp::create(b, loc, b.getFloatAttr(elementType, value));
  return linalg::FillOp::create(b, loc, cst, empty).getResult(0);
}

/// `v` with the exact type `ty` (a static/dynamic shape refinement only).
Value castTo(OpBuilder &b, Location loc, Value v, Type ty) {
  if (v.getType() == ty)
    return v;
  return tensor::CastOp::create(b, loc, ty, v);
}

/// Whether an LSE contributes: finite (not +-inf, not NaN).
Value isLive(OpBuilder &b, Location loc, Value lse) {
  return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT,
                               math::AbsFOp::create(b, loc, lse),
                               cF32(b, loc, kInf));
}

//===----------------------------------------------------------------------===//
// mha
//===----------------------------------------------------------------------===//

/// Emits the attention of single query rows against key ranges of `k`/`v`.
/// The state threaded through the loops is (out, lse, scores).
struct RowAttention {
  Value q, k, v;
  int64_t qkWidth, vWidth;
  Type elementType;
  double scale;

  /// The `width`-wide row of head `head` at token `row` of `src`, widened
  /// to f32.
  Value readRow(OpBuilder &b, Location loc, Value src, Value row, Value head,
                int64_t width) const {
    auto vecTy = VectorType::get({width}, elementType);
    Value padding =
        arith::ConstantOp::create(b, loc, b.getFloatAttr(elementType, 0.0));
    Value vec = vector::TransferReadOp::create(
        b, loc, vecTy, src, ValueRange{row, head, cIdx(b, loc, 0)}, padding,
        ArrayRef<bool>{true});
    if (elementType.isF32())
      return vec;
    return arith::ExtFOp::create(b, loc,
                                 VectorType::get({width}, b.getF32Type()), vec);
  }

  /// Query `token`, head `head` against keys `keyBegin .. keyBegin+visible-1`;
  /// returns the updated (out, lse, scores).
  SmallVector<Value> emit(OpBuilder &b, Location loc, Value token, Value head,
                          Value keyBegin, Value visible,
                          ValueRange state) const {
    Value c0 = cIdx(b, loc, 0), c1 = cIdx(b, loc, 1);
    Type f32 = b.getF32Type();
    auto accTy = VectorType::get({vWidth}, f32);
    Value qRow = readRow(b, loc, q, token, head, qkWidth);
    qRow =
        arith::MulFOp::create(b, loc, qRow,
                              vector::BroadcastOp::create(
                                  b, loc, qRow.getType(), cF32(b, loc, scale)));

    // Pass 1: the scaled scores and their maximum.
    auto scoreLoop = scf::ForOp::create(
        b, loc, c0, visible, c1, ValueRange{cF32(b, loc, -kInf), state[2]},
        [&](OpBuilder &nb, Location nloc, Value j, ValueRange it) {
          Value kRow =
              readRow(nb, nloc, k, arith::AddIOp::create(nb, nloc, keyBegin, j),
                      head, qkWidth);
          Value score = vector::ReductionOp::create(
              nb, nloc, vector::CombiningKind::ADD,
              arith::MulFOp::create(nb, nloc, qRow, kRow),
              arith::FastMathFlags::reassoc);
          Value max = arith::MaximumFOp::create(nb, nloc, it[0], score);
          Value scores =
              tensor::InsertOp::create(nb, nloc, score, it[1], ValueRange{j});
          scf::YieldOp::create(nb, nloc, ValueRange{max, scores});
        });
    Value max = scoreLoop.getResult(0), scores = scoreLoop.getResult(1);
    // A row that sees no key keeps max = -inf; anchor at 0 so that
    // exp(s - anchor) never computes -inf - -inf.
    Value anchor = arith::SelectOp::create(
        b, loc,
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, max,
                              cF32(b, loc, -kInf)),
        cF32(b, loc, 0.0), max);

    // Pass 2: weights exp(s - max), their sum and the weighted V rows.
    Value zeroAcc = arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(accTy, b.getF32FloatAttr(0.0)));
    auto valueLoop = scf::ForOp::create(
        b, loc, c0, visible, c1, ValueRange{cF32(b, loc, 0.0), zeroAcc},
        [&](OpBuilder &nb, Location nloc, Value j, ValueRange it) {
          Value s = tensor::ExtractOp::create(nb, nloc, scores, ValueRange{j});
          Value p = math::ExpOp::create(
              nb, nloc, arith::SubFOp::create(nb, nloc, s, anchor));
          Value vRow =
              readRow(nb, nloc, v, arith::AddIOp::create(nb, nloc, keyBegin, j),
                      head, vWidth);
          Value acc = vector::FMAOp::create(
              nb, nloc, vector::BroadcastOp::create(nb, nloc, accTy, p), vRow,
              it[1]);
          Value sum = arith::AddFOp::create(nb, nloc, it[0], p);
          scf::YieldOp::create(nb, nloc, ValueRange{sum, acc});
        });
    Value sum = valueLoop.getResult(0), acc = valueLoop.getResult(1);

    // No visible key: out 0, lse -inf. UGT keeps a NaN sum visible.
    Value seen = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UGT, sum,
                                       cF32(b, loc, 0.0));
    Value inv = arith::SelectOp::create(
        b, loc, seen, arith::DivFOp::create(b, loc, cF32(b, loc, 1.0), sum),
        cF32(b, loc, 0.0));
    Value outRow = arith::MulFOp::create(
        b, loc, acc, vector::BroadcastOp::create(b, loc, accTy, inv));
    if (!elementType.isF32())
      outRow = arith::TruncFOp::create(
          b, loc, VectorType::get({vWidth}, elementType), outRow);
    Value out = vector::TransferWriteOp::create(b, loc, outRow, state[0],
                                                ValueRange{token, head, c0},
                                                ArrayRef<bool>{true})
                    .getResult();
    Value lseValue = arith::SelectOp::create(
        b, loc, seen,
        arith::AddFOp::create(b, loc, anchor, math::LogOp::create(b, loc, sum)),
        cF32(b, loc, -kInf));
    Value lse = tensor::InsertOp::create(b, loc, lseValue, state[1],
                                         ValueRange{head, token});
    return {out, lse, scores};
  }
};

struct MhaLowering : OpRewritePattern<MhaOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MhaOp op,
                                PatternRewriter &rewriter) const override {
    auto qTy = cast<RankedTensorType>(op.getQ().getType());
    int64_t qkWidth = qTy.getDimSize(2);
    int64_t vWidth = cast<RankedTensorType>(op.getV().getType()).getDimSize(2);
    if (ShapedType::isDynamic(qkWidth) || ShapedType::isDynamic(vWidth))
      return rewriter.notifyMatchFailure(
          op, "needs static head widths (they are vector lengths)");
    if (qkWidth > kMaxRowVectorWidth || vWidth > kMaxRowVectorWidth)
      return op.emitOpError()
             << "the CPU mha lowering holds a q/k row (" << qkWidth
             << ") and a v row (" << vWidth << ") in vectors of at most "
             << kMaxRowVectorWidth << " elements";

    Location loc = op.getLoc();
    RowAttention rows{op.getQ(),
                      op.getK(),
                      op.getV(),
                      qkWidth,
                      vWidth,
                      qTy.getElementType(),
                      op.getSoftmaxScale().convertToDouble()};
    Value cuQ = op.getCuSeqlensQ(), cuK = op.getCuSeqlensK();
    bool causal = op.getCausal();

    OpFoldResult tokens = tensor::getMixedSize(rewriter, loc, op.getQ(), 0);
    OpFoldResult heads = tensor::getMixedSize(rewriter, loc, op.getQ(), 1);
    // Rows outside every request are never visited: they keep out 0 and
    // lse -inf.
    Value out =
        filled(rewriter, loc, {tokens, heads, rewriter.getIndexAttr(vWidth)},
               qTy.getElementType(), 0.0);
    Value lse =
        filled(rewriter, loc, {heads, tokens}, rewriter.getF32Type(), -kInf);
    Value scores =
        tensor::EmptyOp::create(rewriter, loc,
                                ArrayRef<OpFoldResult>{tensor::getMixedSize(
                                    rewriter, loc, op.getK(), 0)},
                                rewriter.getF32Type());

    Value c0 = cIdx(rewriter, loc, 0), c1 = cIdx(rewriter, loc, 1);
    Value batch = arith::SubIOp::create(rewriter, loc,
                                        dimSize(rewriter, loc, cuQ, 0), c1);
    Value numHeads = dimSize(rewriter, loc, op.getQ(), 1);
    auto requestLoop = scf::ForOp::create(
        rewriter, loc, c0, batch, c1, ValueRange{out, lse, scores},
        [&](OpBuilder &b, Location l, Value req, ValueRange reqState) {
          Value next = arith::AddIOp::create(b, l, req, c1);
          Value qBegin = extractIndex(b, l, cuQ, req);
          Value qLen = arith::SubIOp::create(
              b, l, extractIndex(b, l, cuQ, next), qBegin);
          Value kBegin = extractIndex(b, l, cuK, req);
          Value kLen = arith::SubIOp::create(
              b, l, extractIndex(b, l, cuK, next), kBegin);
          auto headLoop = scf::ForOp::create(
              b, l, c0, numHeads, c1, reqState,
              [&](OpBuilder &b, Location l, Value head, ValueRange headState) {
                auto rowLoop = scf::ForOp::create(
                    b, l, c0, qLen, c1, headState,
                    [&](OpBuilder &b, Location l, Value i, ValueRange state) {
                      Value visible = kLen;
                      if (causal) {
                        // Bottom-right aligned: row i sees keys
                        // [0, kLen - qLen + i], clamped to [0, kLen].
                        Value last = causalVisible(b, l, kLen, qLen, i);
                        visible = arith::MinSIOp::create(
                            b, l, arith::MaxSIOp::create(b, l, last, c0), kLen);
                      }
                      Value token = arith::AddIOp::create(b, l, qBegin, i);
                      scf::YieldOp::create(
                          b, l,
                          rows.emit(b, l, token, head, kBegin, visible, state));
                    });
                scf::YieldOp::create(b, l, rowLoop.getResults());
              });
          scf::YieldOp::create(b, l, headLoop.getResults());
        });

    rewriter.replaceOp(op, {castTo(rewriter, loc, requestLoop.getResult(0),
                                   op.getOut().getType()),
                            castTo(rewriter, loc, requestLoop.getResult(1),
                                   op.getLse().getType())});
    return success();
  }
};

//===----------------------------------------------------------------------===//
// merge_states
//===----------------------------------------------------------------------===//

struct MergeStatesLowering : OpRewritePattern<MergeStatesOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MergeStatesOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    Type f32 = rewriter.getF32Type();
    auto outTy = cast<RankedTensorType>(op.getOutA().getType());
    Type elementType = outTy.getElementType();

    // Per (head, token): normalised weights of both sides and the merged
    // LSE, written over lse_a (destination-passing, so a merge inside a loop
    // updates its state in place). A side with an infinite LSE weighs 0;
    // with neither side live the weights are 0 and the LSE is -inf. A NaN
    // LSE is a side that saw NaN: it makes the weights and the LSE NaN, so
    // the merged row reads as poisoned rather than empty.
    SmallVector<OpFoldResult> lseSizes =
        tensor::getMixedSizes(rewriter, loc, op.getLseA());
    Value weightInit = tensor::EmptyOp::create(rewriter, loc, lseSizes, f32);
    AffineMap id2 = rewriter.getMultiDimIdentityMap(2);
    auto par = utils::IteratorType::parallel;
    auto weights = linalg::GenericOp::create(
        rewriter, loc,
        TypeRange{weightInit.getType(), weightInit.getType(),
                  op.getLseA().getType()},
        ValueRange{op.getLseB()},
        ValueRange{weightInit, weightInit, op.getLseA()},
        ArrayRef<AffineMap>{id2, id2, id2, id2},
        ArrayRef<utils::IteratorType>{par, par},
        [&](OpBuilder &b, Location l, ValueRange args) {
          Value lb = args[0], la = args[3];
          Value liveA = isLive(b, l, la), liveB = isLive(b, l, lb);
          Value any = arith::OrIOp::create(b, l, liveA, liveB);
          Value ninf = cF32(b, l, -kInf), zero = cF32(b, l, 0.0);
          Value max = arith::MaximumFOp::create(
              b, l, arith::SelectOp::create(b, l, liveA, la, ninf),
              arith::SelectOp::create(b, l, liveB, lb, ninf));
          Value anchor = arith::SelectOp::create(b, l, any, max, zero);
          auto weight = [&](Value live, Value lse) -> Value {
            Value w = math::ExpOp::create(
                b, l, arith::SubFOp::create(b, l, lse, anchor));
            return arith::SelectOp::create(b, l, live, w, zero);
          };
          Value wa = weight(liveA, la), wb = weight(liveB, lb);
          Value total = arith::AddFOp::create(b, l, wa, wb);
          Value inv = arith::SelectOp::create(
              b, l, any, arith::DivFOp::create(b, l, cF32(b, l, 1.0), total),
              zero);
          Value lse = arith::SelectOp::create(
              b, l, any,
              arith::AddFOp::create(b, l, anchor,
                                    math::LogOp::create(b, l, total)),
              ninf);
          Value poisoned =
              arith::CmpFOp::create(b, l, arith::CmpFPredicate::UNO, la, lb);
          Value nan = cF32(b, l, std::numeric_limits<double>::quiet_NaN());
          auto orNaN = [&](Value v) -> Value {
            return arith::SelectOp::create(b, l, poisoned, nan, v);
          };
          linalg::YieldOp::create(
              b, l,
              ValueRange{orNaN(arith::MulFOp::create(b, l, wa, inv)),
                         orNaN(arith::MulFOp::create(b, l, wb, inv)),
                         orNaN(lse)});
        });

    // Per output element: the weighted sum in f32, written over out_a. A
    // zero weight drops its side explicitly because a side that does not
    // contribute may hold garbage, and 0 * NaN would leak it; a NaN weight
    // (a poisoned row) is kept.
    AffineMap id3 = rewriter.getMultiDimIdentityMap(3);
    AffineMap headToken = AffineMap::get(
        3, 0, {getAffineDimExpr(1, ctx), getAffineDimExpr(0, ctx)}, ctx);
    auto merged = linalg::GenericOp::create(
        rewriter, loc, op.getOutA().getType(),
        ValueRange{op.getOutB(), weights.getResult(0), weights.getResult(1)},
        ValueRange{op.getOutA()},
        ArrayRef<AffineMap>{id3, headToken, headToken, id3},
        ArrayRef<utils::IteratorType>{par, par, par},
        [&](OpBuilder &b, Location l, ValueRange args) {
          Value zero = cF32(b, l, 0.0);
          auto term = [&](Value o, Value w) -> Value {
            Value used =
                arith::CmpFOp::create(b, l, arith::CmpFPredicate::UNE, w, zero);
            Value t = arith::MulFOp::create(b, l, w, toF32(b, l, o));
            return arith::SelectOp::create(b, l, used, t, zero);
          };
          Value sum = arith::AddFOp::create(b, l, term(args[3], args[1]),
                                            term(args[0], args[2]));
          linalg::YieldOp::create(b, l, fromF32(b, l, sum, elementType));
        });

    rewriter.replaceOp(
        op,
        {castTo(rewriter, loc, merged.getResult(0), op.getOut().getType()),
         castTo(rewriter, loc, weights.getResult(2), op.getLse().getType())});
    return success();
  }
};

} // namespace

void mla::populateMLAAttentionToLinalgPatterns(RewritePatternSet &patterns) {
  patterns.add<MhaLowering, MergeStatesLowering>(patterns.getContext());
}
