//===- GpuDecode.cpp - MLA decode on the GPU from a cached image ----------===//
//
// Every check runs before the first launch, so a rejected call leaves the
// stream untouched; the launches themselves are the only driver calls run()
// makes.
//
//===----------------------------------------------------------------------===//

#include "mla/GpuRuntime/GpuDecode.h"
#include "mla/Contract/ArgRules.h"
#include "mla/GpuRuntime/TensorMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/MathExtras.h"
#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

using namespace mla::gpu;
using llvm::Twine;

/// Grid y and z extents (pieces per request, requests) are at most this.
static constexpr int64_t kMaxGridYZ = 65535;
static constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
static constexpr size_t kSectionAlign = 256;

static llvm::Error invalid(const Twine &message) {
  return llvm::createStringError(
      std::make_error_code(std::errc::invalid_argument), message);
}

DecodeWorkspaceLayout
mla::gpu::decodeWorkspaceLayout(const DecodeKernelSpec &spec, int64_t batch,
                                int64_t numSplits) {
  auto align = [](size_t v) { return llvm::alignTo(v, kSectionAlign); };
  const DecodeShape &shape = spec.shape;
  size_t pieces = static_cast<size_t>(numSplits) * batch;
  size_t rows = pieces * shape.queryRows * shape.numHeads;
  DecodeWorkspaceLayout layout;
  layout.partialOut = 0;
  layout.partialLse = align(rows * shape.latentDim * sizeof(float));
  layout.splitBounds = layout.partialLse + align(rows * sizeof(float));
  layout.counters =
      layout.splitBounds + batch * (numSplits + 1) * sizeof(int32_t);
  // One counter per row block of a request, when the pieces may be merged
  // in the partial kernel.
  if (decodeCombinesInKernel(spec.chip, shape, spec.tiling, numSplits))
    layout.numCounters = batch * decodeRowBlocks(shape, spec.tiling);
  layout.totalBytes = layout.counters + layout.numCounters * sizeof(int32_t);
  if (spec.tiling.persistent) {
    layout.cuSplits = layout.totalBytes;
    layout.schedule = layout.cuSplits + (batch + 1) * sizeof(int32_t);
    layout.totalBytes = layout.schedule + kMaxDecodeParts *
                                              mla::plan::kScheduleRowSize *
                                              sizeof(int32_t);
  }
  return layout;
}

static llvm::Error checkSplitCount(int64_t numSplits) {
  if (numSplits < 1 || numSplits > kMaxGridYZ)
    return invalid("the number of splits must be in [1, " + Twine(kMaxGridYZ) +
                   "], got " + Twine(numSplits));
  return llvm::Error::success();
}

/// Appends the S+1 bounds of one request cut into pieces of `chunk` tokens.
static void appendChunkedRow(std::vector<int32_t> &bounds, int64_t len,
                             int64_t numSplits, int64_t chunk) {
  for (int64_t s = 0; s <= numSplits; ++s)
    bounds.push_back(static_cast<int32_t>(std::min(s * chunk, len)));
}

llvm::Expected<SplitBounds>
mla::gpu::planUniformBounds(llvm::ArrayRef<int32_t> seqLens, int64_t numSplits,
                            int64_t alignTokens) {
  if (llvm::Error error = checkSplitCount(numSplits))
    return std::move(error);
  if (alignTokens < 1)
    return invalid("alignTokens must be positive, got " + Twine(alignTokens));
  SplitBounds result;
  result.numSplits = numSplits;
  result.bounds.reserve(seqLens.size() * (numSplits + 1));
  for (auto [b, len] : llvm::enumerate(seqLens)) {
    if (len < 0)
      return invalid("seq_lens[" + Twine(b) + "] = " + Twine(len) +
                     " is negative");
    int64_t chunk = llvm::alignTo(llvm::divideCeil(len, numSplits),
                                  static_cast<uint64_t>(alignTokens));
    appendChunkedRow(result.bounds, len, numSplits,
                     std::max<int64_t>(chunk, 1));
  }
  return result;
}

llvm::Expected<SplitBounds> mla::gpu::planCapacityBounds(int64_t batch,
                                                         int64_t capacity,
                                                         int64_t numSplits,
                                                         int64_t alignTokens) {
  if (batch < 0 || capacity < 0 || capacity > kInt32Max)
    return invalid("batch (" + Twine(batch) + ") and capacity (" +
                   Twine(capacity) + ") must be non-negative int32 values");
  std::vector<int32_t> lens(batch, static_cast<int32_t>(capacity));
  return planUniformBounds(lens, numSplits, alignTokens);
}

mla::plan::SplitPlanOptions
mla::gpu::decodePlanOptions(const DecodeKernelSpec &spec,
                            plan::SplitPolicy policy, int64_t numSms) {
  plan::SplitPlanOptions options;
  options.policy = policy;
  options.numSms = numSms;
  options.numHeadsQ = spec.shape.numHeads;
  options.queryRows = spec.shape.queryRows;
  options.rowsPerCta = spec.tiling.rowsPerCta;
  return options;
}

llvm::Expected<SplitBounds>
mla::gpu::planBounds(llvm::ArrayRef<int32_t> seqLens,
                     const plan::SplitPlanOptions &options) {
  llvm::Expected<plan::SplitPlan> plan = plan::planSplits(seqLens, options);
  if (!plan)
    return plan.takeError();
  if (llvm::Error error = checkSplitCount(plan->maxSplits))
    return std::move(error);
  SplitBounds bounds{plan->maxSplits, std::move(plan->bounds)};
  if (options.policy == plan::SplitPolicy::Balanced) {
    bounds.numSmParts = plan->numSmParts;
    bounds.schedule = std::move(plan->schedule);
    bounds.cuSplits = std::move(plan->cuSplits);
  }
  return bounds;
}

llvm::Error mla::gpu::checkSeqLens(const DecodeKernelSpec &spec,
                                   llvm::ArrayRef<int32_t> seqLens,
                                   int64_t maxPages) {
  std::optional<int64_t> causalRows;
  if (spec.shape.causal)
    causalRows = spec.shape.queryRows;
  return checkSeqLenValues(seqLens, maxPages, spec.shape.pageSize,
                           "the block table's", causalRows);
}

llvm::Error mla::gpu::checkDecodeSizes(const DecodeKernelSpec &spec,
                                       int64_t batch, int64_t maxPages,
                                       int64_t numPages, int64_t numSplits) {
  if (batch < 1 || batch > kMaxGridYZ)
    return invalid("the batch size must be in [1, " + Twine(kMaxGridYZ) +
                   "], got " + Twine(batch));
  if (maxPages < 1 || maxPages > kInt32Max / spec.shape.pageSize)
    return invalid("the block table must have at least one column and a "
                   "capacity (columns x page size " +
                   Twine(spec.shape.pageSize) + ") that fits in int32, got " +
                   Twine(maxPages) + " columns");
  if (numPages < 1 || numPages > kInt32Max)
    return invalid("the cache must hold between 1 and " + Twine(kInt32Max) +
                   " pages, got " + Twine(numPages));
  return checkSplitCount(numSplits);
}

/// A workspace of `bytes` holds the sections of `batch` requests in
/// `numSplits` pieces laid out for `layoutBatch` (0: `batch`) requests.
static llvm::Error checkWorkspace(const DecodeKernelSpec &spec, size_t bytes,
                                  int64_t batch, int64_t layoutBatch,
                                  int64_t numSplits) {
  if (!layoutBatch)
    layoutBatch = batch;
  if (layoutBatch < batch || layoutBatch > kMaxGridYZ)
    return invalid("the workspace is laid out for " + Twine(layoutBatch) +
                   " requests; the batch of " + Twine(batch) +
                   " must fit in it (and it in " + Twine(kMaxGridYZ) + ")");
  size_t needed =
      decodeWorkspaceLayout(spec, layoutBatch, numSplits).totalBytes;
  if (bytes < needed)
    return invalid("the workspace holds " + Twine(bytes) + " bytes; " +
                   Twine(layoutBatch) + " requests in " + Twine(numSplits) +
                   " pieces need " + Twine(needed));
  return llvm::Error::success();
}

/// A varlen spec needs query_start_loc and T <= B * Sq tokens (the
/// workspace's partial sections hold B * Sq); a uniform one neither.
static llvm::Error checkVarlenArgs(const DecodeKernelSpec &spec,
                                   CUdeviceptr queryStartLoc, int64_t numTokens,
                                   int64_t batch) {
  if (!spec.shape.varlen) {
    if (queryStartLoc || numTokens)
      return invalid("query_start_loc was given to a uniform decode kernel; "
                     "varlen decodes need a varlen=1 spec");
    return llvm::Error::success();
  }
  if (!queryStartLoc)
    return invalid("the device pointer query_start_loc is null");
  if (queryStartLoc % 4)
    return invalid("the device pointer query_start_loc is not 4-byte aligned");
  if (numTokens < 0 || numTokens > batch * spec.shape.queryRows)
    return invalid("a varlen decode of " + Twine(batch) +
                   " requests of at most " + Twine(spec.shape.queryRows) +
                   " query tokens holds at most " +
                   Twine(batch * spec.shape.queryRows) +
                   " tokens, got T = " + Twine(numTokens));
  // The combine runs one CTA row per token along the grid's y extent.
  if (numTokens > 65535)
    return invalid("a varlen decode takes at most 65535 query tokens, got " +
                   Twine(numTokens));
  return llvm::Error::success();
}

llvm::Error mla::gpu::checkDecodeArgs(const DecodeKernelSpec &spec,
                                      const DecodeArgs &args) {
  struct Pointer {
    CUdeviceptr value;
    const char *name;
    unsigned align;
  };
  // q, cache, out and the workspace are moved in 16-byte vectors; the rest
  // are read or written element by element.
  const Pointer pointers[] = {{args.q, "q", 16},
                              {args.cache, "cache", 16},
                              {args.blockTable, "block_table", 4},
                              {args.seqLens, "seq_lens", 4},
                              {args.out, "out", 16},
                              {args.lse, "lse", 4},
                              {args.workspace, "workspace", 16}};
  for (const Pointer &p : pointers) {
    if (!p.value)
      return invalid(Twine("the device pointer ") + p.name + " is null");
    if (p.value % p.align)
      return invalid(Twine("the device pointer ") + p.name + " is not " +
                     Twine(p.align) + "-byte aligned");
  }
  bool wantsScale = spec.shape.kvFormat == CacheFormat::FP8E4M3;
  if (wantsScale && (!args.kvScale || args.kvScale % 4))
    return invalid("an fp8_e4m3 decode reads its per-tensor scale from "
                   "kv_scale, a 4-byte aligned device pointer to one float32; "
                   "got " +
                   Twine(args.kvScale ? "an unaligned one" : "null"));
  if (!wantsScale && args.kvScale)
    return invalid("kv_scale is the per-tensor scale of an fp8_e4m3 cache; "
                   "this kernel reads " +
                   Twine(spec.shape.fp8() ? "per-row scales" : "no scale") +
                   ": pass 0");
  if (llvm::Error error = checkDecodeSizes(spec, args.batch, args.maxPages,
                                           args.numPages, args.numSplits))
    return error;
  if (!(args.softmaxScale > 0) || std::isinf(args.softmaxScale))
    return invalid("softmax_scale must be positive and finite in float32, "
                   "got " +
                   Twine(std::to_string(args.softmaxScale)));
  if (llvm::Error error =
          checkVarlenArgs(spec, args.queryStartLoc, args.numTokens, args.batch))
    return error;
  if (spec.tiling.persistent &&
      (args.numSmParts < 1 || args.numSmParts > kMaxDecodeParts))
    return invalid("the persistent decode (tile suffix b) needs the SM parts "
                   "of its uploaded balanced plan, in [1, " +
                   Twine(kMaxDecodeParts) + "]; got " + Twine(args.numSmParts));
  if (!spec.tiling.persistent && args.numSmParts)
    return invalid("numSmParts is the persistent decode's (tile suffix b); "
                   "this kernel takes 0, got " +
                   Twine(args.numSmParts));
  return checkWorkspace(spec, args.workspaceBytes, args.batch, args.layoutBatch,
                        args.numSplits);
}

llvm::Error mla::gpu::checkDecodePlanArgs(const DecodeKernelSpec &spec,
                                          const DecodePlanArgs &args) {
  const std::pair<CUdeviceptr, const char *> pointers[] = {
      {args.seqLens, "seq_lens"},
      {args.blockTable, "block_table"},
      {args.workspace, "workspace"},
      {args.status, "status"}};
  for (auto [value, name] : pointers) {
    if (!value)
      return invalid(Twine("the device pointer ") + name + " is null");
    if (value % 4)
      return invalid(Twine("the device pointer ") + name +
                     " is not 4-byte aligned");
  }
  if (llvm::Error error = checkDecodeSizes(spec, args.batch, args.maxPages,
                                           args.numPages, args.numSplits))
    return error;
  if (llvm::Error error =
          checkVarlenArgs(spec, args.queryStartLoc, args.numTokens, args.batch))
    return error;
  return checkWorkspace(spec, args.workspaceBytes, args.batch, args.maxBatch,
                        args.numSplits);
}

llvm::Error mla::gpu::decodePlanStatusError(int32_t status) {
  if (!status)
    return llvm::Error::success();
  std::string rules;
  if (status & kDecodePlanBadSeqLen)
    rules += "a seq_lens value was outside [0, block table columns x page "
             "size] (or, for a causal decode, between 1 and Sq - 1; for a "
             "varlen one, below its request's query tokens)";
  if (status & kDecodePlanBadPage)
    rules += std::string(rules.empty() ? "" : "; ") +
             "a block table entry a request reads was outside [0, pages in "
             "the cache)";
  if (status & kDecodePlanBadQueryStartLoc)
    rules += std::string(rules.empty() ? "" : "; ") +
             "query_start_loc did not start at 0, decreased, gave a request "
             "more query tokens than the kernel's Sq or did not end at T";
  if (rules.empty())
    rules = "unknown status bits " + std::to_string(status);
  return invalid("a device-planned decode was given invalid tables since the "
                 "last check: " +
                 rules +
                 "; those requests were planned as empty (out 0, lse -inf)");
}

llvm::Expected<GpuDecoder> GpuDecoder::create(const DecodeKernelSpec &spec,
                                              const std::vector<char> &image) {
  std::string why = checkDecodeTiling(spec.chip, spec.shape, spec.tiling);
  if (!why.empty())
    return invalid("kernel spec '" + toString(spec) + "' is unusable: " + why);
  llvm::Expected<CudaKernel> partial = loadKernel(image, kDecodePartialKernel);
  if (!partial)
    return partial.takeError();
  llvm::Expected<CudaKernel> combine = loadKernel(image, kCombineKernel);
  if (!combine)
    return combine.takeError();
  llvm::Expected<CudaKernel> planner = loadKernel(image, kDecodePlanKernel);
  if (!planner)
    return planner.takeError();
  int64_t smem = decodeSharedBytes(spec.chip, spec.shape, spec.tiling);
  if (llvm::Error error =
          partial->setMaxDynamicSharedBytes(static_cast<int>(smem)))
    return std::move(error);
  return GpuDecoder(spec, std::move(*partial), std::move(*combine),
                    std::move(*planner));
}

llvm::Expected<GpuDecoder> GpuDecoder::fromCache(const DecodeKernelSpec &spec,
                                                 const KernelCache &cache,
                                                 const Compiler &fallback) {
  std::string key = cacheKeyFor(spec);
  if (std::optional<std::vector<char>> image =
          cache.lookup(key, toString(spec)))
    return create(spec, *image);
  if (!fallback)
    return cache.getMissingEntryError(toString(spec), key);
  llvm::Expected<std::vector<char>> image = fallback(spec);
  if (!image)
    return image.takeError();
  // Another process can still use the kernel later if this fails; this one
  // has it in hand already.
  llvm::consumeError(cache.store(key, toString(spec), *image));
  return create(spec, *image);
}

/// A balanced plan of `batch` requests the persistent build can walk.
static llvm::Error checkPersistentPlan(int64_t batch,
                                       const SplitBounds &bounds) {
  if (bounds.numSmParts < 1 || bounds.numSmParts > kMaxDecodeParts)
    return invalid("the persistent decode (tile suffix b) walks a balanced "
                   "plan of 1 to " +
                   Twine(kMaxDecodeParts) +
                   " SM parts (planBounds with SplitPolicy::Balanced); got " +
                   Twine(bounds.numSmParts) + " parts");
  if (bounds.schedule.size() !=
          size_t(bounds.numSmParts * mla::plan::kScheduleRowSize) ||
      bounds.cuSplits.size() != size_t(batch + 1))
    return invalid("a balanced plan of " + Twine(batch) + " requests in " +
                   Twine(bounds.numSmParts) + " parts has " +
                   Twine(bounds.numSmParts * mla::plan::kScheduleRowSize) +
                   " schedule words and " + Twine(batch + 1) +
                   " cu_splits; got " + Twine(bounds.schedule.size()) +
                   " and " + Twine(bounds.cuSplits.size()));
  return llvm::Error::success();
}

llvm::Error GpuDecoder::uploadBounds(CUstream stream, CUdeviceptr workspace,
                                     size_t workspaceBytes, int64_t batch,
                                     const SplitBounds &bounds) const {
  if (!workspace)
    return invalid("the device pointer workspace is null");
  if (batch < 1 || bounds.numSplits < 1 ||
      bounds.bounds.size() !=
          static_cast<size_t>(batch * (bounds.numSplits + 1)))
    return invalid("split bounds of " + Twine(bounds.bounds.size()) +
                   " entries do not match " + Twine(batch) + " requests x (" +
                   Twine(bounds.numSplits) + " + 1) pieces");
  DecodeWorkspaceLayout layout =
      decodeWorkspaceLayout(spec, batch, bounds.numSplits);
  if (workspaceBytes < layout.totalBytes)
    return invalid("the workspace holds " + Twine(workspaceBytes) + " bytes; " +
                   Twine(batch) + " requests in " + Twine(bounds.numSplits) +
                   " pieces need " + Twine(layout.totalBytes));
  llvm::Expected<const CudaDriver &> driver = CudaRuntime::get();
  if (!driver)
    return driver.takeError();
  // The combine counters follow the bounds: zeroed by the same copy; the
  // persistent build's cu_splits and schedule follow them.
  std::vector<int32_t> words(bounds.bounds.size() + layout.numCounters, 0);
  llvm::copy(bounds.bounds, words.begin());
  if (spec.tiling.persistent) {
    if (llvm::Error error = checkPersistentPlan(batch, bounds))
      return error;
    words.insert(words.end(), bounds.cuSplits.begin(), bounds.cuSplits.end());
    words.insert(words.end(), bounds.schedule.begin(), bounds.schedule.end());
  }
  return driver->check(driver->api().memcpyHtoDAsync(
                           workspace + layout.splitBounds, words.data(),
                           words.size() * sizeof(int32_t), stream),
                       "cuMemcpyHtoDAsync(split bounds)");
}

llvm::Error GpuDecoder::plan(CUstream stream,
                             const DecodePlanArgs &args) const {
  if (llvm::Error error = checkDecodePlanArgs(spec, args))
    return error;
  if (spec.tiling.persistent)
    return invalid("the persistent decode (tile suffix b) walks a balanced "
                   "plan made on the host from host seq_lens (planBounds, "
                   "uploadBounds); the device planner makes uniform pieces");
  DecodeWorkspaceLayout layout =
      decodeWorkspaceLayout(spec, args.maxBatch, args.numSplits);
  CUdeviceptr seqLens = args.seqLens, blockTable = args.blockTable,
              status = args.status;
  CUdeviceptr bounds = args.workspace + layout.splitBounds;
  int32_t batch = static_cast<int32_t>(args.batch);
  int32_t maxPages = static_cast<int32_t>(args.maxPages);
  int32_t numPages = static_cast<int32_t>(args.numPages);
  int32_t numSplits = static_cast<int32_t>(args.numSplits);
  CUdeviceptr queryStartLoc = args.queryStartLoc;
  int32_t numTokens = static_cast<int32_t>(args.numTokens);
  void *params[] = {&seqLens,       &blockTable, &bounds,   &status,
                    &batch,         &maxPages,   &numPages, &numSplits,
                    &queryStartLoc, &numTokens};
  static_assert(std::size(params) == kDecodePlanVarlenNumParams);
  // A uniform planner takes the first kDecodePlanNumParams.
  Dim3 grid{static_cast<unsigned>(
      llvm::divideCeil(args.batch, kDecodePlanRequestsPerCta))};
  Dim3 block{static_cast<unsigned>(kDecodePlanThreadsPerCta)};
  if (llvm::Error error = planner.launch(grid, block, 0, stream, params))
    return error;
  if (!layout.numCounters)
    return llvm::Error::success();
  llvm::Expected<const CudaDriver &> driver = CudaRuntime::get();
  if (!driver)
    return driver.takeError();
  return driver->check(
      driver->api().memsetD32Async(args.workspace + layout.counters, 0,
                                   layout.numCounters, stream),
      "cuMemsetD32Async(combine counters)");
}

llvm::Error GpuDecoder::encodePipelinedMaps(const DecodeArgs &args,
                                            DecodeTmaMaps &maps) const {
  if (maps.encodedFor(args))
    return llvm::Error::success();
  maps.q = 0; // stale until both maps are encoded
  const DecodeShape &s = spec.shape;
  // TMA row coordinates are int32.
  if (args.numPages > kInt32Max / s.pageSize)
    return invalid("the pipelined decode addresses cache rows (pages x page "
                   "size) as int32; " +
                   Twine(args.numPages) + " pages of " + Twine(s.pageSize) +
                   " is too many");
  llvm::Expected<const CudaDriver &> driver = CudaRuntime::get();
  if (!driver)
    return driver.takeError();
  ActType elem = s.elem == ElemType::BF16 ? ActType::BF16 : ActType::F16;
  llvm::Expected<CUtensorMap> q = encodeHeadRowsMap(
      *driver, args.q, elem, args.batch * s.queryRows * s.numHeads, 1,
      s.rowDim(), spec.tiling.rowsPerCta);
  if (!q)
    return q.takeError();
  // The seesaw build over fp8_e4m3 and fp8_ds_mla reads the raw rows
  // (KernelABI.h).
  llvm::Expected<CUtensorMap> cache =
      s.fp8()
          ? encodeByteRowsMap(*driver, args.cache, args.numPages * s.pageSize,
                              s.cacheRowBytes(), spec.tiling.kvBlock)
          : encodeHeadRowsMap(*driver, args.cache, elem,
                              args.numPages * s.pageSize, 1, s.rowDim(),
                              spec.tiling.kvBlock);
  if (!cache)
    return cache.takeError();
  if (decodeSeesawScaleTiles(s, spec.tiling) > 0) {
    llvm::Expected<CUtensorMap> scales = encodeByteRowsMap(
        *driver, args.cache, args.numPages * s.pageSize, s.cacheRowBytes(),
        spec.tiling.kvBlock, /*boxBytes=*/16);
    if (!scales)
      return scales.takeError();
    maps.scaleMap = *scales;
  }
  maps.qMap = *q;
  maps.cacheMap = *cache;
  maps.q = args.q, maps.cache = args.cache;
  maps.batch = args.batch, maps.numPages = args.numPages;
  return llvm::Error::success();
}

llvm::Error GpuDecoder::run(CUstream stream, const DecodeArgs &args,
                            DecodeTmaMaps *maps) const {
  if (llvm::Error error = checkDecodeArgs(spec, args))
    return error;
  DecodeWorkspaceLayout layout = decodeWorkspaceLayout(
      spec, args.layoutBatch ? args.layoutBatch : args.batch, args.numSplits);
  CUdeviceptr q = args.q, cache = args.cache, blockTable = args.blockTable,
              seqLens = args.seqLens, out = args.out, lse = args.lse;
  // One piece per request: the kernel writes the final rows itself
  // (KernelABI.h) and no combine runs.
  // The persistent build writes a one-piece request's rows to out itself.
  bool direct = decodeWritesFinalRows(spec.chip, args.numSplits) &&
                !spec.tiling.persistent;
  CUdeviceptr partialOut = direct ? out : args.workspace + layout.partialOut;
  CUdeviceptr partialLse = direct ? lse : args.workspace + layout.partialLse;
  CUdeviceptr splitBounds = args.workspace + layout.splitBounds;
  int32_t batch = static_cast<int32_t>(args.batch);
  int32_t maxPages = static_cast<int32_t>(args.maxPages);
  int32_t numSplits = static_cast<int32_t>(args.numSplits);
  float softmaxScale = args.softmaxScale;
  CUdeviceptr kvScale = args.kvScale;
  CUdeviceptr queryStartLoc = args.queryStartLoc;
  int32_t numTokens = static_cast<int32_t>(args.numTokens);
  bool varlen = spec.shape.varlen;
  if (varlen && numTokens == 0)
    return llvm::Error::success(); // no query token: nothing to write

  // The pipelined kernel also takes q and the cache as TMA maps, encoded
  // from host data only (pointers and sizes), so a plan/run decode and a
  // captured graph need no sync.
  DecodeTmaMaps local;
  DecodeTmaMaps &tma = maps ? *maps : local;
  if (spec.tiling.pipelined) {
    if (llvm::Error error = encodePipelinedMaps(args, tma))
      return error;
  }
  // The eleven shared parameters, then the groups this kernel declares in
  // KernelABI.h's order: kv_scale (fp8_e4m3), query_start_loc and T
  // (varlen), the two tensor maps (pipelined), the combine's counters, out
  // and lse (seesaw).
  llvm::SmallVector<void *, kDecodeSeesawNumParams + 2> partialParams = {
      &q,          &cache, &blockTable, &seqLens,   &splitBounds, &partialOut,
      &partialLse, &batch, &maxPages,   &numSplits, &softmaxScale};
  if (spec.shape.kvFormat == CacheFormat::FP8E4M3)
    partialParams.push_back(&kvScale);
  if (varlen)
    partialParams.append({&queryStartLoc, &numTokens});
  if (spec.tiling.pipelined)
    partialParams.append({&tma.qMap, &tma.cacheMap});
  if (decodeSeesawScaleTiles(spec.shape, spec.tiling) > 0)
    partialParams.push_back(&tma.scaleMap);
  // The kernel merges the pieces itself, as the last piece of each row
  // block (KernelABI.h; no CTA waits for another, so any grid and an
  // ordinary launch); the counters enable that.
  int64_t rows = spec.shape.queryRows * spec.shape.numHeads;
  Dim3 partialGrid{
      static_cast<unsigned>(decodeRowBlocks(spec.shape, spec.tiling)),
      static_cast<unsigned>(numSplits), static_cast<unsigned>(batch)};
  bool merges =
      decodeCombinesInKernel(spec.chip, spec.shape, spec.tiling, numSplits);
  CUdeviceptr counters = merges ? args.workspace + layout.counters : 0;
  if (decodeCanCombineInKernel(spec.chip, spec.shape, spec.tiling))
    partialParams.append({&counters, &out, &lse});
  // The persistent build: (row blocks, SM parts) CTAs walking the schedule;
  // the last piece of each row block merges it (no CTA waits).
  CUdeviceptr cuSplits = args.workspace + layout.cuSplits;
  CUdeviceptr schedule = args.workspace + layout.schedule;
  if (spec.tiling.persistent) {
    partialParams.append({&schedule, &cuSplits});
    partialGrid =
        Dim3{partialGrid.x, static_cast<unsigned>(args.numSmParts), 1};
  }
  assert(partialParams.size() == size_t(decodeKernelNumParams(
                                     spec.chip, spec.shape, spec.tiling)) &&
         "launch parameters differ from KernelABI.h");
  // A varlen image's combine runs T requests of one row (KernelABI.h).
  int32_t combineBatch = varlen ? numTokens : batch;
  void *combineParams[] = {&partialOut, &partialLse,   &out,
                           &lse,        &combineBatch, &numSplits};
  static_assert(std::size(combineParams) == kCombineNumParams);

  Dim3 partialBlock{static_cast<unsigned>(decodeThreadsPerCta(spec.tiling))};
  unsigned smem = static_cast<unsigned>(
      decodeSharedBytes(spec.chip, spec.shape, spec.tiling));
  if (llvm::Error error = partial.launch(partialGrid, partialBlock, smem,
                                         stream, partialParams.data()))
    return error;
  if (direct || merges)
    return llvm::Error::success();

  int64_t combineRows = varlen ? spec.shape.numHeads : rows;
  Dim3 combineGrid{
      static_cast<unsigned>(llvm::divideCeil(combineRows, kCombineRowsPerCta)),
      static_cast<unsigned>(combineBatch)};
  Dim3 combineBlock{static_cast<unsigned>(kCombineThreadsPerCta)};
  return combine.launch(combineGrid, combineBlock, 0, stream, combineParams);
}

int64_t mla::gpu::decodeCtasPerSm(const DecodeKernelSpec &spec) {
  // sm_90 / sm_100: 228 KiB of shared memory per SM (1 KiB reserved per
  // CTA), 64K registers; the kernels are compiled for up to 255 registers.
  int64_t smem = decodeSharedBytes(spec.chip, spec.shape, spec.tiling) + 1024;
  int64_t bySmem = (228 * 1024) / smem;
  int64_t byRegs = 65536 / (decodeThreadsPerCta(spec.tiling) * 256);
  return std::max<int64_t>(1, std::min(bySmem, byRegs));
}

int64_t mla::gpu::chooseGridSplits(const DecodeKernelSpec &spec, int64_t batch,
                                   int64_t maxSeqLen, int64_t numSms,
                                   int64_t maxSplits) {
  const DecodeShape &shape = spec.shape;
  const DecodeTiling &tiling = spec.tiling;
  if (batch <= 0 || maxSeqLen <= 0 || numSms <= 0)
    return 1;
  // Rates one CTA gets when every SM runs one: HBM bandwidth and mma.sync
  // throughput per SM (H200-class: ~3.3 TB/s sustained, ~180 dense TFLOPS
  // measured for these kernels; only their ratio and the combine term's
  // scale matter for the choice).
  const double bandwidth = 3.3e12, flops = 180e12;
  const int64_t rows = shape.numHeads * shape.queryRows;
  const int64_t rowBlocks = decodeRowBlocks(shape, tiling);
  const double blockBytes = double(tiling.kvBlock) * shape.cacheRowBytes();
  const double blockFlops = 2.0 * tiling.rowsPerCta * tiling.kvBlock *
                            double(shape.rowDim() + shape.latentDim);
  const double tBlock = std::max(blockBytes / (bandwidth / numSms),
                                 blockFlops / (flops / numSms));
  const int64_t slots = numSms * decodeCtasPerSm(spec);
  const int64_t page = shape.pageSize;
  int64_t best = 1;
  double bestTime = 0;
  for (int64_t s = 1; s <= maxSplits; ++s) {
    // Pieces are whole pages (planUniformBounds); the longest piece sets the
    // CTA time.
    int64_t piece = (maxSeqLen + s - 1) / s;
    piece = (piece + page - 1) / page * page;
    if (s > 1 && piece * (s - 1) >= maxSeqLen)
      continue; // the last piece would be empty: that count only adds work
    int64_t blocks = (piece + tiling.kvBlock - 1) / tiling.kvBlock;
    int64_t ctas = rowBlocks * s * batch;
    int64_t waves = (ctas + slots - 1) / slots;
    double combineBytes =
        decodeWritesFinalRows(spec.chip, s)
            ? 0.0
            : double(s) * batch * rows * (shape.latentDim + 1) * 4 * 2;
    double time = waves * blocks * tBlock + combineBytes / bandwidth;
    if (s == 1 || time < bestTime * 0.98) {
      best = s;
      bestTime = time;
    }
  }
  return best;
}
