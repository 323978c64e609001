//===- DcpShardTest.cpp - which tokens a DCP rank owns --------------------===//
//
// ownedTokens and globalPosition against an enumeration of the global tokens
// and the ranks they land on.
//
//===----------------------------------------------------------------------===//

#include "mla/Contract/DcpShard.h"
#include "gtest/gtest.h"

using namespace mla::dcp;

namespace {

TEST(DcpShard, OwnedTokensCountsTheRankRuns) {
  for (int64_t world : {1, 2, 3, 4, 8})
    for (int64_t interleave : {1, 2, 16, 64})
      for (int64_t rank = 0; rank < world; ++rank)
        for (int64_t n = -3; n < 300; ++n) {
          int64_t owned = 0;
          for (int64_t t = 0; t < n; ++t)
            owned += (t / interleave) % world == rank;
          EXPECT_EQ(ownedTokens(n, world, rank, interleave), owned)
              << "n=" << n << " world=" << world << " rank=" << rank
              << " interleave=" << interleave;
        }
}

TEST(DcpShard, LocalPositionsMapToTheRankTokensInOrder) {
  for (int64_t world : {1, 2, 4})
    for (int64_t interleave : {1, 3, 64})
      for (int64_t rank = 0; rank < world; ++rank) {
        int64_t local = 0;
        for (int64_t t = 0; t < 500; ++t) {
          if ((t / interleave) % world == rank) {
            EXPECT_EQ(globalPosition(local++, world, rank, interleave), t);
          }
        }
      }
}

TEST(DcpShard, OneRankOwnsEverything) {
  EXPECT_EQ(ownedTokens(131072, 1, 0, 1), 131072);
  EXPECT_EQ(ownedTokens(131072, 4, 3, 1), 32768);
  EXPECT_EQ(ownedTokens(3, 4, 3, 1), 0);
}

} // namespace
