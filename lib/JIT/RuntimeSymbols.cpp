//===- RuntimeSymbols.cpp - host functions JIT-compiled code calls --------===//
//
// mla.plan_splits runs the split planner on run-time seq_lens: the lowered
// code calls `_mlir_ciface_mla_plan_split_bounds` with memref descriptors,
// and this file provides it, so compile-time and run-time plans come from
// the same C++ function.
//
//===----------------------------------------------------------------------===//

#include "mla/JIT/RuntimeSymbols.h"
#include "mla/Contract/SplitPlanner.h"
#include "mlir/ExecutionEngine/CRunnerUtils.h"
#include "llvm/Support/Error.h"
#include <algorithm>

using namespace mla;

/// Fills `out [B, S+1]` with the piece bounds of `seqLens [B]` under
/// `policy` (0 heuristic, 1 balanced, 2 batch-invariant; the enum order of
/// #mla.split_plan). `numSmParts` is the plan attribute's CTA count.
/// Negative lengths (which validated callers never pass) count as 0. A plan
/// with more pieces than the static capacity S (a heuristic plan for longer
/// sequences than the compile-time bound) falls back to S equal pieces,
/// which is always correct.
extern "C" void _mlir_ciface_mla_plan_split_bounds(
    StridedMemRefType<int32_t, 1> *seqLens, StridedMemRefType<int32_t, 2> *out,
    int64_t policy, int64_t numSmParts, int64_t numHeads, int64_t queryRows) {
  int64_t batch = seqLens->sizes[0], capacity = out->sizes[1] - 1;
  std::vector<int32_t> lens(batch);
  for (int64_t b = 0; b < batch; ++b)
    lens[b] = std::max<int32_t>(
        0, seqLens->data[seqLens->offset + b * seqLens->strides[0]]);

  plan::SplitPlanOptions options;
  options.numHeadsQ = numHeads;
  options.queryRows = queryRows;
  switch (policy) {
  case 1: {
    options.policy = plan::SplitPolicy::Balanced;
    // Invert balancedNumSmParts so the planner uses exactly numSmParts.
    int64_t ctasPerPart =
        (numHeads * queryRows + options.rowsPerCta - 1) / options.rowsPerCta;
    options.numSms = numSmParts * std::max<int64_t>(ctasPerPart, 1);
    break;
  }
  case 2:
    options.policy = plan::SplitPolicy::BatchInvariant;
    options.numSms = numSmParts;
    break;
  default:
    options.policy = plan::SplitPolicy::Heuristic;
    options.numSms = numSmParts;
    break;
  }

  auto at = [&](int64_t b, int64_t s) -> int32_t & {
    return out->data[out->offset + b * out->strides[0] + s * out->strides[1]];
  };
  llvm::Expected<plan::SplitPlan> planned = plan::planSplits(lens, options);
  if (planned && planned->maxSplits <= capacity) {
    int64_t width = planned->maxSplits + 1;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t s = 0; s <= capacity; ++s)
        at(b, s) = planned->bounds[b * width + std::min(s, width - 1)];
    return;
  }
  llvm::consumeError(planned.takeError());
  for (int64_t b = 0; b < batch; ++b) {
    int64_t chunk = (lens[b] + capacity - 1) / capacity;
    for (int64_t s = 0; s <= capacity; ++s)
      at(b, s) = static_cast<int32_t>(std::min<int64_t>(s * chunk, lens[b]));
  }
}

llvm::orc::SymbolMap
mla::runtimeSymbols(llvm::orc::MangleAndInterner interner) {
  llvm::orc::SymbolMap symbols;
  symbols[interner(std::string("_mlir_ciface_") + kPlanSplitBoundsFn)] = {
      llvm::orc::ExecutorAddr::fromPtr(&_mlir_ciface_mla_plan_split_bounds),
      llvm::JITSymbolFlags::Exported};
  return symbols;
}
