//===- MixedBatchTest.cpp - Which requests of a batch take decode ---------===//
//
// The rule mla-select-algorithm applies and the runtimes split batches by
// on the host (the pass's lit tests check the IR side).
//
//===----------------------------------------------------------------------===//

#include "mla/Contract/MixedBatch.h"
#include "gtest/gtest.h"
#include <vector>

using namespace mla;

namespace {

TEST(MixedBatch, DecodePathIsForShortRequestsWithTokens) {
  EXPECT_FALSE(takesDecodePath(0, 4));
  EXPECT_TRUE(takesDecodePath(1, 1));
  EXPECT_TRUE(takesDecodePath(4, 4));
  EXPECT_FALSE(takesDecodePath(5, 4));
  EXPECT_FALSE(takesDecodePath(1, 0));
}

TEST(MixedBatch, RuntimeBatchesSplitOffTheLeadingSingleTokenRequests) {
  // q_len 1, 1, 1, 5, 1: the run ends at the prompt; the last request is a
  // prefill too.
  std::vector<int32_t> qsl = {0, 1, 2, 3, 8, 9};
  EXPECT_EQ(countLeadingDecodes(qsl, 1), 3);
  EXPECT_EQ(countLeadingDecodes(qsl, 0), 0);
  EXPECT_EQ(countLeadingDecodes(qsl, -3), 0);
  // A request without tokens ends the run, as a prompt does.
  EXPECT_EQ(countLeadingDecodes(std::vector<int32_t>{0, 1, 1, 2}, 1), 1);
  EXPECT_EQ(countLeadingDecodes(std::vector<int32_t>{0, 0, 1}, 1), 0);
  // Decode only, and no requests at all.
  EXPECT_EQ(countLeadingDecodes(std::vector<int32_t>{0, 1, 2}, 1), 2);
  EXPECT_EQ(countLeadingDecodes(std::vector<int32_t>{0}, 1), 0);
}

TEST(MixedBatch, RuntimeBatchesTakeThresholdsUpToOne) {
  for (int64_t threshold : {-1, 0, 1})
    EXPECT_FALSE(static_cast<bool>(checkRuntimeDecodeThreshold(threshold)));
  llvm::Error error = checkRuntimeDecodeThreshold(2);
  ASSERT_TRUE(static_cast<bool>(error));
  EXPECT_NE(llvm::toString(std::move(error)).find("decode_threshold 2"),
            std::string::npos);
}

} // namespace
