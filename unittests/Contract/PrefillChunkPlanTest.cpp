//===- PrefillChunkPlanTest.cpp - The host chunk plan of a prefill --------===//
//
// The plan must be mla-chunk-prefill's (its file comment states the
// policy): the GPU runtime merges the chunks this plan names, the CPU
// lowering the ones the pass computes in IR.
//
//===----------------------------------------------------------------------===//

#include "mla/Contract/ChunkedPrefill.h"
#include "gtest/gtest.h"
#include <vector>

using namespace mla;
using namespace mla::gpu;

namespace {

struct Tables {
  std::vector<int32_t> starts, cuRows;
  int64_t rows;
};

Tables tablesOf(const PrefillChunkPlan &plan, const PrefillChunk &chunk) {
  size_t batch = plan.getContextLens().size();
  Tables t{std::vector<int32_t>(batch), std::vector<int32_t>(batch + 1), 0};
  t.rows = plan.fillTables(chunk, t.starts, t.cuRows);
  return t;
}

TEST(PrefillChunkPlan, DefaultBudgetIsThePassDefault) {
  EXPECT_EQ(defaultPrefillWorkspaceRows(4096, 128, 64), 32768);
  EXPECT_EQ(defaultPrefillWorkspaceRows(64), 32768);
  // sm_100a's page of 128: 4 pages x 128 requests reach the 64K cap.
  EXPECT_EQ(defaultPrefillWorkspaceRows(128), 65536);
  // The one-page-per-request floor wins over the cap.
  EXPECT_EQ(defaultPrefillWorkspaceRows(16, 2048, 64), 131072);
}

TEST(PrefillChunkPlan, RequestsAdvanceTogetherWhenAPageEachFits) {
  // Contexts 100, 0 (a 1-token prompt at position 0), 10 and 300 - 4; W = 200
  // over 3 requests with context: 66 each, rounded down to C = 64.
  std::vector<int32_t> qsl{0, 2, 3, 8, 12}, lens{102, 1, 15, 300};
  PrefillChunkPlan plan(qsl, lens, 200, 16, 1 << 20);
  EXPECT_EQ(plan.getContextLens(), (llvm::ArrayRef<int64_t>{100, 0, 10, 296}));
  EXPECT_EQ(plan.getChunkSize(), 64);
  ASSERT_EQ(plan.getChunks().size(), 5u); // ceil(296 / 64)
  Tables first = tablesOf(plan, plan.getChunks()[0]);
  EXPECT_EQ(first.starts, (std::vector<int32_t>{0, 0, 0, 0}));
  EXPECT_EQ(first.cuRows, (std::vector<int32_t>{0, 64, 64, 74, 138}));
  Tables second = tablesOf(plan, plan.getChunks()[1]);
  EXPECT_EQ(second.starts, (std::vector<int32_t>{64, 64, 64, 64}));
  EXPECT_EQ(second.cuRows, (std::vector<int32_t>{0, 36, 36, 36, 100}));
  Tables last = tablesOf(plan, plan.getChunks()[4]);
  EXPECT_EQ(last.cuRows, (std::vector<int32_t>{0, 0, 0, 0, 40}));
  EXPECT_EQ(plan.getMaxChunkRows(), 138);
  for (const PrefillChunk &c : plan.getChunks())
    EXPECT_LE(tablesOf(plan, c).rows, plan.getWorkspaceRows());
}

TEST(PrefillChunkPlan, RequestsTakeTurnsWhenAPageEachDoesNotFit) {
  // W = 40 over 2 requests with context, pages of 32: 20 each is below a
  // page, so one request per chunk with C = 32.
  std::vector<int32_t> qsl{0, 1, 2}, lens{71, 20};
  PrefillChunkPlan plan(qsl, lens, 40, 32, 1 << 20);
  EXPECT_EQ(plan.getChunkSize(), 32);
  ASSERT_EQ(plan.getChunks().size(), 4u); // ceil(70/32) + ceil(19/32)
  EXPECT_EQ(plan.getChunks()[2].firstRequest, 0);
  EXPECT_EQ(plan.getChunks()[2].start, 64);
  EXPECT_EQ(tablesOf(plan, plan.getChunks()[2]).cuRows,
            (std::vector<int32_t>{0, 6, 6}));
  EXPECT_EQ(plan.getChunks()[3].firstRequest, 1);
  EXPECT_EQ(plan.getChunks()[3].start, 0);
  EXPECT_EQ(tablesOf(plan, plan.getChunks()[3]).cuRows,
            (std::vector<int32_t>{0, 0, 19}));
  EXPECT_EQ(plan.getMaxChunkRows(), 32);
}

TEST(PrefillChunkPlan, BudgetsBelowAPageCutInsidePages) {
  // W = 5 < page 16: C = W, chunk starts are multiples of 5.
  std::vector<int32_t> qsl{0, 3}, lens{15};
  PrefillChunkPlan plan(qsl, lens, 5, 16, 1 << 20);
  EXPECT_EQ(plan.getChunkSize(), 5);
  ASSERT_EQ(plan.getChunks().size(), 3u);
  EXPECT_EQ(plan.getChunks()[2].start, 10);
  EXPECT_EQ(tablesOf(plan, plan.getChunks()[2]).cuRows,
            (std::vector<int32_t>{0, 2}));
}

TEST(PrefillChunkPlan, NoContextMeansNoChunks) {
  std::vector<int32_t> qsl{0, 4, 5}, lens{4, 1};
  PrefillChunkPlan plan(qsl, lens, 1024, 64, 1 << 20);
  EXPECT_TRUE(plan.getChunks().empty());
  EXPECT_EQ(plan.getMaxChunkRows(), 0);
  std::vector<int32_t> onlyZero{0}, noLens;
  PrefillChunkPlan empty(onlyZero, noLens, 1024, 64, 0);
  EXPECT_TRUE(empty.getChunks().empty());
  EXPECT_EQ(empty.getWorkspaceRows(), 1);
}

TEST(PrefillChunkPlan, TheBudgetIsClampedToTheTable) {
  // A table of 2 x 3 pages of 16 addresses 96 positions: W = 1000 -> 96.
  std::vector<int32_t> qsl{0, 1, 2}, lens{40, 30};
  PrefillChunkPlan plan(qsl, lens, 1000, 16, 96);
  EXPECT_EQ(plan.getWorkspaceRows(), 96);
  EXPECT_EQ(plan.getChunkSize(), 48);
  ASSERT_EQ(plan.getChunks().size(), 1u);
  EXPECT_EQ(tablesOf(plan, plan.getChunks()[0]).cuRows,
            (std::vector<int32_t>{0, 39, 68}));
}

TEST(PrefillChunkPlan, WorkspaceLayoutHoldsEveryRegion) {
  ChunkedPrefillShape shape; // DeepSeek-V3, bf16
  shape.numHeads = 16;
  ChunkedPrefillWorkspace none = getChunkedPrefillWorkspace(shape, 10, 2, 0);
  // K/V of 10 rows and the new tokens' LSE only.
  EXPECT_EQ(none.v, 10u * 16 * 128 * 2 + 0u);
  EXPECT_EQ(none.k, 2u * 10 * 16 * 128 * 2);
  // The LSE's 640 bytes, rounded up to 256.
  EXPECT_EQ(none.totalBytes, none.lseNew + 768);
  ChunkedPrefillWorkspace some = getChunkedPrefillWorkspace(shape, 10, 2, 64);
  // K/V regions are sized for the larger of T and the chunk.
  EXPECT_EQ(some.v, 64u * 16 * 128 * 2);
  for (uint64_t offset :
       {some.v, some.k, some.lseNew, some.gathered, some.latent, some.outCtx,
        some.lseCtx, some.outChunk, some.lseChunk, some.tables})
    EXPECT_EQ(offset % 256, 0u);
  EXPECT_GE(some.totalBytes, some.tables + 5 * 4);
  EXPECT_GE(some.tables, some.lseChunk + 16 * 10 * 4);
}

TEST(PrefillChunkPlan, SpecsNameEveryPiece) {
  ChunkedPrefillShape shape;
  shape.numHeads = 16;
  shape.format = CacheFormat::FP8E4M3;
  ChunkedPrefillSpecs specs = getChunkedPrefillSpecs(Chip::SM90a, shape);
  // fp8_e4m3's scale is a launch argument, not part of the gather's spec.
  EXPECT_EQ(toString(specs.gather), "gather_cache chip=sm_90a L=512 R=64 "
                                    "page=64 dtype=bf16 format=fp8_e4m3");
  EXPECT_EQ(toString(specs.upProjKv),
            "up_proj_kv chip=sm_90a N=16 L=512 P=128 V=128 dtype=bf16");
  EXPECT_EQ(toString(specs.causalMha),
            "mha chip=sm_90a N=16 D=192 V=128 dtype=bf16 causal=1 "
            "scale=0x3d93cd3a");
  EXPECT_EQ(toString(specs.contextMha),
            "mha chip=sm_90a N=16 D=192 V=128 dtype=bf16 causal=0 "
            "scale=0x3d93cd3a");
  EXPECT_EQ(toString(specs.merge),
            "merge_states chip=sm_90a N=16 H=128 dtype=bf16");
  EXPECT_STREQ(checkChunkedPrefillSpecs(specs), "");
  shape.latentDim = 96;
  EXPECT_STREQ(
      checkChunkedPrefillSpecs(getChunkedPrefillSpecs(Chip::SM90a, shape)),
      "L must be a multiple of 64 (the staged K slice)");
}

} // namespace
