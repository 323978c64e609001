//===- KernelSpecTest.cpp - tests of kernel specs and their cache keys ----===//
//
// The spec text is hashed into the kernel-cache key, so it must round-trip
// exactly, print one way only, and change the key when any field changes (a
// stale hit would launch a kernel baked for another shape). Malformed text
// must be rejected with a message, never read as a default.
//
//===----------------------------------------------------------------------===//

#include "mla/Contract/KernelSpec.h"
#include "mla/GpuRuntime/KernelCache.h"
#include "gtest/gtest.h"
#include <cstring>
#include <set>
#include <vector>

using namespace mla::gpu;

namespace {

const char *const kDeepSeek =
    "decode chip=sm_90a N=128 Sq=1 L=512 R=64 page=64 dtype=bf16 causal=0 "
    "tile=64x2x64x2s";

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

TEST(KernelSpecTest, VarlenIsWrittenOnlyWhenSetAndSm90Only) {
  DecodeKernelSpec spec;
  spec.shape.queryRows = 8;
  spec.shape.causal = true;
  spec.shape.varlen = true;
  // The varlen default (not the seesaw build, which is uniform only) also
  // runs the uniform shape.
  spec.tiling = chooseDecodeTiling(spec.chip, spec.shape);
  EXPECT_FALSE(spec.tiling.seesaw);
  DecodeKernelSpec uniformSpec = spec;
  uniformSpec.shape.varlen = false;
  std::string uniform = toString(uniformSpec);
  EXPECT_EQ(uniform.find("varlen"), std::string::npos);
  std::string text = toString(spec);
  EXPECT_EQ(text, uniform + " varlen=1");
  DecodeKernelSpec back = parseOrDie(text);
  EXPECT_TRUE(back.shape.varlen);
  EXPECT_NE(cacheKeyFor(back), cacheKeyFor(parseOrDie(uniform)));
  EXPECT_FALSE(parseOrDie(uniform + " varlen=0").shape.varlen);

  DecodeKernelSpec parsed;
  std::string error;
  EXPECT_FALSE(parseDecodeKernelSpec(
      "decode chip=sm_90a N=16 Sq=9 L=512 R=64 page=64 dtype=bf16 causal=1 "
      "varlen=1",
      parsed, error));
  EXPECT_NE(error.find("largest query length Sq = 9 must be in [1, 8]"),
            std::string::npos)
      << error;
  EXPECT_FALSE(parseDecodeKernelSpec(
      "decode chip=sm_100a N=16 Sq=2 L=512 R=64 page=64 dtype=bf16 causal=1 "
      "varlen=1",
      parsed, error));
  EXPECT_NE(error.find("built for sm_90a only"), std::string::npos) << error;
}

// The varlen row mapping is built into the mma.sync and wgmma kernels; the
// pipelined build refuses it by name. Those kernels dequantise fp8 caches, so
// a varlen spec may name an fp8 format: it gets a wgmma or mma.sync tiling.
TEST(KernelSpecTest, VarlenRejectsPipelinedBuildsAndTakesFp8) {
  const std::string varlen = "decode chip=sm_90a N=128 Sq=4 L=512 R=64 "
                             "page=64 dtype=bf16 causal=1 varlen=1";
  EXPECT_TRUE(parseOrDie(varlen + " tile=64x2x64x2w").shape.varlen);
  EXPECT_NE(parseError(varlen + " tile=64x2x64x2p")
                .find("varlen decode (query_start_loc) is not built for the "
                      "pipelined decode"),
            std::string::npos);
  for (const char *format : {"fp8_e4m3", "fp8_ds_mla"}) {
    DecodeKernelSpec spec = parseOrDie(varlen + " format=" + format);
    EXPECT_TRUE(spec.shape.varlen && spec.shape.fp8()) << format;
    EXPECT_FALSE(spec.tiling.pipelined) << format;
  }
  // The same shapes without varlen=1 stay usable.
  EXPECT_TRUE(parseOrDie("decode chip=sm_90a N=128 Sq=4 L=512 R=64 page=64 "
                         "dtype=bf16 causal=1 tile=64x2x64x2p")
                  .tiling.pipelined);
  // A varlen kernel's query_start_loc and T follow the eleven shared
  // parameters and, for fp8_e4m3, kv_scale (KernelABI.h).
  EXPECT_EQ(decodePartialNumParams(parseOrDie(varlen).shape),
            kDecodePartialVarlenNumParams);
  EXPECT_EQ(
      decodePartialNumParams(parseOrDie(varlen + " format=fp8_e4m3").shape),
      kDecodePartialVarlenNumParams + 1);
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

TEST(KernelSpecTest, Fp8CachesAddTheirFormatAndKeepBf16Keys) {
  // A cache of dtype prints no format: bf16/f16 texts and keys are those
  // from before fp8 decode existed.
  DecodeKernelSpec bf16 = parseOrDie(kDeepSeek);
  EXPECT_EQ(toString(bf16), kDeepSeek);
  EXPECT_FALSE(bf16.shape.fp8());

  const std::pair<const char *, CacheFormat> formats[] = {
      {"fp8_e4m3", CacheFormat::FP8E4M3},
      {"fp8_e4m3_token", CacheFormat::FP8E4M3Token},
      {"fp8_ds_mla", CacheFormat::FP8DsMla}};
  std::set<std::string> keys = {cacheKeyFor(bf16)};
  for (auto [name, format] : formats) {
    DecodeKernelSpec spec = parseOrDie(
        std::string("decode chip=sm_90a N=16 Sq=1 L=512 R=64 page=64 "
                    "dtype=bf16 causal=0 format=") +
        name);
    EXPECT_EQ(spec.shape.kvFormat, format);
    std::string text = toString(spec);
    EXPECT_NE(text.find(std::string(" format=") + name + " tile="),
              std::string::npos)
        << text;
    EXPECT_EQ(toString(parseOrDie(text)), text);
    EXPECT_TRUE(keys.insert(cacheKeyFor(spec)).second) << text;
  }
  // fp8_ds_mla's 656-byte rows leave no room for two raw stages beside the
  // wgmma tiles; at N = 128 its default is the seesaw build, which has none.
  DecodeKernelSpec ds = parseOrDie("decode chip=sm_90a N=128 Sq=1 L=512 R=64 "
                                   "page=64 dtype=bf16 causal=0 "
                                   "format=fp8_ds_mla");
  EXPECT_TRUE(ds.tiling.seesaw);
  EXPECT_LE(decodeSharedBytes(ds.chip, ds.shape, ds.tiling), 227 * 1024);
  EXPECT_NE(parseError(toString(ds).substr(0, toString(ds).rfind(" tile=")) +
                       " tile=64x2x64x2w")
                .find("more than the 232448 a CTA may use"),
            std::string::npos);
  DecodeKernelSpec e4m3 = parseOrDie(
      "decode chip=sm_90a N=128 Sq=1 L=512 R=64 page=64 dtype=bf16 causal=0 "
      "format=fp8_e4m3");
  EXPECT_TRUE(e4m3.tiling.wgmma);
  EXPECT_EQ(decodePartialNumParams(e4m3.shape), kDecodePartialNumParams + 1);
  EXPECT_EQ(decodePartialNumParams(ds.shape), kDecodePartialNumParams);
  // fp8 shrinks what a block reads: 576 and 656 bytes a row, not 1152.
  EXPECT_EQ(e4m3.shape.cacheRowBytes(), 576);
  EXPECT_EQ(ds.shape.cacheRowBytes(), 656);
  EXPECT_EQ(bf16.shape.cacheRowBytes(), 1152);

  EXPECT_NE(parseError("decode chip=sm_90a N=16 Sq=1 L=512 R=64 page=64 "
                       "dtype=bf16 causal=0 format=f32")
                .find("format (the cache's row format"),
            std::string::npos);
  // sm_100a reads fp8_e4m3 and fp8_ds_mla (decode-sm100-fp8.mlir), not
  // fp8_e4m3_token.
  DecodeKernelSpec sm100;
  std::string error;
  EXPECT_TRUE(parseDecodeKernelSpec(
      "decode chip=sm_100a N=128 Sq=1 L=512 R=64 page=128 dtype=bf16 "
      "causal=0 format=fp8_e4m3",
      sm100, error))
      << error;
  EXPECT_EQ(sm100.tiling.kvBlock, 64);
  EXPECT_NE(parseError("decode chip=sm_100a N=128 Sq=1 L=512 R=64 page=128 "
                       "dtype=bf16 causal=0 format=fp8_e4m3_token")
                .find("does not read fp8_e4m3_token caches"),
            std::string::npos);
}

TEST(KernelSpecTest, RawFp8DecodeRules) {
  // The 16-row mma.sync kernel reads fp8_e4m3 and fp8_ds_mla from the raw
  // ring (no KV tile): fp8_ds_mla when each warp's output slice is one
  // 128-column scale tile, with a P tile per scale tile and the tiles'
  // running maxima (128 bytes) in shared memory.
  auto spec = [](const char *format, const char *tile) {
    return parseOrDie(std::string("decode chip=sm_90a N=16 Sq=1 L=512 R=64 "
                                  "page=64 dtype=bf16 causal=0 format=") +
                      format + " tile=" + tile);
  };
  DecodeKernelSpec ds = spec("fp8_ds_mla", "16x4x64x2");
  EXPECT_TRUE(decodeReadsRawFp8(ds.shape, ds.tiling));
  EXPECT_EQ(decodeRawScaleTiles(ds.shape, ds.tiling), 4);
  // Q 16 x 1152, four P tiles of 16 x 144, the row-reduction scratch and
  // the maxima (256 + 128), two raw stages of 64 x 656, and the bulk
  // copies' two mbarriers (a 128-byte section).
  EXPECT_EQ(decodeSharedBytes(ds.chip, ds.shape, ds.tiling),
            16 * 1152 + 4 * 16 * 144 + 256 + 128 + 2 * 64 * 656 + 128);
  // Two CTAs share an SM (228 KB, 1 KB reserved per CTA).
  EXPECT_LE(2 * (decodeSharedBytes(ds.chip, ds.shape, ds.tiling) + 1024),
            228 * 1024);
  EXPECT_EQ(chooseDecodeTiling(ds.chip, ds.shape).kvBlock, 64);
  // Two scale tiles per warp (8 warps over 64 columns, or 2 over 256): the
  // dequantising kernel.
  for (const char *tile : {"16x8x64x3", "16x2x32x2"}) {
    DecodeKernelSpec other = spec("fp8_ds_mla", tile);
    EXPECT_FALSE(decodeReadsRawFp8(other.shape, other.tiling)) << tile;
    EXPECT_EQ(decodeRawScaleTiles(other.shape, other.tiling), 0) << tile;
  }
  DecodeKernelSpec e4m3 = spec("fp8_e4m3", "16x4x64x2");
  EXPECT_TRUE(decodeReadsRawFp8(e4m3.shape, e4m3.tiling));
  EXPECT_EQ(decodeRawScaleTiles(e4m3.shape, e4m3.tiling), 0);
  // 584-byte rows are not 16-byte aligned: fp8_e4m3_token dequantises.
  DecodeKernelSpec token = spec("fp8_e4m3_token", "16x4x64x2");
  EXPECT_FALSE(decodeReadsRawFp8(token.shape, token.tiling));
  EXPECT_EQ(chooseDecodeTiling(token.chip, token.shape).kvBlock, 32);
}

TEST(KernelSpecTest, KeysInAnyOrderAndOptionalTile) {
  DecodeKernelSpec spec = parseOrDie(
      "decode tile=64x2x64x2s scale=0x3d93cd3a causal=0 dtype=bf16 page=64 "
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

TEST(KernelSpecTest, ScaleOfOlderTextsIsIgnored) {
  // The softmax scale is a launch argument: texts printed when it was baked
  // in name today's kernel, whatever scale they carry, so one cache entry
  // serves every scale.
  for (const char *scale : {"scale=0x3d93cd3a", "scale=0.0721687836",
                            "scale=0x3e000000", "scale=2"}) {
    DecodeKernelSpec spec = parseOrDie(
        std::string("decode chip=sm_90a N=128 Sq=1 L=512 R=64 page=64 "
                    "dtype=bf16 causal=0 ") +
        scale);
    EXPECT_EQ(toString(spec), kDeepSeek) << scale;
    EXPECT_EQ(cacheKeyFor(spec), cacheKeyFor(parseOrDie(kDeepSeek))) << scale;
  }
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
  // 16 hex digits of the code generator's sources (CodegenFingerprint.cmake).
  size_t codegen = version.find(";codegen-");
  ASSERT_NE(codegen, std::string::npos) << version;
  std::string fingerprint = version.substr(codegen + 9);
  EXPECT_EQ(fingerprint.size(), 16u) << version;
  EXPECT_EQ(fingerprint.find_first_not_of("0123456789abcdef"),
            std::string::npos)
      << version;
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
  // The wgmma tile, so that the pipelined and seesaw flags are changes.
  const DecodeKernelSpec base = parseOrDie(
      "decode chip=sm_90a N=128 Sq=1 L=512 R=64 page=64 dtype=bf16 causal=0 "
      "tile=64x2x64x2w");
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
  vary([](DecodeKernelSpec &s) { s.tiling.rowsPerCta = 32; });
  vary([](DecodeKernelSpec &s) { s.tiling.warpsN = 4; });
  vary([](DecodeKernelSpec &s) { s.tiling.kvBlock = 32; });
  vary([](DecodeKernelSpec &s) { s.tiling.stages = 3; });
  vary([](DecodeKernelSpec &s) { s.tiling.wgmma = false; });
  vary([](DecodeKernelSpec &s) { s.tiling.pipelined = true; });
  vary([](DecodeKernelSpec &s) {
    s.tiling.pipelined = true;
    s.tiling.seesaw = true;
  });

  std::set<std::string> keys = {cacheKeyFor(base)};
  for (const DecodeKernelSpec &spec : variants)
    EXPECT_TRUE(keys.insert(cacheKeyFor(spec)).second) << toString(spec);
}

TEST(KernelSpecTest, MalformedTextIsRejected) {
  const std::string rest = " N=128 Sq=1 L=512 R=64 page=64 dtype=bf16 causal=0";
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
  std::string shape = " Sq=1 L=512 R=64 page=64 dtype=bf16 causal=0";
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
    EXPECT_NE(parseError(noScale + bad)
                  .find("scale (ignored: the softmax scale is a launch "
                        "argument) must be a positive finite f32"),
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

TEST(KernelSpecTest, PipelinedTileRoundTrips) {
  // Suffix p: the warp-specialised TMA build, which is a wgmma kernel of
  // 384 threads (a producer warpgroup ahead of the two consumers).
  std::string text = "decode chip=sm_90a N=16 Sq=2 L=512 R=64 page=64 "
                     "dtype=bf16 causal=1 tile=64x2x64x2p";
  DecodeKernelSpec spec = parseOrDie(text);
  EXPECT_TRUE(spec.tiling.wgmma);
  EXPECT_TRUE(spec.tiling.pipelined);
  EXPECT_EQ(toString(spec), text);
  EXPECT_EQ(decodeThreadsPerCta(spec.tiling), 384);
  DecodeKernelSpec plain = spec;
  plain.tiling.pipelined = false;
  EXPECT_EQ(decodeThreadsPerCta(plain.tiling), 256);
  // Q, two 64-token stages, P, the row scratch, and 21 mbarriers (Q, nine
  // box-full and one empty per stage) in 256 bytes.
  EXPECT_EQ(decodeSharedBytes(spec.chip, spec.shape, spec.tiling),
            decodeSharedBytes(plain.chip, plain.shape, plain.tiling) + 256);
  EXPECT_LE(decodeSharedBytes(spec.chip, spec.shape, spec.tiling), 227 * 1024);
  // Three stages of 576-wide rows do not fit; no wgmma on sm_100a.
  EXPECT_NE(parseError("decode chip=sm_90a N=16 Sq=1 L=512 R=64 page=64 "
                       "dtype=bf16 causal=0 tile=64x2x64x3p")
                .find("bytes of shared memory"),
            std::string::npos);
  spec.tiling.wgmma = false;
  EXPECT_NE(checkDecodeTiling(spec.chip, spec.shape, spec.tiling)
                .find("built on wgmma"),
            std::string::npos);
  spec.tiling.wgmma = true;
  EXPECT_NE(checkDecodeTiling(Chip::SM100a, spec.shape, spec.tiling)
                .find("sm_100a uses tcgen05"),
            std::string::npos);
}

TEST(KernelSpecTest, SeesawOverE4M3IsTheDefaultFrom64Rows) {
  // fp8_e4m3 under the seesaw tile: Q's two E4M3 parts (72 KB), two slots
  // of five 128-byte x 64-token raw boxes (80 KB), the f16 V tile (64 KB),
  // the scratch and 17 mbarriers; kv_scale before the maps.
  std::string text = "decode chip=sm_90a N=128 Sq=1 L=512 R=64 page=64 "
                     "dtype=bf16 causal=0 format=fp8_e4m3 tile=64x2x64x2s";
  DecodeKernelSpec spec = parseOrDie(text);
  EXPECT_EQ(toString(spec), text);
  EXPECT_TRUE(decodeSeesawReadsE4M3(spec.shape, spec.tiling));
  EXPECT_EQ(decodeSharedBytes(spec.chip, spec.shape, spec.tiling),
            73728 + 2 * 5 * 8192 + 65536 + 512 + 256);
  EXPECT_EQ(decodeKernelNumParams(spec.chip, spec.shape, spec.tiling),
            kDecodeSeesawNumParams + 1);
  // The planner's choice from 64 query rows (1.37x the wgmma kernel on the
  // H200); 16 rows keep the 16-row kernel, f16 q the wgmma one.
  EXPECT_TRUE(chooseDecodeTiling(spec.chip, spec.shape).seesaw);
  DecodeShape n16 = spec.shape;
  n16.numHeads = 16;
  EXPECT_EQ(chooseDecodeTiling(spec.chip, n16).rowsPerCta, 16);
  DecodeShape f16 = spec.shape;
  f16.elem = ElemType::F16;
  EXPECT_FALSE(chooseDecodeTiling(spec.chip, f16).seesaw);
  DecodeShape bf16 = spec.shape;
  bf16.kvFormat = CacheFormat::BF16;
  EXPECT_FALSE(decodeSeesawReadsE4M3(bf16, spec.tiling));
}

TEST(KernelSpecTest, SeesawRefusesE4M3Token) {
  // Odd 584-byte rows start 8 bytes off a 16-byte boundary, where no TMA
  // box may start (the H200 raised an illegal instruction, 2026-12-05).
  std::string text = "decode chip=sm_90a N=128 Sq=1 L=512 R=64 page=64 "
                     "dtype=bf16 causal=0 format=fp8_e4m3_token "
                     "tile=64x2x64x2s";
  EXPECT_NE(parseError(text).find("does not read fp8_e4m3_token caches: "
                                  "every odd 584-byte row starts 8 bytes off "
                                  "a 16-byte boundary"),
            std::string::npos);
  DecodeShape shape = parseOrDie("decode chip=sm_90a N=128 Sq=1 L=512 R=64 "
                                 "page=64 dtype=bf16 causal=0 "
                                 "format=fp8_e4m3_token")
                          .shape;
  DecodeTiling seesaw = parseOrDie("decode chip=sm_90a N=128 Sq=1 L=512 R=64 "
                                   "page=64 dtype=bf16 causal=0 "
                                   "tile=64x2x64x2s")
                            .tiling;
  EXPECT_FALSE(decodeSeesawReadsE4M3(shape, seesaw));
}

TEST(KernelSpecTest, SeesawOverDsMlaIsTheDefaultFrom64Rows) {
  // fp8_ds_mla under the seesaw tile: slots of five boxes and the rows'
  // scales (41 KB), the f16 V tile, the scratch, each slot's 64 x 16-byte
  // tile factors, the 128-byte scale-maximum scratch; the scale map after
  // the cache's.
  std::string text = "decode chip=sm_90a N=128 Sq=1 L=512 R=64 page=64 "
                     "dtype=bf16 causal=0 format=fp8_ds_mla tile=64x2x64x2s";
  DecodeKernelSpec spec = parseOrDie(text);
  EXPECT_EQ(toString(spec), text);
  EXPECT_TRUE(decodeSeesawReadsE4M3(spec.shape, spec.tiling));
  EXPECT_EQ(decodeSeesawScaleTiles(spec.shape, spec.tiling), 4);
  EXPECT_EQ(decodeSharedBytes(spec.chip, spec.shape, spec.tiling),
            73728 + 2 * (5 * 8192 + 1024) + 65536 + 512 + 2048 + 128 + 256);
  EXPECT_EQ(decodeKernelNumParams(spec.chip, spec.shape, spec.tiling),
            kDecodeSeesawNumParams + 1);
  EXPECT_TRUE(chooseDecodeTiling(spec.chip, spec.shape).seesaw);
  DecodeTiling wgmma = spec.tiling;
  wgmma.seesaw = wgmma.pipelined = false;
  EXPECT_EQ(decodeSeesawScaleTiles(spec.shape, wgmma), 0);
}

TEST(KernelSpecTest, SeesawTileRoundTrips) {
  // Suffix s: the seesaw schedule of the warp-specialised TMA build (same
  // 384 threads and parameters), with no P tile of its own.
  std::string text = "decode chip=sm_90a N=128 Sq=2 L=512 R=64 page=64 "
                     "dtype=bf16 causal=1 tile=64x2x64x2s";
  DecodeKernelSpec spec = parseOrDie(text);
  EXPECT_TRUE(spec.tiling.wgmma);
  EXPECT_TRUE(spec.tiling.pipelined);
  EXPECT_TRUE(spec.tiling.seesaw);
  EXPECT_EQ(toString(spec), text);
  EXPECT_EQ(decodeThreadsPerCta(spec.tiling), 384);
  DecodeKernelSpec pipelined = spec;
  pipelined.tiling.seesaw = false;
  // Q 72 KB, two 72 KB slots, the 512-byte row scratch, 21 mbarriers: the
  // pipelined build less its 8 KB P tile.
  EXPECT_EQ(decodeSharedBytes(spec.chip, spec.shape, spec.tiling),
            3 * 73728 + 512 + 256);
  EXPECT_EQ(
      decodeSharedBytes(spec.chip, spec.shape, spec.tiling) + 8192,
      decodeSharedBytes(pipelined.chip, pipelined.shape, pipelined.tiling));
  const std::string shape = "decode chip=sm_90a N=16 Sq=1 L=512 R=64 page=64 "
                            "dtype=bf16 causal=0";
  EXPECT_NE(parseError(shape + " tile=64x2x64x3s")
                .find("the seesaw decode needs R >= 64 (P is stored over a "
                      "64-column RoPE box) and stages = 2, got R = 64, "
                      "stages = 3"),
            std::string::npos);
  for (const char *format : {"fp8_e4m3", "fp8_ds_mla"})
    EXPECT_NE(parseError(std::string("decode chip=sm_90a N=16 Sq=1 L=512 "
                                     "R=64 page=64 dtype=f16 causal=0 "
                                     "format=") +
                         format + " tile=64x2x64x2s")
                  .find("the seesaw decode (tile suffix s) reads bf16/f16 "
                        "caches, and fp8_e4m3 and fp8_ds_mla caches under "
                        "bf16 activations with R = 64"),
              std::string::npos)
        << format;
  // fp8_ds_mla: each warpgroup's 256 V columns are two whole scale tiles.
  EXPECT_NE(parseError("decode chip=sm_90a N=16 Sq=1 L=384 R=64 page=64 "
                       "dtype=bf16 causal=0 format=fp8_ds_mla tile=64x2x64x2s")
                .find("for fp8_ds_mla, L a multiple of 256"),
            std::string::npos);
  EXPECT_NE(parseError("decode chip=sm_90a N=16 Sq=2 L=512 R=64 page=64 "
                       "dtype=bf16 causal=1 varlen=1 tile=64x2x64x2s")
                .find("varlen decode (query_start_loc) is not built for the "
                      "seesaw decode (tile suffix s)"),
            std::string::npos);
  // The flag is a schedule of the pipelined build only.
  DecodeKernelSpec alone = spec;
  alone.tiling.pipelined = false;
  EXPECT_NE(checkDecodeTiling(alone.chip, alone.shape, alone.tiling)
                .find("the seesaw decode is a schedule of the pipelined "
                      "build"),
            std::string::npos);
  EXPECT_NE(checkDecodeTiling(Chip::SM100a, spec.shape, spec.tiling)
                .find("sm_100a uses tcgen05"),
            std::string::npos);
}

TEST(KernelSpecTest, UnusableTilingIsRejected) {
  std::string shape = "decode chip=sm_90a N=128 Sq=1 L=512 R=64 page=64 "
                      "dtype=bf16 causal=0";
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
                       "dtype=bf16 causal=0")
                .find("the default tile cannot run this shape on sm_90a: "),
            std::string::npos);
}

} // namespace

//===----------------------------------------------------------------------===//
// cache_write and projection specs
//===----------------------------------------------------------------------===//

namespace {

const char *const kCacheWriteBf16 =
    "cache_write chip=sm_90a L=512 R=64 page=64 dtype=bf16 format=bf16";
const char *const kCacheWriteFp8 = "cache_write chip=sm_90a L=512 R=64 page=64 "
                                   "dtype=bf16 format=fp8_e4m3";
const char *const kAbsorbQ =
    "absorb_q chip=sm_90a N=128 P=128 L=512 R=64 dtype=bf16";
const char *const kUpProjOut =
    "up_proj_out chip=sm_90a N=128 L=512 V=128 dtype=bf16";

KernelSpec parseAnyOrDie(const std::string &text) {
  KernelSpec spec;
  std::string error;
  EXPECT_TRUE(parseKernelSpec(text, spec, error)) << error;
  return spec;
}

std::string parseAnyError(const std::string &text) {
  KernelSpec spec;
  std::string error;
  EXPECT_FALSE(parseKernelSpec(text, spec, error)) << text;
  return error;
}

TEST(KernelSpecTest,
     DefaultCacheWriteAndProjectionSpecsPrintTheDocumentedText) {
  EXPECT_EQ(toString(CacheWriteKernelSpec()), kCacheWriteBf16);
  CacheWriteKernelSpec fp8;
  fp8.shape.format = CacheFormat::FP8E4M3;
  EXPECT_EQ(toString(fp8), kCacheWriteFp8);
  ProjectionKernelSpec absorb;
  absorb.shape = {128, 128, 512, 64, ActType::BF16};
  EXPECT_EQ(toString(absorb), kAbsorbQ);
  ProjectionKernelSpec up;
  up.kind = ProjectionKind::UpProjOut;
  up.shape = {128, 512, 128, 0, ActType::BF16};
  EXPECT_EQ(toString(up), kUpProjOut);
}

TEST(KernelSpecTest, Fp8E4m3ScaleIsNotPartOfCacheWriteOrGatherImages) {
  // fp8_e4m3's kv_scale is a kernel parameter: texts printed when it was
  // baked in name today's kernel whatever scale they carry, so two scales
  // share one key.
  for (const char *family : {"cache_write", "gather_cache"}) {
    std::string rest = " chip=sm_90a L=512 R=64 page=64 dtype=bf16 "
                       "format=fp8_e4m3";
    std::string canonical = family + rest;
    KernelSpec plain = parseAnyOrDie(canonical);
    EXPECT_EQ(toString(plain), canonical);
    for (const char *scale : {" scale=0x3f000000", " scale=0x40000000",
                              " scale=0.02", " scale=1"}) {
      KernelSpec old = parseAnyOrDie(family + rest + scale);
      EXPECT_EQ(toString(old), canonical) << scale;
      EXPECT_EQ(cacheKeyFor(old), cacheKeyFor(plain)) << scale;
    }
  }
}

TEST(KernelSpecTest, EveryFamilyRoundTripsThroughTheDispatchingParser) {
  for (const char *text :
       {kDeepSeek, kCacheWriteBf16, kCacheWriteFp8, kAbsorbQ, kUpProjOut,
        "cache_write chip=sm_100a L=256 R=32 page=16 dtype=f32 format=f16",
        "cache_write chip=sm_90a L=512 R=64 page=64 dtype=f16 "
        "format=fp8_e4m3_token",
        "cache_write chip=sm_90a L=512 R=64 page=64 dtype=bf16 "
        "format=fp8_ds_mla",
        "cache_write chip=sm_90a L=512 R=64 page=64 dtype=bf16 format=f32",
        "absorb_q chip=sm_100a N=4 P=16 L=72 R=32 dtype=f16",
        "up_proj_out chip=sm_90a N=16 L=300 V=100 dtype=f32"}) {
    KernelSpec spec = parseAnyOrDie(text);
    EXPECT_EQ(toString(spec), text);
    EXPECT_EQ(cacheKeyFor(parseAnyOrDie(toString(spec))), cacheKeyFor(spec));
  }
  EXPECT_TRUE(
      std::holds_alternative<DecodeKernelSpec>(parseAnyOrDie(kDeepSeek)));
  KernelSpec cacheWrite = parseAnyOrDie(
      "cache_write format=fp8_e4m3 scale=0.02 dtype=f16 page=32 R=64 L=512 "
      "chip=sm90");
  ASSERT_TRUE(std::holds_alternative<CacheWriteKernelSpec>(cacheWrite));
  const auto &cw = std::get<CacheWriteKernelSpec>(cacheWrite);
  EXPECT_EQ(cw.shape.format, CacheFormat::FP8E4M3);
  EXPECT_EQ(cw.shape.input, ActType::F16);
  EXPECT_EQ(cw.pageSize, 32);
  EXPECT_EQ(toString(cacheWrite), "cache_write chip=sm_90a L=512 R=64 page=32 "
                                  "dtype=f16 format=fp8_e4m3");
  KernelSpec up = parseAnyOrDie(kUpProjOut);
  ASSERT_TRUE(std::holds_alternative<ProjectionKernelSpec>(up));
  const auto &p = std::get<ProjectionKernelSpec>(up);
  EXPECT_EQ(p.kind, ProjectionKind::UpProjOut);
  EXPECT_EQ(p.shape.inDim, 512);
  EXPECT_EQ(p.shape.outDim, 128);
  EXPECT_EQ(p.shape.ropeDim, 0);
  EXPECT_EQ(pipelineFor(up), "mla-to-nvvm{chip=sm_90a format=bin}");
}

TEST(KernelSpecTest, CacheWriteAndProjectionKeysUseTheDecodeScheme) {
  KernelSpec spec = parseAnyOrDie(kCacheWriteFp8);
  EXPECT_EQ(cacheKeyFor(spec),
            computeKernelCacheKey(kCacheWriteFp8,
                                  "mla-to-nvvm{chip=sm_90a format=bin}",
                                  toolchainVersion(), "sm_90a"));
  EXPECT_EQ(cacheKeyFor(parseAnyOrDie(kAbsorbQ)),
            computeKernelCacheKey(kAbsorbQ,
                                  "mla-to-nvvm{chip=sm_90a format=bin}",
                                  toolchainVersion(), "sm_90a"));
  // The decode spec's key is the one DecodeKernelSpec always had.
  EXPECT_EQ(cacheKeyFor(parseAnyOrDie(kDeepSeek)),
            cacheKeyFor(parseOrDie(kDeepSeek)));
}

TEST(KernelSpecTest, CacheWriteAndProjectionKeysChangeWithEveryField) {
  std::set<std::string> keys;
  auto add = [&](const KernelSpec &spec) {
    EXPECT_TRUE(keys.insert(cacheKeyFor(spec)).second) << toString(spec);
  };
  const CacheWriteKernelSpec base =
      std::get<CacheWriteKernelSpec>(parseAnyOrDie(kCacheWriteFp8));
  add(base);
  auto vary = [&](auto change) {
    CacheWriteKernelSpec spec = base;
    change(spec);
    add(spec);
  };
  vary([](CacheWriteKernelSpec &s) { s.chip = Chip::SM100a; });
  vary([](CacheWriteKernelSpec &s) { s.shape.latentDim = 256; });
  vary([](CacheWriteKernelSpec &s) { s.shape.ropeDim = 32; });
  vary([](CacheWriteKernelSpec &s) { s.pageSize = 16; });
  vary([](CacheWriteKernelSpec &s) { s.shape.input = ActType::F16; });
  for (CacheFormat format :
       {CacheFormat::BF16, CacheFormat::F16, CacheFormat::F32,
        CacheFormat::FP8E4M3Token, CacheFormat::FP8DsMla})
    vary([&](CacheWriteKernelSpec &s) { s.shape.format = format; });

  const ProjectionKernelSpec absorb =
      std::get<ProjectionKernelSpec>(parseAnyOrDie(kAbsorbQ));
  add(absorb);
  auto varyProjection = [&](auto change) {
    ProjectionKernelSpec spec = absorb;
    change(spec);
    add(spec);
  };
  varyProjection([](ProjectionKernelSpec &s) { s.chip = Chip::SM100a; });
  varyProjection([](ProjectionKernelSpec &s) { s.shape.numHeads = 16; });
  varyProjection([](ProjectionKernelSpec &s) { s.shape.inDim = 64; });
  varyProjection([](ProjectionKernelSpec &s) { s.shape.outDim = 256; });
  varyProjection([](ProjectionKernelSpec &s) { s.shape.ropeDim = 32; });
  varyProjection([](ProjectionKernelSpec &s) { s.shape.elem = ActType::F16; });
  // The same dimensions as the other projection are another kernel.
  varyProjection([](ProjectionKernelSpec &s) {
    s.kind = ProjectionKind::UpProjOut;
    s.shape.ropeDim = 0;
  });
}

TEST(KernelSpecTest, UnknownKeyNamesEveryKeyOfTheFamily) {
  // Each family's message lists its keys in one order; an unknown key ("zz",
  // after every valid key) is reported once the valid ones are read.
  const std::pair<const char *, const char *> cases[] = {
      {"decode chip=sm_90a N=128 Sq=1 L=512 R=64 page=64 dtype=bf16 causal=0",
       "chip, N, Sq, L, R, page, dtype, causal, format, varlen, scale or "
       "tile"},
      {"cache_write chip=sm_90a L=512 R=64 page=64 dtype=bf16 format=bf16",
       "chip, L, R, page, dtype, format or scale"},
      {"gather_cache chip=sm_90a L=512 R=64 page=64 dtype=bf16 format=bf16",
       "chip, L, R, page, dtype, format or scale"},
      {"absorb_q chip=sm_90a N=128 P=128 L=512 R=64 dtype=bf16",
       "chip, N, P, L, R or dtype"},
      {"up_proj_out chip=sm_90a N=128 L=512 V=128 dtype=bf16",
       "chip, N, L, V or dtype"},
      {"merge_states chip=sm_90a N=128 H=512 dtype=f32", "chip, N, H or dtype"},
      {"up_proj_kv chip=sm_90a N=128 L=512 P=128 V=128 dtype=bf16",
       "chip, N, L, P, V or dtype"},
      {"mha chip=sm_90a N=128 D=192 V=128 dtype=bf16 causal=1 "
       "scale=0x3e13cd3a",
       "chip, N, D, V, dtype, causal or scale"},
  };
  for (const auto &[text, keys] : cases) {
    KernelSpec spec;
    std::string error;
    EXPECT_TRUE(parseKernelSpec(text, spec, error)) << text << ": " << error;
    EXPECT_EQ(parseAnyError(std::string(text) + " zz=1"),
              std::string("unknown key 'zz' (expected ") + keys + ")");
  }
  EXPECT_EQ(parseAnyError("decode chip=sm_90a N=128 Sq=1 L=512 R=64 page=64 "
                          "dtype=bf16 causal=0 format=bf16"),
            "format (the cache's row format; omitted for a cache of dtype) "
            "must be fp8_e4m3, fp8_e4m3_token or fp8_ds_mla, got 'bf16'");
  EXPECT_EQ(parseAnyError("cache_write chip=sm_90a L=512 R=64 page=64 "
                          "dtype=bf16 format=fp9"),
            "format must be bf16, f16, f32, fp8_e4m3, fp8_e4m3_token or "
            "fp8_ds_mla, got 'fp9'");
  EXPECT_EQ(parseAnyError("mha chip=sm_90a N=128 D=192 V=128 dtype=bf16 "
                          "causal=2 scale=0x3e13cd3a"),
            "causal must be 0 or 1, got '2'");
  EXPECT_EQ(parseAnyError("merge_states chip=sm_90a N=128 H=512 dtype=f64"),
            "dtype must be bf16, f16 or f32, got 'f64'");
}

TEST(KernelSpecTest, MalformedCacheWriteAndProjectionTextIsRejected) {
  auto rejects = [](const std::string &text, const std::string &message) {
    EXPECT_NE(parseAnyError(text).find(message), std::string::npos)
        << text << " -> " << parseAnyError(text);
  };
  rejects("prefill chip=sm_90a",
          "starts with its family (decode, cache_write, absorb_q, "
          "up_proj_out, gather_cache, merge_states, up_proj_kv or mha), got "
          "'prefill'");
  rejects("", "got ''");
  const std::string cw = "cache_write chip=sm_90a L=512 R=64 page=64 ";
  rejects(cw + "dtype=bf16", "missing format");
  rejects(cw + "dtype=fp8 format=bf16", "dtype must be bf16, f16 or f32");
  rejects(cw + "dtype=bf16 format=fp8", "format must be bf16, f16, f32");
  rejects(cw + "dtype=bf16 format=bf16 scale=0x3f800000",
          "scale is only accepted (and ignored) with format fp8_e4m3, not "
          "bf16");
  for (const char *bad : {"scale=0", "scale=inf", "scale=-1", "scale=0x3f80"})
    rejects(cw + "dtype=bf16 format=fp8_e4m3 " + bad,
            "scale (ignored: fp8_e4m3's kv_scale is a kernel parameter) must "
            "be a positive finite f32 when given");
  rejects(cw + "dtype=bf16 format=bf16 N=4", "unknown key 'N'");
  rejects("cache_write chip=sm_90a L=500 R=64 page=64 dtype=bf16 "
          "format=fp8_ds_mla",
          "fp8_ds_mla needs L % 128 == 0, got L = 500");
  rejects("cache_write chip=sm_90a L=512 R=0 page=64 dtype=bf16 format=bf16",
          "R must be an integer >= 1");
  rejects("absorb_q chip=sm_90a N=128 P=128 L=512 dtype=bf16", "missing R");
  rejects("absorb_q chip=sm_90a N=128 P=128 L=512 R=64 V=8 dtype=bf16",
          "unknown key 'V'");
  rejects("up_proj_out chip=sm_90a N=128 L=512 V=128 R=64 dtype=bf16",
          "unknown key 'R'");
  rejects("up_proj_out chip=sm_90a N=128 L=500 V=128 dtype=bf16",
          "no up_proj_out kernel for this shape: bf16/f16 projections need "
          "K % 16 == 0");
  rejects("absorb_q chip=sm_90a N=70000 P=128 L=512 R=64 dtype=f32",
          "N must be at most 65535");
  rejects("absorb_q chip=sm_80 N=128 P=128 L=512 R=64 dtype=bf16",
          "unknown chip 'sm_80'");
  // The family-specific parsers refuse the other families.
  CacheWriteKernelSpec cacheWrite;
  std::string error;
  EXPECT_FALSE(parseCacheWriteKernelSpec(kAbsorbQ, cacheWrite, error));
  EXPECT_NE(error.find("starts with 'cache_write'"), std::string::npos);
  ProjectionKernelSpec projection;
  EXPECT_FALSE(parseProjectionKernelSpec(kCacheWriteBf16, projection, error));
  EXPECT_NE(error.find("'absorb_q' or 'up_proj_out'"), std::string::npos);
}

TEST(KernelSpecTest, PrefillFamiliesPrintParseAndRoundTrip) {
  GatherCacheKernelSpec gather;
  EXPECT_EQ(toString(gather), "gather_cache chip=sm_90a L=512 R=64 page=64 "
                              "dtype=bf16 format=bf16");
  MergeStatesKernelSpec merge;
  EXPECT_EQ(toString(merge), "merge_states chip=sm_90a N=128 H=128 dtype=bf16");
  UpProjKvKernelSpec upKv;
  EXPECT_EQ(toString(upKv),
            "up_proj_kv chip=sm_90a N=128 L=512 P=128 V=128 dtype=bf16");
  for (const char *text :
       {"gather_cache chip=sm_90a L=512 R=64 page=64 dtype=bf16 "
        "format=fp8_ds_mla",
        "gather_cache chip=sm_100a L=256 R=32 page=16 dtype=f32 "
        "format=fp8_e4m3",
        "gather_cache chip=sm_90a L=512 R=64 page=64 dtype=f16 "
        "format=fp8_e4m3_token",
        "merge_states chip=sm_100a N=16 H=512 dtype=f32",
        "up_proj_kv chip=sm_90a N=16 L=256 P=64 V=128 dtype=f16",
        "mha chip=sm_90a N=128 D=192 V=128 dtype=bf16 causal=1 "
        "scale=0x3d93cd3a",
        "mha chip=sm_100a N=3 D=40 V=20 dtype=f32 causal=0 scale=0x3e000000"}) {
    KernelSpec spec = parseAnyOrDie(text);
    EXPECT_EQ(toString(spec), text);
    EXPECT_EQ(cacheKeyFor(parseAnyOrDie(toString(spec))), cacheKeyFor(spec));
    EXPECT_EQ(pipelineFor(spec),
              std::string("mla-to-nvvm{chip=") +
                  (std::strstr(text, "sm_100a") ? "sm_100a" : "sm_90a") +
                  " format=bin}");
  }
  KernelSpec g = parseAnyOrDie("gather_cache format=fp8_e4m3 scale=0.5 "
                               "dtype=f32 page=32 R=64 L=512 chip=sm90");
  ASSERT_TRUE(std::holds_alternative<GatherCacheKernelSpec>(g));
  const auto &gs = std::get<GatherCacheKernelSpec>(g).shape;
  EXPECT_EQ(gs.row.format, CacheFormat::FP8E4M3);
  EXPECT_EQ(gs.row.input, ActType::F32);
  EXPECT_EQ(gs.pageSize, 32);
  KernelSpec u = parseAnyOrDie("up_proj_kv V=64 P=32 L=128 N=4 dtype=bf16 "
                               "chip=sm_90a");
  ASSERT_TRUE(std::holds_alternative<UpProjKvKernelSpec>(u));
  EXPECT_EQ(std::get<UpProjKvKernelSpec>(u).shape.columns(), 4 * (32 + 64));
}

TEST(KernelSpecTest, PrefillKeysChangeWithEveryField) {
  std::set<std::string> keys;
  auto add = [&](const KernelSpec &spec) {
    EXPECT_TRUE(keys.insert(cacheKeyFor(spec)).second) << toString(spec);
  };
  GatherCacheKernelSpec gather;
  add(gather);
  auto varyGather = [&](auto change) {
    GatherCacheKernelSpec spec;
    change(spec);
    add(spec);
  };
  varyGather([](GatherCacheKernelSpec &s) { s.chip = Chip::SM100a; });
  varyGather([](GatherCacheKernelSpec &s) { s.shape.row.latentDim = 256; });
  varyGather([](GatherCacheKernelSpec &s) { s.shape.row.ropeDim = 32; });
  varyGather([](GatherCacheKernelSpec &s) { s.shape.pageSize = 16; });
  varyGather(
      [](GatherCacheKernelSpec &s) { s.shape.row.input = ActType::F32; });
  for (CacheFormat format : {CacheFormat::F16, CacheFormat::F32,
                             CacheFormat::FP8E4M3Token, CacheFormat::FP8DsMla})
    varyGather([&](GatherCacheKernelSpec &s) { s.shape.row.format = format; });
  // A gather is another kernel than the cache write of the same rows.
  add(CacheWriteKernelSpec());

  MergeStatesKernelSpec merge;
  add(merge);
  for (auto change : std::vector<void (*)(MergeStatesKernelSpec &)>{
           [](MergeStatesKernelSpec &s) { s.chip = Chip::SM100a; },
           [](MergeStatesKernelSpec &s) { s.shape.numHeads = 16; },
           [](MergeStatesKernelSpec &s) { s.shape.headDim = 512; },
           [](MergeStatesKernelSpec &s) { s.shape.elem = ActType::F16; }}) {
    MergeStatesKernelSpec spec;
    change(spec);
    add(spec);
  }
  MhaKernelSpec mha;
  add(mha);
  for (auto change : std::vector<void (*)(MhaKernelSpec &)>{
           [](MhaKernelSpec &s) { s.chip = Chip::SM100a; },
           [](MhaKernelSpec &s) { s.shape.numHeads = 16; },
           [](MhaKernelSpec &s) { s.shape.qkDim = 128; },
           [](MhaKernelSpec &s) { s.shape.vDim = 64; },
           [](MhaKernelSpec &s) { s.shape.elem = ActType::F16; },
           [](MhaKernelSpec &s) { s.shape.causal = false; },
           [](MhaKernelSpec &s) { s.shape.scale = 0.125f; }}) {
    MhaKernelSpec spec;
    change(spec);
    add(spec);
  }
  UpProjKvKernelSpec upKv;
  add(upKv);
  for (auto change : std::vector<void (*)(UpProjKvKernelSpec &)>{
           [](UpProjKvKernelSpec &s) { s.chip = Chip::SM100a; },
           [](UpProjKvKernelSpec &s) { s.shape.numHeads = 16; },
           [](UpProjKvKernelSpec &s) { s.shape.latentDim = 256; },
           [](UpProjKvKernelSpec &s) { s.shape.nopeDim = 64; },
           [](UpProjKvKernelSpec &s) { s.shape.valueDim = 64; },
           [](UpProjKvKernelSpec &s) { s.shape.elem = ActType::F16; }}) {
    UpProjKvKernelSpec spec;
    change(spec);
    add(spec);
  }
}

TEST(KernelSpecTest, MalformedPrefillTextIsRejected) {
  auto rejects = [](const std::string &text, const std::string &message) {
    EXPECT_NE(parseAnyError(text).find(message), std::string::npos)
        << text << " -> " << parseAnyError(text);
  };
  const std::string g = "gather_cache chip=sm_90a L=512 R=64 page=64 ";
  rejects(g + "dtype=bf16", "missing format");
  rejects("gather_cache chip=sm_90a L=500 R=64 page=64 dtype=bf16 "
          "format=fp8_ds_mla",
          "fp8_ds_mla needs L % 128 == 0");
  rejects("merge_states chip=sm_90a N=16 dtype=bf16", "missing H");
  rejects("merge_states chip=sm_90a N=16 H=128 V=2 dtype=bf16",
          "unknown key 'V'");
  rejects("merge_states chip=sm_90a N=0 H=128 dtype=bf16",
          "N must be an integer >= 1");
  rejects("up_proj_kv chip=sm_90a N=16 L=512 P=128 dtype=bf16", "missing V");
  rejects("up_proj_kv chip=sm_90a N=16 L=500 P=128 V=128 dtype=bf16",
          "no up_proj_kv kernel for this shape: L must be a multiple of 64");
  rejects("up_proj_kv chip=sm_90a N=16 L=512 P=100 V=128 dtype=bf16",
          "P and V must be multiples of 8");
  rejects("up_proj_kv chip=sm_90a N=16 L=512 P=128 V=128 dtype=f32",
          "reads bf16 or f16, not f32");
  rejects("mha chip=sm_90a N=16 D=192 V=128 dtype=bf16 causal=1",
          "missing scale");
  rejects("mha chip=sm_90a N=16 D=192 V=128 dtype=bf16 causal=2 scale=1",
          "causal must be 0 or 1");
  rejects("mha chip=sm_90a N=16 D=192 V=128 dtype=bf16 causal=0 scale=-1",
          "scale must be a positive finite f32");
  GatherCacheKernelSpec gather;
  std::string error;
  EXPECT_FALSE(parseGatherCacheKernelSpec(kCacheWriteBf16, gather, error));
  EXPECT_NE(error.find("starts with 'gather_cache'"), std::string::npos);
}

} // namespace
