//===- MixedAttentionTest.cpp - host plan of a mixed batch on the GPU -----===//
//
// Everything planMixedAttention and runMixedAttention decide before a
// launch needs no GPU: the split, the prefill's rebased offsets and chunks,
// the workspace sections and the kernels' specs. Launches are covered by
// test/python/test_gpu_attention.py on a GPU machine.
//
//===----------------------------------------------------------------------===//

#include "mla/GpuRuntime/MixedAttention.h"
#include "gtest/gtest.h"
#include <vector>

using namespace mla;
using namespace mla::gpu;

namespace {

ChunkedPrefillShape deepSeekShape(int64_t heads = 16) {
  ChunkedPrefillShape shape;
  shape.numHeads = heads;
  return shape;
}

std::string errorText(llvm::Error error) {
  EXPECT_TRUE(static_cast<bool>(error));
  return llvm::toString(std::move(error));
}

TEST(MixedAttention, SpecsAreThePlainDecodeAndProjectionKernels) {
  // What `mla-aot --shapes deepseek` builds for DeepSeek-V3 on sm_90a.
  MixedAttentionSpecs specs =
      getMixedAttentionSpecs(Chip::SM90a, deepSeekShape(128));
  DecodeKernelSpec decode;
  decode.shape.numHeads = 128;
  decode.tiling = chooseDecodeTiling(decode.chip, decode.shape);
  EXPECT_EQ(toString(specs.decode), toString(decode));
  EXPECT_EQ(toString(specs.absorbQ),
            "absorb_q chip=sm_90a N=128 P=128 L=512 R=64 dtype=bf16");
  EXPECT_EQ(toString(specs.upProjOut),
            "up_proj_out chip=sm_90a N=128 L=512 V=128 dtype=bf16");
  EXPECT_EQ(checkMixedDecodePath(specs, deepSeekShape(128)), "");
}

TEST(MixedAttention, DecodePathNeedsACacheOfTheActivationType) {
  ChunkedPrefillShape shape = deepSeekShape();
  shape.format = CacheFormat::FP8DsMla;
  MixedAttentionSpecs specs = getMixedAttentionSpecs(Chip::SM90a, shape);
  EXPECT_NE(checkMixedDecodePath(specs, shape), "");
  // A batch without decode requests never needs it.
  std::vector<int32_t> qsl = {0, 3, 5}, lens = {67, 2};
  MixedAttentionBatch batch{qsl, lens, 2, 4, 1, 4096, 132};
  llvm::Expected<MixedAttentionPlan> plan =
      planMixedAttention(specs, shape, batch);
  ASSERT_TRUE(static_cast<bool>(plan)) << llvm::toString(plan.takeError());
  EXPECT_EQ(plan->numDecodes, 0);
  // One that has them is refused, naming the way out.
  std::vector<int32_t> mixedQsl = {0, 1, 5};
  batch.queryStartLoc = mixedQsl;
  EXPECT_NE(errorText(planMixedAttention(specs, shape, batch).takeError())
                .find("decode_threshold 0"),
            std::string::npos);
}

TEST(MixedAttention, PlansBothPathsAndTheirWorkspace) {
  ChunkedPrefillShape shape = deepSeekShape();
  MixedAttentionSpecs specs = getMixedAttentionSpecs(Chip::SM90a, shape);
  // Two decodes (contexts 99 and 9), a 4-token prompt over 60 cached rows,
  // a request without tokens and a 1-token prompt.
  std::vector<int32_t> qsl = {0, 1, 2, 6, 6, 7}, lens = {100, 10, 64, 5, 1};
  MixedAttentionBatch batch{qsl, lens, 4, 32, 1, 4096, 132};
  llvm::Expected<MixedAttentionPlan> plan =
      planMixedAttention(specs, shape, batch);
  ASSERT_TRUE(static_cast<bool>(plan)) << llvm::toString(plan.takeError());
  EXPECT_EQ(plan->numDecodes, 2);
  EXPECT_EQ(plan->prefillQueryStartLoc, (std::vector<int32_t>{0, 4, 4, 5}));
  ASSERT_TRUE(plan->prefillChunks.has_value());
  EXPECT_EQ(plan->prefillChunks->getContextLens(),
            (llvm::ArrayRef<int64_t>{60, 5, 0}));
  // Every piece of the two decode requests is planned, within seq_lens.
  const SplitBounds &bounds = plan->decodeBounds;
  ASSERT_EQ(bounds.bounds.size(), size_t(2 * (bounds.numSplits + 1)));
  EXPECT_EQ(bounds.bounds.front(), 0);

  const MixedAttentionWorkspace &w = plan->workspace;
  uint64_t e = 2, n = 16;
  EXPECT_EQ(w.absorbed, 0u);
  EXPECT_GE(w.latentOut, 2 * n * 576 * e);
  EXPECT_GE(w.lse, w.latentOut + 2 * n * 512 * e);
  EXPECT_EQ(
      w.decodeBytes,
      decodeWorkspaceLayout(specs.decode, 2, bounds.numSplits).totalBytes);
  EXPECT_GE(w.queryStartLoc, w.decode + w.decodeBytes);
  EXPECT_EQ(w.prefillBytes,
            getChunkedPrefillWorkspace(shape, 5, 3,
                                       plan->prefillChunks->getMaxChunkRows())
                .totalBytes);
  EXPECT_EQ(w.totalBytes, w.prefill + w.prefillBytes);
  for (uint64_t offset :
       {w.latentOut, w.lse, w.decode, w.queryStartLoc, w.prefill, w.totalBytes})
    EXPECT_EQ(offset % 256, 0u);
}

TEST(MixedAttention, DecodeOnlyAndPrefillOnlyBatches) {
  ChunkedPrefillShape shape = deepSeekShape();
  MixedAttentionSpecs specs = getMixedAttentionSpecs(Chip::SM90a, shape);
  std::vector<int32_t> qsl = {0, 1, 2}, lens = {7, 70};
  MixedAttentionBatch batch{qsl, lens, 2, 8, 1, 4096, 132};
  llvm::Expected<MixedAttentionPlan> decodes =
      planMixedAttention(specs, shape, batch);
  ASSERT_TRUE(static_cast<bool>(decodes));
  EXPECT_EQ(decodes->numDecodes, 2);
  EXPECT_FALSE(decodes->prefillChunks.has_value());
  EXPECT_EQ(decodes->workspace.prefillBytes, 0u);

  batch.decodeThreshold = 0;
  llvm::Expected<MixedAttentionPlan> prefills =
      planMixedAttention(specs, shape, batch);
  ASSERT_TRUE(static_cast<bool>(prefills));
  EXPECT_EQ(prefills->numDecodes, 0);
  EXPECT_EQ(prefills->prefillQueryStartLoc, qsl);
  EXPECT_TRUE(prefills->prefillChunks.has_value());
  EXPECT_EQ(prefills->workspace.decodeBytes, 0u);
}

TEST(MixedAttention, RunChecksBeforeEnqueuing) {
  ChunkedPrefillShape shape = deepSeekShape();
  MixedAttentionSpecs specs = getMixedAttentionSpecs(Chip::SM90a, shape);
  std::vector<int32_t> qsl = {0, 1, 3}, lens = {7, 70};
  MixedAttentionBatch batch{qsl, lens, 2, 8, 1, 4096, 132};
  llvm::Expected<MixedAttentionPlan> plan =
      planMixedAttention(specs, shape, batch);
  ASSERT_TRUE(static_cast<bool>(plan));
  // Every tensor 16-byte aligned, each at its own 1 MiB.
  MixedAttentionArgs args;
  CUdeviceptr next = 1 << 20;
  for (CUdeviceptr *p : {&args.q, &args.kvC, &args.kPe, &args.kvBProj,
                         &args.wUkT, &args.wUv, &args.cache, &args.blockTable,
                         &args.seqLens, &args.out, &args.workspace})
    *p = next += 1 << 20;
  args.tokens = 3;
  args.batch = 2;
  args.maxPages = 2;
  args.numPages = 8;
  args.workspaceBytes = plan->workspace.totalBytes - 1;
  EXPECT_NE(errorText(checkMixedAttention(specs, shape, args, *plan))
                .find("the attention workspace holds"),
            std::string::npos);
  args.workspaceBytes = plan->workspace.totalBytes;
  EXPECT_FALSE(
      static_cast<bool>(checkMixedAttention(specs, shape, args, *plan)));
  // The decode path's launches are checked: w_uk_t misaligned.
  args.wUkT += 4;
  EXPECT_NE(errorText(checkMixedAttention(specs, shape, args, *plan))
                .find("must be 16-byte aligned"),
            std::string::npos);
  args.wUkT -= 4;
  // A run without the kernels the plan needs enqueues nothing.
  EXPECT_NE(errorText(runMixedAttention(nullptr, {}, specs, shape, args, *plan))
                .find("not loaded"),
            std::string::npos);
}

} // namespace
