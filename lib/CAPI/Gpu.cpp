//===- Gpu.cpp - C API of the mla GPU runtime -----------------------------===//
//
// Decoders and the cache write / projection kernels are loaded once per
// (spec, CUDA context) and kept for the life of the process (or until
// mlaGpuClearDecoders): loading a module costs far more than a launch.
// Everything that can be rejected is rejected before the first thing
// enqueued (the bounds upload of a decode, the one launch of the others).
//
//===----------------------------------------------------------------------===//

#include "mla-c/Gpu.h"
#include "mla/Contract/Version.h"
#include "mla/GpuRuntime/CacheProjectionLaunch.h"
#include "mla/GpuRuntime/GpuDecode.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>

using namespace mla::gpu;
using llvm::Twine;

namespace {

llvm::Error invalid(const Twine &message) {
  return llvm::createStringError(
      std::make_error_code(std::errc::invalid_argument), message);
}

void writeMessage(const std::string &message, char *err, size_t errLen) {
  if (!err || !errLen)
    return;
  size_t n = std::min(message.size(), errLen - 1);
  std::memcpy(err, message.data(), n);
  err[n] = '\0';
}

/// Maps an error to its return code (by the error code it carries) and
/// writes its message.
int report(llvm::Error error, char *err, size_t errLen) {
  if (!error)
    return MLA_GPU_SUCCESS;
  int code = MLA_GPU_ERROR_CUDA;
  std::string message;
  llvm::handleAllErrors(std::move(error), [&](const llvm::ErrorInfoBase &e) {
    std::error_code ec = e.convertToErrorCode();
    if (ec == std::errc::invalid_argument)
      code = MLA_GPU_ERROR_INVALID_ARGUMENT;
    else if (ec == std::errc::no_such_file_or_directory)
      code = MLA_GPU_ERROR_KERNEL_NOT_FOUND;
    message += (message.empty() ? "" : "; ") + e.message();
  });
  writeMessage(message, err, errLen);
  return code;
}

/// The process's loaded kernels and per-device facts, under one lock.
struct State {
  std::mutex mutex;
  std::map<std::pair<std::string, CUcontext>, std::unique_ptr<GpuDecoder>>
      decoders;
  /// Single-kernel images (cache write, projections) by spec text.
  std::map<std::pair<std::string, CUcontext>, std::unique_ptr<CudaKernel>>
      kernels;
  std::map<int32_t, CUcontext> primaryContexts;
  std::map<int32_t, int64_t> numSms;
  /// mlaGpuGetRuntimeStats's counters, reset by mlaGpuClearDecoders.
  mlaGpuRuntimeStats stats = {};
};

/// Counts one load of a kernel from the cache directory in `stats` and adds
/// its wall time when it goes out of scope.
class LoadCounter {
public:
  explicit LoadCounter(mlaGpuRuntimeStats &stats)
      : stats(stats), start(std::chrono::steady_clock::now()) {
    ++stats.misses;
  }
  ~LoadCounter() {
    stats.loadSeconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
  }

  /// Passes on the error of a failed load, counting a missing entry.
  llvm::Error failed(llvm::Error error) {
    return llvm::handleErrors(
        std::move(error),
        [&](std::unique_ptr<llvm::ErrorInfoBase> e) -> llvm::Error {
          if (e->convertToErrorCode() == std::errc::no_such_file_or_directory)
            ++stats.notFound;
          return llvm::Error(std::move(e));
        });
  }

private:
  mlaGpuRuntimeStats &stats;
  std::chrono::steady_clock::time_point start;
};

State &state() {
  static State s;
  return s;
}

llvm::Expected<CUdevice> getDevice(const CudaDriver &driver, int32_t ordinal) {
  CUdevice device;
  if (llvm::Error error = driver.check(driver.api().deviceGet(&device, ordinal),
                                       "cuDeviceGet(" + Twine(ordinal) + ")"))
    return std::move(error);
  return device;
}

/// Makes a context of device `ordinal` current on this thread: the current
/// one if it is on that device, else the device's primary context (retained
/// once per process). Caller holds the state lock.
llvm::Expected<CUcontext> useDevice(State &s, int32_t ordinal) {
  llvm::Expected<const CudaDriver &> driver = CudaRuntime::get();
  if (!driver)
    return driver.takeError();
  const CudaDriverApi &api = driver->api();
  llvm::Expected<CUdevice> device = getDevice(*driver, ordinal);
  if (!device)
    return device.takeError();
  CUcontext current = nullptr;
  if (llvm::Error error =
          driver->check(api.ctxGetCurrent(&current), "cuCtxGetCurrent"))
    return std::move(error);
  if (current) {
    CUdevice currentDevice;
    if (llvm::Error error = driver->check(api.ctxGetDevice(&currentDevice),
                                          "cuCtxGetDevice"))
      return std::move(error);
    if (currentDevice == *device)
      return current;
  }
  auto [it, inserted] = s.primaryContexts.try_emplace(ordinal, nullptr);
  if (inserted) {
    if (llvm::Error error =
            driver->check(api.devicePrimaryCtxRetain(&it->second, *device),
                          "cuDevicePrimaryCtxRetain")) {
      s.primaryContexts.erase(it);
      return std::move(error);
    }
  }
  if (llvm::Error error =
          driver->check(api.ctxSetCurrent(it->second), "cuCtxSetCurrent"))
    return std::move(error);
  return it->second;
}

/// Multiprocessors of device `ordinal`. Caller holds the state lock.
llvm::Expected<int64_t> getNumSms(State &s, int32_t ordinal) {
  if (auto it = s.numSms.find(ordinal); it != s.numSms.end())
    return it->second;
  llvm::Expected<const CudaDriver &> driver = CudaRuntime::get();
  if (!driver)
    return driver.takeError();
  llvm::Expected<CUdevice> device = getDevice(*driver, ordinal);
  if (!device)
    return device.takeError();
  int count = 0;
  if (llvm::Error error = driver->check(
          driver->api().deviceGetAttribute(
              &count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, *device),
          "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)"))
    return std::move(error);
  s.numSms[ordinal] = count;
  return count;
}

llvm::Expected<Chip> chipOfDevice(int32_t ordinal) {
  llvm::Expected<std::pair<int, int>> cc =
      CudaRuntime::getComputeCapability(ordinal);
  if (!cc)
    return cc.takeError();
  if (cc->first == 9)
    return Chip::SM90a;
  if (cc->first == 10)
    return Chip::SM100a;
  return invalid("device " + Twine(ordinal) + " is sm_" + Twine(cc->first) +
                 Twine(cc->second) +
                 "; mla's GPU kernels target sm_90a and sm_100a");
}

llvm::Expected<std::string>
buildSpec(const char *chip, int32_t device, int64_t numHeads,
          int64_t queryRows, int64_t latentDim, int64_t ropeDim,
          int64_t pageSize, int32_t dtype, int32_t causal, double scale,
          const char *tile) {
  DecodeKernelSpec spec;
  if (chip) {
    if (!parseChip(chip, spec.chip))
      return invalid(Twine("unknown chip '") + chip +
                     "' (expected sm_90a or sm_100a)");
  } else {
    llvm::Expected<Chip> found = chipOfDevice(device);
    if (!found)
      return found.takeError();
    spec.chip = *found;
  }
  if (dtype != MLA_GPU_DTYPE_BF16 && dtype != MLA_GPU_DTYPE_F16)
    return invalid("dtype must be MLA_GPU_DTYPE_BF16 or MLA_GPU_DTYPE_F16, "
                   "got " + Twine(dtype));
  auto positive = [](int64_t v, const char *name) -> llvm::Error {
    if (v < 1 || v > (1 << 20))
      return invalid(Twine(name) + " must be in [1, 1048576], got " + Twine(v));
    return llvm::Error::success();
  };
  for (auto [value, name] :
       {std::pair{numHeads, "the number of heads"},
        std::pair{queryRows, "the number of query rows"},
        std::pair{latentDim, "the latent width L"},
        std::pair{pageSize, "the page size"}})
    if (llvm::Error error = positive(value, name))
      return std::move(error);
  if (ropeDim < 0 || ropeDim > (1 << 20))
    return invalid("the RoPE width R must be in [0, 1048576], got " +
                   Twine(ropeDim));
  float scale32 = static_cast<float>(scale);
  if (!(scale32 > 0) || scale32 == INFINITY)
    return invalid("softmax_scale must be positive and finite in float32, "
                   "got " + Twine(std::to_string(scale)));
  // Build the text and parse it back, so the tiling defaults and checks are
  // exactly the ones any other spec text goes through.
  spec.shape.numHeads = numHeads;
  spec.shape.queryRows = queryRows;
  spec.shape.latentDim = latentDim;
  spec.shape.ropeDim = ropeDim;
  spec.shape.pageSize = pageSize;
  spec.shape.elem = dtype == MLA_GPU_DTYPE_BF16 ? ElemType::BF16 : ElemType::F16;
  spec.shape.causal = causal != 0;
  spec.shape.scale = scale32;
  std::string text = toString(spec);
  text = text.substr(0, text.rfind(" tile="));
  if (tile)
    text += std::string(" tile=") + tile;
  DecodeKernelSpec parsed;
  std::string why;
  if (!parseDecodeKernelSpec(text, parsed, why))
    return invalid("no decode kernel for this shape: " + why);
  return toString(parsed);
}

llvm::Expected<DecodeKernelSpec> parseSpec(const char *text) {
  if (!text)
    return invalid("the kernel spec is null");
  DecodeKernelSpec spec;
  std::string why;
  if (!parseDecodeKernelSpec(text, spec, why))
    return invalid(Twine("bad kernel spec '") + text + "': " + why);
  return spec;
}

/// The decoder of `spec` in context `context`, loaded on first use. Caller
/// holds the state lock.
llvm::Expected<const GpuDecoder &>
getDecoder(State &s, const DecodeKernelSpec &spec, CUcontext context) {
  auto key = std::make_pair(toString(spec), context);
  if (auto it = s.decoders.find(key); it != s.decoders.end()) {
    ++s.stats.hits;
    return *it->second;
  }
  LoadCounter counter(s.stats);
  llvm::Expected<KernelCache> cache = KernelCache::openDefault();
  if (!cache)
    return counter.failed(cache.takeError());
  llvm::Expected<GpuDecoder> decoder = GpuDecoder::fromCache(spec, *cache);
  if (!decoder)
    return counter.failed(decoder.takeError());
  auto &slot = s.decoders[key];
  slot = std::make_unique<GpuDecoder>(std::move(*decoder));
  return *slot;
}

/// The kernel of a single-kernel spec in context `context`, loaded on first
/// use with `load`. Caller holds the state lock.
template <typename Spec, typename Loader>
llvm::Expected<const CudaKernel &> getKernel(State &s, const Spec &spec,
                                             CUcontext context, Loader load) {
  auto key = std::make_pair(toString(spec), context);
  if (auto it = s.kernels.find(key); it != s.kernels.end()) {
    ++s.stats.hits;
    return *it->second;
  }
  LoadCounter counter(s.stats);
  llvm::Expected<KernelCache> cache = KernelCache::openDefault();
  if (!cache)
    return counter.failed(cache.takeError());
  llvm::Expected<CudaKernel> kernel = load(spec, *cache);
  if (!kernel)
    return counter.failed(kernel.takeError());
  auto &slot = s.kernels[key];
  slot = std::make_unique<CudaKernel>(std::move(*kernel));
  return *slot;
}

/// Parses `text` as a spec of the family `Spec` parses.
template <typename Spec>
llvm::Expected<Spec> parseFamily(const char *text, const char *family,
                                 bool (*parse)(const std::string &, Spec &,
                                               std::string &)) {
  if (!text)
    return invalid("the kernel spec is null");
  Spec spec;
  std::string why;
  if (!parse(text, spec, why))
    return invalid(Twine("bad ") + family + " kernel spec '" + text +
                   "': " + why);
  return spec;
}

struct CacheWriteCall {
  const char *spec;
  int32_t device;
  CacheWriteArgs args;
  const int32_t *slotMappingHost;
  CUstream stream;
};

llvm::Error cacheWrite(const CacheWriteCall &call) {
  llvm::Expected<CacheWriteKernelSpec> spec = parseFamily<CacheWriteKernelSpec>(
      call.spec, "cache_write", parseCacheWriteKernelSpec);
  if (!spec)
    return spec.takeError();
  CacheWriteArgs args = call.args;
  args.shape = spec->shape;
  if (llvm::Error error = checkCacheWriteArgs(args))
    return error;
  if (args.tokens == 0)
    return llvm::Error::success();
  if (call.slotMappingHost)
    if (llvm::Error error = checkSlotMapping(
            llvm::ArrayRef(call.slotMappingHost, args.tokens), args.numSlots))
      return error;

  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  llvm::Expected<CUcontext> context = useDevice(s, call.device);
  if (!context)
    return context.takeError();
  llvm::Expected<const CudaKernel &> kernel =
      getKernel(s, *spec, *context, loadCacheWriteKernel);
  if (!kernel)
    return kernel.takeError();
  return launchCacheWrite(*kernel, call.stream, args);
}

llvm::Error project(ProjectionKind kind, const char *specText, int32_t device,
                    ProjectionArgs args, CUstream stream) {
  bool absorb = kind == ProjectionKind::AbsorbQ;
  const char *family = absorb ? "absorb_q" : "up_proj_out";
  llvm::Expected<ProjectionKernelSpec> spec =
      parseFamily<ProjectionKernelSpec>(specText, family,
                                        parseProjectionKernelSpec);
  if (!spec)
    return spec.takeError();
  if (spec->kind != kind)
    return invalid(Twine("the kernel spec '") + specText + "' is not an " +
                   family + " spec");
  args.shape = spec->shape;
  if (llvm::Error error =
          absorb ? checkAbsorbQArgs(args) : checkUpProjOutArgs(args))
    return error;
  if (args.tokens == 0)
    return llvm::Error::success();

  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  llvm::Expected<CUcontext> context = useDevice(s, device);
  if (!context)
    return context.takeError();
  llvm::Expected<const CudaKernel &> kernel =
      getKernel(s, *spec, *context, loadProjectionKernel);
  if (!kernel)
    return kernel.takeError();
  return absorb ? launchAbsorbQ(*kernel, stream, args)
                : launchUpProjOut(*kernel, stream, args);
}

struct DecodeCall {
  const char *spec;
  int32_t device;
  DecodeArgs args;
  const int32_t *seqLensHost;
  int64_t numSplits;
  int32_t splitPolicy;
  size_t *workspaceBytes;
  CUstream stream;
};

llvm::Error decode(const DecodeCall &call) {
  llvm::Expected<DecodeKernelSpec> spec = parseSpec(call.spec);
  if (!spec)
    return spec.takeError();
  const DecodeArgs &args = call.args;
  if (!call.workspaceBytes)
    return invalid("workspaceBytes is null");
  if (call.numSplits < 0)
    return invalid("num_splits must be positive, or 0 to let the split "
                   "policy decide; got " + Twine(call.numSplits));
  mla::plan::SplitPolicy policy;
  switch (call.splitPolicy) {
  case MLA_GPU_SPLIT_HEURISTIC:
    policy = mla::plan::SplitPolicy::Heuristic;
    break;
  case MLA_GPU_SPLIT_BALANCED:
    policy = mla::plan::SplitPolicy::Balanced;
    break;
  case MLA_GPU_SPLIT_BATCH_INVARIANT:
    policy = mla::plan::SplitPolicy::BatchInvariant;
    break;
  case MLA_GPU_SPLIT_GRID:
    // Planned below from the lengths (or the capacity) and the SM count.
    policy = mla::plan::SplitPolicy::Heuristic;
    break;
  default:
    return invalid("unknown split policy " + Twine(call.splitPolicy));
  }
  // Sizes first (with one split: the count is checked once planned), so the
  // lengths below can be read and the capacity computed safely.
  if (llvm::Error error = checkDecodeSizes(*spec, args.batch, args.maxPages,
                                           args.numPages, 1))
    return error;
  llvm::ArrayRef<int32_t> lens;
  if (call.seqLensHost) {
    lens = llvm::ArrayRef(call.seqLensHost, args.batch);
    if (llvm::Error error = checkSeqLens(*spec, lens, args.maxPages))
      return error;
  } else if (call.numSplits == 0 && policy != mla::plan::SplitPolicy::Heuristic) {
    return invalid("the balanced and batch-invariant split policies plan from "
                   "the sequence lengths: pass them on the host");
  }

  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  int64_t alignTokens = spec->shape.pageSize;
  int64_t capacity = args.maxPages * spec->shape.pageSize;
  llvm::Expected<SplitBounds> bounds = [&]() -> llvm::Expected<SplitBounds> {
    if (call.numSplits > 0)
      return call.seqLensHost
                 ? planUniformBounds(lens, call.numSplits, alignTokens)
                 : planCapacityBounds(args.batch, capacity, call.numSplits,
                                      alignTokens);
    if (policy == mla::plan::SplitPolicy::BatchInvariant)
      return planUniformBounds(lens, 1, alignTokens);
    llvm::Expected<int64_t> numSms = getNumSms(s, call.device);
    if (!numSms)
      return numSms.takeError();
    if (call.splitPolicy == MLA_GPU_SPLIT_GRID) {
      int64_t longest = capacity;
      if (call.seqLensHost) {
        longest = 0;
        for (int32_t len : lens)
          longest = std::max<int64_t>(longest, len);
      }
      int64_t count = chooseGridSplits(*spec, args.batch, longest, *numSms);
      return call.seqLensHost
                 ? planUniformBounds(lens, count, alignTokens)
                 : planCapacityBounds(args.batch, capacity, count, alignTokens);
    }
    if (!call.seqLensHost)
      return planCapacityBounds(
          args.batch, capacity,
          mla::plan::heuristicNumSplits(capacity, *numSms), alignTokens);
    return planBounds(lens, decodePlanOptions(*spec, policy, *numSms));
  }();
  if (!bounds)
    return bounds.takeError();

  DecodeArgs full = args;
  full.numSplits = bounds->numSplits;
  if (!args.workspace) {
    if (llvm::Error error = checkDecodeSizes(*spec, full.batch, full.maxPages,
                                             full.numPages, full.numSplits))
      return error;
    *call.workspaceBytes =
        decodeWorkspaceLayout(spec->shape, full.batch, full.numSplits)
            .totalBytes;
    return llvm::Error::success();
  }
  full.workspaceBytes = *call.workspaceBytes;
  if (llvm::Error error = checkDecodeArgs(*spec, full))
    return error;

  llvm::Expected<CUcontext> context = useDevice(s, call.device);
  if (!context)
    return context.takeError();
  llvm::Expected<const GpuDecoder &> decoder = getDecoder(s, *spec, *context);
  if (!decoder)
    return decoder.takeError();
  if (llvm::Error error =
          decoder->uploadBounds(call.stream, full.workspace,
                                full.workspaceBytes, full.batch, *bounds))
    return error;
  return decoder->run(call.stream, full);
}

} // namespace

extern "C" int mlaGpuDecodeSpec(const char *chip, int32_t device,
                                int64_t numHeads, int64_t queryRows,
                                int64_t latentDim, int64_t ropeDim,
                                int64_t pageSize, int32_t dtype,
                                int32_t causal, double softmaxScale,
                                const char *tile, char *spec, size_t specLen,
                                char *err, size_t errLen) {
  llvm::Expected<std::string> text =
      buildSpec(chip, device, numHeads, queryRows, latentDim, ropeDim,
                pageSize, dtype, causal, softmaxScale, tile);
  if (!text)
    return report(text.takeError(), err, errLen);
  if (!spec || specLen <= text->size())
    return report(invalid("the spec buffer holds " + Twine(specLen) +
                          " bytes; the spec needs " + Twine(text->size() + 1)),
                  err, errLen);
  writeMessage(*text, spec, specLen);
  return MLA_GPU_SUCCESS;
}

extern "C" int mlaGpuDecode(const char *spec, int32_t device, uint64_t q,
                            uint64_t cache, uint64_t blockTable,
                            uint64_t seqLens, const int32_t *seqLensHost,
                            int64_t batch, int64_t maxPages, int64_t numPages,
                            int64_t numSplits, int32_t splitPolicy,
                            uint64_t out, uint64_t lse, uint64_t workspace,
                            size_t *workspaceBytes, void *stream, char *err,
                            size_t errLen) {
  DecodeCall call;
  call.spec = spec;
  call.device = device;
  call.args.q = q;
  call.args.cache = cache;
  call.args.blockTable = blockTable;
  call.args.seqLens = seqLens;
  call.args.out = out;
  call.args.lse = lse;
  call.args.workspace = workspace;
  call.args.batch = batch;
  call.args.maxPages = maxPages;
  call.args.numPages = numPages;
  call.seqLensHost = seqLensHost;
  call.numSplits = numSplits;
  call.splitPolicy = splitPolicy;
  call.workspaceBytes = workspaceBytes;
  call.stream = static_cast<CUstream>(stream);
  return report(decode(call), err, errLen);
}

extern "C" int mlaGpuCanonicalSpec(const char *text, char *spec,
                                   size_t specLen, char *err, size_t errLen) {
  if (!text)
    return report(invalid("the kernel spec is null"), err, errLen);
  KernelSpec parsed;
  std::string why;
  if (!parseKernelSpec(text, parsed, why))
    return report(invalid(Twine("bad kernel spec '") + text + "': " + why),
                  err, errLen);
  std::string canonical = toString(parsed);
  if (!spec || specLen <= canonical.size())
    return report(invalid("the spec buffer holds " + Twine(specLen) +
                          " bytes; the spec needs " +
                          Twine(canonical.size() + 1)),
                  err, errLen);
  writeMessage(canonical, spec, specLen);
  return MLA_GPU_SUCCESS;
}

extern "C" int mlaGpuCacheWrite(const char *spec, int32_t device,
                                uint64_t kvC, uint64_t kPe,
                                uint64_t slotMapping,
                                const int32_t *slotMappingHost, uint64_t cache,
                                int64_t tokens, int64_t numSlots, void *stream,
                                char *err, size_t errLen) {
  CacheWriteCall call;
  call.spec = spec;
  call.device = device;
  call.args.kvC = kvC;
  call.args.kPe = kPe;
  call.args.slotMapping = slotMapping;
  call.args.cache = cache;
  call.args.tokens = tokens;
  call.args.numSlots = numSlots;
  call.slotMappingHost = slotMappingHost;
  call.stream = static_cast<CUstream>(stream);
  return report(cacheWrite(call), err, errLen);
}

extern "C" int mlaGpuAbsorbQ(const char *spec, int32_t device, uint64_t q,
                             uint64_t wUkT, uint64_t out, int64_t tokens,
                             void *stream, char *err, size_t errLen) {
  ProjectionArgs args;
  args.in = q;
  args.weight = wUkT;
  args.out = out;
  args.tokens = tokens;
  return report(project(ProjectionKind::AbsorbQ, spec, device, args,
                        static_cast<CUstream>(stream)),
                err, errLen);
}

extern "C" int mlaGpuUpProjOut(const char *spec, int32_t device, uint64_t o,
                               uint64_t wUv, uint64_t out, int64_t tokens,
                               void *stream, char *err, size_t errLen) {
  ProjectionArgs args;
  args.in = o;
  args.weight = wUv;
  args.out = out;
  args.tokens = tokens;
  return report(project(ProjectionKind::UpProjOut, spec, device, args,
                        static_cast<CUstream>(stream)),
                err, errLen);
}

extern "C" void mlaGpuClearDecoders(void) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.decoders.clear();
  s.kernels.clear();
  s.stats = {};
}

extern "C" void mlaGpuGetRuntimeStats(mlaGpuRuntimeStats *stats) {
  if (!stats)
    return;
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  *stats = s.stats;
  stats->loadedKernels = s.decoders.size() + s.kernels.size();
}

extern "C" const char *mlaGpuGetVersion(void) { return mla::getVersion(); }
