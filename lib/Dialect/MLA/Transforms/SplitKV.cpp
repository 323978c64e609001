//===- SplitKV.cpp - the mla-split-kv pass --------------------------------===//
//
// mla.decode -> mla.decode_partial + mla.combine, following the decode's
// split plan (see mla-plan-splits). The same patterns let the CPU lowering
// accept decodes that were never planned: they become one piece per request.
//
//===----------------------------------------------------------------------===//

#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mla/Dialect/MLA/Transforms/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace mla {
#define GEN_PASS_DEF_MLASPLITKV
#include "mla/Dialect/MLA/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;
using namespace mla;

namespace {
struct SplitDecode : public OpRewritePattern<DecodeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(DecodeOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    int64_t splits = op.getNumSplits().value_or(1);
    DecodeQueryDims dims = op.getQueryDims();
    int64_t batch = dims.batch;
    Type i32 = rewriter.getI32Type();

    // Planned pieces: constant bounds, or the host planner at run time.
    Value bounds;
    if (SplitPlanAttr plan = op.getSplitPlanAttr()) {
      auto boundsTy = RankedTensorType::get({batch, splits + 1}, i32);
      if (DenseI32ArrayAttr values = plan.getBounds())
        bounds = arith::ConstantOp::create(
            rewriter, loc,
            DenseElementsAttr::get(boundsTy, values.asArrayRef()));
      else if (plan.getPolicy() != SplitPolicy::batch_invariant)
        // One piece per request is [0, seq_len): equal pieces say the same
        // without a host call.
        bounds =
            PlanSplitsOp::create(rewriter, loc, boundsTy, op.getSeqLens(), plan,
                                 rewriter.getI64IntegerAttr(dims.numHeads),
                                 rewriter.getI64IntegerAttr(dims.queryRows));
    }

    auto outTy = op.getOut().getType();
    auto lseTy = op.getLse().getType();
    SmallVector<int64_t> poShape = {splits};
    llvm::append_range(poShape, outTy.getShape());
    SmallVector<int64_t> plShape = {splits};
    llvm::append_range(plShape, lseTy.getShape());
    Type f32 = rewriter.getF32Type();
    auto partial = DecodePartialOp::create(
        rewriter, loc, RankedTensorType::get(poShape, f32),
        RankedTensorType::get(plShape, f32), op.getQ(), op.getCache(),
        op.getBlockTable(), op.getSeqLens(), bounds, op.getQueryStartLoc(),
        op.getLayout(), op.getSoftmaxScaleAttr(), op.getCausalAttr(),
        rewriter.getI64IntegerAttr(splits), /*shard=*/DcpShardAttr(),
        op.getMaxQueryLenAttr());
    // Target annotations (mla.padded_heads) stay with the kernel's work.
    partial->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    rewriter.replaceOpWithNewOp<CombineOp>(
        op, outTy, lseTy, partial.getPartialOut(), partial.getPartialLse());
    return success();
  }
};

struct SplitKVPass : public mla::impl::MLASplitKVBase<SplitKVPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateSplitKVPatterns(patterns);
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};
} // namespace

void mla::populateSplitKVPatterns(RewritePatternSet &patterns) {
  patterns.add<SplitDecode>(patterns.getContext());
}
