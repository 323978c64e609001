//===- PrefillABITest.cpp - the mha launch contract -----------------------===//
//
// Which mha build a chip and shape get, its shared memory and its grid: the
// numbers the emitter and the MLIR-free launcher must agree on.
//
//===----------------------------------------------------------------------===//

#include "mla/Contract/PrefillABI.h"
#include "gtest/gtest.h"

using namespace mla::gpu;

namespace {

MhaShape shape(int64_t n, int64_t qk, int64_t v, ActType elem = ActType::BF16) {
  MhaShape s;
  s.numHeads = n;
  s.qkDim = qk;
  s.vDim = v;
  s.elem = elem;
  return s;
}

TEST(PrefillABITest, TensorCoreBuildOnlyWhereItsTilesFit) {
  EXPECT_TRUE(mhaUsesWgmma(Chip::SM90a, shape(128, 192, 128)));
  EXPECT_TRUE(mhaUsesWgmma(Chip::SM90a, shape(16, 64, 64, ActType::F16)));
  EXPECT_TRUE(mhaUsesWgmma(Chip::SM90a, shape(16, 128, 128)));
  // No wgmma on sm_100a, none for f32, widths the 64-column boxes do not
  // tile, and a V accumulator past the consumers' registers.
  EXPECT_FALSE(mhaUsesWgmma(Chip::SM100a, shape(128, 192, 128)));
  EXPECT_FALSE(mhaUsesWgmma(Chip::SM90a, shape(16, 192, 128, ActType::F32)));
  EXPECT_FALSE(mhaUsesWgmma(Chip::SM90a, shape(3, 40, 20)));
  EXPECT_FALSE(mhaUsesWgmma(Chip::SM90a, shape(16, 192, 256)));
}

TEST(PrefillABITest, SharedMemoryOfTheDeepSeekShape) {
  MhaSmemLayout l = mhaSmemLayout(shape(128, 192, 128));
  // Q 128x192, two K slots 128x192 and two V slots 128x128 (bf16), then
  // nine mbarriers; every tile 1024-byte aligned for the 128B swizzle.
  EXPECT_EQ(l.q, 0);
  EXPECT_EQ(l.k, 49152);
  EXPECT_EQ(l.v, 49152 + 2 * 49152);
  EXPECT_EQ(l.barriers, 49152 + 2 * 49152 + 2 * 32768);
  EXPECT_EQ(l.total, l.barriers + 9 * 8);
  EXPECT_EQ(l.k % 1024, 0);
  EXPECT_EQ(l.v % 1024, 0);
  EXPECT_LE(l.total, kSm90MaxSharedBytes);
  EXPECT_EQ(mhaSharedBytes(Chip::SM90a, shape(128, 192, 128)), l.total);
  EXPECT_EQ(mhaSharedBytes(Chip::SM100a, shape(128, 192, 128)), 0);
}

TEST(PrefillABITest, GridCoversEveryTileOfEveryRequest) {
  // Heads on y; on x enough tiles for ceil(T/128) plus one partial tile per
  // request and for the two gaps around the requests.
  LaunchDims d = mhaLaunchDims(Chip::SM90a, shape(128, 192, 128), 1000, 3);
  EXPECT_EQ(d.gridX, 8u + 3u + 2u);
  EXPECT_EQ(d.gridY, 128u);
  EXPECT_EQ(d.blockX, uint32_t(kMhaWgmmaThreads));
  LaunchDims c = mhaLaunchDims(Chip::SM100a, shape(16, 192, 128), 10, 1);
  EXPECT_EQ(c.gridX, uint32_t((10 * 16 + kMhaRowsPerCta - 1) / kMhaRowsPerCta));
  EXPECT_EQ(c.blockX, uint32_t(kMhaThreadsPerCta));
}

} // namespace
