//===- ArgRulesTest.cpp - the argument rules of every API operation -------===//
//
// The rules are what every binding (Python, C, C++, the GPU runtime) relies
// on, so each limit is pinned here with the message a user will read.
//
//===----------------------------------------------------------------------===//

#include "mla/Contract/ArgRules.h"
#include "mla/Contract/Error.h"
#include "gtest/gtest.h"
#include <numeric>
#include <vector>

using namespace mla;

namespace {

/// The message of `error`, or "" on success.
std::string messageOf(llvm::Error error) {
  std::string message;
  llvm::handleAllErrors(std::move(error), [&](const RuntimeError &e) {
    EXPECT_EQ(e.getKind(), RuntimeErrorKind::InvalidArgument);
    message = e.getMessage();
  });
  return message;
}

template <typename T> std::string messageOf(llvm::Expected<T> value) {
  if (value)
    return "";
  return messageOf(value.takeError());
}

HostTensor tensor(DType dtype, llvm::ArrayRef<int64_t> shape,
                  void *data = nullptr) {
  HostTensor t;
  t.dtype = dtype;
  t.shape.assign(shape.begin(), shape.end());
  t.data = data;
  return t;
}

/// A valid decode: B = 2, Sq = 1, N = 3, L = 64, R = 16, 8 pages of 16,
/// a 4-column block table.
struct DecodeCase {
  std::vector<int32_t> table = std::vector<int32_t>(8);
  std::vector<int32_t> lens{5, 40};
  HostTensor q = tensor(DType::f32, {2, 1, 3, 80});
  HostTensor cache = tensor(DType::f32, {8, 16, 80});
  HostTensor blockTable = tensor(DType::i32, {2, 4}, table.data());
  HostTensor seqLens = tensor(DType::i32, {2}, lens.data());
  DecodeOptions options;

  DecodeCase() {
    std::iota(table.begin(), table.end(), 0);
    options.headDimV = 64;
    options.softmaxScale = 0.125;
  }

  llvm::Expected<DecodeCall> check(Device device = Device::CPU) {
    return checkDecode(device, q, cache, blockTable, seqLens, options);
  }
};

TEST(ArgRules, DecodeReturnsTheCheckedCall) {
  DecodeCase c;
  llvm::Expected<DecodeCall> call = c.check();
  ASSERT_TRUE(!!call) << messageOf(call.takeError());
  EXPECT_EQ(call->batch, 2);
  EXPECT_EQ(call->numHeads, 3);
  EXPECT_EQ(call->latentDim, 64);
  EXPECT_EQ(call->ropeDim, 16);
  EXPECT_EQ(call->maxPages, 4);
  EXPECT_EQ(call->cache.layoutFormat, "f32");
  EXPECT_EQ(call->cache.pageSize, 16);
  EXPECT_FLOAT_EQ(call->softmaxScale, 0.125f);
}

TEST(ArgRules, DecodeNamesTheArgumentAndTheLimit) {
  DecodeCase c;
  c.lens[1] = 65;
  EXPECT_EQ(messageOf(c.check()),
            "seq_lens[1] = 65 exceeds block_table capacity 64 (4 pages of 16)");
  c = DecodeCase();
  c.table[6] = 99; // request 1, column 2: read by its 40 positions
  EXPECT_EQ(messageOf(c.check()),
            "block_table[1, 2] = 99 is not a page of kv_cache (8 pages)");
  c = DecodeCase();
  c.options.headDimV = 80;
  EXPECT_NE(messageOf(c.check()).find("head_dim_v = 80 must be in [1, 79]"),
            std::string::npos);
  c = DecodeCase();
  c.options.causal = true;
  c.q = tensor(DType::f32, {2, 8, 3, 80});
  EXPECT_NE(messageOf(c.check()).find(
                "causal decode needs seq_lens[0] = 5 >= s_q = 8"),
            std::string::npos);
}

/// A valid varlen decode: q_b = {2, 0, 3} over seq_lens {5, 0, 40}.
struct VarlenCase : DecodeCase {
  std::vector<int32_t> starts{0, 2, 2, 5};
  HostTensor qsl = tensor(DType::i32, {4}, starts.data());

  VarlenCase() {
    table.resize(12);
    std::iota(table.begin(), table.end(), 0);
    lens = {5, 0, 40};
    q = tensor(DType::f32, {5, 3, 80});
    cache = tensor(DType::f32, {12, 16, 80});
    blockTable = tensor(DType::i32, {3, 4}, table.data());
    seqLens = tensor(DType::i32, {3}, lens.data());
    options.causal = true;
  }

  llvm::Expected<DecodeCall> check(Device device = Device::CPU) {
    return checkVarlenDecode(device, q, cache, blockTable, seqLens, qsl,
                             options);
  }
};

TEST(ArgRules, VarlenDecodeTakesPackedQueriesAndItsLargestLength) {
  VarlenCase c;
  llvm::Expected<DecodeCall> call = c.check();
  ASSERT_TRUE(!!call) << messageOf(call.takeError());
  EXPECT_TRUE(call->varlen);
  EXPECT_EQ(call->batch, 3);
  EXPECT_EQ(call->tokens, 5);
  EXPECT_EQ(call->queryRows, 3);
  EXPECT_EQ(call->numHeads, 3);
  EXPECT_EQ(call->latentDim, 64);
  // Without host values the kernel must take the largest allowed length.
  c.qsl.data = nullptr;
  call = c.check();
  ASSERT_TRUE(!!call) << messageOf(call.takeError());
  EXPECT_EQ(call->queryRows, 8);
}

TEST(ArgRules, VarlenDecodeNamesTheBrokenRule) {
  auto message = [](auto mutate) {
    VarlenCase c;
    mutate(c);
    return messageOf(c.check());
  };
  EXPECT_EQ(message([](VarlenCase &c) { c.lens[0] = 1; }),
            "request 0 has 2 query tokens but seq_lens[0] = 1 (seq_lens "
            "counts the query tokens: q_len > seq_len is an input error)");
  EXPECT_EQ(message([](VarlenCase &c) { c.starts = {0, 2, 3, 5}; }),
            "request 1 has 1 query tokens but seq_lens[1] = 0 (seq_lens "
            "counts the query tokens: q_len > seq_len is an input error)");
  EXPECT_EQ(message([](VarlenCase &c) {
              c.starts = {0, 0, 0, 9};
              c.q = tensor(DType::f32, {9, 3, 80});
            }),
            "request 2 has 9 query tokens (query_start_loc[3] - "
            "query_start_loc[2]), more than the 8 a varlen decode takes");
  EXPECT_EQ(message([](VarlenCase &c) { c.starts = {1, 2, 2, 5}; }),
            "query_start_loc must start at 0 and never decrease, but "
            "query_start_loc[0] = 1");
  EXPECT_EQ(
      message([](VarlenCase &c) { c.starts = {0, 2, 2, 4}; }),
      "query_start_loc[3] = 4 must equal the token count T = 5 (q dim 0)");
  EXPECT_NE(message([](VarlenCase &c) {
              c.q = tensor(DType::f32, {5, 1, 3, 80});
            }).find("q must have rank 3 ([T, h_q, d])"),
            std::string::npos);
  EXPECT_EQ(message([](VarlenCase &c) {
              c.qsl = tensor(DType::i32, {3}, c.starts.data());
            }),
            "block_table dim 0 is 3 but B (query_start_loc dim 0 - 1) is 2");
}

// The GPU varlen kernels dequantise fp8 rows as the uniform ones do: an fp8
// cache of the format's row bytes passes, one of another width is refused.
TEST(ArgRules, GpuVarlenDecodeTakesFp8Caches) {
  VarlenCase c;
  c.q = tensor(DType::bf16, {5, 3, 80});
  c.options.cache.kvFormat = "fp8_e4m3_token";
  c.cache = tensor(DType::u8, {12, 16, 88}); // 80 codes, two f32 scales
  EXPECT_EQ(messageOf(c.check(Device::GPU)), "");
  c.cache = tensor(DType::u8, {12, 16, 80});
  EXPECT_NE(messageOf(c.check(Device::GPU)), "");
}

TEST(ArgRules, CpuNumSplitsAreBoundedByTheTableCapacity) {
  DecodeCase c;
  c.options.numSplits = 64;
  EXPECT_EQ(messageOf(c.check()), "");
  c.options.numSplits = 65;
  EXPECT_EQ(messageOf(c.check()),
            "num_splits = 65 must be in [1, 64]: a piece holds at least one "
            "of the block table's 64 positions");
  c.options.numSplits = int64_t(1) << 40;
  EXPECT_NE(messageOf(c.check()).find("num_splits = 1099511627776"),
            std::string::npos);
  c.options.numSplits = 0;
  EXPECT_EQ(messageOf(c.check()), "num_splits must be positive, got 0");
}

TEST(ArgRules, GpuDecodeTakesHalfPrecisionAutoCachesAndGridSplits) {
  DecodeCase c;
  c.q.dtype = c.cache.dtype = DType::bf16;
  c.blockTable.data = nullptr; // on the device
  c.options.numSplits = 65535;
  EXPECT_EQ(messageOf(c.check(Device::GPU)), "");
  c.options.numSplits = 65536;
  EXPECT_NE(messageOf(c.check(Device::GPU))
                .find("num_splits = 65536 must be "
                      "in [1, 65535]"),
            std::string::npos);
  c.options.numSplits.reset();
  c.q.dtype = c.cache.dtype = DType::f32;
  EXPECT_EQ(messageOf(c.check(Device::GPU)),
            "q must be bfloat16 or float16, got float32");
  c.q.dtype = c.cache.dtype = DType::f16;
  c.options.cache.kvFormat = "fp8_e4m3";
  EXPECT_EQ(messageOf(c.check(Device::GPU)),
            "kv_format 'fp8_e4m3' needs a uint8 kv_cache, got float16");
  // The CPU takes what the GPU does not, and the other way round.
  c.options.cache.kvFormat = "auto";
  c.cache = tensor(DType::f16, {8, 24, 80});
  EXPECT_EQ(messageOf(c.check(Device::GPU)), "");
  EXPECT_EQ(messageOf(c.check(Device::CPU)),
            "kv_cache page size (dim 1) must be a positive multiple of 16, "
            "got 24");
}

TEST(ArgRules, GpuDecodeTakesFp8CachesWithTheScaleOnTheDevice) {
  DecodeCase c;
  c.q = tensor(DType::bf16, {2, 1, 3, 576});
  c.options.headDimV = 512;
  c.blockTable.data = nullptr; // on the device
  // fp8_e4m3 rows are L+R bytes; the scale comes at launch, not as an option.
  c.cache = tensor(DType::u8, {8, 64, 576});
  c.options.cache.kvFormat = "fp8_e4m3";
  llvm::Expected<DecodeCall> call = c.check(Device::GPU);
  ASSERT_TRUE(static_cast<bool>(call)) << llvm::toString(call.takeError());
  EXPECT_EQ(call->cache.layoutFormat, "fp8_e4m3");
  EXPECT_FALSE(call->cache.scale.has_value());
  c.options.cache.kvScale = 0.5;
  EXPECT_NE(messageOf(c.check(Device::GPU))
                .find("reads fp8_e4m3's kv_scale from device memory"),
            std::string::npos);
  // The CPU (which takes f16, not bf16, q) still needs it among the options.
  c.options.cache.kvScale.reset();
  c.q.dtype = DType::f16;
  EXPECT_NE(messageOf(c.check(Device::CPU)).find("needs kv_scale"),
            std::string::npos);
  c.q.dtype = DType::bf16;
  c.cache = tensor(DType::u8, {8, 64, 656});
  c.options.cache.kvFormat = "fp8_ds_mla";
  EXPECT_EQ(messageOf(c.check(Device::GPU)), "");
  c.options.cache.kvFormat = "fp8_e4m3_token";
  EXPECT_NE(messageOf(c.check(Device::GPU)).find("656"), std::string::npos);
  c.cache = tensor(DType::u8, {8, 64, 584});
  EXPECT_EQ(messageOf(c.check(Device::GPU)), "");
}

TEST(ArgRules, OptionStringsWithNulAreRejected) {
  DecodeCase c;
  c.options.cache.kvFormat = std::string("auto\0junk", 9);
  EXPECT_EQ(messageOf(c.check()),
            "kv_format holds a NUL byte at offset 4; options are plain text");
  EXPECT_EQ(messageOf(checkOptionString("split_policy", "grid")), "");
}

TEST(ArgRules, CacheWriteChecksFormatsAndSlots) {
  std::vector<int32_t> slots{0, 17, -1};
  HostTensor kvC = tensor(DType::f32, {3, 64});
  HostTensor kPe = tensor(DType::f32, {3, 1, 16});
  HostTensor cache = tensor(DType::u8, {4, 16, 88});
  HostTensor slotMapping = tensor(DType::i32, {3}, slots.data());
  CacheFormat format;
  format.kvFormat = "fp8_e4m3_token";
  llvm::Expected<CacheWriteCall> call =
      checkCacheWrite(Device::CPU, kvC, kPe, cache, slotMapping, format);
  ASSERT_TRUE(!!call) << messageOf(call.takeError());
  EXPECT_EQ(call->cache.layoutFormat, "fp8_e4m3_token");
  EXPECT_TRUE(call->writesAnything);

  slots[2] = 64;
  EXPECT_EQ(messageOf(checkCacheWrite(Device::CPU, kvC, kPe, cache, slotMapping,
                                      format)),
            "slot_mapping[2] = 64 is beyond kv_cache's 64 slots (4 pages of "
            "16)");
  format.kvFormat = "fp8_ds_mla";
  EXPECT_EQ(messageOf(checkCacheWrite(Device::CPU, kvC, kPe, cache, slotMapping,
                                      format)),
            "kv_format 'fp8_ds_mla' needs a latent width L that is a multiple "
            "of 128, got L = 64");
  // The GPU kernel converts to the cache's float type; the CPU does not.
  format.kvFormat = "auto";
  slots[2] = -1;
  HostTensor bf16Cache = tensor(DType::bf16, {4, 16, 80});
  EXPECT_EQ(messageOf(checkCacheWrite(Device::GPU, kvC, kPe, bf16Cache,
                                      slotMapping, format)),
            "");
  EXPECT_EQ(messageOf(checkCacheWrite(Device::CPU, kvC, kPe, bf16Cache,
                                      slotMapping, format)),
            "kv_cache is bfloat16 but kv_format 'auto' stores kv_c's dtype "
            "float32");
}

TEST(ArgRules, KvScaleIsAHostValueOrAOneElementF32DeviceTensor) {
  // f32 activations: both devices write them.
  HostTensor kvC = tensor(DType::f32, {2, 64});
  HostTensor kPe = tensor(DType::f32, {2, 16});
  HostTensor cache = tensor(DType::u8, {4, 16, 80});
  std::vector<int32_t> slots{0, 5};
  HostTensor slotMapping = tensor(DType::i32, {2}, slots.data());
  auto check = [&](Device device, const CacheFormat &format) {
    return checkCacheWrite(device, kvC, kPe, cache, slotMapping, format);
  };
  CacheFormat format;
  format.kvFormat = "fp8_e4m3";
  EXPECT_EQ(messageOf(check(Device::GPU, format)),
            "kv_format 'fp8_e4m3' needs kv_scale, the per-tensor scale its "
            "values were divided by");
  // A device tensor: float32, one element (vLLM's k_scale is [] or [1]).
  for (llvm::SmallVector<int64_t> shape :
       {llvm::SmallVector<int64_t>{}, {1}, {1, 1}}) {
    format.kvScaleTensor = tensor(DType::f32, shape);
    llvm::Expected<CacheWriteCall> call = check(Device::GPU, format);
    ASSERT_TRUE(!!call) << messageOf(call.takeError());
    EXPECT_TRUE(call->cache.scaleOnDevice);
    EXPECT_FALSE(call->cache.scale.has_value());
  }
  format.kvScaleTensor = tensor(DType::bf16, {1});
  EXPECT_EQ(messageOf(check(Device::GPU, format)),
            "a kv_scale tensor must hold one float32 element, got bfloat16 "
            "[1]");
  format.kvScaleTensor = tensor(DType::f32, {2});
  EXPECT_EQ(messageOf(check(Device::GPU, format)),
            "a kv_scale tensor must hold one float32 element, got float32 "
            "[2]");
  // On the CPU the tensor is a host array and its value is read.
  format.kvScaleTensor = tensor(DType::f32, {1});
  EXPECT_EQ(messageOf(check(Device::CPU, format)),
            "the CPU path reads the kv_scale tensor's value, but it has no "
            "host data");
  float value = 0.25f;
  format.kvScaleTensor = tensor(DType::f32, {1}, &value);
  llvm::Expected<CacheWriteCall> cpu = check(Device::CPU, format);
  ASSERT_TRUE(!!cpu) << messageOf(cpu.takeError());
  EXPECT_EQ(cpu->cache.scale, 0.25f);
  EXPECT_FALSE(cpu->cache.scaleOnDevice);
  value = -1.0f;
  EXPECT_EQ(messageOf(check(Device::CPU, format)),
            "kv_scale must be positive and finite, got -1.000000");
  format.kvScale = 0.5;
  EXPECT_EQ(messageOf(check(Device::GPU, format)),
            "kv_scale is given twice: as a value and as a device tensor");
  // A host value, rounded to the f32 the kernels and the IR use.
  format.kvScaleTensor.reset();
  llvm::Expected<CacheWriteCall> call = check(Device::GPU, format);
  ASSERT_TRUE(!!call) << messageOf(call.takeError());
  EXPECT_FALSE(call->cache.scaleOnDevice);
  EXPECT_EQ(call->cache.scale, 0.5f);
  // The formats that store their scales in the rows take neither.
  format.kvFormat = "fp8_ds_mla";
  format.kvScale.reset();
  format.kvScaleTensor = tensor(DType::f32, {1});
  cache = tensor(DType::u8, {4, 16, 256 + 8 + 32});
  kvC = tensor(DType::f32, {2, 256});
  EXPECT_EQ(messageOf(check(Device::GPU, format)),
            "kv_scale is only used by kv_format 'fp8_e4m3', not 'fp8_ds_mla'");
}

TEST(ArgRules, Projections) {
  HostTensor q = tensor(DType::bf16, {5, 3, 24});
  HostTensor wUkT = tensor(DType::bf16, {3, 8, 64});
  llvm::Expected<ProjectionCall> call = checkAbsorbQ(Device::GPU, q, wUkT);
  ASSERT_TRUE(!!call) << messageOf(call.takeError());
  EXPECT_EQ(call->ropeDim, 16);
  EXPECT_EQ(call->outDim, 64);
  EXPECT_EQ(messageOf(checkAbsorbQ(Device::CPU, q, wUkT)),
            "q must be float32 or float16, got bfloat16");
  HostTensor o = tensor(DType::f32, {5, 3, 64});
  HostTensor wUv = tensor(DType::f32, {3, 63, 8});
  EXPECT_EQ(messageOf(checkUpProjOut(Device::CPU, o, wUv)),
            "w_uv dim 1 is 63 but o's latent width (dim 2) is 64");
  EXPECT_EQ(messageOf(checkSplitKvBProj(tensor(DType::f32, {38, 64}), 3, 8, 5)),
            "kv_b_proj dim 0 is 38 but N*(P+V) = 3*(8+5) = 39");
}

TEST(ArgRules, MergeStatesLseLayout) {
  HostTensor out = tensor(DType::f32, {4, 2, 8});
  HostTensor lse = tensor(DType::f32, {2, 4});
  HostTensor lseT = tensor(DType::f32, {4, 2});
  EXPECT_EQ(messageOf(checkMergeStates(Device::CPU, out, lse, out, lse)), "");
  EXPECT_EQ(messageOf(checkMergeStates(Device::CPU, out, lseT, out, lse)),
            "lse_a must be [N, T] = [2, 4] for out_a [4, 2, 8], got [4, 2]");
  HostTensor outBf16 = tensor(DType::bf16, {4, 2, 8});
  EXPECT_EQ(
      messageOf(checkMergeStates(Device::CPU, outBf16, lse, outBf16, lse)),
      "out_a must be float32 or float16, got bfloat16");
  EXPECT_EQ(
      messageOf(checkMergeStates(Device::GPU, outBf16, lse, outBf16, lse)), "");
}

TEST(ArgRules, GatherCacheTables) {
  // Two requests over 4 pages of 16: request 0 gathers positions 10..25
  // (pages 0 and 1 of its table), request 1 nothing.
  std::vector<int32_t> table = {2, 3, -1, 0, 1, -1}, starts = {10, 0},
                       cuRows = {0, 16, 16};
  HostTensor cache = tensor(DType::f32, {4, 16, 80});
  HostTensor ws = tensor(DType::f32, {20, 80});
  auto check = [&](Device device, bool host) {
    return checkGatherCache(
        device, cache,
        tensor(DType::i32, {2, 3}, host ? table.data() : nullptr),
        tensor(DType::i32, {2}, host ? starts.data() : nullptr),
        tensor(DType::i32, {3}, host ? cuRows.data() : nullptr), ws, 64,
        CacheFormat());
  };
  llvm::Expected<GatherCacheCall> call = check(Device::CPU, true);
  ASSERT_TRUE(!!call) << messageOf(call.takeError());
  EXPECT_EQ(call->ropeDim, 16);
  EXPECT_TRUE(call->gathersAnything);
  table[1] = 4;
  EXPECT_EQ(messageOf(check(Device::CPU, true)),
            "block_table[0, 1] = 4 is not a page of kv_cache's 4");
  // Without host tables nothing is read: the GPU kernel skips bad rows.
  EXPECT_EQ(messageOf(check(Device::GPU, false)), "");
  table[1] = 3;
  starts[0] = 40;
  EXPECT_EQ(messageOf(check(Device::CPU, true)),
            "request 0 gathers position 55, past its 3 block_table pages of "
            "16");
  starts[0] = 10;
  cuRows[2] = 15;
  EXPECT_EQ(messageOf(check(Device::CPU, true)),
            "cu_rows must be non-decreasing, but cu_rows[2] = 15 < "
            "cu_rows[1] = 16");
  EXPECT_EQ(messageOf(checkGatherCache(
                Device::CPU, cache, tensor(DType::i32, {2, 3}),
                tensor(DType::i32, {2}), tensor(DType::i32, {3}), ws, 80,
                CacheFormat())),
            "latent_dim = 80 must be in [1, 79]: workspace rows are L + R "
            "wide with R >= 1");
}

TEST(ArgRules, UpProjKvWeights) {
  HostTensor latent = tensor(DType::f32, {5, 64});
  llvm::Expected<UpProjKvCall> call =
      checkUpProjKv(Device::CPU, latent, tensor(DType::f32, {39, 64}), 3, 8, 5);
  ASSERT_TRUE(!!call) << messageOf(call.takeError());
  EXPECT_EQ(call->rows, 5);
  EXPECT_EQ(messageOf(checkUpProjKv(Device::CPU, latent,
                                    tensor(DType::f32, {39, 32}), 3, 8, 5)),
            "kv_b_proj dim 1 is 32 but latent's width L is 64");
  EXPECT_EQ(messageOf(checkUpProjKv(Device::CPU, latent,
                                    tensor(DType::f16, {39, 64}), 3, 8, 5)),
            "kv_b_proj is float16 but latent is float32; they must have the "
            "same dtype");
}

TEST(ArgRules, MhaSeqlens) {
  std::vector<int32_t> cuQ = {0, 3, 5}, cuK = {0, 4, 9};
  HostTensor q = tensor(DType::f32, {5, 2, 24});
  HostTensor k = tensor(DType::f32, {10, 2, 24});
  HostTensor v = tensor(DType::f32, {10, 2, 16});
  auto check = [&] {
    return checkMha(Device::CPU, q, k, v, tensor(DType::i32, {3}, cuQ.data()),
                    tensor(DType::i32, {3}, cuK.data()), 0.2, true);
  };
  llvm::Expected<MhaCall> call = check();
  ASSERT_TRUE(!!call) << messageOf(call.takeError());
  EXPECT_EQ(call->batch, 2);
  EXPECT_EQ(call->valueDim, 16);
  cuK[2] = 11;
  EXPECT_EQ(messageOf(check()),
            "cu_seqlens_k ends at 11, past the 10 rows of k");
  cuK[2] = 9;
  cuQ[0] = 1;
  EXPECT_EQ(messageOf(check()), "cu_seqlens_q[0] = 1 must be 0");
  cuQ[0] = 0;
  cuQ[1] = 6;
  EXPECT_EQ(messageOf(check()),
            "cu_seqlens_q must be non-decreasing, but entry 2 is 5 after 6");
}

TEST(ArgRules, PrefillTablesAgree) {
  // Two requests of 3 and 2 new tokens over contexts of 2 and 18.
  std::vector<int32_t> table{0, 1, 2, 3, 4, 5};
  std::vector<int32_t> qsl{0, 3, 5}, lens{5, 20};
  HostTensor q = tensor(DType::f32, {5, 3, 24});
  HostTensor kvC = tensor(DType::f32, {5, 64});
  HostTensor kPe = tensor(DType::f32, {5, 16});
  HostTensor w = tensor(DType::f32, {39, 64});
  HostTensor cache = tensor(DType::f32, {6, 16, 80});
  HostTensor blockTable = tensor(DType::i32, {2, 3}, table.data());
  HostTensor queryStartLoc = tensor(DType::i32, {3}, qsl.data());
  HostTensor seqLens = tensor(DType::i32, {2}, lens.data());
  PrefillOptions options;
  options.softmaxScale = 0.1;
  options.vHeadDim = 5;
  auto check = [&] {
    return checkPrefill(Device::CPU, q, kvC, kPe, w, cache, blockTable,
                        queryStartLoc, seqLens, options);
  };
  llvm::Expected<PrefillCall> call = check();
  ASSERT_TRUE(!!call) << messageOf(call.takeError());
  EXPECT_EQ(call->nopeDim, 8);
  EXPECT_EQ(call->batch, 2);
  qsl[2] = 4;
  EXPECT_EQ(messageOf(check()), "query_start_loc[2] = 4 must equal the token "
                                "count T = 5 (q dim 0)");
  qsl[2] = 5;
  lens[0] = 2;
  EXPECT_NE(messageOf(check()).find("seq_lens[0] = 2 is shorter than request "
                                    "0's 3 new tokens"),
            std::string::npos);
}

TEST(ArgRules, GpuPrefillTakesHalfActivationsAndAnyFloatCache) {
  std::vector<int32_t> table{0, 1, 2, 3, 4, 5};
  std::vector<int32_t> qsl{0, 3, 5}, lens{5, 20};
  HostTensor q = tensor(DType::bf16, {5, 3, 24});
  HostTensor kvC = tensor(DType::bf16, {5, 64});
  HostTensor kPe = tensor(DType::bf16, {5, 1, 16});
  HostTensor w = tensor(DType::bf16, {39, 64});
  HostTensor cache = tensor(DType::f32, {6, 8, 80});
  HostTensor blockTable = tensor(DType::i32, {2, 3}, table.data());
  HostTensor queryStartLoc = tensor(DType::i32, {3}, qsl.data());
  HostTensor seqLens = tensor(DType::i32, {2}, lens.data());
  PrefillOptions options;
  options.softmaxScale = 0.1;
  options.vHeadDim = 5;
  auto check = [&](Device device) {
    return checkPrefill(device, q, kvC, kPe, w, cache, blockTable,
                        queryStartLoc, seqLens, options);
  };
  // An f32 cache of page size 8 serves bf16 activations on the GPU only.
  llvm::Expected<PrefillCall> call = check(Device::GPU);
  ASSERT_TRUE(!!call) << messageOf(call.takeError());
  EXPECT_EQ(call->cache.layoutFormat, "f32");
  EXPECT_EQ(call->cache.pageSize, 8);
  EXPECT_EQ(messageOf(check(Device::CPU)),
            "q must be float32 or float16, got bfloat16");
  for (HostTensor *t : {&q, &kvC, &kPe, &w})
    t->dtype = DType::f32;
  EXPECT_EQ(messageOf(check(Device::GPU)),
            "q must be bfloat16 or float16, got float32");
  for (HostTensor *t : {&q, &kvC, &kPe, &w})
    t->dtype = DType::f16;
  seqLens.data = nullptr;
  EXPECT_EQ(messageOf(check(Device::GPU)),
            "prefill needs the host copy of seq_lens (the context chunks are "
            "planned on the host)");
}

TEST(ArgRules, SharedValueRules) {
  std::vector<int32_t> lens{0, 3, 64};
  EXPECT_EQ(messageOf(checkSeqLenValues(lens, 4, 16, "block_table", 4)),
            "causal decode needs seq_lens[1] = 3 >= s_q = 4 (the query rows "
            "are the request's last s_q positions)");
  EXPECT_EQ(messageOf(checkSeqLenValues(lens, 4, 16, "block_table", {})), "");
  std::vector<int32_t> padding{-1, -5};
  llvm::Expected<bool> writes = checkSlotValues(padding, 2, 16);
  ASSERT_TRUE(!!writes);
  EXPECT_FALSE(*writes);
}

} // namespace
