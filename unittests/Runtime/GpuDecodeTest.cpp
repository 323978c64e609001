//===- GpuDecodeTest.cpp - host-side logic of GPU decode ------------------===//
//
// Everything GpuDecoder checks or plans before a launch needs no GPU: the
// workspace layout, split bounds, argument validation and the cache-miss
// message. Launches are covered by `mla-bench --check` and
// test/python/test_gpu_decode.py on a GPU machine.
//
//===----------------------------------------------------------------------===//

#include "mla/GpuRuntime/GpuDecode.h"
#include "llvm/Support/FileSystem.h"
#include "gtest/gtest.h"
#include <cmath>

using namespace mla::gpu;

namespace {

DecodeKernelSpec deepSeekSpec(int64_t heads = 128, int64_t sq = 1,
                              bool causal = false) {
  DecodeKernelSpec spec;
  spec.shape.numHeads = heads;
  spec.shape.queryRows = sq;
  spec.shape.causal = causal;
  spec.tiling = chooseDecodeTiling(spec.chip, spec.shape);
  return spec;
}

/// The error's message; fails the test when there is no error.
std::string errorText(llvm::Error error) {
  EXPECT_TRUE(static_cast<bool>(error));
  return llvm::toString(std::move(error));
}

bool contains(const std::string &text, llvm::StringRef part) {
  return llvm::StringRef(text).contains(part);
}

TEST(GpuDecode, WorkspaceLayoutIsAlignedAndSizedPerAbi) {
  DecodeKernelSpec spec; // N=128, Sq=1, L=512
  // The pipelined build has no counters (decodeCombinesInKernel).
  spec.tiling.wgmma = spec.tiling.pipelined = true;
  DecodeShape &shape = spec.shape;
  DecodeWorkspaceLayout layout = decodeWorkspaceLayout(spec, 3, 5);
  size_t partialOut = size_t(5) * 3 * 128 * 512 * 4;
  EXPECT_EQ(layout.partialOut, 0u);
  EXPECT_EQ(layout.partialLse, partialOut);
  EXPECT_EQ(layout.splitBounds % 256, 0u);
  EXPECT_GE(layout.splitBounds, layout.partialLse + 5 * 3 * 128 * 4);
  EXPECT_EQ(layout.totalBytes, layout.splitBounds + 3 * 6 * 4);
  // The ABI's float count is the two f32 sections without padding.
  EXPECT_LE(static_cast<size_t>(decodeWorkspaceFloats(shape, 3, 5)) * 4,
            layout.splitBounds);

  // Odd sizes still give aligned sections.
  shape.numHeads = 3;
  shape.latentDim = 48;
  layout = decodeWorkspaceLayout(spec, 1, 1);
  EXPECT_EQ(layout.partialLse % 256, 0u);
  EXPECT_EQ(layout.splitBounds % 256, 0u);
}

TEST(GpuDecode, SeesawWorkspaceHasACounterPerRowBlockBehindTheBounds) {
  DecodeKernelSpec spec;
  spec.chip = Chip::SM90a;
  spec.shape.numHeads = 128;
  spec.shape.queryRows = 2;
  spec.tiling = chooseDecodeTiling(spec.chip, spec.shape);
  ASSERT_TRUE(spec.tiling.seesaw);
  DecodeWorkspaceLayout layout = decodeWorkspaceLayout(spec, 3, 5);
  // 256 rows per request in blocks of 64: 4 counters per request.
  EXPECT_EQ(layout.numCounters, 3 * 4);
  EXPECT_EQ(layout.counters, layout.splitBounds + 3 * 6 * 4);
  EXPECT_EQ(layout.totalBytes, layout.counters + 3 * 4 * 4);
  EXPECT_EQ(decodeRowBlocks(spec.shape, spec.tiling), 4);
  EXPECT_TRUE(decodeCombinesInKernel(spec.chip, spec.shape, spec.tiling, 5));
  EXPECT_FALSE(decodeCombinesInKernel(spec.chip, spec.shape, spec.tiling, 1));
  // One piece: nothing to merge, no counters.
  EXPECT_EQ(decodeWorkspaceLayout(spec, 3, 1).numCounters, 0);
  EXPECT_EQ(decodeKernelNumParams(spec.chip, spec.shape, spec.tiling),
            kDecodeSeesawNumParams);

  // The pipelined build without the seesaw schedule never merges.
  spec.tiling.seesaw = false;
  EXPECT_EQ(decodeWorkspaceLayout(spec, 3, 5).numCounters, 0);
  EXPECT_FALSE(decodeCombinesInKernel(spec.chip, spec.shape, spec.tiling, 5));
}

TEST(GpuDecode, MmaSyncDecodeMergesAsTheLastPieceOfUniformShapes) {
  DecodeKernelSpec spec;
  spec.chip = Chip::SM90a;
  spec.shape.numHeads = 16;
  spec.shape.kvFormat = CacheFormat::FP8E4M3;
  spec.tiling = {16, 4, 64, 2};
  EXPECT_TRUE(decodeMergesAsLastPiece(spec.chip, spec.shape, spec.tiling));
  EXPECT_TRUE(decodeCombinesInKernel(spec.chip, spec.shape, spec.tiling, 2));
  EXPECT_FALSE(decodeCombinesInKernel(spec.chip, spec.shape, spec.tiling, 1));
  // One row block of 16 rows per request: a counter each.
  EXPECT_EQ(decodeWorkspaceLayout(spec, 7, 2).numCounters, 7);
  EXPECT_EQ(decodeWorkspaceLayout(spec, 7, 1).numCounters, 0);
  // The eleven shared parameters, kv_scale, then counters, out and lse.
  EXPECT_EQ(decodeKernelNumParams(spec.chip, spec.shape, spec.tiling),
            kDecodePartialNumParams + 1 + kDecodeCombineNumParams);

  // A varlen image keeps mla_combine (its rows are token-packed).
  spec.shape.varlen = true;
  EXPECT_FALSE(decodeCombinesInKernel(spec.chip, spec.shape, spec.tiling, 2));
  EXPECT_EQ(decodeKernelNumParams(spec.chip, spec.shape, spec.tiling),
            kDecodePartialNumParams + 1 + 2);
  // So does sm_100a's kernel.
  spec.shape.varlen = false;
  spec.chip = Chip::SM100a;
  EXPECT_FALSE(decodeCombinesInKernel(spec.chip, spec.shape, spec.tiling, 2));
  EXPECT_EQ(decodeKernelNumParams(spec.chip, spec.shape, spec.tiling),
            kDecodePartialNumParams + 1);
}

TEST(GpuDecode, UniformBoundsCoverEachRequestInAlignedPieces) {
  llvm::Expected<SplitBounds> bounds =
      planUniformBounds({0, 1, 65, 8191}, 4, 64);
  ASSERT_TRUE(static_cast<bool>(bounds)) << llvm::toString(bounds.takeError());
  EXPECT_EQ(bounds->numSplits, 4);
  std::vector<int32_t> expected = {
      0, 0,    0,    0,    0,    // empty request: every piece empty
      0, 1,    1,    1,    1,    // one token: one piece
      0, 64,   65,   65,   65,   // ceil(65/4) = 17 -> 64
      0, 2048, 4096, 6144, 8191, // ceil(8191/4) = 2048
  };
  EXPECT_EQ(bounds->bounds, expected);
}

TEST(GpuDecode, UniformBoundsRejectBadCounts) {
  EXPECT_TRUE(contains(errorText(planUniformBounds({1}, 0, 64).takeError()),
                       "number of splits must be in [1, 65535]"));
  EXPECT_TRUE(contains(errorText(planUniformBounds({1}, 65536, 64).takeError()),
                       "65536"));
  EXPECT_TRUE(contains(errorText(planUniformBounds({-3}, 2, 64).takeError()),
                       "seq_lens[0] = -3 is negative"));
}

TEST(GpuDecode, CapacityBoundsIgnoreLengths) {
  llvm::Expected<SplitBounds> bounds = planCapacityBounds(2, 256, 2, 64);
  ASSERT_TRUE(static_cast<bool>(bounds)) << llvm::toString(bounds.takeError());
  EXPECT_EQ(bounds->bounds, (std::vector<int32_t>{0, 128, 256, 0, 128, 256}));
}

TEST(GpuDecode, PlannedBoundsFollowThePolicy) {
  DecodeKernelSpec spec = deepSeekSpec();
  std::vector<int32_t> lens = {0, 1, 4096, 8191};

  llvm::Expected<SplitBounds> invariant = planBounds(
      lens,
      decodePlanOptions(spec, mla::plan::SplitPolicy::BatchInvariant, 132));
  ASSERT_TRUE(static_cast<bool>(invariant));
  EXPECT_EQ(invariant->numSplits, 1);
  EXPECT_EQ(invariant->bounds,
            (std::vector<int32_t>{0, 0, 0, 1, 0, 4096, 0, 8191}));

  // vLLM's count: next_pow2(8191 / 512) = 16 pieces for every request.
  llvm::Expected<SplitBounds> heuristic = planBounds(
      lens, decodePlanOptions(spec, mla::plan::SplitPolicy::Heuristic, 132));
  ASSERT_TRUE(static_cast<bool>(heuristic));
  EXPECT_EQ(heuristic->numSplits, 16);
  EXPECT_EQ(heuristic->bounds.size(), lens.size() * 17);

  llvm::Expected<SplitBounds> balanced = planBounds(
      lens, decodePlanOptions(spec, mla::plan::SplitPolicy::Balanced, 132));
  ASSERT_TRUE(static_cast<bool>(balanced));
  for (size_t b = 0; b < lens.size(); ++b) {
    const int32_t *row = &balanced->bounds[b * (balanced->numSplits + 1)];
    EXPECT_EQ(row[0], 0);
    EXPECT_EQ(row[balanced->numSplits], lens[b]);
  }

  mla::plan::SplitPlanOptions options =
      decodePlanOptions(spec, mla::plan::SplitPolicy::Balanced, 132);
  EXPECT_EQ(options.numHeadsQ, 128);
  EXPECT_EQ(options.rowsPerCta, spec.tiling.rowsPerCta);
  options.numSms = 0;
  llvm::Expected<SplitBounds> bad = planBounds(lens, options);
  ASSERT_FALSE(static_cast<bool>(bad));
  EXPECT_TRUE(contains(llvm::toString(bad.takeError()), "numSms"));
}

TEST(GpuDecode, SeqLensAreCheckedAgainstCapacityAndQueryRows) {
  DecodeKernelSpec spec = deepSeekSpec(16, 2, /*causal=*/true);
  EXPECT_FALSE(static_cast<bool>(checkSeqLens(spec, {0, 2, 128}, 2)));
  EXPECT_TRUE(contains(errorText(checkSeqLens(spec, {0, 129}, 2)),
                       "seq_lens[1] = 129 exceeds the block table's capacity "
                       "128 (2 pages of 64)"));
  EXPECT_TRUE(contains(errorText(checkSeqLens(spec, {1}, 2)),
                       "causal decode needs seq_lens[0] = 1 >= s_q = 2"));
  EXPECT_TRUE(contains(errorText(checkSeqLens(spec, {-1}, 2)), "negative"));
  spec.shape.causal = false;
  EXPECT_FALSE(static_cast<bool>(checkSeqLens(spec, {1}, 2)));
}

DecodeArgs validArgs(const DecodeKernelSpec &spec) {
  DecodeArgs args;
  args.q = 0x1000;
  args.cache = 0x2000;
  args.blockTable = 0x3000;
  args.seqLens = 0x4000;
  args.out = 0x5000;
  args.lse = 0x6000;
  args.workspace = 0x7000;
  args.batch = 4;
  args.maxPages = 8;
  args.numPages = 32;
  args.numSplits = 3;
  args.softmaxScale = 0.125f;
  args.workspaceBytes = decodeWorkspaceLayout(spec, 4, 3).totalBytes;
  return args;
}

TEST(GpuDecode, ArgumentsAreValidatedWithoutAGpu) {
  DecodeKernelSpec spec = deepSeekSpec();
  EXPECT_FALSE(static_cast<bool>(checkDecodeArgs(spec, validArgs(spec))));

  auto rejects = [&](auto mutate, llvm::StringRef part) {
    DecodeArgs args = validArgs(spec);
    mutate(args);
    std::string message = errorText(checkDecodeArgs(spec, args));
    EXPECT_TRUE(contains(message, part)) << message;
  };
  rejects([](DecodeArgs &a) { a.q = 0; }, "device pointer q is null");
  rejects([](DecodeArgs &a) { a.lse = 0; }, "device pointer lse is null");
  rejects([](DecodeArgs &a) { a.cache += 8; }, "cache is not 16-byte aligned");
  rejects([](DecodeArgs &a) { a.seqLens += 2; },
          "seq_lens is not 4-byte aligned");
  rejects([](DecodeArgs &a) { a.batch = 0; },
          "batch size must be in [1, 65535]");
  rejects([](DecodeArgs &a) { a.batch = 70000; }, "got 70000");
  rejects([](DecodeArgs &a) { a.maxPages = 0; }, "at least one column");
  rejects([](DecodeArgs &a) { a.maxPages = int64_t(1) << 30; },
          "fits in int32");
  rejects([](DecodeArgs &a) { a.numPages = 0; }, "between 1 and");
  rejects([](DecodeArgs &a) { a.numSplits = 0; }, "number of splits");
  rejects([](DecodeArgs &a) { a.workspaceBytes -= 1; },
          "4 requests in 3 pieces need");
  rejects([](DecodeArgs &a) { a.softmaxScale = 0; },
          "softmax_scale must be positive and finite");
  rejects([](DecodeArgs &a) { a.softmaxScale = -1; },
          "softmax_scale must be positive and finite");
  rejects([](DecodeArgs &a) { a.softmaxScale = INFINITY; },
          "softmax_scale must be positive and finite");
  rejects([](DecodeArgs &a) { a.softmaxScale = NAN; },
          "softmax_scale must be positive and finite");
  // A device plan's workspace is laid out for its maximum batch.
  rejects([](DecodeArgs &a) { a.layoutBatch = 3; },
          "the batch of 4 must fit in it");
  rejects([](DecodeArgs &a) { a.layoutBatch = 5; },
          "5 requests in 3 pieces need");
}

TEST(GpuDecode, KvScaleIsPassedExactlyForFp8E4M3) {
  DecodeKernelSpec spec = deepSeekSpec();
  DecodeArgs args = validArgs(spec);
  args.kvScale = 0x1000;
  EXPECT_TRUE(contains(errorText(checkDecodeArgs(spec, args)),
                       "this kernel reads no scale: pass 0"));
  spec.shape.kvFormat = CacheFormat::FP8DsMla;
  spec.tiling = chooseDecodeTiling(spec.chip, spec.shape);
  args = validArgs(spec);
  EXPECT_FALSE(static_cast<bool>(checkDecodeArgs(spec, args)));
  args.kvScale = 0x1000;
  EXPECT_TRUE(contains(errorText(checkDecodeArgs(spec, args)),
                       "this kernel reads per-row scales: pass 0"));
  spec.shape.kvFormat = CacheFormat::FP8E4M3;
  spec.tiling = chooseDecodeTiling(spec.chip, spec.shape);
  args = validArgs(spec);
  EXPECT_TRUE(contains(errorText(checkDecodeArgs(spec, args)),
                       "kv_scale, a 4-byte aligned device pointer to one "
                       "float32; got null"));
  args.kvScale = 0x1002;
  EXPECT_TRUE(
      contains(errorText(checkDecodeArgs(spec, args)), "got an unaligned one"));
  args.kvScale = 0x1000;
  EXPECT_FALSE(static_cast<bool>(checkDecodeArgs(spec, args)));
}

TEST(GpuDecode, DevicePlanArgumentsAreValidatedWithoutAGpu) {
  DecodeKernelSpec spec = deepSeekSpec();
  DecodePlanArgs valid;
  valid.seqLens = 0x1000;
  valid.blockTable = 0x2000;
  valid.workspace = 0x3000;
  valid.status = 0x4000;
  valid.batch = 3;
  valid.maxBatch = 8;
  valid.maxPages = 16;
  valid.numPages = 64;
  valid.numSplits = 4;
  valid.workspaceBytes = decodeWorkspaceLayout(spec, 8, 4).totalBytes;
  EXPECT_FALSE(static_cast<bool>(checkDecodePlanArgs(spec, valid)));

  auto rejects = [&](auto mutate, llvm::StringRef part) {
    DecodePlanArgs args = valid;
    mutate(args);
    std::string message = errorText(checkDecodePlanArgs(spec, args));
    EXPECT_TRUE(contains(message, part)) << message;
  };
  rejects([](DecodePlanArgs &a) { a.status = 0; },
          "device pointer status is null");
  rejects([](DecodePlanArgs &a) { a.seqLens += 2; },
          "seq_lens is not 4-byte aligned");
  rejects([](DecodePlanArgs &a) { a.batch = 9; },
          "laid out for 8 requests; the batch of 9");
  rejects([](DecodePlanArgs &a) { a.workspaceBytes -= 4; },
          "8 requests in 4 pieces need");
  rejects([](DecodePlanArgs &a) { a.numSplits = 0; }, "number of splits");
  rejects([](DecodePlanArgs &a) { a.maxPages = 0; }, "at least one column");
}

TEST(GpuDecode, VarlenArgumentsNeedQueryStartLocAndFitTheWorkspace) {
  DecodeKernelSpec uniform = deepSeekSpec();
  DecodeArgs given = validArgs(uniform);
  given.queryStartLoc = 0x9000;
  given.numTokens = 3;
  EXPECT_TRUE(contains(errorText(checkDecodeArgs(uniform, given)),
                       "varlen decodes need a varlen=1 spec"));

  DecodeKernelSpec spec = deepSeekSpec();
  spec.shape.queryRows = 4;
  spec.shape.varlen = true;
  spec.tiling = chooseDecodeTiling(spec.chip, spec.shape);
  DecodeArgs valid = validArgs(spec);
  valid.queryStartLoc = 0x9000;
  valid.numTokens = 4 * 4; // B * Sq: the workspace's token capacity
  EXPECT_FALSE(static_cast<bool>(checkDecodeArgs(spec, valid)));
  auto rejects = [&](auto mutate, llvm::StringRef part) {
    DecodeArgs args = valid;
    mutate(args);
    std::string message = errorText(checkDecodeArgs(spec, args));
    EXPECT_TRUE(contains(message, part)) << message;
  };
  rejects([](DecodeArgs &a) { a.queryStartLoc = 0; },
          "device pointer query_start_loc is null");
  rejects([](DecodeArgs &a) { a.queryStartLoc += 2; },
          "query_start_loc is not 4-byte aligned");
  rejects([](DecodeArgs &a) { a.numTokens = 17; },
          "holds at most 16 tokens, got T = 17");
}

TEST(GpuDecode, PlanStatusNamesTheBrokenRule) {
  EXPECT_TRUE(
      contains(errorText(decodePlanStatusError(kDecodePlanBadQueryStartLoc)),
               "query_start_loc did not start at 0"));
  EXPECT_FALSE(static_cast<bool>(decodePlanStatusError(0)));
  std::string lens = errorText(decodePlanStatusError(kDecodePlanBadSeqLen));
  EXPECT_TRUE(contains(lens, "a seq_lens value was outside")) << lens;
  EXPECT_FALSE(contains(lens, "block table entry")) << lens;
  std::string both = errorText(
      decodePlanStatusError(kDecodePlanBadSeqLen | kDecodePlanBadPage));
  EXPECT_TRUE(contains(both, "seq_lens value")) << both;
  EXPECT_TRUE(contains(both, "a block table entry a request reads was "
                             "outside [0, pages in the cache)"))
      << both;
  EXPECT_TRUE(contains(both, "planned as empty")) << both;
}

TEST(GpuDecode, CacheMissNamesTheAotCommand) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("mla-gpudecode", dir));
  KernelCache cache(std::string(dir.str()));
  DecodeKernelSpec spec = deepSeekSpec();

  llvm::Expected<GpuDecoder> decoder = GpuDecoder::fromCache(spec, cache);
  ASSERT_FALSE(static_cast<bool>(decoder));
  std::string message = llvm::toString(decoder.takeError());
  EXPECT_TRUE(contains(message, "mla-aot --cache-dir " + std::string(dir) +
                                    " --spec \"" + toString(spec) + "\""))
      << message;
  EXPECT_TRUE(contains(message, cacheKeyFor(spec))) << message;

  // A fallback's failure is the load's failure, and nothing is stored.
  decoder = GpuDecoder::fromCache(
      spec, cache,
      [](const DecodeKernelSpec &) -> llvm::Expected<std::vector<char>> {
        return llvm::createStringError("compiler unavailable");
      });
  ASSERT_FALSE(static_cast<bool>(decoder));
  EXPECT_EQ(llvm::toString(decoder.takeError()), "compiler unavailable");
  EXPECT_FALSE(cache.lookup(cacheKeyFor(spec), toString(spec)).has_value());
  llvm::sys::fs::remove_directories(dir);
}

TEST(GpuDecode, UnusableTilingIsRejectedBeforeLoading) {
  DecodeKernelSpec spec = deepSeekSpec();
  spec.tiling.kvBlock = 48; // does not divide the 64-token page
  llvm::Expected<GpuDecoder> decoder =
      GpuDecoder::create(spec, std::vector<char>{'x'});
  ASSERT_FALSE(static_cast<bool>(decoder));
  std::string message = llvm::toString(decoder.takeError());
  EXPECT_TRUE(contains(message, "is unusable")) << message;
}

TEST(GpuDecode, GridSplitsFillTheSmsWithoutExtraWaves) {
  auto spec = [](int64_t n) {
    DecodeKernelSpec s;
    s.shape.numHeads = n;
    s.tiling = chooseDecodeTiling(s.chip, s.shape);
    return s;
  };
  // One CTA per SM for both DeepSeek tiles.
  EXPECT_EQ(decodeCtasPerSm(spec(128)), 1);
  EXPECT_EQ(decodeCtasPerSm(spec(16)), 1);
  // The requests' row blocks already fill 132 SMs in whole waves: 1 piece.
  EXPECT_EQ(chooseGridSplits(spec(128), 132, 8192, 132), 1);
  EXPECT_EQ(chooseGridSplits(spec(128), 64, 4096, 132), 1);
  EXPECT_EQ(chooseGridSplits(spec(16), 128, 8192, 132), 1);
  // 64 or 32 requests leave half the SMs idle: 2 pieces.
  EXPECT_EQ(chooseGridSplits(spec(128), 32, 16384, 132), 2);
  EXPECT_EQ(chooseGridSplits(spec(16), 64, 32768, 132), 2);
  // One long request spreads over many SMs, never beyond one page a piece.
  int64_t s = chooseGridSplits(spec(16), 1, 32768, 132);
  EXPECT_GE(s, 32);
  EXPECT_LE(s, 64);
  EXPECT_EQ(chooseGridSplits(spec(16), 1, 100, 132), 2);
  EXPECT_EQ(chooseGridSplits(spec(16), 4, 0, 132), 1);
}

} // namespace

namespace {

TEST(GpuDecode, PersistentSeesawWalksABalancedPlan) {
  DecodeKernelSpec spec;
  std::string error;
  ASSERT_TRUE(parseDecodeKernelSpec(
      "decode chip=sm_90a N=128 Sq=2 L=512 R=64 page=64 dtype=bf16 causal=1 "
      "tile=64x2x64x2b",
      spec, error))
      << error;
  EXPECT_TRUE(spec.tiling.persistent && spec.tiling.seesaw);
  EXPECT_EQ(toString(spec),
            "decode chip=sm_90a N=128 Sq=2 L=512 R=64 page=64 dtype=bf16 "
            "causal=1 tile=64x2x64x2b");
  EXPECT_EQ(checkDecodeTiling(spec.chip, spec.shape, spec.tiling), "");
  // Schedule and cu_splits after the seesaw's sixteen; the "Q empty"
  // barrier still fits the seesaw's barrier section.
  EXPECT_EQ(decodeKernelNumParams(spec.chip, spec.shape, spec.tiling),
            kDecodeSeesawNumParams + kDecodePersistentExtraParams);
  DecodeTiling seesaw = spec.tiling;
  seesaw.persistent = false;
  EXPECT_EQ(decodeSharedBytes(spec.chip, spec.shape, spec.tiling),
            decodeSharedBytes(spec.chip, spec.shape, seesaw));
  // Counters for every row block even with one piece, then cu_splits and
  // the schedule.
  DecodeWorkspaceLayout layout = decodeWorkspaceLayout(spec, 3, 1);
  EXPECT_EQ(layout.numCounters, 3 * 4);
  EXPECT_EQ(layout.cuSplits, layout.counters + 3 * 4 * 4);
  EXPECT_EQ(layout.schedule, layout.cuSplits + 4 * 4);
  EXPECT_EQ(layout.totalBytes,
            layout.schedule +
                kMaxDecodeParts * mla::plan::kScheduleRowSize * 4);

  // planBounds keeps a balanced plan's schedule; 132 SMs over 4 row
  // blocks are 33 parts.
  std::vector<int32_t> lens = {8192, 0, 100, 8192};
  llvm::Expected<SplitBounds> bounds = planBounds(
      lens, decodePlanOptions(spec, mla::plan::SplitPolicy::Balanced, 132));
  ASSERT_TRUE(static_cast<bool>(bounds)) << llvm::toString(bounds.takeError());
  EXPECT_EQ(bounds->numSmParts, 33);
  EXPECT_EQ(bounds->schedule.size(), size_t(33 * 8));
  EXPECT_EQ(bounds->cuSplits.size(), lens.size() + 1);
  // Other policies carry no schedule.
  llvm::Expected<SplitBounds> grid = planBounds(
      lens, decodePlanOptions(spec, mla::plan::SplitPolicy::Heuristic, 132));
  ASSERT_TRUE(static_cast<bool>(grid));
  EXPECT_EQ(grid->numSmParts, 0);

  // The launch needs the plan's parts; other kernels take none.
  DecodeArgs args;
  args.q = 0x1000, args.cache = 0x2000, args.blockTable = 0x3000;
  args.seqLens = 0x4000, args.out = 0x5000, args.lse = 0x6000;
  args.workspace = 0x7000;
  args.batch = 4, args.maxPages = 128, args.numPages = 512;
  args.numSplits = bounds->numSplits;
  args.softmaxScale = 0.125f;
  args.workspaceBytes =
      decodeWorkspaceLayout(spec, 4, bounds->numSplits).totalBytes;
  args.numSmParts = bounds->numSmParts;
  EXPECT_FALSE(static_cast<bool>(checkDecodeArgs(spec, args)));
  args.numSmParts = 0;
  std::string message = llvm::toString(checkDecodeArgs(spec, args));
  EXPECT_TRUE(llvm::StringRef(message).contains("needs the SM parts"))
      << message;
  args.numSmParts = kMaxDecodeParts + 1;
  message = llvm::toString(checkDecodeArgs(spec, args));
  EXPECT_TRUE(llvm::StringRef(message).contains("in [1, 1024]")) << message;
  DecodeKernelSpec plain = spec;
  plain.tiling.persistent = false;
  args.numSmParts = 33;
  args.workspaceBytes =
      decodeWorkspaceLayout(plain, 4, bounds->numSplits).totalBytes;
  message = llvm::toString(checkDecodeArgs(plain, args));
  EXPECT_TRUE(llvm::StringRef(message).contains("this kernel takes 0"))
      << message;
}

TEST(GpuDecode, PersistentSeesawIsBf16UniformSm90Only) {
  DecodeKernelSpec spec;
  spec.tiling = {64, 2, 64, 2, true, true, true, true};
  EXPECT_EQ(checkDecodeTiling(spec.chip, spec.shape, spec.tiling), "");
  DecodeShape fp8 = spec.shape;
  fp8.kvFormat = CacheFormat::FP8E4M3;
  EXPECT_TRUE(llvm::StringRef(checkDecodeTiling(spec.chip, fp8, spec.tiling))
                  .contains("tile suffix b"));
  DecodeShape varlen = spec.shape;
  varlen.varlen = true;
  EXPECT_FALSE(checkDecodeTiling(spec.chip, varlen, spec.tiling).empty());
  DecodeTiling noSeesaw = spec.tiling;
  noSeesaw.seesaw = false;
  EXPECT_TRUE(
      llvm::StringRef(checkDecodeTiling(spec.chip, spec.shape, noSeesaw))
          .contains("tile suffix b"));
}

} // namespace
