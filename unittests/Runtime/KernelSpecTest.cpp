//===- KernelSpecTest.cpp - tests of kernel specs and their cache keys ----===//
//
// The spec text is hashed into the kernel-cache key, so it must round-trip
// exactly, print one way only, and change the key when any field changes (a
// stale hit would launch a kernel baked for another shape). Malformed text
// must be rejected with a message, never read as a default.
//
//===----------------------------------------------------------------------===//

#include "mla/Runtime/Gpu/KernelSpec.h"
#include "mla/Runtime/Gpu/KernelCache.h"
#include "gtest/gtest.h"
#include <cstring>
#include <set>
#include <vector>

using namespace mla::gpu;

namespace {

const char *const kDeepSeek =
    "decode chip=sm_90a N=128 Sq=1 L=512 R=64 page=64 dtype=bf16 causal=0 "
    "scale=0x3d93cd3a tile=64x2x32x2";

DecodeKernelSpec parseOrDie(const std::string &text) {
  DecodeKernelSpec spec;
  std::string error;
  EXPECT_TRUE(parseDecodeKernelSpec(text, spec, error)) << error;
  return spec;
}

std::string parseError(const std::string &text) {
  DecodeKernelSpec spec;
  std::string error;
  EXPECT_FALSE(parseDecodeKernelSpec(text, spec, error)) << text;
  return error;
}

TEST(KernelSpecTest, DefaultSpecPrintsTheDocumentedText) {
  DecodeKernelSpec spec;
  spec.tiling = chooseDecodeTiling(spec.chip, spec.shape);
  EXPECT_EQ(toString(spec), kDeepSeek);
}

TEST(KernelSpecTest, RoundTripsExactly) {
  DecodeKernelSpec spec;
  spec.shape.numHeads = 16;
  spec.shape.queryRows = 2;
  spec.shape.latentDim = 256;
  spec.shape.ropeDim = 64;
  spec.shape.pageSize = 32;
  spec.shape.elem = ElemType::F16;
  spec.shape.causal = true;
  spec.shape.scale = 0.1f / 3.0f; // no short decimal form
  spec.tiling = chooseDecodeTiling(spec.chip, spec.shape);
  std::string text = toString(spec);
  DecodeKernelSpec back = parseOrDie(text);
  EXPECT_EQ(toString(back), text);
  EXPECT_EQ(back.chip, spec.chip);
  EXPECT_EQ(back.shape.numHeads, 16);
  EXPECT_EQ(back.shape.queryRows, 2);
  EXPECT_EQ(back.shape.latentDim, 256);
  EXPECT_EQ(back.shape.ropeDim, 64);
  EXPECT_EQ(back.shape.pageSize, 32);
  EXPECT_EQ(back.shape.elem, ElemType::F16);
  EXPECT_TRUE(back.shape.causal);
  EXPECT_EQ(std::memcmp(&back.shape.scale, &spec.shape.scale, sizeof(float)),
            0);
  EXPECT_EQ(back.tiling.rowsPerCta, spec.tiling.rowsPerCta);
  EXPECT_EQ(back.tiling.warpsN, spec.tiling.warpsN);
  EXPECT_EQ(back.tiling.kvBlock, spec.tiling.kvBlock);
  EXPECT_EQ(back.tiling.stages, spec.tiling.stages);
  EXPECT_EQ(cacheKeyFor(back), cacheKeyFor(spec));

  DecodeKernelSpec sm100;
  sm100.chip = Chip::SM100a;
  sm100.tiling = chooseDecodeTiling(sm100.chip, sm100.shape);
  DecodeKernelSpec sm100Back = parseOrDie(toString(sm100));
  EXPECT_EQ(sm100Back.chip, Chip::SM100a);
  EXPECT_EQ(toString(sm100Back), toString(sm100));
}

TEST(KernelSpecTest, KeysInAnyOrderAndOptionalTile) {
  DecodeKernelSpec spec = parseOrDie(
      "decode tile=64x2x32x2 scale=0x3d93cd3a causal=0 dtype=bf16 page=64 "
      "R=64 L=512 Sq=1 N=128 chip=sm90");
  EXPECT_EQ(toString(spec), kDeepSeek);
  // Without a tile the spec gets chooseDecodeTiling's.
  DecodeKernelSpec chosen = parseOrDie(
      "decode chip=sm_90a N=16 Sq=1 L=512 R=64 page=64 dtype=bf16 causal=0 "
      "scale=0x3d93cd3a");
  DecodeTiling expected = chooseDecodeTiling(Chip::SM90a, chosen.shape);
  EXPECT_EQ(chosen.tiling.rowsPerCta, expected.rowsPerCta);
  EXPECT_EQ(chosen.tiling.warpsN, expected.warpsN);
  EXPECT_EQ(chosen.tiling.kvBlock, expected.kvBlock);
  EXPECT_EQ(chosen.tiling.stages, expected.stages);
}

TEST(KernelSpecTest, DecimalScaleIsTheNearestFloat) {
  DecodeKernelSpec spec = parseOrDie(
      "decode chip=sm_90a N=128 Sq=1 L=512 R=64 page=64 dtype=bf16 causal=0 "
      "scale=0.0721687836");
  EXPECT_EQ(toString(spec), kDeepSeek);
}

TEST(KernelSpecTest, PipelineAndToolchain) {
  DecodeKernelSpec spec = parseOrDie(kDeepSeek);
  EXPECT_EQ(pipelineFor(spec), "mla-to-nvvm{chip=sm_90a format=bin}");
  spec.chip = Chip::SM100a;
  spec.tiling = chooseDecodeTiling(spec.chip, spec.shape);
  EXPECT_EQ(pipelineFor(spec), "mla-to-nvvm{chip=sm_100a format=bin}");
  std::string version = toolchainVersion();
  EXPECT_EQ(version.rfind("mlir-", 0), 0u) << version;
  EXPECT_NE(version.find(";cuda-"), std::string::npos) << version;
}

TEST(KernelSpecTest, KeyIsStable) {
  DecodeKernelSpec spec = parseOrDie(kDeepSeek);
  std::string key = cacheKeyFor(spec);
  EXPECT_EQ(key.size(), 32u);
  EXPECT_EQ(key.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(cacheKeyFor(parseOrDie(kDeepSeek)), key);
  EXPECT_EQ(key, computeKernelCacheKey(kDeepSeek,
                                       "mla-to-nvvm{chip=sm_90a format=bin}",
                                       toolchainVersion(), "sm_90a"));
}

TEST(KernelSpecTest, KeyChangesWithEveryField) {
  const DecodeKernelSpec base = parseOrDie(kDeepSeek);
  std::vector<DecodeKernelSpec> variants;
  auto vary = [&](auto change) {
    DecodeKernelSpec spec = base;
    change(spec);
    variants.push_back(spec);
  };
  vary([](DecodeKernelSpec &s) { s.chip = Chip::SM100a; });
  vary([](DecodeKernelSpec &s) { s.shape.numHeads = 64; });
  vary([](DecodeKernelSpec &s) { s.shape.queryRows = 2; });
  vary([](DecodeKernelSpec &s) { s.shape.latentDim = 448; });
  vary([](DecodeKernelSpec &s) { s.shape.ropeDim = 128; });
  vary([](DecodeKernelSpec &s) { s.shape.pageSize = 128; });
  vary([](DecodeKernelSpec &s) { s.shape.elem = ElemType::F16; });
  vary([](DecodeKernelSpec &s) { s.shape.causal = true; });
  vary([](DecodeKernelSpec &s) {
    // The next f32 up: one ulp must change the key.
    uint32_t bits;
    std::memcpy(&bits, &s.shape.scale, 4);
    ++bits;
    std::memcpy(&s.shape.scale, &bits, 4);
  });
  vary([](DecodeKernelSpec &s) { s.tiling.rowsPerCta = 32; });
  vary([](DecodeKernelSpec &s) { s.tiling.warpsN = 4; });
  vary([](DecodeKernelSpec &s) { s.tiling.kvBlock = 64; });
  vary([](DecodeKernelSpec &s) { s.tiling.stages = 3; });

  std::set<std::string> keys = {cacheKeyFor(base)};
  for (const DecodeKernelSpec &spec : variants)
    EXPECT_TRUE(keys.insert(cacheKeyFor(spec)).second) << toString(spec);
}

TEST(KernelSpecTest, MalformedTextIsRejected) {
  const std::string rest =
      " N=128 Sq=1 L=512 R=64 page=64 dtype=bf16 causal=0 scale=0x3d93cd3a";
  EXPECT_NE(parseError("").find("starts with its family 'decode'"),
            std::string::npos);
  EXPECT_NE(parseError("prefill chip=sm_90a" + rest).find("'decode'"),
            std::string::npos);
  EXPECT_NE(parseError("decode chip=sm_80" + rest).find("unknown chip 'sm_80'"),
            std::string::npos);
  EXPECT_NE(parseError("decode chip=sm_90a N=128").find("missing Sq, L, R"),
            std::string::npos);
  EXPECT_NE(parseError("decode chip=sm_90a N=64" + rest).find("given twice"),
            std::string::npos);
  EXPECT_NE(parseError("decode chip=sm_90a heads=4" + rest)
                .find("unknown key 'heads'"),
            std::string::npos);
  EXPECT_NE(parseError("decode chip=sm_90a oops" + rest).find("key=value"),
            std::string::npos);
  std::string shape =
      " Sq=1 L=512 R=64 page=64 dtype=bf16 causal=0 scale=0x3d93cd3a";
  for (const char *bad : {"N=0", "N=-4", "N=12x", "N=", "N=1.5"})
    EXPECT_NE(parseError(std::string("decode chip=sm_90a ") + bad + shape)
                  .find("N must be an integer >= 1"),
              std::string::npos)
        << bad;
  std::string noScale =
      "decode chip=sm_90a N=128 Sq=1 L=512 R=64 page=64 dtype=bf16 causal=0 ";
  for (const char *bad :
       {"scale=0x3d93cd3", "scale=0x3d93cd3g", "scale=-0.1", "scale=0",
        "scale=inf", "scale=0x7fc00000", "scale=0x1p-4", "scale=0.1s"})
    EXPECT_NE(parseError(noScale + bad).find("scale must be"),
              std::string::npos)
        << bad;
  EXPECT_NE(parseError(noScale + "scale=0.1 dtype=fp8").find("given twice"),
            std::string::npos);
  EXPECT_NE(parseError("decode chip=sm_90a N=128 Sq=1 L=512 R=64 page=64 "
                       "dtype=fp8 causal=0 scale=0.1")
                .find("dtype must be bf16 or f16"),
            std::string::npos);
  EXPECT_NE(parseError("decode chip=sm_90a N=128 Sq=1 L=512 R=64 page=64 "
                       "dtype=bf16 causal=yes scale=0.1")
                .find("causal must be 0 or 1"),
            std::string::npos);
}

TEST(KernelSpecTest, UnusableTilingIsRejected) {
  std::string shape = "decode chip=sm_90a N=128 Sq=1 L=512 R=64 page=64 "
                      "dtype=bf16 causal=0 scale=0x3d93cd3a";
  for (const char *bad : {" tile=64x2x32", " tile=64x2x32x2x1",
                          " tile=64x0x32x2", " tile=64xx32x2", " tile=big"})
    EXPECT_NE(parseError(shape + bad).find("tile must be"), std::string::npos)
        << bad;
  // Well-formed but checkDecodeTiling refuses it: a KV block larger than a
  // page.
  EXPECT_NE(parseError(shape + " tile=64x2x128x2")
                .find("the given tile cannot run this shape on sm_90a: "
                      "kv_block = 128 must divide the page size 64"),
            std::string::npos);
  // No tiling can run a latent width that is not a multiple of 16.
  EXPECT_NE(parseError("decode chip=sm_90a N=128 Sq=1 L=500 R=64 page=64 "
                       "dtype=bf16 causal=0 scale=0x3d93cd3a")
                .find("the default tile cannot run this shape on sm_90a: "),
            std::string::npos);
}

} // namespace
