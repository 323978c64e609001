//===- SplitPlanner.cpp - split-KV plans for MLA decode -------------------===//
//
// Every policy first lists its pieces in request order; one routine then
// turns that list into bounds and cumulative counts, so the policies differ
// only in where they cut.
//
//===----------------------------------------------------------------------===//

#include "mla/Contract/SplitPlanner.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <cassert>
#include <limits>

using namespace mla::plan;
using llvm::ArrayRef;

namespace {
/// One contiguous range [begin, end) of one request's KV.
struct Piece {
  int32_t request;
  int32_t begin;
  int32_t end;
};
} // namespace

static constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

static llvm::Error invalid(const llvm::Twine &message) {
  return llvm::createStringError(
      std::make_error_code(std::errc::invalid_argument),
      "split planner: " + message);
}

static llvm::Error checkCount(llvm::StringRef name, int64_t value,
                              int64_t min) {
  if (value >= min && value <= kInt32Max)
    return llvm::Error::success();
  return invalid(name + " must be in [" + llvm::Twine(min) + ", " +
                 llvm::Twine(kInt32Max) + "], got " + llvm::Twine(value));
}

static llvm::Error validate(ArrayRef<int32_t> seqLens,
                            const SplitPlanOptions &options) {
  if (options.numSms < 1 || options.numSms > kMaxSms)
    return invalid("numSms must be in [1, " + llvm::Twine(kMaxSms) + "], got " +
                   llvm::Twine(options.numSms));
  if (llvm::Error err = checkCount("numHeadsQ", options.numHeadsQ, 1))
    return err;
  if (llvm::Error err = checkCount("queryRows", options.queryRows, 1))
    return err;
  if (llvm::Error err = checkCount("blockTokens", options.blockTokens, 1))
    return err;
  if (llvm::Error err =
          checkCount("fixedOverheadBlocks", options.fixedOverheadBlocks, 0))
    return err;
  if (llvm::Error err = checkCount("rowsPerCta", options.rowsPerCta, 1))
    return err;
  // cuSplits[batch] >= batch must fit in int32.
  if (static_cast<uint64_t>(seqLens.size()) > static_cast<uint64_t>(kInt32Max))
    return invalid("batch of " + llvm::Twine(seqLens.size()) +
                   " requests does not fit in int32");
  for (auto [b, len] : llvm::enumerate(seqLens))
    if (len < 0)
      return invalid("seq_lens[" + llvm::Twine(b) + "] is negative (" +
                     llvm::Twine(len) + ")");
  return llvm::Error::success();
}

int64_t mla::plan::heuristicNumSplits(int64_t maxSeqLen, int64_t numSms) {
  assert(maxSeqLen >= 0 && numSms >= 1 && "invalid heuristic inputs");
  uint64_t wanted = llvm::PowerOf2Ceil(std::max<int64_t>(1, maxSeqLen / 512));
  return std::min<int64_t>(static_cast<int64_t>(wanted), 2 * numSms);
}

int64_t mla::plan::balancedNumSmParts(const SplitPlanOptions &options) {
  int64_t ctasPerRequest = llvm::divideCeil(
      options.numHeadsQ * options.queryRows, options.rowsPerCta);
  return std::max<int64_t>(1, options.numSms / ctasPerRequest);
}

/// Builds bounds and cuSplits from pieces listed in request order, every
/// request having at least one piece.
static SplitPlan assemble(ArrayRef<int32_t> seqLens, ArrayRef<Piece> pieces) {
  SplitPlan plan;
  plan.batch = seqLens.size();
  plan.cuSplits.assign(plan.batch + 1, 0);
  for (const Piece &piece : pieces)
    ++plan.cuSplits[piece.request + 1];
  for (int64_t b = 0; b < plan.batch; ++b) {
    plan.maxSplits = std::max<int64_t>(plan.maxSplits, plan.cuSplits[b + 1]);
    plan.cuSplits[b + 1] += plan.cuSplits[b];
  }

  int64_t rowSize = plan.maxSplits + 1;
  plan.bounds.resize(plan.batch * rowSize);
  for (int64_t b = 0; b < plan.batch; ++b) {
    int32_t *row = &plan.bounds[b * rowSize];
    ArrayRef<Piece> mine =
        pieces.slice(plan.cuSplits[b], plan.cuSplits[b + 1] - plan.cuSplits[b]);
    assert(!mine.empty() && mine.front().request == b && "pieces out of order");
    for (auto [s, piece] : llvm::enumerate(mine))
      row[s] = piece.begin;
    std::fill(row + mine.size(), row + rowSize, seqLens[b]);
  }
  return plan;
}

/// Appends one row, laid out as ScheduleColumn says, to `schedule`.
static void appendScheduleRow(std::vector<int32_t> &schedule, int64_t beginReq,
                              int64_t beginPos, int64_t endReq, int64_t endPos,
                              int64_t beginSplit) {
  int32_t row[kScheduleRowSize] = {};
  row[kBeginReq] = beginReq;
  row[kBeginPos] = beginPos;
  row[kEndReq] = endReq;
  row[kEndPos] = endPos;
  row[kBeginSplit] = beginSplit;
  schedule.insert(schedule.end(), row, row + kScheduleRowSize);
}

/// Heuristic and BatchInvariant plans: one schedule row per piece.
static void schedulePerPiece(SplitPlan &plan, ArrayRef<Piece> pieces) {
  plan.numSmParts = pieces.size();
  plan.schedule.reserve(pieces.size() * kScheduleRowSize);
  for (auto [index, piece] : llvm::enumerate(pieces))
    appendScheduleRow(plan.schedule, piece.request, piece.begin, piece.request,
                      piece.end, index - plan.cuSplits[piece.request]);
}

static llvm::Expected<SplitPlan>
planHeuristic(ArrayRef<int32_t> seqLens, const SplitPlanOptions &options) {
  int32_t maxSeqLen = seqLens.empty() ? 0 : *llvm::max_element(seqLens);
  int64_t k = heuristicNumSplits(maxSeqLen, options.numSms);
  if (static_cast<int64_t>(seqLens.size()) * k > kInt32Max)
    return invalid(llvm::Twine(seqLens.size()) + " requests x " +
                   llvm::Twine(k) + " splits do not fit in int32");

  std::vector<Piece> pieces;
  pieces.reserve(seqLens.size() * k);
  for (auto [b, len] : llvm::enumerate(seqLens)) {
    int64_t chunk = llvm::divideCeil(len, k);
    for (int64_t s = 0; s < k; ++s)
      pieces.push_back(
          {static_cast<int32_t>(b),
           static_cast<int32_t>(std::min<int64_t>(s * chunk, len)),
           static_cast<int32_t>(std::min<int64_t>((s + 1) * chunk, len))});
  }
  SplitPlan plan = assemble(seqLens, pieces);
  schedulePerPiece(plan, pieces);
  return plan;
}

static SplitPlan planBatchInvariant(ArrayRef<int32_t> seqLens) {
  std::vector<Piece> pieces;
  pieces.reserve(seqLens.size());
  for (auto [b, len] : llvm::enumerate(seqLens))
    pieces.push_back({static_cast<int32_t>(b), 0, len});
  SplitPlan plan = assemble(seqLens, pieces);
  schedulePerPiece(plan, pieces);
  return plan;
}

/// FlashMLA-style balanced plan. Request b costs blocks(b) + overhead, with
/// blocks(b) = ceil(S_b / blockTokens); every part may spend
/// payload = ceil(total / parts) + overhead. Parts are filled in request order:
/// while the rest of the current request, plus its overhead, fits in what the
/// part has left, the part takes it whole; otherwise, if more than the
/// overhead is left, the part takes that many blocks minus the overhead and
/// ends inside the request (the next part continues it and pays the overhead
/// again); otherwise the part ends and the leftover (at most the overhead) is
/// unused. Each part thus spends at most `payload`, and ends no earlier than
/// `payload - overhead` after it started, which is why `parts` parts always
/// cover the whole batch.
static llvm::Expected<SplitPlan> planBalanced(ArrayRef<int32_t> seqLens,
                                              const SplitPlanOptions &options) {
  int64_t parts = balancedNumSmParts(options);
  int64_t blockTokens = options.blockTokens;
  int64_t overhead = options.fixedOverheadBlocks;
  // Each part boundary adds at most one piece.
  if (static_cast<int64_t>(seqLens.size()) + parts - 1 > kInt32Max)
    return invalid(llvm::Twine(seqLens.size()) + " requests over " +
                   llvm::Twine(parts) + " parts do not fit in int32");

  std::vector<int64_t> blocks;
  blocks.reserve(seqLens.size());
  int64_t total = 0;
  for (int32_t len : seqLens) {
    blocks.push_back(llvm::divideCeil(len, blockTokens));
    total += blocks.back() + overhead;
  }
  int64_t payload = llvm::divideCeil(total, parts) + overhead;

  int64_t batch = seqLens.size();
  std::vector<Piece> pieces;
  std::vector<int32_t> schedule;
  schedule.reserve(parts * kScheduleRowSize);
  int64_t req = 0;   // First request not fully placed.
  int64_t block = 0; // Its first block not placed.
  int64_t split = 0; // Index of its next piece.
  for (int64_t part = 0; part < parts; ++part) {
    if (req == batch) {
      appendScheduleRow(schedule, batch, 0, batch - 1, 0, 0);
      continue;
    }
    int64_t beginReq = req, beginPos = block * blockTokens, beginSplit = split;
    int64_t budget = payload;
    while (req < batch) {
      int64_t remaining = blocks[req] - block;
      if (budget >= remaining + overhead) {
        pieces.push_back({static_cast<int32_t>(req),
                          static_cast<int32_t>(block * blockTokens),
                          seqLens[req]});
        budget -= remaining + overhead;
        ++req;
        block = 0;
        split = 0;
        continue;
      }
      if (budget > overhead) {
        int64_t taken = budget - overhead;
        pieces.push_back({static_cast<int32_t>(req),
                          static_cast<int32_t>(block * blockTokens),
                          static_cast<int32_t>((block + taken) * blockTokens)});
        block += taken;
        ++split;
      }
      break;
    }
    // The part ends inside request `req` or at the end of the one before it.
    if (block > 0)
      appendScheduleRow(schedule, beginReq, beginPos, req, block * blockTokens,
                        beginSplit);
    else
      appendScheduleRow(schedule, beginReq, beginPos, req - 1, seqLens[req - 1],
                        beginSplit);
  }
  assert(req == batch && "the payload covers the batch in `parts` parts");

  SplitPlan plan = assemble(seqLens, pieces);
  plan.numSmParts = parts;
  plan.schedule = std::move(schedule);
  return plan;
}

llvm::Expected<SplitPlan>
mla::plan::planSplits(ArrayRef<int32_t> seqLens,
                      const SplitPlanOptions &options) {
  if (llvm::Error err = validate(seqLens, options))
    return std::move(err);
  switch (options.policy) {
  case SplitPolicy::Heuristic:
    return planHeuristic(seqLens, options);
  case SplitPolicy::Balanced:
    return planBalanced(seqLens, options);
  case SplitPolicy::BatchInvariant:
    return planBatchInvariant(seqLens);
  }
  llvm_unreachable("unknown split policy");
}

std::string mla::plan::describe(const SplitPlan &plan) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "batch " << plan.batch << ", maxSplits " << plan.maxSplits << ", parts "
     << plan.numSmParts << "\n";
  int64_t rowSize = plan.maxSplits + 1;
  for (int64_t b = 0; b < plan.batch; ++b) {
    os << "  request " << b << ":";
    const int32_t *row = &plan.bounds[b * rowSize];
    for (int32_t s = 0, e = plan.cuSplits[b + 1] - plan.cuSplits[b]; s < e; ++s)
      os << " [" << row[s] << ", " << row[s + 1] << ")";
    os << "\n";
  }
  for (int64_t p = 0; p < plan.numSmParts; ++p) {
    const int32_t *row = &plan.schedule[p * kScheduleRowSize];
    os << "  part " << p << ": ";
    if (row[kBeginReq] > row[kEndReq]) {
      os << "idle\n";
      continue;
    }
    os << "request " << row[kBeginReq] << " @ " << row[kBeginPos]
       << " .. request " << row[kEndReq] << " @ " << row[kEndPos]
       << ", first split " << row[kBeginSplit] << "\n";
  }
  return text;
}
