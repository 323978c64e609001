//===- SelectAlgorithm.cpp - the mla-select-algorithm pass ----------------===//
//
// Plans a mixed batch (primer section 8): every mla.attention becomes the
// absorbed MQA path (split_kv_b_proj, absorb_q, decode, up_proj_out; primer
// section 5) for the requests with 1 <= q_len <= threshold and the
// up-projected MHA path (prefill; primer section 7) for the others. Both
// compute the same attention at different costs: decode attends over the
// latent rows themselves, one read serving every head, but pays the W_UK and
// W_UV products per query row; prefill up-projects each context row to
// per-head K/V, which pays off when many query rows share it.
//
// Static batches (query_start_loc is a constant): the split is decided
// here. Decode requests are grouped by q_len, one mla.decode per group,
// because a decode's query shape [B, Sq] is uniform; the prefill requests
// form one mla.prefill with query_start_loc rebased to 0. A path's rows are
// one slice when its requests are adjacent and a concatenation of slices
// otherwise, so any request order is handled. Requests without tokens take
// no path.
//
// Run-time batches: the split is read from query_start_loc at run time.
// Sq is part of mla.decode's type, so only single-row decode requests can be
// split off, i.e. decode-threshold = 1 (0 and below mean "prefill only"):
// the decode path takes the leading run of requests with q_len = 1, counted
// by an scf.while, and every later request takes the prefill path. Engines
// put decode requests first (vLLM reorders its batches so); on a batch that
// is not so ordered the result is the same, decode requests behind the
// first longer one merely take the costlier path. query_start_loc[0] = 0 as
// the op requires, so the i-th decode request owns token i.
//
// Output rows outside every request are 0, as mla.prefill leaves them.
//
// The rule (which requests take which path, at compile time and at run
// time) is mla/Contract/MixedBatch.h's, which the runtimes that split a
// batch on the host use as well.
//
//===----------------------------------------------------------------------===//

#include "mla/Contract/MixedBatch.h"
#include "mla/Dialect/MLA/Transforms/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"
#include "llvm/ADT/MapVector.h"

namespace mla {
#define GEN_PASS_DEF_MLASELECTALGORITHM
#include "mla/Dialect/MLA/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;
using namespace mla;

namespace {

/// Rows [begin, begin + size) of a tensor's leading dimension.
struct RowRange {
  int64_t begin, size;
};

/// The requests of one path of a static batch: their token rows (of q, kv_c,
/// k_pe and the output), their request rows (of block_table and seq_lens)
/// with adjacent ranges merged, and their query lengths in order.
struct Selection {
  SmallVector<RowRange> tokens, requests;
  SmallVector<int64_t> queryLens;

  void add(int64_t request, int64_t firstToken, int64_t queryLen) {
    append(tokens, firstToken, queryLen);
    append(requests, request, 1);
    queryLens.push_back(queryLen);
  }
  bool empty() const { return queryLens.empty(); }
  int64_t numRequests() const { return queryLens.size(); }
  int64_t numTokens() const {
    int64_t n = 0;
    for (int64_t len : queryLens)
      n += len;
    return n;
  }

private:
  static void append(SmallVectorImpl<RowRange> &ranges, int64_t begin,
                     int64_t size) {
    if (!ranges.empty() && ranges.back().begin + ranges.back().size == begin)
      ranges.back().size += size;
    else
      ranges.push_back({begin, size});
  }
};

/// Builds the replacement of one mla.attention with static widths.
class AlgorithmSplit {
public:
  AlgorithmSplit(OpBuilder &b, AttentionOp op)
      : b(b), loc(op.getLoc()), op(op),
        elementType(op.getQ().getType().getElementType()) {
    auto qTy = op.getQ().getType();
    heads = qTy.getDimSize(1);
    rope = op.getKPe().getType().getShape().back();
    nope = qTy.getDimSize(2) - rope;
    latent = op.getKvC().getType().getDimSize(1);
    value = op.getOut().getType().getDimSize(2);
  }

  /// The whole batch on the prefill path: mla.prefill of the same operands.
  Value buildPrefillOnly() {
    return castToResult(prefill(op.getQ(), op.getKvC(), op.getKPe(),
                                op.getBlockTable(), op.getQueryStartLoc(),
                                op.getSeqLens()));
  }

  /// The split of a batch whose request i owns tokens
  /// [offsets[i], offsets[i + 1]).
  Value buildStatic(ArrayRef<int64_t> offsets, int64_t threshold) {
    llvm::MapVector<int64_t, Selection> decodeGroups;
    Selection prefillRequests;
    for (size_t i = 0; i + 1 < offsets.size(); ++i) {
      int64_t queryLen = offsets[i + 1] - offsets[i];
      if (queryLen == 0)
        continue;
      Selection &sel = takesDecodePath(queryLen, threshold)
                           ? decodeGroups[queryLen]
                           : prefillRequests;
      sel.add(i, offsets[i], queryLen);
    }
    if (decodeGroups.empty())
      return buildPrefillOnly();

    SmallVector<std::pair<Value, const Selection *>> parts;
    for (auto &[queryLen, sel] : decodeGroups) {
      Value q = gather(op.getQ(), sel.tokens);
      Value blockTable = gather(op.getBlockTable(), sel.requests);
      Value seqLens = gather(op.getSeqLens(), sel.requests);
      parts.push_back({decode(q, blockTable, seqLens,
                              b.getIndexAttr(sel.numRequests()), queryLen),
                       &sel});
    }
    if (!prefillRequests.empty()) {
      const Selection &sel = prefillRequests;
      Value q = gather(op.getQ(), sel.tokens);
      Value kvC = gather(op.getKvC(), sel.tokens);
      Value kPe = gather(op.getKPe(), sel.tokens);
      Value blockTable = gather(op.getBlockTable(), sel.requests);
      Value seqLens = gather(op.getSeqLens(), sel.requests);
      SmallVector<int32_t> rebased = {0};
      for (int64_t len : sel.queryLens)
        rebased.push_back(rebased.back() + len);
      auto offsetsTy =
          RankedTensorType::get({int64_t(rebased.size())}, b.getI32Type());
      Value queryStartLoc = arith::ConstantOp::create(
          b, loc, DenseIntElementsAttr::get(offsetsTy, rebased));
      parts.push_back(
          {prefill(q, kvC, kPe, blockTable, queryStartLoc, seqLens), &sel});
    }
    return castToResult(assemble(parts));
  }

  /// The split of a batch known at run time: the leading requests with
  /// kRuntimeDecodeQueryLen query rows each take the decode path
  /// (countLeadingDecodes; see the file comment).
  Value buildDynamic() {
    // The run's counter is its requests' count and their tokens' alike.
    static_assert(kRuntimeDecodeQueryLen == 1,
                  "request i of the decode run owns token i");
    Value queryStartLoc = op.getQueryStartLoc();
    Value zero = idx(0), one = idx(1);
    Value batch = arith::SubIOp::create(b, loc, dim(queryStartLoc, 0), one);
    auto leading = scf::WhileOp::create(
        b, loc, TypeRange{b.getIndexType()}, ValueRange{zero},
        [&](OpBuilder &nb, Location nloc, ValueRange args) {
          // At i = B the clamp gives q_len = 0, which ends the run without
          // reading past query_start_loc[B].
          Value i = args[0];
          Value next = arith::MinUIOp::create(
              nb, nloc, arith::AddIOp::create(nb, nloc, i, one), batch);
          Value queryLen = arith::SubIOp::create(
              nb, nloc, load(nb, nloc, queryStartLoc, next),
              load(nb, nloc, queryStartLoc, i));
          Value single = arith::CmpIOp::create(
              nb, nloc, arith::CmpIPredicate::eq, queryLen, one);
          scf::ConditionOp::create(nb, nloc, single, ValueRange{i});
        },
        [&](OpBuilder &nb, Location nloc, ValueRange args) {
          scf::YieldOp::create(
              nb, nloc,
              ValueRange{arith::AddIOp::create(nb, nloc, args[0], one)});
        });
    Value numDecodes = leading.getResult(0);

    Value decodeQ = slice(op.getQ(), zero, numDecodes);
    Value decodeTable = slice(op.getBlockTable(), zero, numDecodes);
    Value decodeLens = slice(op.getSeqLens(), zero, numDecodes);
    Value decodeOut = decode(decodeQ, decodeTable, decodeLens, numDecodes,
                             kRuntimeDecodeQueryLen);

    Value tokens = dim(op.getQ(), 0);
    Value restTokens = arith::SubIOp::create(b, loc, tokens, numDecodes);
    Value restRequests = arith::SubIOp::create(b, loc, batch, numDecodes);
    Value prefillQ = slice(op.getQ(), numDecodes, restTokens);
    Value prefillKvC = slice(op.getKvC(), numDecodes, restTokens);
    Value prefillKPe = slice(op.getKPe(), numDecodes, restTokens);
    Value prefillTable = slice(op.getBlockTable(), numDecodes, restRequests);
    Value prefillLens = slice(op.getSeqLens(), numDecodes, restRequests);
    Value restOffsets =
        slice(queryStartLoc, numDecodes,
              arith::AddIOp::create(b, loc, restRequests, one).getResult());
    Value prefillOut = prefill(prefillQ, prefillKvC, prefillKPe, prefillTable,
                               subtract(restOffsets, numDecodes), prefillLens);

    // The two paths cover every token, so nothing needs a zero fill.
    Value out = tensor::EmptyOp::create(
        b, loc,
        ArrayRef<OpFoldResult>{tokens, b.getIndexAttr(heads),
                               b.getIndexAttr(value)},
        elementType);
    out = insert(decodeOut, out, zero);
    out = insert(prefillOut, out, numDecodes);
    return castToResult(out);
  }

private:
  /// Absorbed MQA over `batch` requests of `queryRows` tokens each, whose
  /// query rows are `q` [T, N, P+R] (request-major); returns [T, N, V].
  Value decode(Value q, Value blockTable, Value seqLens, OpFoldResult batch,
               int64_t queryRows) {
    if (!wUkT) {
      Type weightType = op.getKvBProj().getType().getElementType();
      auto split = SplitKvBProjOp::create(
          b, loc, RankedTensorType::get({heads, nope, latent}, weightType),
          RankedTensorType::get({heads, latent, value}, weightType),
          op.getKvBProj());
      wUkT = split.getWUkT();
      wUv = split.getWUv();
    }
    int64_t tokens = cast<RankedTensorType>(q.getType()).getDimSize(0);
    std::optional<int64_t> constBatch = getConstantIntValue(batch);
    int64_t staticBatch = constBatch ? *constBatch : ShapedType::kDynamic;
    int64_t row = latent + rope;

    Value absorbed = AbsorbQOp::create(
        b, loc, RankedTensorType::get({tokens, heads, row}, elementType), q,
        wUkT);
    Value perRequest = tensor::ExpandShapeOp::create(
        b, loc,
        RankedTensorType::get({staticBatch, queryRows, heads, row},
                              elementType),
        absorbed, ArrayRef<ReassociationIndices>{{0, 1}, {2}, {3}},
        ArrayRef<OpFoldResult>{batch, b.getIndexAttr(queryRows),
                               b.getIndexAttr(heads), b.getIndexAttr(row)});
    // The cache already holds the new tokens, so causal decode over
    // seq_lens is exactly the prefill's mask: row i sees positions
    // [0, seq_len - q_len + i].
    auto attention = DecodeOp::create(
        b, loc,
        RankedTensorType::get({staticBatch, queryRows, heads, latent},
                              elementType),
        RankedTensorType::get({staticBatch, heads, queryRows}, b.getF32Type()),
        perRequest, op.getCache(), blockTable, seqLens, Value(),
        op.getLayoutAttr(), op.getSoftmaxScaleAttr(), b.getUnitAttr(),
        IntegerAttr(), SplitPlanAttr(), IntegerAttr());
    // Target annotations (mla.padded_heads) follow the work to the decode.
    attention->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    Value perToken = tensor::CollapseShapeOp::create(
        b, loc, attention.getOut(),
        ArrayRef<ReassociationIndices>{{0, 1}, {2}, {3}});
    Value flat = UpProjOutOp::create(
        b, loc, RankedTensorType::get({tokens, heads * value}, elementType),
        perToken, wUv);
    return tensor::ExpandShapeOp::create(
        b, loc, RankedTensorType::get({tokens, heads, value}, elementType),
        flat, ArrayRef<ReassociationIndices>{{0}, {1, 2}},
        ArrayRef<OpFoldResult>{tensor::getMixedSize(b, loc, q, 0),
                               b.getIndexAttr(heads), b.getIndexAttr(value)});
  }

  /// Up-projected MHA over the given requests; returns [T, N, V].
  Value prefill(Value q, Value kvC, Value kPe, Value blockTable,
                Value queryStartLoc, Value seqLens) {
    int64_t tokens = cast<RankedTensorType>(q.getType()).getDimSize(0);
    return PrefillOp::create(
        b, loc, RankedTensorType::get({tokens, heads, value}, elementType), q,
        kvC, kPe, op.getKvBProj(), op.getCache(), blockTable, queryStartLoc,
        seqLens, op.getLayoutAttr(), op.getSoftmaxScaleAttr(),
        op.getWorkspaceRowsAttr());
  }

  /// The op's result from the paths' outputs: each part's rows go back to
  /// its selection's token ranges.
  Value assemble(ArrayRef<std::pair<Value, const Selection *>> parts) {
    int64_t tokens = op.getQ().getType().getDimSize(0);
    if (parts.size() == 1 && parts[0].second->tokens.size() == 1 &&
        parts[0].second->tokens[0].begin == 0 &&
        parts[0].second->tokens[0].size == tokens)
      return parts[0].first;

    int64_t covered = 0;
    for (auto [part, sel] : parts)
      covered += sel->numTokens();
    SmallVector<OpFoldResult> sizes = {
        tensor::getMixedSize(b, loc, op.getQ(), 0), b.getIndexAttr(heads),
        b.getIndexAttr(value)};
    Value out = tensor::EmptyOp::create(b, loc, sizes, elementType);
    // Padding rows after the last request belong to no path.
    if (covered != tokens) {
      Value zero = arith::ConstantOp::create(b, loc, elementType,
                                             b.getZeroAttr(elementType));
      out = linalg::FillOp::create(b, loc, zero, out).getResult(0);
    }
    for (auto [part, sel] : parts) {
      int64_t pos = 0;
      for (RowRange range : sel->tokens) {
        Value rows =
            sel->tokens.size() == 1
                ? part
                : slice(part, b.getIndexAttr(pos), b.getIndexAttr(range.size));
        out = insert(rows, out, b.getIndexAttr(range.begin));
        pos += range.size;
      }
    }
    return out;
  }

  /// The leading-dimension rows `ranges` of `src`, in order.
  Value gather(Value src, ArrayRef<RowRange> ranges) {
    auto ty = cast<RankedTensorType>(src.getType());
    if (ranges.size() == 1 && ranges[0].begin == 0 &&
        ranges[0].size == ty.getDimSize(0))
      return src;
    SmallVector<Value> pieces;
    for (RowRange range : ranges)
      pieces.push_back(
          slice(src, b.getIndexAttr(range.begin), b.getIndexAttr(range.size)));
    if (pieces.size() == 1)
      return pieces.front();
    return tensor::ConcatOp::create(b, loc, /*dim=*/0, pieces);
  }

  /// Rows [begin, begin + size) of `src`'s leading dimension.
  Value slice(Value src, OpFoldResult begin, OpFoldResult size) {
    int64_t rank = cast<RankedTensorType>(src.getType()).getRank();
    SmallVector<OpFoldResult> offsets(rank, b.getIndexAttr(0));
    SmallVector<OpFoldResult> sizes = {size};
    for (int64_t d = 1; d < rank; ++d)
      sizes.push_back(tensor::getMixedSize(b, loc, src, d));
    SmallVector<OpFoldResult> strides(rank, b.getIndexAttr(1));
    offsets[0] = begin;
    return tensor::ExtractSliceOp::create(b, loc, src, offsets, sizes, strides);
  }

  /// `dest` with `rows` written from leading row `begin` on.
  Value insert(Value rows, Value dest, OpFoldResult begin) {
    int64_t rank = cast<RankedTensorType>(rows.getType()).getRank();
    SmallVector<OpFoldResult> offsets(rank, b.getIndexAttr(0));
    SmallVector<OpFoldResult> strides(rank, b.getIndexAttr(1));
    offsets[0] = begin;
    return tensor::InsertSliceOp::create(b, loc, rows, dest, offsets,
                                         tensor::getMixedSizes(b, loc, rows),
                                         strides);
  }

  /// `offsets - base` elementwise (i32 offsets, index base).
  Value subtract(Value offsets, Value base) {
    Value baseI32 = arith::IndexCastOp::create(b, loc, b.getI32Type(), base);
    Value init = tensor::EmptyOp::create(
        b, loc, tensor::getMixedSizes(b, loc, offsets), b.getI32Type());
    AffineMap id = b.getMultiDimIdentityMap(1);
    return linalg::GenericOp::create(
               b, loc, init.getType(), ValueRange{offsets}, ValueRange{init},
               ArrayRef<AffineMap>{id, id},
               ArrayRef<utils::IteratorType>{utils::IteratorType::parallel},
               [&](OpBuilder &nb, Location nloc, ValueRange args) {
                 linalg::YieldOp::create(nb, nloc,
                                         ValueRange{arith::SubIOp::create(
                                             nb, nloc, args[0], baseI32)});
               })
        .getResult(0);
  }

  Value castToResult(Value v) {
    Type ty = op.getOut().getType();
    return v.getType() == ty ? v : tensor::CastOp::create(b, loc, ty, v);
  }
  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value dim(Value t, int64_t d) {
    return getValueOrCreateConstantIndexOp(b, loc,
                                           tensor::getMixedSize(b, loc, t, d));
  }
  /// Element `i` of an i32 tensor, as index.
  static Value load(OpBuilder &nb, Location nloc, Value t, Value i) {
    Value v = tensor::ExtractOp::create(nb, nloc, t, ValueRange{i});
    return arith::IndexCastOp::create(nb, nloc, nb.getIndexType(), v);
  }

  OpBuilder &b;
  Location loc;
  AttentionOp op;
  Type elementType;
  int64_t heads, nope, rope, latent, value; // N, P, R, L, V
  Value wUkT, wUv; // split once, shared by every decode group
};

struct SelectAlgorithmPattern : OpRewritePattern<AttentionOp> {
  SelectAlgorithmPattern(MLIRContext *ctx, int64_t threshold)
      : OpRewritePattern(ctx), threshold(threshold) {}

  /// Errors are reported here because no other pattern rewrites the op; the
  /// pass fails for every op left.
  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    auto qTy = op.getQ().getType();
    if (llvm::any_of(ArrayRef<int64_t>{qTy.getDimSize(1), qTy.getDimSize(2),
                                       op.getKPe().getType().getShape().back(),
                                       op.getKvC().getType().getDimSize(1),
                                       op.getOut().getType().getDimSize(2)},
                     ShapedType::isDynamic))
      return op.emitOpError("cannot select an algorithm: N, P, R, L and V "
                            "must be static");

    AlgorithmSplit split(rewriter, op);
    DenseIntElementsAttr offsetsAttr;
    if (matchPattern(op.getQueryStartLoc(), m_Constant(&offsetsAttr))) {
      SmallVector<int64_t> offsets;
      for (const APInt &o : offsetsAttr.getValues<APInt>())
        offsets.push_back(o.getSExtValue());
      if (failed(checkQueryLens(op, offsets)))
        return failure();
      rewriter.replaceOp(op, split.buildStatic(offsets, threshold));
      return success();
    }
    if (!takesDecodePath(kRuntimeDecodeQueryLen, threshold)) {
      rewriter.replaceOp(op, split.buildPrefillOnly());
      return success();
    }
    if (llvm::Error unsupported = checkRuntimeDecodeThreshold(threshold)) {
      llvm::consumeError(std::move(unsupported));
      return op.emitOpError()
             << "decode-threshold " << threshold
             << " needs a constant query_start_loc: mla.decode has a static "
                "Sq, so a batch known only at run time can only split off "
                "single-row requests (decode-threshold=1)";
    }
    rewriter.replaceOp(op, split.buildDynamic());
    return success();
  }

private:
  /// The cache already holds each request's new tokens, so a constant
  /// seq_len below the request's q_len is an input error (and would not
  /// verify as a causal decode).
  static LogicalResult checkQueryLens(AttentionOp op,
                                      ArrayRef<int64_t> offsets) {
    DenseIntElementsAttr lens;
    if (!matchPattern(op.getSeqLens(), m_Constant(&lens)))
      return success();
    for (auto [i, len] : llvm::enumerate(lens.getValues<APInt>())) {
      int64_t queryLen = offsets[i + 1] - offsets[i];
      if (len.getSExtValue() < queryLen)
        return op.emitOpError()
               << "request " << i << " has q_len " << queryLen
               << " but seq_lens[" << i << "] = " << len.getSExtValue()
               << ": the cache must already hold the request's new tokens";
    }
    return success();
  }

  int64_t threshold;
};

struct MLASelectAlgorithmPass
    : public mla::impl::MLASelectAlgorithmBase<MLASelectAlgorithmPass> {
  using MLASelectAlgorithmBase::MLASelectAlgorithmBase;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<SelectAlgorithmPattern>(&getContext(), decodeThreshold);
    // One walk suffices: the rewrite creates no mla.attention.
    walkAndApplyPatterns(getOperation(), std::move(patterns));
    if (getOperation()
            .walk([](AttentionOp) { return WalkResult::interrupt(); })
            .wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
