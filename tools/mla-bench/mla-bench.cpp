//===- mla-bench.cpp - time and check MLA decode on the GPU ---------------===//
//
// Runs the cached decode kernels (GpuDecoder) without MLIR, so it can be
// built here and carried to a GPU machine that has only a driver.
//
//   mla-bench --cache-dir DIR [--shapes default | --b B --n N --seq S --sq Q
//             [--causal] [--varlen 1,2,4,8]] [--iters 20] [--warmup 5]
//             [--splits auto|K]
//             [--policy heuristic|balanced|batch-invariant] [--tile RxWxKxS]
//             [--no-flush | --flush-mib 512] [--kv-format
//             auto|fp8_e4m3|fp8_e4m3_token|fp8_ds_mla]
//   mla-bench --cache-dir DIR --check      GPU against a float64 reference
//   mla-bench --list-specs [--chip sm_90a] the spec texts mla-aot must build
//
// Timing covers mla_decode_partial + mla_combine only: the split plan is
// made and uploaded before, and L2 is flushed (a 512 MiB memset, --flush-mib)
// between iterations outside the timed region. Speed is reported by the
// primer's section 9 accounting, from the median time; GB/s counts the bytes
// read (the cache rows in their format, q) and written (out).
//
//===----------------------------------------------------------------------===//

#include "DecodeReference.h"
#include "DeviceBuffer.h"
#include "mla/Contract/Version.h"
#include "mla/GpuRuntime/GpuDecode.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>
#include <random>
#include <thread>

using namespace mla;
using namespace mla::gpu;
using mla::bench::DeviceBuffer;
namespace cl = llvm::cl;

static cl::OptionCategory benchCategory("mla-bench options");

/// DeepSeek-V3's softmax scale, (P+R)^-0.5 with P+R = 128 + 64: a launch
/// argument of the decode kernel.
static const float kSoftmaxScale = static_cast<float>(1.0 / std::sqrt(192.0));

static cl::opt<std::string> cacheDir("cache-dir", cl::cat(benchCategory),
                                     cl::desc("Kernel cache directory"),
                                     cl::value_desc("dir"));
static cl::opt<std::string>
    shapesOpt("shapes", cl::cat(benchCategory), cl::init(""),
              cl::desc("'default': the standard decode shapes (ignored when "
                       "--b/--n/--seq/--sq are given)"));
static cl::opt<int64_t> batchOpt("b", cl::cat(benchCategory), cl::init(0),
                                 cl::desc("Batch size"));
static cl::opt<int64_t> headsOpt("n", cl::cat(benchCategory), cl::init(128),
                                 cl::desc("Query heads"));
static cl::opt<int64_t> seqOpt("seq", cl::cat(benchCategory), cl::init(4096),
                               cl::desc("seq_len of every request"));
static cl::opt<int64_t> sqOpt("sq", cl::cat(benchCategory), cl::init(1),
                              cl::desc("Query rows per request"));
static cl::opt<bool> causalOpt("causal", cl::cat(benchCategory),
                               cl::desc("Causal query rows"));
static cl::list<int64_t>
    varlenOpt("varlen", cl::cat(benchCategory), cl::CommaSeparated,
              cl::desc("With --b: a varlen batch (query_start_loc, sm_90a) "
                       "whose request b has the (b mod n)-th of these draft "
                       "lengths (each in [1, 8]) as its query tokens; --sq "
                       "is ignored"),
              cl::value_desc("q_0,q_1,..."));
static cl::opt<int> itersOpt("iters", cl::cat(benchCategory), cl::init(20),
                             cl::desc("Timed iterations"));
static cl::opt<int> warmupOpt("warmup", cl::cat(benchCategory), cl::init(5),
                              cl::desc("Untimed iterations first"));
static cl::opt<std::string> splitsOpt("splits", cl::cat(benchCategory),
                                      cl::init("auto"),
                                      cl::desc("'auto' (from --policy) or "
                                               "pieces per request"));
static cl::opt<std::string>
    policyOpt("policy", cl::cat(benchCategory), cl::init("grid"),
              cl::desc("Split policy for --splits auto: grid (one uniform "
                       "count fitted to the SMs, chooseGridSplits), "
                       "heuristic, balanced or batch-invariant"));
static cl::opt<std::string>
    tileOpt("tile", cl::cat(benchCategory), cl::init(""),
            cl::desc("Tiling RxWxKxS[w|p|s|b] (default: "
                     "chooseDecodeTiling)"));
static cl::opt<int64_t> overheadOpt(
    "balanced-overhead", cl::cat(benchCategory), cl::init(5),
    cl::desc("The balanced policy's cost per piece, in blocks "
             "(SplitPlanOptions::fixedOverheadBlocks; FlashMLA's 5)"));
static cl::opt<bool> noFlush("no-flush", cl::cat(benchCategory),
                             cl::desc("Keep L2 warm between iterations"));
static cl::opt<int64_t> flushMiB(
    "flush-mib", cl::cat(benchCategory), cl::init(512),
    cl::desc("MiB of the memset that flushes L2 before each timed call "
             "(flashmla_bench's is 256)"));
static cl::opt<bool> checkMode("check", cl::cat(benchCategory),
                               cl::desc("Compare against a float64 host "
                                        "reference instead of timing"));
static cl::opt<bool> checkBench(
    "check-bench", cl::cat(benchCategory),
    cl::desc("With --check: check the timing shapes (batch capped at 4, "
             "every request at seq) instead of the mixed-length batches"));
static cl::opt<bool>
    noPoison("no-poison",
             cl::desc("--check: fill unused cache slots with zeros, not NaN"));
static cl::opt<bool> listSpecs("list-specs", cl::cat(benchCategory),
                               cl::desc("Print the kernel specs the timing "
                                        "shapes and --check use, and exit"));
static cl::opt<std::string> kvFormatOpt(
    "kv-format", cl::cat(benchCategory), cl::init("auto"),
    cl::desc("Cache rows: auto (bf16), fp8_e4m3 (per-tensor scale), "
             "fp8_e4m3_token or fp8_ds_mla"));
static cl::opt<std::string> chipOpt("chip", cl::cat(benchCategory),
                                    cl::init(""),
                                    cl::desc("sm_90a or sm_100a (default: "
                                             "device 0's)"));

/// --check tolerances (q and cache uniform in [-1, 1), so |out| <= 1): the
/// output is rounded to bf16 (2^-9 relative) and the kernels may hold
/// probabilities in bf16 for the PV product, a few ulps at 1.0 in all;
/// scores and lse are accumulated in f32.
static constexpr double kOutTol = 2e-2;
static constexpr double kLseTol = 1e-2;

namespace {

struct Shape {
  int64_t batch, heads, seq, sq;
  bool causal;
  /// Varlen: request b's query tokens are drafts[b % drafts.size()] and sq
  /// is the largest of them.
  std::vector<int64_t> drafts = {};
};

llvm::Expected<Chip> targetChip() {
  if (chipOpt.empty())
    return CudaRuntime::getChip();
  Chip chip;
  if (!parseChip(chipOpt, chip))
    return llvm::createStringError("unknown --chip '" + chipOpt + "'");
  return chip;
}

llvm::Expected<CacheFormat> kvFormat() {
  const std::pair<const char *, CacheFormat> formats[] = {
      {"auto", CacheFormat::BF16},
      {"fp8_e4m3", CacheFormat::FP8E4M3},
      {"fp8_e4m3_token", CacheFormat::FP8E4M3Token},
      {"fp8_ds_mla", CacheFormat::FP8DsMla}};
  for (auto [name, format] : formats)
    if (kvFormatOpt == name)
      return format;
  return llvm::createStringError("--kv-format must be auto, fp8_e4m3, "
                                 "fp8_e4m3_token or fp8_ds_mla, got '" +
                                 kvFormatOpt + "'");
}

llvm::Expected<DecodeKernelSpec> makeSpec(Chip chip, const Shape &shape) {
  llvm::Expected<CacheFormat> format = kvFormat();
  if (!format)
    return format.takeError();
  DecodeKernelSpec spec;
  spec.chip = chip;
  spec.shape.numHeads = shape.heads;
  spec.shape.queryRows = shape.sq;
  spec.shape.latentDim = 512;
  spec.shape.ropeDim = 64;
  spec.shape.pageSize = 64;
  spec.shape.elem = ElemType::BF16;
  spec.shape.causal = shape.causal;
  spec.shape.kvFormat = *format;
  // Through the spec text, so --tile gets the parser's checks.
  std::string text = toString(spec);
  text = text.substr(0, text.rfind(" tile="));
  if (!shape.drafts.empty())
    text += " varlen=1";
  if (!tileOpt.empty())
    text += " tile=" + tileOpt;
  std::string why;
  if (!parseDecodeKernelSpec(text, spec, why))
    return llvm::createStringError(why);
  return spec;
}

/// With --tile: whether the forced tiling cannot run `shape` although it is
/// well formed (it runs the N = 128, s_q = 1 decode). Such a shape is skipped,
/// its reason on a comment line, so that one --tile (e.g. the multicast
/// build's, N a multiple of 128) covers the standard sets.
bool tileSkips(Chip chip, const Shape &shape) {
  if (tileOpt.empty())
    return false;
  llvm::Expected<DecodeKernelSpec> spec = makeSpec(chip, shape);
  if (spec)
    return false;
  std::string why = llvm::toString(spec.takeError());
  llvm::Expected<DecodeKernelSpec> reference =
      makeSpec(chip, Shape{1, 128, 64, 1, false});
  if (!reference) {
    // Malformed or unusable everywhere: the caller reports it.
    llvm::consumeError(reference.takeError());
    return false;
  }
  llvm::outs() << "# skipped N=" << shape.heads << " Sq=" << shape.sq
               << " causal=" << (shape.causal ? 1 : 0) << ": " << why << "\n";
  return true;
}

/// One custom shape when --b is given, else the standard set.
std::vector<Shape> timingShapes() {
  if (batchOpt > 0 && !varlenOpt.empty()) {
    std::vector<int64_t> drafts(varlenOpt.begin(), varlenOpt.end());
    return {{batchOpt, headsOpt, seqOpt, *llvm::max_element(drafts), causalOpt,
             drafts}};
  }
  if (batchOpt > 0)
    return {{batchOpt, headsOpt, seqOpt, sqOpt, causalOpt}};
  return {{64, 128, 4096, 1, false},  {132, 128, 8192, 1, false},
          {32, 128, 16384, 1, false}, {128, 16, 8192, 1, false},
          {64, 16, 32768, 1, false},  {128, 128, 8192, 2, true}};
}

/// --check configurations: N in {16, 128}, plain decode and two causal rows.
std::vector<Shape> checkShapes() {
  return {{6, 16, 0, 1, false},
          {6, 128, 0, 1, false},
          {6, 16, 0, 2, true},
          {6, 128, 0, 2, true}};
}

/// Mixed lengths: empty, one token, page edges and a long request. With two
/// causal rows a request holds at least both query tokens.
std::vector<int32_t> checkSeqLens(const Shape &shape) {
  int32_t shortest = shape.causal ? static_cast<int32_t>(shape.sq) : 1;
  return {0, shortest, 63, 64, 65, 8191};
}

/// Random bf16 in [-1, 1).
std::vector<uint16_t> randomBf16(size_t count, std::mt19937 &rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<uint16_t> values(count);
  for (uint16_t &v : values)
    v = bench::floatToBf16(dist(rng));
  return values;
}

/// Fills `bytes` bytes at `dst` by repeating `pattern`.
llvm::Error fillDevice(const CudaDriver &driver, CUdeviceptr dst, size_t bytes,
                       const std::vector<uint8_t> &pattern) {
  for (size_t done = 0; done < bytes;) {
    size_t n = std::min(pattern.size(), bytes - done);
    if (llvm::Error error =
            driver.check(driver.api().memcpyHtoD(dst + done, pattern.data(), n),
                         "cuMemcpyHtoD"))
      return error;
    done += n;
  }
  return llvm::Error::success();
}

/// float8 E4M3FN code -> float (NaN codes give NaN).
float e4m3ToFloat(uint8_t code) {
  if ((code & 0x7f) == 0x7f)
    return NAN;
  int exp = (code >> 3) & 15, man = code & 7;
  float v =
      exp ? std::ldexp(1.0f + man / 8.0f, exp - 7) : std::ldexp(man / 8.0f, -6);
  return code & 0x80 ? -v : v;
}

/// The fp8_e4m3 per-tensor scale of --check: codes of up to 448 to 1.
constexpr float kCheckKvScale = 1.0f / 448;

/// One random cache row of `shape`'s format at `bytes`, and the values it
/// stands for (`values`, L+R): bf16 rows in [-1, 1), fp8 codes of every
/// finite value times scales that bring them to at most ~2.
void randomRow(const DecodeShape &shape, std::mt19937 &rng, uint8_t *bytes,
               float *values) {
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f), scales(0.5f, 2.0f);
  int64_t d = shape.rowDim(), l = shape.latentDim;
  auto bf16At = [&](uint8_t *at, float *value) {
    uint16_t bits = bench::floatToBf16(unit(rng));
    std::memcpy(at, &bits, 2);
    *value = bench::bf16ToFloat(bits);
  };
  auto code = [&] {
    uint8_t c;
    do
      c = static_cast<uint8_t>(rng());
    while ((c & 0x7f) == 0x7f);
    return c;
  };
  auto f32At = [&](uint8_t *at, float value) { std::memcpy(at, &value, 4); };
  switch (shape.kvFormat) {
  case CacheFormat::FP8E4M3:
    for (int64_t c = 0; c < d; ++c) {
      bytes[c] = code();
      values[c] = e4m3ToFloat(bytes[c]) * kCheckKvScale;
    }
    return;
  case CacheFormat::FP8E4M3Token: {
    float s[2] = {scales(rng) / 448, scales(rng) / 448};
    f32At(bytes + d, s[0]);
    f32At(bytes + d + 4, s[1]);
    for (int64_t c = 0; c < d; ++c) {
      bytes[c] = code();
      values[c] = e4m3ToFloat(bytes[c]) * s[c < l ? 0 : 1];
    }
    return;
  }
  case CacheFormat::FP8DsMla: {
    for (int64_t t = 0; t < l / kDsMlaTile; ++t) {
      float s = scales(rng) / 448;
      f32At(bytes + l + 4 * t, s);
      for (int64_t c = t * kDsMlaTile; c < (t + 1) * kDsMlaTile; ++c) {
        bytes[c] = code();
        values[c] = e4m3ToFloat(bytes[c]) * s;
      }
    }
    uint8_t *rope = bytes + dsMlaRopeOffset(l);
    for (int64_t c = l; c < d; ++c)
      bf16At(rope + 2 * (c - l), &values[c]);
    return;
  }
  default:
    for (int64_t c = 0; c < d; ++c)
      bf16At(bytes + 2 * c, &values[c]);
  }
}

/// The bytes the timing runs repeat over the whole cache. bf16/f16: random
/// bf16 in [-1, 1). fp8 formats: 8192 rows as randomRow writes them (finite
/// codes, scales near 1/448), as a real cache holds them: the bf16 pattern
/// read as fp8 rows holds NaN codes (0x7f, 0xff) in every block and f32
/// scales of any size, and a NaN score makes every block rescale O (the
/// timings of 2026-12-05 and before were taken on such rows).
std::vector<uint8_t> timingPattern(const DecodeShape &shape,
                                   std::mt19937 &rng) {
  std::vector<uint8_t> bytes;
  if (shape.kvFormat != CacheFormat::FP8E4M3 &&
      shape.kvFormat != CacheFormat::FP8E4M3Token &&
      shape.kvFormat != CacheFormat::FP8DsMla) {
    std::vector<uint16_t> bf16 = randomBf16(1 << 24, rng);
    bytes.resize(bf16.size() * 2);
    std::memcpy(bytes.data(), bf16.data(), bytes.size());
    return bytes;
  }
  const int64_t rows = 8192, rowBytes = shape.cacheRowBytes();
  std::vector<float> values(shape.rowDim());
  bytes.resize(rows * rowBytes);
  for (int64_t r = 0; r < rows; ++r)
    randomRow(shape, rng, &bytes[r * rowBytes], values.data());
  return bytes;
}

llvm::Error upload(const CudaDriver &driver, CUdeviceptr dst, const void *src,
                   size_t bytes) {
  return driver.check(driver.api().memcpyHtoD(dst, src, bytes), "cuMemcpyHtoD");
}

llvm::Expected<SplitBounds> planFor(const DecodeKernelSpec &spec,
                                    llvm::ArrayRef<int32_t> lens,
                                    llvm::StringRef splits,
                                    llvm::StringRef policy, int64_t numSms) {
  // The persistent build walks a balanced plan and nothing else.
  if (spec.tiling.persistent) {
    if (splits != "auto")
      return llvm::createStringError(
          "the persistent decode (tile suffix b) walks a balanced plan; "
          "--splits must be 'auto', got '" +
          splits + "'");
    policy = "balanced";
  }
  if (splits != "auto") {
    int64_t k = 0;
    if (splits.getAsInteger(10, k) || k < 1)
      return llvm::createStringError("--splits must be 'auto' or a positive "
                                     "integer, got '" +
                                     splits + "'");
    return planUniformBounds(lens, k, spec.shape.pageSize);
  }
  if (policy == "grid") {
    int64_t maxLen = 0;
    for (int32_t len : lens)
      maxLen = std::max<int64_t>(maxLen, len);
    return planUniformBounds(
        lens, chooseGridSplits(spec, lens.size(), maxLen, numSms),
        spec.shape.pageSize);
  }
  plan::SplitPolicy p;
  if (policy == "heuristic")
    p = plan::SplitPolicy::Heuristic;
  else if (policy == "balanced")
    p = plan::SplitPolicy::Balanced;
  else if (policy == "batch-invariant")
    p = plan::SplitPolicy::BatchInvariant;
  else
    return llvm::createStringError("--policy must be grid, heuristic, "
                                   "balanced or batch-invariant, got '" +
                                   policy + "'");
  plan::SplitPlanOptions options = decodePlanOptions(spec, p, numSms);
  options.fixedOverheadBlocks = overheadOpt;
  return planBounds(lens, options);
}

llvm::Expected<int64_t> numSmsOfDevice(const CudaDriver &driver) {
  CUdevice device;
  int count = 0;
  if (llvm::Error error =
          driver.check(driver.api().deviceGet(&device, 0), "cuDeviceGet"))
    return std::move(error);
  if (llvm::Error error = driver.check(
          driver.api().deviceGetAttribute(
              &count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device),
          "cuDeviceGetAttribute"))
    return std::move(error);
  return count;
}

/// Device buffers of one decode problem.
struct Problem {
  int64_t batch, maxPages, numPages;
  DeviceBuffer q, cache, blockTable, seqLens, out, lse;
  /// fp8_e4m3's per-tensor scale (f32 [1]); unused by the other formats.
  DeviceBuffer kvScale;
};

/// Allocates and fills a problem. `host`, when given, receives the inputs
/// (for the reference) and the cache is built from it exactly; otherwise the
/// cache is filled with a repeated random pattern of valid rows
/// (timingPattern).
llvm::Expected<Problem> makeProblem(const CudaDriver &driver,
                                    const DecodeShape &shape,
                                    llvm::ArrayRef<int32_t> lens,
                                    std::mt19937 &rng,
                                    bench::DecodeInputs *host) {
  int64_t batch = lens.size(), page = shape.pageSize, d = shape.rowDim();
  int64_t longest = *std::max_element(lens.begin(), lens.end());
  int64_t maxPages = std::max<int64_t>(1, (longest + page - 1) / page);
  int64_t numPages = batch * maxPages;
  std::vector<int32_t> table(numPages);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);

  size_t qCount = batch * shape.queryRows * shape.numHeads * d;
  int64_t rowBytes = shape.cacheRowBytes();
  size_t cacheCount = numPages * page * d;
  size_t cacheBytes = numPages * page * rowBytes;
  size_t outCount = batch * shape.queryRows * shape.numHeads * shape.latentDim;
  size_t lseCount = batch * shape.numHeads * shape.queryRows;
  auto alloc = [&](size_t bytes) { return DeviceBuffer::alloc(driver, bytes); };
  llvm::Expected<DeviceBuffer> q = alloc(qCount * 2), cache = alloc(cacheBytes),
                               bt = alloc(table.size() * 4),
                               sl = alloc(lens.size() * 4),
                               out = alloc(outCount * 2),
                               lse = alloc(lseCount * 4), kvScale = alloc(4);
  for (llvm::Expected<DeviceBuffer> *b :
       {&q, &cache, &bt, &sl, &out, &lse, &kvScale})
    if (!*b)
      return b->takeError();
  if (llvm::Error error =
          upload(driver, kvScale->get(), &kCheckKvScale, sizeof(float)))
    return std::move(error);

  std::vector<uint16_t> qHost = randomBf16(qCount, rng);
  if (llvm::Error error = upload(driver, q->get(), qHost.data(), qCount * 2))
    return std::move(error);
  if (host) {
    // Slots no request reads hold NaN (or 0): they must never leak. 0xff
    // bytes are NaN as bf16, e4m3 codes and f32 scales alike.
    std::vector<uint8_t> cacheHost(cacheBytes, noPoison ? 0 : 0xff);
    std::vector<float> values(cacheCount, NAN);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t j = 0; j < lens[b]; ++j) {
        int64_t slot = table[b * maxPages + j / page] * page + j % page;
        randomRow(shape, rng, &cacheHost[slot * rowBytes], &values[slot * d]);
      }
    if (llvm::Error error =
            upload(driver, cache->get(), cacheHost.data(), cacheBytes))
      return std::move(error);
    *host = {batch,
             maxPages,
             numPages,
             std::move(qHost),
             std::move(values),
             table,
             std::vector<int32_t>(lens.begin(), lens.end())};
  } else if (llvm::Error error = fillDevice(driver, cache->get(), cacheBytes,
                                            timingPattern(shape, rng))) {
    return std::move(error);
  }
  if (llvm::Error error =
          upload(driver, bt->get(), table.data(), table.size() * 4))
    return std::move(error);
  if (llvm::Error error =
          upload(driver, sl->get(), lens.data(), lens.size() * 4))
    return std::move(error);
  return Problem{batch,
                 maxPages,
                 numPages,
                 std::move(*q),
                 std::move(*cache),
                 std::move(*bt),
                 std::move(*sl),
                 std::move(*out),
                 std::move(*lse),
                 std::move(*kvScale)};
}

/// query_start_loc of a varlen shape's batch.
std::vector<int32_t> queryStartLoc(const Shape &shape) {
  std::vector<int32_t> starts = {0};
  for (int64_t b = 0; b < shape.batch; ++b)
    starts.push_back(starts.back() + shape.drafts[b % shape.drafts.size()]);
  return starts;
}

/// Uploads `bounds` into a fresh workspace and returns it with the args.
llvm::Expected<DeviceBuffer>
prepare(const CudaDriver &driver, const GpuDecoder &decoder, const Problem &p,
        const SplitBounds &bounds, DecodeArgs &args) {
  size_t bytes = decoder.workspaceBytes(p.batch, bounds.numSplits);
  llvm::Expected<DeviceBuffer> workspace = DeviceBuffer::alloc(driver, bytes);
  if (!workspace)
    return workspace.takeError();
  args = {p.q.get(),   p.cache.get(), p.blockTable.get(), p.seqLens.get(),
          p.out.get(), p.lse.get(),   workspace->get(),   bytes,
          p.batch,     p.maxPages,    p.numPages,         bounds.numSplits};
  args.softmaxScale = kSoftmaxScale;
  if (decoder.getSpec().tiling.persistent)
    args.numSmParts = bounds.numSmParts;
  if (decoder.getSpec().shape.kvFormat == CacheFormat::FP8E4M3)
    args.kvScale = p.kvScale.get();
  if (llvm::Error error = decoder.uploadBounds(nullptr, workspace->get(), bytes,
                                               p.batch, bounds))
    return std::move(error);
  return workspace;
}

llvm::Error timeShape(const CudaDriver &driver, const KernelCache &cache,
                      Chip chip, int64_t numSms, const Shape &shape,
                      CUdeviceptr flush, size_t flushBytes) {
  const CudaDriverApi &api = driver.api();
  llvm::Expected<DecodeKernelSpec> spec = makeSpec(chip, shape);
  if (!spec)
    return spec.takeError();
  llvm::Expected<GpuDecoder> decoder = GpuDecoder::fromCache(*spec, cache);
  if (!decoder)
    return decoder.takeError();
  std::mt19937 rng(1234);
  std::vector<int32_t> lens(shape.batch, static_cast<int32_t>(shape.seq));
  llvm::Expected<Problem> problem =
      makeProblem(driver, spec->shape, lens, rng, nullptr);
  if (!problem)
    return problem.takeError();
  llvm::Expected<SplitBounds> bounds =
      planFor(*spec, lens, splitsOpt, policyOpt, numSms);
  if (!bounds)
    return bounds.takeError();
  DecodeArgs args;
  llvm::Expected<DeviceBuffer> workspace =
      prepare(driver, *decoder, *problem, *bounds, args);
  if (!workspace)
    return workspace.takeError();
  // A varlen batch packs its T <= B * Sq tokens into the front of the
  // problem's q, out and lse buffers.
  std::vector<int32_t> starts;
  std::optional<DeviceBuffer> startsBuffer;
  if (!shape.drafts.empty()) {
    starts = queryStartLoc(shape);
    llvm::Expected<DeviceBuffer> buffer =
        DeviceBuffer::alloc(driver, starts.size() * 4);
    if (!buffer)
      return buffer.takeError();
    if (llvm::Error error =
            upload(driver, buffer->get(), starts.data(), starts.size() * 4))
      return error;
    startsBuffer.emplace(std::move(*buffer));
    args.queryStartLoc = startsBuffer->get();
    args.numTokens = starts.back();
  }

  CUstream stream;
  if (llvm::Error error = driver.check(
          api.streamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"))
    return error;
  auto destroyStream =
      llvm::scope_exit([&] { (void)api.streamDestroy(stream); });
  CUevent start, stop;
  if (llvm::Error error = driver.check(
          api.eventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate"))
    return error;
  auto destroyStart = llvm::scope_exit([&] { (void)api.eventDestroy(start); });
  if (llvm::Error error = driver.check(api.eventCreate(&stop, CU_EVENT_DEFAULT),
                                       "cuEventCreate"))
    return error;
  auto destroyStop = llvm::scope_exit([&] { (void)api.eventDestroy(stop); });
  // The bounds went up on the legacy stream: finish that before timing.
  if (llvm::Error error =
          driver.check(api.streamSynchronize(nullptr), "cuStreamSynchronize"))
    return error;

  for (int i = 0; i < warmupOpt; ++i)
    if (llvm::Error error = decoder->run(stream, args))
      return error;
  std::vector<float> times;
  for (int i = 0; i < itersOpt; ++i) {
    if (flush)
      if (llvm::Error error = driver.check(
              api.memsetD8Async(flush, static_cast<unsigned char>(i),
                                flushBytes, stream),
              "cuMemsetD8Async"))
        return error;
    if (llvm::Error error =
            driver.check(api.eventRecord(start, stream), "cuEventRecord"))
      return error;
    if (llvm::Error error = decoder->run(stream, args))
      return error;
    if (llvm::Error error =
            driver.check(api.eventRecord(stop, stream), "cuEventRecord"))
      return error;
    if (llvm::Error error =
            driver.check(api.eventSynchronize(stop), "cuEventSynchronize"))
      return error;
    float ms = 0;
    if (llvm::Error error = driver.check(api.eventElapsedTime(&ms, start, stop),
                                         "cuEventElapsedTime"))
      return error;
    times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  double median =
      times.empty() ? 0
      : times.size() % 2
          ? times[times.size() / 2]
          : (times[times.size() / 2 - 1] + times[times.size() / 2]) / 2;
  double best = times.empty() ? 0 : times.front();

  if (!starts.empty())
    llvm::outs() << "# varlen: " << starts.back()
                 << " query tokens; Sq below is the largest draft\n";
  // Primer section 9, over the batch's query tokens (B * Sq, or a varlen
  // batch's T).
  const DecodeShape &s = spec->shape;
  double totalLen = static_cast<double>(shape.batch) * shape.seq;
  double tokens = starts.empty() ? double(shape.batch) * s.queryRows
                                 : double(starts.back());
  double flops =
      2.0 * tokens * shape.seq * s.numHeads * (s.rowDim() + s.latentDim);
  double bytes = totalLen * s.cacheRowBytes() + tokens * s.numHeads *
                                                    (s.rowDim() + s.latentDim) *
                                                    elemBytes(s.elem);
  llvm::outs() << llvm::format(
      "%5lld %4lld %6lld %3lld %6s %6lld %10s %10.4f %10.4f %9.1f %9.1f\n",
      (long long)shape.batch, (long long)shape.heads, (long long)shape.seq,
      (long long)shape.sq, shape.causal ? "yes" : "no",
      (long long)bounds->numSplits, decodeTileText(spec->tiling).c_str(),
      median, best, median > 0 ? flops / (median * 1e-3) / 1e12 : 0.0,
      median > 0 ? bytes / (median * 1e-3) / 1e9 : 0.0);
  return llvm::Error::success();
}

llvm::Error runTiming(const CudaDriver &driver, const KernelCache &cache,
                      Chip chip, int64_t numSms) {
  size_t flushBytes = size_t(flushMiB) << 20;
  std::optional<DeviceBuffer> flush;
  if (!noFlush) {
    llvm::Expected<DeviceBuffer> buffer =
        DeviceBuffer::alloc(driver, flushBytes);
    if (!buffer)
      return buffer.takeError();
    flush.emplace(std::move(*buffer));
  }
  llvm::outs() << "# " << itersOpt << " timed iterations after " << warmupOpt
               << " warm-up; L2 "
               << (noFlush ? std::string("warm")
                           : "flushed (" + std::to_string(flushMiB) +
                                 " MiB memset)")
               << "; splits " << splitsOpt
               << (splitsOpt == "auto" ? " (" + policyOpt + ")" : "")
               << "; cache " << kvFormatOpt
               << "; TFLOPS and GB/s from the median\n";
  llvm::outs() << "#   b    N    seq  Sq causal splits       tile  median_ms"
                  "     min_ms    TFLOPS      GB/s\n";
  for (const Shape &shape : timingShapes()) {
    if (tileSkips(chip, shape))
      continue;
    if (llvm::Error error = timeShape(driver, cache, chip, numSms, shape,
                                      flush ? flush->get() : 0, flushBytes))
      return error;
  }
  return llvm::Error::success();
}

/// Runs the image's planning kernel over `p`'s device seq_lens and compares
/// its bounds with the host's planUniformBounds: the two planners must agree
/// exactly, and valid tables must leave the status word 0.
llvm::Expected<bool> checkDevicePlan(const CudaDriver &driver,
                                     const GpuDecoder &decoder,
                                     const Problem &p,
                                     llvm::ArrayRef<int32_t> lens,
                                     int64_t numSplits) {
  const DecodeKernelSpec &spec = decoder.getSpec();
  llvm::Expected<SplitBounds> host =
      planUniformBounds(lens, numSplits, spec.shape.pageSize);
  if (!host)
    return host.takeError();
  DecodePlanArgs args;
  args.seqLens = p.seqLens.get();
  args.blockTable = p.blockTable.get();
  args.batch = args.maxBatch = p.batch;
  args.maxPages = p.maxPages;
  args.numPages = p.numPages;
  args.numSplits = numSplits;
  DecodeWorkspaceLayout layout =
      decodeWorkspaceLayout(spec, p.batch, numSplits);
  args.workspaceBytes = layout.totalBytes;
  llvm::Expected<DeviceBuffer> workspace =
      DeviceBuffer::alloc(driver, args.workspaceBytes);
  if (!workspace)
    return workspace.takeError();
  llvm::Expected<DeviceBuffer> status = DeviceBuffer::alloc(driver, 4);
  if (!status)
    return status.takeError();
  args.workspace = workspace->get();
  args.status = status->get();
  int32_t word = 0;
  const CudaDriverApi &api = driver.api();
  if (llvm::Error error = driver.check(
          api.memcpyHtoD(args.status, &word, sizeof(word)), "cuMemcpyHtoD"))
    return std::move(error);
  if (llvm::Error error = decoder.plan(nullptr, args))
    return std::move(error);
  std::vector<int32_t> device(host->bounds.size());
  if (llvm::Error error = driver.check(
          api.memcpyDtoH(device.data(), args.workspace + layout.splitBounds,
                         device.size() * sizeof(int32_t)),
          "cuMemcpyDtoH"))
    return std::move(error);
  if (llvm::Error error = driver.check(
          api.memcpyDtoH(&word, args.status, sizeof(word)), "cuMemcpyDtoH"))
    return std::move(error);
  bool passed = device == host->bounds && word == 0;
  llvm::outs() << llvm::format(
      "N=%-3lld Sq=%lld causal=%d device plan S=%-3lld bounds %s the host "
      "planner's, status %d %s\n",
      (long long)spec.shape.numHeads, (long long)spec.shape.queryRows,
      spec.shape.causal ? 1 : 0, (long long)numSplits,
      device == host->bounds ? "equal" : "DIFFER from", word,
      passed ? "PASS" : "FAIL");
  // Each line as it is decided: a kernel that hangs later (killed by a
  // timeout) must not take the finished lines with it.
  llvm::outs().flush();
  return passed;
}

/// Runs one check configuration for every split choice; false on a mismatch.
llvm::Expected<bool> checkShape(const CudaDriver &driver,
                                const KernelCache &cache, Chip chip,
                                int64_t numSms, const Shape &shape,
                                bool benchShape = false) {
  llvm::Expected<DecodeKernelSpec> spec = makeSpec(chip, shape);
  if (!spec)
    return spec.takeError();
  llvm::Expected<GpuDecoder> decoder = GpuDecoder::fromCache(*spec, cache);
  if (!decoder)
    return decoder.takeError();
  const DecodeShape &s = spec->shape;
  std::mt19937 rng(42 + shape.heads * 10 + shape.sq);
  // Benchmark shapes: every request at `seq`, as timed; else mixed lengths.
  std::vector<int32_t> lens = benchShape
                                  ? std::vector<int32_t>(shape.batch, shape.seq)
                                  : checkSeqLens(shape);
  bench::DecodeInputs host;
  llvm::Expected<Problem> problem = makeProblem(driver, s, lens, rng, &host);
  if (!problem)
    return problem.takeError();
  // After makeProblem, which assigns the inputs anew.
  host.softmaxScale = kSoftmaxScale;
  std::vector<double> refOut, refLse;
  bench::referenceDecode(s, host, refOut, refLse,
                         std::max(1u, std::thread::hardware_concurrency()));

  bool allPassed = true;
  struct Choice {
    const char *splits, *policy;
    int64_t sms;
  };
  const Choice choices[] = {{"1", "", numSms},
                            {"7", "", numSms},
                            {"64", "", numSms},
                            {"auto", "grid", numSms},
                            {"auto", "heuristic", numSms},
                            {"auto", "balanced", numSms},
                            {"auto", "batch-invariant", numSms}};
  // The persistent build walks balanced plans only: the GPU's, and plans
  // for 8 and 2 SMs, whose parts each walk several requests' pieces.
  const Choice persistentChoices[] = {{"auto", "balanced", numSms},
                                      {"auto", "balanced", 8},
                                      {"auto", "balanced", 2}};
  const bool persistent = spec->tiling.persistent;
  for (auto [splits, policy, sms] :
       persistent ? llvm::ArrayRef<Choice>(persistentChoices)
                  : llvm::ArrayRef<Choice>(choices)) {
    if (benchShape && !persistent && llvm::StringRef(policy) != "grid")
      continue;
    llvm::Expected<SplitBounds> bounds =
        planFor(*spec, lens, splits, policy, sms);
    if (!bounds)
      return bounds.takeError();
    DecodeArgs args;
    llvm::Expected<DeviceBuffer> workspace =
        prepare(driver, *decoder, *problem, *bounds, args);
    if (!workspace)
      return workspace.takeError();
    if (llvm::Error error = decoder->run(nullptr, args))
      return std::move(error);
    if (llvm::Error error = driver.check(
            driver.api().streamSynchronize(nullptr), "cuStreamSynchronize"))
      return std::move(error);
    std::vector<uint16_t> out(refOut.size());
    std::vector<float> lse(refLse.size());
    if (llvm::Error error = driver.check(
            driver.api().memcpyDtoH(out.data(), args.out, out.size() * 2),
            "cuMemcpyDtoH"))
      return std::move(error);
    if (llvm::Error error = driver.check(
            driver.api().memcpyDtoH(lse.data(), args.lse, lse.size() * 4),
            "cuMemcpyDtoH"))
      return std::move(error);

    double outErr = 0, lseErr = 0;
    int64_t bad = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      double e = std::fabs(bench::bf16ToFloat(out[i]) - refOut[i]);
      if (!(e <= kOutTol))
        ++bad;
      outErr = std::isnan(e) ? NAN : std::max(outErr, e);
    }
    for (size_t i = 0; i < lse.size(); ++i) {
      double e;
      if (std::isinf(refLse[i]))
        e = lse[i] == refLse[i] ? 0 : INFINITY; // -inf exactly, empty rows
      else
        e = std::fabs(lse[i] - refLse[i]);
      if (!(e <= kLseTol))
        ++bad;
      lseErr = std::isnan(e) ? NAN : std::max(lseErr, e);
    }
    bool passed = bad == 0;
    allPassed &= passed;
    llvm::outs() << llvm::format(
        "N=%-3lld Sq=%lld causal=%d splits=%-4s %-15s S=%-3lld "
        "max|out err|=%.3e max|lse err|=%.3e %s\n",
        (long long)s.numHeads, (long long)s.queryRows, s.causal ? 1 : 0, splits,
        (policy +
         (sms == numSms ? std::string() : "-" + std::to_string(sms) + "sm"))
            .c_str(),
        (long long)bounds->numSplits, outErr, lseErr, passed ? "PASS" : "FAIL");
    if (!passed)
      llvm::outs() << "  " << bad << " values outside tolerance\n";
    llvm::outs().flush();
  }
  // The device planner makes uniform pieces, which the persistent build
  // does not walk.
  for (int64_t numSplits : {1, 7}) {
    if (persistent)
      break;
    llvm::Expected<bool> planned =
        checkDevicePlan(driver, *decoder, *problem, lens, numSplits);
    if (!planned)
      return planned.takeError();
    allPassed &= *planned;
  }
  return allPassed;
}

llvm::Expected<bool> runCheck(const CudaDriver &driver,
                              const KernelCache &cache, Chip chip,
                              int64_t numSms) {
  llvm::outs() << "# GPU vs float64 host reference; "
               << (checkBench ? "the timing shapes, batch <= 4, every request "
                                "at seq"
                              : "seq_lens {0, 1 (2 for causal Sq=2), 63, 64, "
                                "65, 8191}")
               << "; cache " << kvFormatOpt << "; unused cache slots "
               << (noPoison ? "zero" : "NaN") << "; tolerance |out| " << kOutTol
               << ", |lse| " << kLseTol << " absolute\n";
  bool passed = true;
  if (checkBench) {
    // The timing shapes themselves (batch capped at 4 to bound the float64
    // host reference), every request at its full length.
    for (Shape shape : timingShapes()) {
      shape.batch = std::min<int64_t>(shape.batch, 4);
      if (tileSkips(chip, shape))
        continue;
      llvm::outs() << "b=" << shape.batch << " seq=" << shape.seq << " ";
      llvm::Expected<bool> ok =
          checkShape(driver, cache, chip, numSms, shape, /*benchShape=*/true);
      if (!ok)
        return ok.takeError();
      passed &= *ok;
    }
    return passed;
  }
  for (const Shape &shape : checkShapes()) {
    if (tileSkips(chip, shape))
      continue;
    llvm::Expected<bool> ok = checkShape(driver, cache, chip, numSms, shape);
    if (!ok)
      return ok.takeError();
    passed &= *ok;
  }
  return passed;
}

llvm::Error printSpecs() {
  llvm::Expected<Chip> chip = targetChip();
  if (!chip)
    return chip.takeError();
  std::vector<std::string> seen;
  std::vector<Shape> shapes = timingShapes();
  llvm::append_range(shapes, checkShapes());
  for (const Shape &shape : shapes) {
    if (tileSkips(*chip, shape))
      continue;
    llvm::Expected<DecodeKernelSpec> spec = makeSpec(*chip, shape);
    if (!spec)
      return spec.takeError();
    std::string text = toString(*spec);
    if (llvm::is_contained(seen, text))
      continue;
    seen.push_back(text);
    llvm::outs() << text << "\n";
  }
  return llvm::Error::success();
}

llvm::Expected<bool> runMain() {
  if (listSpecs) {
    if (llvm::Error error = printSpecs())
      return std::move(error);
    return true;
  }
  if (cacheDir.empty())
    return llvm::createStringError("--cache-dir is required");
  if (!shapesOpt.empty() && shapesOpt != "default")
    return llvm::createStringError("--shapes takes 'default' only; give one "
                                   "shape with --b/--n/--seq/--sq");
  if (itersOpt < 1 || warmupOpt < 0)
    return llvm::createStringError("--iters must be >= 1 and --warmup >= 0");
  if (flushMiB < 1 || flushMiB > 65536)
    return llvm::createStringError("--flush-mib must be in [1, 65536], got " +
                                   std::to_string(flushMiB));
  for (int64_t v : {(int64_t)headsOpt, (int64_t)seqOpt, (int64_t)sqOpt})
    if (v < 1)
      return llvm::createStringError("--n, --seq and --sq must be positive");
  if (!varlenOpt.empty()) {
    if (batchOpt < 1 || checkMode)
      return llvm::createStringError("--varlen times one --b batch (not "
                                     "--check: the GPU pytest "
                                     "test_gpu_varlen_decode.py checks it)");
    for (int64_t q : varlenOpt)
      if (q < 0 || q > kMaxVarlenQueryRows || q > seqOpt)
        return llvm::createStringError("--varlen lengths must be in [0, " +
                                       std::to_string(kMaxVarlenQueryRows) +
                                       "] and at most --seq");
    if (*llvm::max_element(varlenOpt) < 1)
      return llvm::createStringError("--varlen needs one length >= 1");
  }
  llvm::Expected<const CudaDriver &> driver = CudaRuntime::get();
  if (!driver)
    return driver.takeError();
  if (llvm::Error error = CudaRuntime::ensureContext())
    return std::move(error);
  llvm::Expected<Chip> chip = targetChip();
  if (!chip)
    return chip.takeError();
  llvm::Expected<int64_t> numSms = numSmsOfDevice(*driver);
  if (!numSms)
    return numSms.takeError();
  KernelCache cache(cacheDir);
  if (checkMode)
    return runCheck(*driver, cache, *chip, *numSms);
  if (llvm::Error error = runTiming(*driver, cache, *chip, *numSms))
    return std::move(error);
  return true;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::AddExtraVersionPrinter(mla::printVersion);
  cl::HideUnrelatedOptions(benchCategory);
  cl::ParseCommandLineOptions(argc, argv, "mla GPU decode benchmark\n");
  llvm::Expected<bool> passed = runMain();
  if (!passed) {
    llvm::errs() << "error: " << llvm::toString(passed.takeError()) << "\n";
    return 1;
  }
  if (checkMode)
    llvm::outs() << (*passed ? "PASS" : "FAIL") << "\n";
  return *passed ? 0 : 1;
}
