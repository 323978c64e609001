//===- Dcp.cpp - the mla-dcp pass -----------------------------------------===//
//
// mla.decode -> per-rank mla.decode_partial over a DCP shard + the merge of
// the ranks' states (docs/Design.md, "Decode context parallelism").
//
//===----------------------------------------------------------------------===//

#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mla/Dialect/MLA/Transforms/Passes.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

namespace mla {
#define GEN_PASS_DEF_MLADCP
#include "mla/Dialect/MLA/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;
using namespace mla;

namespace {

/// How a rank-`smallRank` state [B, ...] and its [1, B, ...] form (a unit
/// rank or split axis in front) reshape into each other.
SmallVector<ReassociationIndices> rankAxisGroups(int64_t smallRank) {
  SmallVector<ReassociationIndices> groups = {{0, 1}};
  for (int64_t d = 1; d < smallRank; ++d)
    groups.push_back({d + 1});
  return groups;
}

RankedTensorType withLeading(int64_t lead, RankedTensorType ty) {
  SmallVector<int64_t> shape = {lead};
  llvm::append_range(shape, ty.getShape());
  return RankedTensorType::get(shape, ty.getElementType());
}

struct DcpPass : public mla::impl::MLADcpBase<DcpPass> {
  using MLADcpBase::MLADcpBase;

  void runOnOperation() override {
    if (worldSize <= 0 || rank < -1 || rank >= worldSize) {
      getOperation().emitError()
          << "mla-dcp needs world-size >= 1 and rank in [-1, world-size), "
             "got world-size="
          << worldSize.getValue() << " rank=" << rank.getValue();
      return signalPassFailure();
    }
    SmallVector<DecodeOp> decodes;
    getOperation().walk([&](DecodeOp op) { decodes.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (DecodeOp op : decodes) {
      rewriter.setInsertionPoint(op);
      if (failed(rewriteDecode(rewriter, op)))
        return signalPassFailure();
    }
  }

  LogicalResult rewriteDecode(IRRewriter &rewriter, DecodeOp op) {
    if (op.getSplitPlanAttr())
      return op.emitOpError(
          "has a split_plan, whose pieces count global positions: run "
          "mla-dcp before mla-plan-splits");
    // The shard's causal limits and rank states assume a uniform [B, Sq]
    // query; query_start_loc's packed tokens are not sharded.
    if (op.isVarlen())
      return op.emitOpError("mla-dcp shards uniform decodes only; this decode "
                            "has a query_start_loc (varlen)");
    auto outTy = op.getOut().getType();
    auto stateTy =
        RankedTensorType::get(outTy.getShape(), rewriter.getF32Type());
    auto lseTy = op.getLse().getType();
    Location loc = op.getLoc();

    Value gatheredOut, gatheredLse;
    if (rank >= 0) {
      FailureOr<int64_t> run = runLength(op, /*wholePages=*/false);
      if (failed(run))
        return failure();
      auto [o, l] = rankState(rewriter, op, op.getBlockTable(), rank, *run,
                              stateTy, lseTy);
      auto gather =
          DcpAllGatherOp::create(rewriter, loc, withLeading(worldSize, stateTy),
                                 withLeading(worldSize, lseTy), o, l,
                                 rewriter.getI64IntegerAttr(worldSize));
      gatheredOut = gather.getGatheredOut();
      gatheredLse = gather.getGatheredLse();
    } else {
      FailureOr<int64_t> run = runLength(op, /*wholePages=*/true);
      if (failed(run))
        return failure();
      SmallVector<Value> outs, lses;
      for (int64_t r = 0; r < worldSize; ++r) {
        Value table = rankBlockTable(rewriter, loc, op.getBlockTable(), r);
        auto [o, l] = rankState(rewriter, op, table, r, *run, stateTy, lseTy);
        outs.push_back(tensor::ExpandShapeOp::create(
            rewriter, loc, withLeading(1, stateTy), o,
            rankAxisGroups(stateTy.getRank())));
        lses.push_back(
            tensor::ExpandShapeOp::create(rewriter, loc, withLeading(1, lseTy),
                                          l, rankAxisGroups(lseTy.getRank())));
      }
      gatheredOut = outs.size() == 1
                        ? outs.front()
                        : tensor::ConcatOp::create(rewriter, loc, 0, outs);
      gatheredLse = lses.size() == 1
                        ? lses.front()
                        : tensor::ConcatOp::create(rewriter, loc, 0, lses);
    }
    rewriter.replaceOpWithNewOp<DcpCombineOp>(op, outTy, lseTy, gatheredOut,
                                              gatheredLse);
    return success();
  }

  /// The shard's run length: the option, or one page. Viewing a shard
  /// inside the global cache (`wholePages`) needs runs of exactly one page.
  FailureOr<int64_t> runLength(DecodeOp op, bool wholePages) {
    int64_t pageSize = op.getCache().getType().getDimSize(1);
    if (ShapedType::isDynamic(pageSize) && op.getLayout().getPageSize())
      pageSize = *op.getLayout().getPageSize();
    int64_t run = interleave ? interleave : pageSize;
    if (run <= 0 || ShapedType::isDynamic(run))
      return op.emitOpError()
             << "mla-dcp: interleave " << interleave.getValue()
             << " must be positive, or 0 with a static page size";
    if (!wholePages)
      return run;
    if (run != pageSize)
      return op.emitOpError()
             << "mla-dcp without a rank views each rank's shard inside the "
                "global cache, which needs interleave = the page size ("
             << (ShapedType::isDynamic(pageSize) ? Twine("dynamic")
                                                 : Twine(pageSize))
             << "), got " << run << "; pass rank=R to build a rank program";
    if (op.getBlockTable().getType().isDynamicDim(1))
      return op.emitOpError("mla-dcp without a rank needs a static block "
                            "table column count to slice it per rank");
    return run;
  }

  /// Rank `r`'s pages of a whole-page shard: block table columns
  /// r, r + W, r + 2W, ...
  Value rankBlockTable(IRRewriter &rewriter, Location loc, Value table,
                       int64_t r) {
    auto ty = cast<RankedTensorType>(table.getType());
    int64_t cols = ty.getDimSize(1);
    int64_t local = cols > r ? (cols - r + worldSize - 1) / worldSize : 0;
    SmallVector<OpFoldResult> offsets = {rewriter.getIndexAttr(0),
                                         rewriter.getIndexAttr(r)};
    SmallVector<OpFoldResult> sizes = {
        tensor::getMixedSize(rewriter, loc, table, 0),
        rewriter.getIndexAttr(local)};
    SmallVector<OpFoldResult> strides = {rewriter.getIndexAttr(1),
                                         rewriter.getIndexAttr(worldSize)};
    return tensor::ExtractSliceOp::create(rewriter, loc, table, offsets, sizes,
                                          strides);
  }

  /// Rank `r`'s decode state over its shard: [B, Sq, N, L] and [B, N, Sq].
  std::pair<Value, Value> rankState(IRRewriter &rewriter, DecodeOp op,
                                    Value table, int64_t r, int64_t run,
                                    RankedTensorType stateTy,
                                    RankedTensorType lseTy) {
    Location loc = op.getLoc();
    int64_t splits = op.getNumSplits().value_or(1);
    auto partial = DecodePartialOp::create(
        rewriter, loc, withLeading(splits, stateTy), withLeading(splits, lseTy),
        op.getQ(), op.getCache(), table, op.getSeqLens(),
        /*split_bounds=*/Value(), /*query_start_loc=*/Value(), op.getLayout(),
        op.getSoftmaxScaleAttr(), op.getCausalAttr(),
        rewriter.getI64IntegerAttr(splits),
        DcpShardAttr::get(&getContext(), worldSize, r, run),
        /*max_query_len=*/IntegerAttr());
    // Target annotations (mla.padded_heads) stay with the kernel's work.
    partial->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    if (splits > 1) {
      auto combine =
          CombineOp::create(rewriter, loc, stateTy, lseTy,
                            partial.getPartialOut(), partial.getPartialLse());
      return {combine.getOut(), combine.getLse()};
    }
    Value o = tensor::CollapseShapeOp::create(
        rewriter, loc, stateTy, partial.getPartialOut(),
        rankAxisGroups(stateTy.getRank()));
    Value l = tensor::CollapseShapeOp::create(rewriter, loc, lseTy,
                                              partial.getPartialLse(),
                                              rankAxisGroups(lseTy.getRank()));
    return {o, l};
  }
};

} // namespace
