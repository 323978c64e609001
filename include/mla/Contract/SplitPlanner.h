//===- SplitPlanner.h - split-KV plans for MLA decode -----------*- C++ -*-===//
//
// Decides how each request's KV range [0, seq_len) is cut into contiguous
// pieces that separate CTAs attend to, and whose partial (out, lse) a combine
// step merges (docs/mla-primer.md, section 6). Three policies mirror the
// kernels they serve: vLLM Triton MLA's one-count-per-batch heuristic,
// FlashMLA's balanced persistent schedule, and one piece per request for
// batch-invariant results.
//
// The planner depends on LLVM Support only, never on MLIR: compile-time
// passes and the host runtime (at every launch) both call it.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_CONTRACT_SPLITPLANNER_H
#define MLA_CONTRACT_SPLITPLANNER_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"
#include <cstdint>
#include <string>
#include <vector>

namespace mla::plan {

/// How request KV ranges are split.
enum class SplitPolicy {
  /// One count k for the whole batch, from the longest request; every request
  /// is cut into k equal pieces (vLLM Triton MLA).
  Heuristic,
  /// FlashMLA-style: the batch's KV blocks plus a per-request overhead are
  /// dealt evenly to a fixed number of persistent CTAs ("SM parts").
  Balanced,
  /// Exactly one piece per request, so a request's result never depends on
  /// the rest of the batch.
  BatchInvariant,
};

/// Inputs of the planner besides the sequence lengths. Every count must be in
/// [1, INT32_MAX] (fixedOverheadBlocks in [0, INT32_MAX]) and numSms at most
/// kMaxSms.
struct SplitPlanOptions {
  SplitPolicy policy = SplitPolicy::Heuristic;
  /// Streaming multiprocessors of the target GPU (132 on H200).
  int64_t numSms = 132;
  /// Query heads N on this GPU.
  int64_t numHeadsQ = 128;
  /// Query rows s_q per request (1 for plain decode).
  int64_t queryRows = 1;
  /// KV block size of the balanced scheduler, in tokens.
  int64_t blockTokens = 64;
  /// Cost charged by the balanced scheduler for every piece, in blocks.
  int64_t fixedOverheadBlocks = 5;
  /// Query rows (heads x s_q) one CTA handles.
  int64_t rowsPerCta = 64;
};

/// The largest numSms the planner accepts; more is a caller bug, not a GPU.
inline constexpr int64_t kMaxSms = 1 << 16;

/// Columns of one schedule row. A part covers requests beginReq..endReq
/// (inclusive): beginReq from position beginPos, endReq up to position endPos
/// (exclusive), every request in between whole. beginSplit is the index,
/// among beginReq's pieces, of the piece the part starts with (the partial
/// result of piece s of request b lives at slot cuSplits[b] + s); the other
/// requests of the part start at piece 0. A part with no work has
/// beginReq = batch, endReq = batch - 1 and zero positions.
enum ScheduleColumn : int {
  kBeginReq = 0,
  kBeginPos = 1,
  kEndReq = 2,
  kEndPos = 3,
  kBeginSplit = 4,
  // Columns 5..7 are reserved and zero (FlashMLA's row width).
  kScheduleRowSize = 8,
};

/// A split plan for one batch.
struct SplitPlan {
  int64_t batch = 0;
  /// S: the most pieces of any request.
  int64_t maxSplits = 1;
  /// [batch, S+1] positions: piece s of request b is
  /// [bounds[b*(S+1)+s], bounds[b*(S+1)+s+1]). Rows of requests with fewer
  /// than S pieces repeat the request's end, so trailing pieces are empty.
  std::vector<int32_t> bounds;
  /// [batch+1] cumulative piece counts (FlashMLA's num_splits): request b has
  /// cuSplits[b+1] - cuSplits[b] pieces, empty pieces included.
  std::vector<int32_t> cuSplits;
  /// Rows of `schedule`. Balanced: the persistent CTAs. Heuristic and
  /// BatchInvariant: one row per piece, in request order, so a persistent
  /// kernel can execute any plan.
  int64_t numSmParts = 0;
  /// [numSmParts, kScheduleRowSize] rows laid out as ScheduleColumn says.
  std::vector<int32_t> schedule;
};

/// Validates the options and the sequence lengths (none negative) and plans
/// the batch. Fails with std::errc::invalid_argument and a message naming the
/// offending value.
llvm::Expected<SplitPlan> planSplits(llvm::ArrayRef<int32_t> seqLens,
                                     const SplitPlanOptions &options);

/// vLLM Triton MLA's split count for a batch whose longest request has
/// maxSeqLen tokens: min(next_pow2(max(1, maxSeqLen / 512)), 2 * numSms).
/// Requires maxSeqLen >= 0 and numSms >= 1.
int64_t heuristicNumSplits(int64_t maxSeqLen, int64_t numSms);

/// FlashMLA's persistent CTA count: numSms divided by the CTAs one request
/// needs to cover its heads x s_q query rows, ceil(numHeadsQ * queryRows /
/// rowsPerCta); at least 1. Requires valid options.
int64_t balancedNumSmParts(const SplitPlanOptions &options);

/// A human-readable dump of the pieces and the schedule, for tests and
/// debugging.
std::string describe(const SplitPlan &plan);

} // namespace mla::plan

#endif // MLA_CONTRACT_SPLITPLANNER_H
