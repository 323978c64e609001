//===- PlanSplits.cpp - the mla-plan-splits pass --------------------------===//
//
// Chooses each decode's split-KV plan with the C++ planner the runtime also
// uses, so a plan made at compile time (constant seq_lens) and one made on
// the host at launch (dynamic seq_lens) are the same function of the inputs.
//
//===----------------------------------------------------------------------===//

#include "mla/Contract/SplitPlanner.h"
#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mla/Dialect/MLA/Transforms/Passes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/Remarks.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include <limits>

namespace mla {
#define GEN_PASS_DEF_MLAPLANSPLITS
#include "mla/Dialect/MLA/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;
using namespace mla;

/// SM counts used when neither the option nor the target says: H200 for
/// sm90 (and without a target), B200 for sm100.
static constexpr int64_t kDefaultNumSms = 132;
static constexpr int64_t kDefaultSm100NumSms = 148;

static std::optional<std::pair<SplitPolicy, plan::SplitPolicy>>
parsePolicy(StringRef name) {
  if (name == "heuristic")
    return std::make_pair(SplitPolicy::heuristic, plan::SplitPolicy::Heuristic);
  if (name == "balanced")
    return std::make_pair(SplitPolicy::balanced, plan::SplitPolicy::Balanced);
  if (name == "batch-invariant")
    return std::make_pair(SplitPolicy::batch_invariant,
                          plan::SplitPolicy::BatchInvariant);
  return std::nullopt;
}

/// "auto": splitting KV exists to fill a GPU's SMs, so GPUs get the balanced
/// plan; the CPU lowering walks pieces one after another, so there one piece
/// per request is fastest; without a target, vLLM's heuristic.
static std::string autoPolicy(TargetAttr target) {
  if (!target)
    return "heuristic";
  return target.getChip() == Chip::cpu ? "batch-invariant" : "balanced";
}

namespace {
struct PlanSplitsPass : public mla::impl::MLAPlanSplitsBase<PlanSplitsPass> {
  using MLAPlanSplitsBase::MLAPlanSplitsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto target =
        module->getAttrOfType<TargetAttr>(MLADialect::getTargetAttrName());
    std::string policyName = policy == "auto" ? autoPolicy(target) : policy;
    auto policies = parsePolicy(policyName);
    if (!policies) {
      module.emitError() << "mla-plan-splits: unknown policy '" << policy
                         << "' (expected heuristic, balanced, "
                            "batch-invariant or auto)";
      return signalPassFailure();
    }
    int64_t sms = numSms;
    if (sms <= 0) {
      if (target && target.getNumSms())
        sms = *target.getNumSms();
      else if (target && target.getChip() == Chip::sm100)
        sms = kDefaultSm100NumSms;
      else
        sms = kDefaultNumSms;
    }
    if (maxSeqLen <= 0) {
      module.emitError() << "mla-plan-splits: max-seq-len " << maxSeqLen
                         << " must be positive";
      return signalPassFailure();
    }

    policyReason =
        policy == "auto"
            ? "policy=auto on " +
                  (target ? stringifyChip(target.getChip()).str()
                          : std::string("a module without #mla.target")) +
                  " is " + policyName
            : "policy=" + policyName + " from the pass option";
    policyReason += ", " + std::to_string(sms) + " SMs";

    WalkResult result = module.walk([&](DecodeOp op) {
      if (op.getNumSplits()) {
        explain(op, "num_splits was given; the user's count wins");
        return WalkResult::advance();
      }
      if (failed(planDecode(op, policies->first, policies->second, sms)))
        return WalkResult::interrupt();
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }

  LogicalResult planDecode(DecodeOp op, SplitPolicy policyAttr,
                           plan::SplitPolicy policyKind, int64_t sms) {
    DecodeQueryDims dims = op.getQueryDims();
    int64_t heads = dims.numHeads, rows = dims.queryRows;
    if (ShapedType::isDynamic(heads) || ShapedType::isDynamic(rows))
      return op.emitOpError("mla-plan-splits needs static N and Sq to size "
                            "the plan");
    // The planner takes counts in [1, INT32_MAX] (SplitPlanner.h); the
    // run-time path sizes the plan without it, so check here rather than
    // divide by zero or overflow for an empty or absurd query.
    constexpr int64_t kMaxCount = std::numeric_limits<int32_t>::max();
    if (heads < 1 || rows < 1 || heads > kMaxCount || rows > kMaxCount)
      return op.emitOpError()
             << "mla-plan-splits needs N and Sq in [1, " << kMaxCount
             << "], got N = " << heads << " and Sq = " << rows;
    plan::SplitPlanOptions options;
    options.policy = policyKind;
    options.numSms = sms;
    options.numHeadsQ = heads;
    options.queryRows = rows;

    OpBuilder b(op);
    DenseIntElementsAttr lens;
    if (matchPattern(op.getSeqLens(), m_Constant(&lens))) {
      SmallVector<int32_t> seqLens;
      for (const APInt &v : lens.getValues<APInt>())
        seqLens.push_back(static_cast<int32_t>(v.getSExtValue()));
      llvm::Expected<plan::SplitPlan> planned =
          plan::planSplits(seqLens, options);
      if (!planned)
        return op.emitOpError() << llvm::toString(planned.takeError());
      op.setNumSplits(planned->maxSplits);
      op.setSplitPlanAttr(SplitPlanAttr::get(
          b.getContext(), policyAttr, partsOf(*planned, options),
          b.getDenseI32ArrayAttr(planned->bounds)));
      explain(op, "constant seq_lens: the pieces are planned now");
      return success();
    }

    // Run-time lengths: size the partial state for the worst case and leave
    // the pieces to the host planner (mla.plan_splits).
    int64_t capacity = 1, parts = sms;
    switch (policyKind) {
    case plan::SplitPolicy::Heuristic:
      capacity = plan::heuristicNumSplits(maxSeqLen, sms);
      break;
    case plan::SplitPolicy::Balanced:
      // A part contributes at most one piece to any request.
      parts = plan::balancedNumSmParts(options);
      capacity = parts;
      break;
    case plan::SplitPolicy::BatchInvariant:
      capacity = 1;
      break;
    }
    op.setNumSplits(capacity);
    op.setSplitPlanAttr(
        SplitPlanAttr::get(b.getContext(), policyAttr, parts, nullptr));
    explain(op, "run-time seq_lens: the partial state is sized for "
                "max-seq-len=" +
                    std::to_string(maxSeqLen) +
                    " and the host planner cuts the pieces");
    return success();
  }

  /// Says what `op`'s plan is and why as an analysis remark, shown by
  /// `--remarks-filter=mla-plan-splits`. Debian's LLVM is built without
  /// assertions, so -debug-only does not exist and pass statistics stay
  /// zero; remarks work in every build.
  void explain(DecodeOp op, const std::string &why) {
    SplitPlanAttr plan = op.getSplitPlanAttr();
    remark::analysis(op.getLoc(), remark::RemarkOpts::name("SplitPlan")
                                      .category(getArgument())
                                      .function(getFunctionName(op)))
        << remark::metric("num_splits", op.getNumSplits().value_or(0))
        << remark::metric("policy",
                          plan ? stringifySplitPolicy(plan.getPolicy()).str()
                               : std::string("given"))
        << remark::reason("{0}; {1}", why, policyReason);
  }

  /// The enclosing function's name, owned by the context (a remark may be
  /// reported after the pass, under --remark-policy=final).
  static StringRef getFunctionName(Operation *op) {
    auto func = op->getParentOfType<FunctionOpInterface>();
    return func ? func.getName() : StringRef();
  }

  /// Why the policy is what it is, for the remarks.
  std::string policyReason;

  /// The CTA count the plan was made for: the balanced plan's parts, the
  /// SM count otherwise (heuristic and batch-invariant pieces are
  /// independent CTAs).
  static int64_t partsOf(const plan::SplitPlan &planned,
                         const plan::SplitPlanOptions &options) {
    if (options.policy == plan::SplitPolicy::Balanced)
      return planned.numSmParts;
    return options.numSms;
  }
};
} // namespace
