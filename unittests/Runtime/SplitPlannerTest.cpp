//===- SplitPlannerTest.cpp - tests of the split-KV planner ---------------===//
//
// Every plan is checked against the invariants a kernel and its combine step
// rely on (verifyPlan); the policy-specific tests then pin down where each
// policy cuts.
//
//===----------------------------------------------------------------------===//

#include "mla/Contract/SplitPlanner.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"
#include "gtest/gtest.h"
#include <map>
#include <utility>

using namespace mla::plan;

namespace {

/// The balanced scheduler's cost of piece [begin, end): its blocks plus the
/// per-piece overhead.
int64_t pieceCost(int64_t begin, int64_t end, const SplitPlanOptions &options) {
  return llvm::divideCeil(end, options.blockTokens) -
         begin / options.blockTokens + options.fixedOverheadBlocks;
}

/// What one balanced part may spend: the average cost of a part, rounded up,
/// plus one overhead.
int64_t balancedPayload(llvm::ArrayRef<int32_t> seqLens,
                        const SplitPlanOptions &options, int64_t parts) {
  int64_t total = 0;
  for (int32_t len : seqLens)
    total += pieceCost(0, len, options);
  return llvm::divideCeil(total, parts) + options.fixedOverheadBlocks;
}

/// Piece s of request b.
std::pair<int32_t, int32_t> piece(const SplitPlan &plan, int64_t b, int64_t s) {
  const int32_t *row = &plan.bounds[b * (plan.maxSplits + 1)];
  return {row[s], row[s + 1]};
}

int64_t numPieces(const SplitPlan &plan, int64_t b) {
  return plan.cuSplits[b + 1] - plan.cuSplits[b];
}

/// Request b's row of bounds.
std::vector<int32_t> boundsRow(const SplitPlan &plan, int64_t b) {
  auto begin = plan.bounds.begin() + b * (plan.maxSplits + 1);
  return std::vector<int32_t>(begin, begin + plan.maxSplits + 1);
}

/// Checks what every consumer of a plan relies on: each request's pieces
/// cover [0, S_b) exactly once in order, the counts agree with each other,
/// the schedule visits every piece exactly once, and the policy's own rules
/// (uniform heuristic pieces; block-aligned, budgeted balanced parts).
::testing::AssertionResult verifyPlan(llvm::ArrayRef<int32_t> seqLens,
                                      const SplitPlanOptions &options,
                                      const SplitPlan &plan) {
  int64_t batch = seqLens.size();
  if (plan.batch != batch)
    return ::testing::AssertionFailure() << "batch " << plan.batch;
  if (plan.cuSplits.size() != size_t(batch + 1) || plan.cuSplits[0] != 0)
    return ::testing::AssertionFailure() << "cuSplits shape";
  int64_t mostPieces = 1;
  for (int64_t b = 0; b < batch; ++b) {
    if (numPieces(plan, b) < 1)
      return ::testing::AssertionFailure() << "request " << b << " no piece";
    mostPieces = std::max(mostPieces, numPieces(plan, b));
  }
  if (plan.maxSplits != mostPieces)
    return ::testing::AssertionFailure() << "maxSplits " << plan.maxSplits
                                         << " but most pieces " << mostPieces;
  if (plan.bounds.size() != size_t(batch * (plan.maxSplits + 1)))
    return ::testing::AssertionFailure() << "bounds shape";

  // Coverage: bounds start at 0, never decrease, and reach S_b after the
  // request's last piece; trailing entries repeat S_b.
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<int32_t> row = boundsRow(plan, b);
    if (row.front() != 0)
      return ::testing::AssertionFailure() << "request " << b << " starts late";
    for (int64_t s = 0; s < plan.maxSplits; ++s)
      if (row[s] > row[s + 1])
        return ::testing::AssertionFailure()
               << "request " << b << " bounds decrease at " << s;
    for (int64_t s = numPieces(plan, b); s <= plan.maxSplits; ++s)
      if (row[s] != seqLens[b])
        return ::testing::AssertionFailure()
               << "request " << b << " bound " << s << " is " << row[s]
               << ", not its end " << seqLens[b];
  }

  if (options.policy == SplitPolicy::BatchInvariant && plan.maxSplits != 1)
    return ::testing::AssertionFailure() << "batch-invariant plan splits";

  if (options.policy == SplitPolicy::Heuristic) {
    int32_t maxLen = seqLens.empty() ? 0 : *llvm::max_element(seqLens);
    int64_t k = heuristicNumSplits(maxLen, options.numSms);
    for (int64_t b = 0; b < batch; ++b) {
      if (numPieces(plan, b) != k)
        return ::testing::AssertionFailure() << "request " << b << " not k";
      int64_t chunk = llvm::divideCeil(seqLens[b], k);
      for (int64_t s = 0; s < k; ++s)
        if (piece(plan, b, s) !=
            std::pair<int32_t, int32_t>(
                std::min<int64_t>(s * chunk, seqLens[b]),
                std::min<int64_t>((s + 1) * chunk, seqLens[b])))
          return ::testing::AssertionFailure()
                 << "request " << b << " piece " << s << " not uniform";
    }
  }

  bool balanced = options.policy == SplitPolicy::Balanced;
  int64_t payload =
      balanced ? balancedPayload(seqLens, options, balancedNumSmParts(options))
               : 0;
  if (balanced) {
    for (int64_t b = 0; b < batch; ++b) {
      // Cuts sit on block boundaries; only a request of length 0 has an empty
      // piece; a request that fits one part's payload spans at most two.
      for (int64_t s = 0; s < numPieces(plan, b); ++s) {
        auto [begin, end] = piece(plan, b, s);
        if (begin % options.blockTokens != 0 ||
            (s + 1 < numPieces(plan, b) && end % options.blockTokens != 0))
          return ::testing::AssertionFailure()
                 << "request " << b << " piece " << s << " off a block";
        if (begin == end && seqLens[b] != 0)
          return ::testing::AssertionFailure()
                 << "request " << b << " piece " << s << " empty";
      }
      if (pieceCost(0, seqLens[b], options) <= payload &&
          numPieces(plan, b) > 2)
        return ::testing::AssertionFailure()
               << "request " << b << " fits a part but spans "
               << numPieces(plan, b);
    }
    if (plan.numSmParts != balancedNumSmParts(options))
      return ::testing::AssertionFailure() << "part count";
  }

  // The schedule visits piece (b, s) exactly once, with its exact range.
  if (plan.schedule.size() != size_t(plan.numSmParts * kScheduleRowSize))
    return ::testing::AssertionFailure() << "schedule shape";
  std::map<std::pair<int64_t, int64_t>, int> visits;
  for (int64_t p = 0; p < plan.numSmParts; ++p) {
    const int32_t *row = &plan.schedule[p * kScheduleRowSize];
    for (int c = kBeginSplit + 1; c < kScheduleRowSize; ++c)
      if (row[c] != 0)
        return ::testing::AssertionFailure() << "part " << p << " reserved";
    if (row[kBeginReq] > row[kEndReq]) {
      if (row[kBeginReq] != batch || row[kEndReq] != batch - 1 ||
          row[kBeginPos] != 0 || row[kEndPos] != 0 || row[kBeginSplit] != 0)
        return ::testing::AssertionFailure() << "part " << p << " bad idle";
      continue;
    }
    if (row[kBeginReq] < 0 || row[kEndReq] >= batch)
      return ::testing::AssertionFailure() << "part " << p << " out of range";
    int64_t cost = 0;
    for (int64_t b = row[kBeginReq]; b <= row[kEndReq]; ++b) {
      bool first = b == row[kBeginReq];
      int64_t s = first ? row[kBeginSplit] : 0;
      int32_t begin = first ? row[kBeginPos] : 0;
      int32_t end = b == row[kEndReq] ? row[kEndPos] : seqLens[b];
      if (s >= numPieces(plan, b) ||
          piece(plan, b, s) != std::pair<int32_t, int32_t>(begin, end))
        return ::testing::AssertionFailure()
               << "part " << p << " range of request " << b << " is not piece "
               << s << "\n"
               << describe(plan);
      ++visits[{b, s}];
      cost += pieceCost(begin, end, options);
    }
    // Balance: no part spends more than the payload, i.e. more than one
    // block (rounding) plus one overhead above the average.
    if (balanced && cost > payload)
      return ::testing::AssertionFailure()
             << "part " << p << " costs " << cost << " > " << payload;
  }
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s < numPieces(plan, b); ++s)
      if (visits[{b, s}] != 1)
        return ::testing::AssertionFailure()
               << "piece (" << b << ", " << s << ") visited " << visits[{b, s}]
               << " times";
  return ::testing::AssertionSuccess();
}

SplitPlanOptions withPolicy(SplitPolicy policy) {
  SplitPlanOptions options;
  options.policy = policy;
  return options;
}

/// Plans, expecting success and a valid plan.
SplitPlan planValid(llvm::ArrayRef<int32_t> seqLens,
                    const SplitPlanOptions &options) {
  llvm::Expected<SplitPlan> plan = planSplits(seqLens, options);
  if (!plan) {
    ADD_FAILURE() << llvm::toString(plan.takeError());
    return SplitPlan();
  }
  EXPECT_TRUE(verifyPlan(seqLens, options, *plan));
  return std::move(*plan);
}

/// Plans, expecting failure; returns the message.
std::string planError(llvm::ArrayRef<int32_t> seqLens,
                      const SplitPlanOptions &options) {
  llvm::Expected<SplitPlan> plan = planSplits(seqLens, options);
  if (plan) {
    ADD_FAILURE() << "planned an invalid input:\n" << describe(*plan);
    return "";
  }
  return llvm::toString(plan.takeError());
}

//===----------------------------------------------------------------------===//
// Counts
//===----------------------------------------------------------------------===//

TEST(SplitPlannerCounts, Heuristic) {
  EXPECT_EQ(heuristicNumSplits(8192, 132), 16);
  EXPECT_EQ(heuristicNumSplits(100, 132), 1);
  EXPECT_EQ(heuristicNumSplits(0, 132), 1);
  EXPECT_EQ(heuristicNumSplits(1023, 132), 1);
  EXPECT_EQ(heuristicNumSplits(1024, 132), 2);
  // 1536 / 512 = 3 rounds up to 4.
  EXPECT_EQ(heuristicNumSplits(1536, 132), 4);
  EXPECT_EQ(heuristicNumSplits(1 << 30, 132), 264);
  EXPECT_EQ(heuristicNumSplits(8192, 4), 8);
}

TEST(SplitPlannerCounts, BalancedParts) {
  SplitPlanOptions options;
  EXPECT_EQ(balancedNumSmParts(options), 66);
  options.numHeadsQ = 16;
  EXPECT_EQ(balancedNumSmParts(options), 132);
  options.numHeadsQ = 128;
  options.queryRows = 2;
  EXPECT_EQ(balancedNumSmParts(options), 33);
  options.numSms = 1;
  EXPECT_EQ(balancedNumSmParts(options), 1);
}

//===----------------------------------------------------------------------===//
// Every policy on the shapes that break planners
//===----------------------------------------------------------------------===//

class SplitPlannerPolicyTest : public ::testing::TestWithParam<SplitPolicy> {};

TEST_P(SplitPlannerPolicyTest, ZeroLengths) {
  SplitPlan plan = planValid({0, 0, 0}, withPolicy(GetParam()));
  for (int32_t bound : plan.bounds)
    EXPECT_EQ(bound, 0);
}

TEST_P(SplitPlannerPolicyTest, SingleTokens) {
  SplitPlan plan = planValid({1, 1, 1}, withPolicy(GetParam()));
  // Nothing cuts a one-token request.
  for (int64_t b = 0; b < 3; ++b)
    EXPECT_EQ(boundsRow(plan, b)[1], 1);
}

TEST_P(SplitPlannerPolicyTest, PageBoundaries) {
  planValid({63, 64, 65, 127, 128, 129, 1023, 1024, 1025},
            withPolicy(GetParam()));
}

TEST_P(SplitPlannerPolicyTest, OneLongAmongShort) {
  std::vector<int32_t> seqLens(15, 1024);
  seqLens.insert(seqLens.begin() + 7, 10240);
  planValid(seqLens, withPolicy(GetParam()));
}

TEST_P(SplitPlannerPolicyTest, MorePartsThanBlocks) {
  SplitPlanOptions options = withPolicy(GetParam());
  options.numHeadsQ = 16;
  planValid({10, 3}, options);
}

TEST_P(SplitPlannerPolicyTest, SingleRequest) {
  planValid({8192}, withPolicy(GetParam()));
  planValid({0}, withPolicy(GetParam()));
}

TEST_P(SplitPlannerPolicyTest, HugeBatch) {
  std::vector<int32_t> seqLens(1024, 8192);
  planValid(seqLens, withPolicy(GetParam()));
}

TEST_P(SplitPlannerPolicyTest, EmptyBatch) {
  SplitPlan plan = planValid({}, withPolicy(GetParam()));
  EXPECT_EQ(plan.maxSplits, 1);
  EXPECT_EQ(plan.cuSplits, std::vector<int32_t>({0}));
}

TEST_P(SplitPlannerPolicyTest, SmallBlocksNoOverhead) {
  SplitPlanOptions options = withPolicy(GetParam());
  options.blockTokens = 16;
  options.fixedOverheadBlocks = 0;
  options.numSms = 7;
  options.rowsPerCta = 128;
  planValid({0, 5, 16, 17, 300, 0, 4097}, options);
}

TEST_P(SplitPlannerPolicyTest, RejectsNegativeLength) {
  std::string message = planError({4, -1}, withPolicy(GetParam()));
  EXPECT_NE(message.find("seq_lens[1] is negative (-1)"), std::string::npos)
      << message;
}

INSTANTIATE_TEST_SUITE_P(
    SplitPlanner, SplitPlannerPolicyTest,
    ::testing::Values(SplitPolicy::Heuristic, SplitPolicy::Balanced,
                      SplitPolicy::BatchInvariant),
    [](const ::testing::TestParamInfo<SplitPolicy> &info) -> std::string {
      switch (info.param) {
      case SplitPolicy::Heuristic:
        return "Heuristic";
      case SplitPolicy::Balanced:
        return "Balanced";
      case SplitPolicy::BatchInvariant:
        return "BatchInvariant";
      }
      return "Unknown";
    });

//===----------------------------------------------------------------------===//
// Heuristic
//===----------------------------------------------------------------------===//

TEST(SplitPlannerHeuristic, OneCountForTheBatch) {
  SplitPlan plan =
      planValid({8192, 100, 0}, withPolicy(SplitPolicy::Heuristic));
  ASSERT_EQ(plan.maxSplits, 16);
  EXPECT_EQ(piece(plan, 0, 15), std::make_pair(7680, 8192));
  // ceil(100 / 16) = 7 tokens a piece; the last two pieces are short/empty.
  std::vector<int32_t> expected;
  for (int32_t s = 0; s < 15; ++s)
    expected.push_back(7 * s);
  expected.insert(expected.end(), {100, 100});
  EXPECT_EQ(boundsRow(plan, 1), expected);
  EXPECT_EQ(boundsRow(plan, 2), std::vector<int32_t>(17, 0));
}

TEST(SplitPlannerHeuristic, DependsOnTheLongestRequest) {
  SplitPlanOptions options = withPolicy(SplitPolicy::Heuristic);
  SplitPlan alone = planValid({4096}, options);
  SplitPlan withLonger = planValid({4096, 65536}, options);
  EXPECT_EQ(alone.maxSplits, 8);
  EXPECT_EQ(withLonger.maxSplits, 128);
}

//===----------------------------------------------------------------------===//
// BatchInvariant
//===----------------------------------------------------------------------===//

TEST(SplitPlannerBatchInvariant, RequestPlanIgnoresTheBatch) {
  SplitPlanOptions options = withPolicy(SplitPolicy::BatchInvariant);
  const std::vector<std::vector<int32_t>> batches = {
      {3000}, {3000, 100000, 5}, {7, 0, 3000}, {3000, 3000, 3000, 1 << 20}};
  for (const std::vector<int32_t> &seqLens : batches) {
    SplitPlan plan = planValid(seqLens, options);
    for (auto [b, len] : llvm::enumerate(seqLens)) {
      EXPECT_EQ(boundsRow(plan, b), std::vector<int32_t>({0, len}));
      const int32_t *row = &plan.schedule[b * kScheduleRowSize];
      EXPECT_EQ(
          std::vector<int32_t>(row, row + kScheduleRowSize),
          std::vector<int32_t>({int32_t(b), 0, int32_t(b), len, 0, 0, 0, 0}));
    }
  }
}

//===----------------------------------------------------------------------===//
// Balanced
//===----------------------------------------------------------------------===//

/// Two parts (4 SMs, two CTAs per request's heads) over one 1000-token
/// request: 16 blocks + 5 overhead = 21, payload ceil(21 / 2) + 5 = 16, so
/// part 0 takes 16 - 5 = 11 blocks and part 1 the rest.
TEST(SplitPlannerBalanced, ExactCut) {
  SplitPlanOptions options = withPolicy(SplitPolicy::Balanced);
  options.numSms = 4;
  SplitPlan plan = planValid({1000}, options);
  EXPECT_EQ(plan.bounds, std::vector<int32_t>({0, 704, 1000}));
  EXPECT_EQ(plan.cuSplits, std::vector<int32_t>({0, 2}));
  EXPECT_EQ(plan.schedule, std::vector<int32_t>({0, 0, 0, 704, 0, 0, 0, 0, //
                                                 0, 704, 0, 1000, 1, 0, 0, 0}));
  EXPECT_EQ(describe(plan), "batch 1, maxSplits 2, parts 2\n"
                            "  request 0: [0, 704) [704, 1000)\n"
                            "  part 0: request 0 @ 0 .. request 0 @ 704, "
                            "first split 0\n"
                            "  part 1: request 0 @ 704 .. request 0 @ 1000, "
                            "first split 1\n");
}

/// Costs 7, 5 and 10 over two parts, payload 16: part 0 takes requests 0 and
/// 1 whole (12) and stops, since 4 left is within the overhead.
TEST(SplitPlannerBalanced, PartCoversSeveralRequests) {
  SplitPlanOptions options = withPolicy(SplitPolicy::Balanced);
  options.numSms = 4;
  SplitPlan plan = planValid({100, 0, 300}, options);
  EXPECT_EQ(plan.maxSplits, 1);
  EXPECT_EQ(plan.schedule, std::vector<int32_t>({0, 0, 1, 0, 0, 0, 0, 0, //
                                                 2, 0, 2, 300, 0, 0, 0, 0}));
}

/// Eight parts; seven requests of 16 blocks (cost 21) and one of 160 (cost
/// 165): payload ceil(312 / 8) + 5 = 44 holds two short requests, and the
/// long one is dealt 39 blocks at a time over the last parts.
TEST(SplitPlannerBalanced, SplitsTheLongRequestOnly) {
  SplitPlanOptions options = withPolicy(SplitPolicy::Balanced);
  options.numSms = 16;
  std::vector<int32_t> seqLens(7, 1024);
  seqLens.push_back(10240);
  SplitPlan plan = planValid(seqLens, options);
  for (int64_t b = 0; b < 7; ++b)
    EXPECT_EQ(numPieces(plan, b), 1) << "short request " << b;
  EXPECT_EQ(numPieces(plan, 7), 5);
  EXPECT_EQ(boundsRow(plan, 7),
            std::vector<int32_t>({0, 1152, 3648, 6144, 8640, 10240}));
}

/// 132 parts over two requests of cost 1 + 5: payload ceil(12 / 132) + 5 = 6
/// holds one request, so two parts work and 130 are idle.
TEST(SplitPlannerBalanced, IdlePartsAfterTheBatch) {
  SplitPlanOptions options = withPolicy(SplitPolicy::Balanced);
  options.numHeadsQ = 16;
  SplitPlan plan = planValid({10, 3}, options);
  ASSERT_EQ(plan.numSmParts, 132);
  int idle = 0;
  for (int64_t p = 0; p < plan.numSmParts; ++p)
    idle += plan.schedule[p * kScheduleRowSize + kBeginReq] == 2;
  EXPECT_EQ(idle, 130);
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

TEST(SplitPlannerErrors, RejectsBadOptions) {
  auto expectError = [](void (*mutate)(SplitPlanOptions &),
                        llvm::StringRef text) {
    SplitPlanOptions options;
    mutate(options);
    std::string message = planError({64}, options);
    EXPECT_NE(message.find(text.str()), std::string::npos) << message;
  };
  expectError([](SplitPlanOptions &o) { o.numSms = 0; },
              "numSms must be in [1, 65536], got 0");
  expectError([](SplitPlanOptions &o) { o.numSms = kMaxSms + 1; },
              "numSms must be in [1, 65536], got 65537");
  expectError([](SplitPlanOptions &o) { o.numHeadsQ = 0; }, "numHeadsQ");
  expectError([](SplitPlanOptions &o) { o.numHeadsQ = int64_t(1) << 31; },
              "numHeadsQ must be in [1, 2147483647], got 2147483648");
  expectError([](SplitPlanOptions &o) { o.queryRows = -2; }, "queryRows");
  expectError([](SplitPlanOptions &o) { o.blockTokens = 0; }, "blockTokens");
  expectError([](SplitPlanOptions &o) { o.fixedOverheadBlocks = -1; },
              "fixedOverheadBlocks must be in [0, 2147483647], got -1");
  expectError([](SplitPlanOptions &o) { o.rowsPerCta = 0; }, "rowsPerCta");
}

TEST(SplitPlannerErrors, RejectsPlansBeyondInt32) {
  // 8.2M requests x 264 splits is more pieces than cuSplits can count.
  std::vector<int32_t> seqLens(8200000, 1 << 20);
  std::string message = planError(seqLens, SplitPlanOptions());
  EXPECT_NE(message.find("8200000 requests x 264 splits do not fit in int32"),
            std::string::npos)
      << message;
}

TEST(SplitPlannerErrors, ErrorIsInvalidArgument) {
  llvm::Expected<SplitPlan> plan = planSplits({-5}, SplitPlanOptions());
  ASSERT_FALSE(bool(plan));
  std::error_code code = llvm::errorToErrorCode(plan.takeError());
  EXPECT_EQ(code, std::errc::invalid_argument);
}

} // namespace
