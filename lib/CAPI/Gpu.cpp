//===- Gpu.cpp - C API of the mla GPU runtime -----------------------------===//
//
// Decoders and the single-kernel images are loaded once per
// (spec, CUDA context) and kept for the life of the process (or until
// mlaGpuClearDecoders): loading a module costs far more than a launch.
// Everything that can be rejected is rejected before the first thing
// enqueued (the bounds upload of a decode, the one launch of the others).
//
//===----------------------------------------------------------------------===//

#include "mla-c/Gpu.h"
#include "mla/Contract/ArgRules.h"
#include "mla/Contract/Error.h"
#include "mla/Contract/Version.h"
#include "mla/GpuRuntime/CacheProjectionLaunch.h"
#include "mla/GpuRuntime/ChunkedPrefill.h"
#include "mla/GpuRuntime/GpuDecode.h"
#include "mla/GpuRuntime/KvScale.h"
#include "mla/GpuRuntime/MixedAttention.h"
#include "mla/GpuRuntime/PrefillLaunch.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

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
  llvm::handleAllErrors(
      std::move(error),
      [&](const mla::RuntimeError &e) {
        // The argument rules' errors (the rest of the runtime marks its
        // own with an error code).
        if (e.getKind() == mla::RuntimeErrorKind::InvalidArgument)
          code = MLA_GPU_ERROR_INVALID_ARGUMENT;
        message += (message.empty() ? "" : "; ") + e.getMessage();
      },
      [&](const llvm::ErrorInfoBase &e) {
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
  /// Shared with the decode plans made from them, which keep a decoder
  /// loaded across mlaGpuClearDecoders.
  std::map<std::pair<std::string, CUcontext>, std::shared_ptr<GpuDecoder>>
      decoders;
  /// Single-kernel images (cache write, projections) by spec text.
  std::map<std::pair<std::string, CUcontext>, std::unique_ptr<CudaKernel>>
      kernels;
  /// Whole prefills' kernel sets, by their spec texts.
  std::map<std::pair<std::string, CUcontext>, std::unique_ptr<ChunkedPrefill>>
      prefills;
  /// Host kv_scale values on the device, for calls that give no tensor.
  KvScaleBuffers kvScales;
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
    if (llvm::Error error =
            driver->check(api.ctxGetDevice(&currentDevice), "cuCtxGetDevice"))
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

llvm::Expected<std::string>
buildSpec(const char *chip, int32_t device, int64_t numHeads, int64_t queryRows,
          int64_t latentDim, int64_t ropeDim, int64_t pageSize, int32_t dtype,
          int32_t causal, const char *kvFormat, const char *tile, bool varlen) {
  DecodeKernelSpec spec;
  if (chip) {
    if (!parseChip(chip, spec.chip))
      return invalid(Twine("unknown chip '") + chip +
                     "' (expected sm_90a or sm_100a)");
  } else {
    llvm::Expected<Chip> found = CudaRuntime::getChip(device);
    if (!found)
      return found.takeError();
    spec.chip = *found;
  }
  if (dtype != MLA_GPU_DTYPE_BF16 && dtype != MLA_GPU_DTYPE_F16)
    return invalid("dtype must be MLA_GPU_DTYPE_BF16 or MLA_GPU_DTYPE_F16, "
                   "got " +
                   Twine(dtype));
  auto positive = [](int64_t v, const char *name) -> llvm::Error {
    if (v < 1 || v > (1 << 20))
      return invalid(Twine(name) + " must be in [1, 1048576], got " + Twine(v));
    return llvm::Error::success();
  };
  for (auto [value, name] : {std::pair{numHeads, "the number of heads"},
                             std::pair{queryRows, "the number of query rows"},
                             std::pair{latentDim, "the latent width L"},
                             std::pair{pageSize, "the page size"}})
    if (llvm::Error error = positive(value, name))
      return std::move(error);
  if (ropeDim < 0 || ropeDim > (1 << 20))
    return invalid("the RoPE width R must be in [0, 1048576], got " +
                   Twine(ropeDim));
  // Build the text and parse it back, so the tiling defaults and checks are
  // exactly the ones any other spec text goes through.
  spec.shape.numHeads = numHeads;
  spec.shape.queryRows = queryRows;
  spec.shape.latentDim = latentDim;
  spec.shape.ropeDim = ropeDim;
  spec.shape.pageSize = pageSize;
  spec.shape.elem =
      dtype == MLA_GPU_DTYPE_BF16 ? ElemType::BF16 : ElemType::F16;
  spec.shape.causal = causal != 0;
  llvm::StringRef format = kvFormat ? kvFormat : "auto";
  if (format == "fp8_e4m3")
    spec.shape.kvFormat = CacheFormat::FP8E4M3;
  else if (format == "fp8_e4m3_token")
    spec.shape.kvFormat = CacheFormat::FP8E4M3Token;
  else if (format == "fp8_ds_mla")
    spec.shape.kvFormat = CacheFormat::FP8DsMla;
  else if (format != "auto")
    return invalid("kv_format '" + format +
                   "' is unknown (expected auto, fp8_e4m3, fp8_e4m3_token, "
                   "fp8_ds_mla)");
  std::string text = toString(spec);
  text = text.substr(0, text.rfind(" tile="));
  if (varlen)
    text += " varlen=1";
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
llvm::Expected<std::shared_ptr<GpuDecoder>>
getDecoder(State &s, const DecodeKernelSpec &spec, CUcontext context) {
  auto key = std::make_pair(toString(spec), context);
  if (auto it = s.decoders.find(key); it != s.decoders.end()) {
    ++s.stats.hits;
    return it->second;
  }
  LoadCounter counter(s.stats);
  llvm::Expected<KernelCache> cache = KernelCache::openDefault();
  if (!cache)
    return counter.failed(cache.takeError());
  llvm::Expected<GpuDecoder> decoder = GpuDecoder::fromCache(spec, *cache);
  if (!decoder)
    return counter.failed(decoder.takeError());
  auto &slot = s.decoders[key];
  slot = std::make_shared<GpuDecoder>(std::move(*decoder));
  return slot;
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

//===----------------------------------------------------------------------===//
// Arguments
//===----------------------------------------------------------------------===//

/// The host description of `t` for the argument rules; `host` is the host
/// copy of an integer table, when the caller has one.
llvm::Expected<mla::HostTensor> unwrap(const mlaGpuTensor *t,
                                       llvm::StringRef name,
                                       const int32_t *host = nullptr) {
  if (!t)
    return invalid(name + " is NULL");
  mla::HostTensor result;
  switch (t->dtype) {
  case MLA_GPU_DTYPE_BF16:
    result.dtype = mla::DType::bf16;
    break;
  case MLA_GPU_DTYPE_F16:
    result.dtype = mla::DType::f16;
    break;
  case MLA_GPU_DTYPE_F32:
    result.dtype = mla::DType::f32;
    break;
  case MLA_GPU_DTYPE_INT32:
    result.dtype = mla::DType::i32;
    break;
  case MLA_GPU_DTYPE_UINT8:
    result.dtype = mla::DType::u8;
    break;
  default:
    return invalid(name + " has unknown dtype code " + Twine(t->dtype));
  }
  if (t->rank < 0 || t->rank > MLA_GPU_MAX_RANK)
    return invalid(name + " has rank " + Twine(t->rank) + "; ranks 0 to " +
                   Twine(MLA_GPU_MAX_RANK) + " are supported");
  result.shape.assign(t->shape, t->shape + t->rank);
  if (llvm::any_of(result.shape, [](int64_t d) { return d < 0; }))
    return invalid(name + " has a negative dimension " +
                   mla::formatShape(result.shape));
  result.data = const_cast<int32_t *>(host);
  return result;
}

llvm::Expected<mla::CacheFormat> unwrap(const mlaGpuCacheFormat &format) {
  mla::CacheFormat result;
  result.kvFormat = format.kvFormat ? format.kvFormat : "auto";
  if (format.hasKvScale)
    result.kvScale = format.kvScale;
  if (format.kvScaleTensor) {
    llvm::Expected<mla::HostTensor> t =
        unwrap(format.kvScaleTensor, "the kv_scale tensor");
    if (!t)
      return t.takeError();
    result.kvScaleTensor = std::move(*t);
  }
  return result;
}

/// The kv_scale pointer of a launch over `cache` (KvScale.h): the caller's
/// device tensor, its host value in a buffer the runtime keeps in `device`'s
/// context (uploaded on the first call with that value), or 0 for the
/// formats whose kernels take none.
llvm::Expected<CUdeviceptr> getKvScalePointer(int32_t device,
                                              const mla::CheckedCache &cache,
                                              const mlaGpuCacheFormat *format) {
  if (cache.scaleOnDevice)
    return format->kvScaleTensor->data;
  if (!cache.scale)
    return 0;
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  llvm::Expected<CUcontext> context = useDevice(s, device);
  if (!context)
    return context.takeError();
  return s.kvScales.get(*context, *cache.scale);
}

llvm::Expected<mla::plan::SplitPolicy> unwrapPolicy(int32_t policy) {
  switch (policy) {
  case MLA_GPU_SPLIT_HEURISTIC:
    return mla::plan::SplitPolicy::Heuristic;
  case MLA_GPU_SPLIT_BALANCED:
    return mla::plan::SplitPolicy::Balanced;
  case MLA_GPU_SPLIT_BATCH_INVARIANT:
    return mla::plan::SplitPolicy::BatchInvariant;
  case MLA_GPU_SPLIT_GRID:
    // Planned from the lengths (or the capacity) and the SM count.
    return mla::plan::SplitPolicy::Heuristic;
  default:
    return invalid("unknown split policy " + Twine(policy));
  }
}

/// Says which spec the call needed when `spec` is another one.
template <typename Spec>
llvm::Error checkSpecFits(const Spec &spec, const Spec &needed) {
  if (toString(spec) == toString(needed))
    return llvm::Error::success();
  return invalid("the kernel spec '" + toString(spec) +
                 "' was not made for these arguments, which need '" +
                 toString(needed) + "'");
}

//===----------------------------------------------------------------------===//
// Decode
//===----------------------------------------------------------------------===//

/// A decode call as the C API receives it; a varlen one also has
/// query_start_loc (and maybe its host copy).
struct DecodeCall {
  const mlaGpuTensor *q, *cache, *blockTable, *seqLens;
  const int32_t *seqLensHost, *blockTableHost;
  const mlaGpuDecodeOptions *options;
  const mlaGpuTensor *queryStartLoc = nullptr;
  const int32_t *queryStartLocHost = nullptr;
};

/// The decode rules on `call`'s descriptions, and its split policy.
llvm::Expected<mla::DecodeCall> checkDecodeCall(const DecodeCall &call) {
  if (!call.options)
    return invalid("options is NULL");
  const mlaGpuDecodeOptions &o = *call.options;
  llvm::Expected<mla::plan::SplitPolicy> policy = unwrapPolicy(o.splitPolicy);
  if (!policy)
    return policy.takeError();
  std::array<mla::HostTensor, 4> t;
  std::pair<const mlaGpuTensor *, const char *> in[] = {
      {call.q, "q"},
      {call.cache, "kv_cache"},
      {call.blockTable, "block_table"},
      {call.seqLens, "seq_lens"}};
  for (auto [i, arg] : llvm::enumerate(in)) {
    const int32_t *host = i == 3   ? call.seqLensHost
                          : i == 2 ? call.blockTableHost
                                   : nullptr;
    llvm::Expected<mla::HostTensor> unwrapped =
        unwrap(arg.first, arg.second, host);
    if (!unwrapped)
      return unwrapped.takeError();
    t[i] = std::move(*unwrapped);
  }
  mla::DecodeOptions options;
  options.headDimV = o.headDimV;
  options.softmaxScale = o.softmaxScale;
  options.causal = o.causal != 0;
  if (o.hasNumSplits)
    options.numSplits = o.numSplits;
  llvm::Expected<mla::CacheFormat> format = unwrap(o.cache);
  if (!format)
    return format.takeError();
  options.cache = std::move(*format);
  if (!call.queryStartLoc)
    return mla::checkDecode(mla::Device::GPU, t[0], t[1], t[2], t[3], options);
  llvm::Expected<mla::HostTensor> qsl =
      unwrap(call.queryStartLoc, "query_start_loc", call.queryStartLocHost);
  if (!qsl)
    return qsl.takeError();
  return mla::checkVarlenDecode(mla::Device::GPU, t[0], t[1], t[2], t[3], *qsl,
                                options);
}

/// The row format of a checked cache (its layout keyword).
CacheFormat cacheFormatOf(const mla::CheckedCache &cache) {
  llvm::StringRef layout = cache.layoutFormat;
  if (layout == "bf16")
    return CacheFormat::BF16;
  if (layout == "f16")
    return CacheFormat::F16;
  if (layout == "f32")
    return CacheFormat::F32;
  if (layout == "fp8_e4m3")
    return CacheFormat::FP8E4M3;
  if (layout == "fp8_e4m3_token")
    return CacheFormat::FP8E4M3Token;
  return CacheFormat::FP8DsMla;
}

/// The spec a checked decode needs, with `spec`'s chip and tiling (and, for
/// a varlen call, its largest query length, which checkSpecFitsVarlen
/// compares with the call's).
DecodeKernelSpec neededSpec(const DecodeKernelSpec &spec,
                            const mla::DecodeCall &call) {
  DecodeKernelSpec needed = spec;
  DecodeShape &s = needed.shape;
  s.numHeads = call.numHeads;
  s.varlen = call.varlen;
  if (!call.varlen)
    s.queryRows = call.queryRows;
  s.latentDim = call.latentDim;
  s.ropeDim = call.ropeDim;
  s.pageSize = call.cache.pageSize;
  s.elem = call.dtype == mla::DType::bf16 ? ElemType::BF16 : ElemType::F16;
  s.causal = call.causal;
  // A cache of q's dtype keeps the kvFormat default, as the spec text does.
  CacheFormat format = cacheFormatOf(call.cache);
  s.kvFormat = isFp8(format) ? format : CacheFormat::BF16;
  return needed;
}

/// checkSpecFits for either form: a varlen call with host query_start_loc
/// values also needs every q_b within the kernel's Sq.
llvm::Error checkDecodeSpecFits(const DecodeKernelSpec &spec,
                                const DecodeCall &call,
                                const mla::DecodeCall &checked) {
  if (llvm::Error error = checkSpecFits(spec, neededSpec(spec, checked)))
    return error;
  if (checked.varlen && call.queryStartLocHost &&
      checked.queryRows > spec.shape.queryRows)
    return invalid("a request has " + Twine(checked.queryRows) +
                   " query tokens, more than the " +
                   Twine(spec.shape.queryRows) + " the kernel spec '" +
                   toString(spec) + "' takes");
  return llvm::Error::success();
}

/// The split bounds of a checked decode. Caller holds the state lock.
llvm::Expected<SplitBounds> planDecode(State &s, const DecodeCall &call,
                                       const DecodeKernelSpec &spec,
                                       const mla::DecodeCall &checked,
                                       int32_t device) {
  int32_t policyCode = call.options->splitPolicy;
  mla::plan::SplitPolicy policy = *unwrapPolicy(policyCode);
  int64_t batch = checked.batch;
  int64_t alignTokens = spec.shape.pageSize;
  int64_t capacity = checked.maxPages * spec.shape.pageSize;
  llvm::ArrayRef<int32_t> lens;
  if (call.seqLensHost)
    lens = llvm::ArrayRef(call.seqLensHost, batch);
  if (checked.numSplits)
    return call.seqLensHost
               ? planUniformBounds(lens, *checked.numSplits, alignTokens)
               : planCapacityBounds(batch, capacity, *checked.numSplits,
                                    alignTokens);
  if (policy == mla::plan::SplitPolicy::BatchInvariant)
    return planUniformBounds(lens, 1, alignTokens);
  llvm::Expected<int64_t> numSms = getNumSms(s, device);
  if (!numSms)
    return numSms.takeError();
  if (policyCode == MLA_GPU_SPLIT_GRID) {
    int64_t longest = capacity;
    if (call.seqLensHost)
      longest = lens.empty() ? 0 : *llvm::max_element(lens);
    int64_t count = chooseGridSplits(spec, batch, longest, *numSms);
    return call.seqLensHost
               ? planUniformBounds(lens, count, alignTokens)
               : planCapacityBounds(batch, capacity, count, alignTokens);
  }
  if (!call.seqLensHost)
    return planCapacityBounds(batch, capacity,
                              mla::plan::heuristicNumSplits(capacity, *numSms),
                              alignTokens);
  return planBounds(lens, decodePlanOptions(spec, policy, *numSms));
}

llvm::Error decode(const char *specText, int32_t device, const DecodeCall &call,
                   uint64_t out, uint64_t lse, uint64_t kvScale,
                   uint64_t workspace, size_t *workspaceBytes,
                   CUstream stream) {
  llvm::Expected<mla::DecodeCall> checked = checkDecodeCall(call);
  if (!checked)
    return checked.takeError();
  llvm::Expected<DecodeKernelSpec> spec = parseSpec(specText);
  if (!spec)
    return spec.takeError();
  if (llvm::Error error = checkDecodeSpecFits(*spec, call, *checked))
    return error;
  if (checked->varlen && !call.queryStartLocHost)
    return invalid("a varlen decode without a plan needs the host copy of "
                   "query_start_loc (its values are checked on the host)");
  if (!workspaceBytes)
    return invalid("workspaceBytes is null");
  // Sizes first (with one split: the count is checked once planned).
  if (llvm::Error error = checkDecodeSizes(
          *spec, checked->batch, checked->maxPages, checked->cache.pages, 1))
    return error;
  if (!call.seqLensHost && !checked->numSplits &&
      call.options->splitPolicy != MLA_GPU_SPLIT_HEURISTIC &&
      call.options->splitPolicy != MLA_GPU_SPLIT_GRID)
    return invalid("the balanced and batch-invariant split policies plan from "
                   "the sequence lengths: pass them on the host");

  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  llvm::Expected<SplitBounds> bounds =
      planDecode(s, call, *spec, *checked, device);
  if (!bounds)
    return bounds.takeError();

  DecodeArgs args;
  args.q = call.q->data;
  args.cache = call.cache->data;
  args.blockTable = call.blockTable->data;
  args.seqLens = call.seqLens->data;
  args.out = out;
  args.lse = lse;
  args.workspace = workspace;
  args.batch = checked->batch;
  args.maxPages = checked->maxPages;
  args.numPages = checked->cache.pages;
  args.numSplits = bounds->numSplits;
  args.softmaxScale = checked->softmaxScale;
  args.kvScale = kvScale;
  if (checked->varlen) {
    args.queryStartLoc = call.queryStartLoc->data;
    args.numTokens = checked->tokens;
  }
  if (!workspace) {
    if (llvm::Error error = checkDecodeSizes(*spec, args.batch, args.maxPages,
                                             args.numPages, args.numSplits))
      return error;
    *workspaceBytes =
        decodeWorkspaceLayout(*spec, args.batch, args.numSplits).totalBytes;
    return llvm::Error::success();
  }
  args.workspaceBytes = *workspaceBytes;
  if (llvm::Error error = checkDecodeArgs(*spec, args))
    return error;

  llvm::Expected<CUcontext> context = useDevice(s, device);
  if (!context)
    return context.takeError();
  llvm::Expected<std::shared_ptr<GpuDecoder>> decoder =
      getDecoder(s, *spec, *context);
  if (!decoder)
    return decoder.takeError();
  if (llvm::Error error = (*decoder)->uploadBounds(
          stream, args.workspace, args.workspaceBytes, args.batch, *bounds))
    return error;
  return (*decoder)->run(stream, args);
}

//===----------------------------------------------------------------------===//
// Decode plans
//===----------------------------------------------------------------------===//

} // namespace

/// A device plan: the decoder it plans for, the caller's buffers, and the
/// shapes of the step planned last (what mlaGpuDecodeRun launches with).
struct mlaGpuDecodePlan {
  std::shared_ptr<GpuDecoder> decoder;
  CUcontext context = nullptr;
  mlaGpuDecodeOptions options = {};
  /// The kv_format options.cache.kvFormat points to.
  std::string kvFormat;
  int64_t maxBatch = 0, numSplits = 1;
  uint64_t workspace = 0;
  size_t workspaceBytes = 0;
  uint64_t status = 0;
  /// The step planned last; batch 0 before the first update.
  int64_t batch = 0, maxPages = 0, numPages = 0;
  /// A varlen step's token count T.
  int64_t numTokens = 0;
  /// A pipelined kernel's TMA maps of the last run's q and cache (a plan is
  /// used by one thread at a time).
  mutable DecodeTmaMaps tmaMaps;
};

namespace {

/// Pieces per request of a device plan: all requests are cut alike, so the
/// count is fixed when the plan is made and the grid does not depend on the
/// lengths. Caller holds the state lock.
llvm::Expected<int64_t> choosePlanSplits(State &s, int32_t device,
                                         const DecodeKernelSpec &spec,
                                         const mla::DecodeCall &checked,
                                         int32_t policy, int64_t maxBatch,
                                         int64_t maxSeqLen) {
  if (checked.numSplits)
    return *checked.numSplits;
  if (policy == MLA_GPU_SPLIT_BATCH_INVARIANT)
    return 1;
  if (policy != MLA_GPU_SPLIT_GRID)
    return invalid("a device plan cuts every request into one count of "
                   "pieces: use the grid or batch-invariant split policy or "
                   "num_splits (the heuristic and balanced policies plan on "
                   "the host, from host lengths)");
  int64_t capacity = checked.maxPages * spec.shape.pageSize;
  if (maxSeqLen < 0 || maxSeqLen > capacity)
    return invalid("max_seq_len must be in [0, " + Twine(capacity) +
                   "] (the block table's capacity; 0 for the capacity), got " +
                   Twine(maxSeqLen));
  llvm::Expected<int64_t> numSms = getNumSms(s, device);
  if (!numSms)
    return numSms.takeError();
  return chooseGridSplits(spec, maxBatch, maxSeqLen ? maxSeqLen : capacity,
                          *numSms);
}

llvm::Error createPlan(const char *specText, int32_t device,
                       const DecodeCall &call, int64_t maxBatch,
                       int64_t maxSeqLen, uint64_t workspace,
                       size_t *workspaceBytes, uint64_t status,
                       mlaGpuDecodePlan **plan) {
  llvm::Expected<mla::DecodeCall> checked = checkDecodeCall(call);
  if (!checked)
    return checked.takeError();
  llvm::Expected<DecodeKernelSpec> spec = parseSpec(specText);
  if (!spec)
    return spec.takeError();
  if (llvm::Error error = checkDecodeSpecFits(*spec, call, *checked))
    return error;
  if (!workspaceBytes)
    return invalid("workspaceBytes is null");
  if (!maxBatch)
    maxBatch = checked->batch;
  if (maxBatch < checked->batch)
    return invalid("max_batch " + Twine(maxBatch) + " is below the batch of " +
                   Twine(checked->batch) + " requests");
  if (llvm::Error error = checkDecodeSizes(*spec, maxBatch, checked->maxPages,
                                           checked->cache.pages, 1))
    return error;

  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  llvm::Expected<int64_t> numSplits =
      choosePlanSplits(s, device, *spec, *checked, call.options->splitPolicy,
                       maxBatch, maxSeqLen);
  if (!numSplits)
    return numSplits.takeError();
  if (llvm::Error error = checkDecodeSizes(*spec, maxBatch, checked->maxPages,
                                           checked->cache.pages, *numSplits))
    return error;
  size_t needed = decodeWorkspaceLayout(*spec, maxBatch, *numSplits).totalBytes;
  if (!workspace) {
    *workspaceBytes = needed;
    return llvm::Error::success();
  }
  if (*workspaceBytes < needed)
    return invalid("the workspace holds " + Twine(*workspaceBytes) +
                   " bytes; the plan needs " + Twine(needed));
  if (workspace % 16 || !status || status % 4)
    return invalid("the workspace must be 16-byte aligned and the status "
                   "word a non-null 4-byte aligned device pointer");
  if (!plan)
    return invalid("plan is null");
  llvm::Expected<CUcontext> context = useDevice(s, device);
  if (!context)
    return context.takeError();
  llvm::Expected<std::shared_ptr<GpuDecoder>> decoder =
      getDecoder(s, *spec, *context);
  if (!decoder)
    return decoder.takeError();
  auto result = std::make_unique<mlaGpuDecodePlan>();
  result->decoder = std::move(*decoder);
  result->context = *context;
  result->options = *call.options;
  result->kvFormat = checked->cache.layoutFormat == "fp8_e4m3" ||
                             checked->cache.layoutFormat == "fp8_e4m3_token" ||
                             checked->cache.layoutFormat == "fp8_ds_mla"
                         ? checked->cache.layoutFormat
                         : "auto";
  result->options.cache.kvFormat = result->kvFormat.c_str();
  result->maxBatch = maxBatch;
  result->numSplits = *numSplits;
  result->workspace = workspace;
  result->workspaceBytes = *workspaceBytes;
  result->status = status;
  *plan = result.release();
  return llvm::Error::success();
}

/// Makes the plan's context current on this thread (a no-op when it is).
llvm::Error usePlanContext(const mlaGpuDecodePlan &plan) {
  llvm::Expected<const CudaDriver &> driver = CudaRuntime::get();
  if (!driver)
    return driver.takeError();
  CUcontext current = nullptr;
  if (llvm::Error error = driver->check(driver->api().ctxGetCurrent(&current),
                                        "cuCtxGetCurrent"))
    return error;
  if (current == plan.context)
    return llvm::Error::success();
  return driver->check(driver->api().ctxSetCurrent(plan.context),
                       "cuCtxSetCurrent");
}

llvm::Error updatePlan(mlaGpuDecodePlan *plan, const DecodeCall &call,
                       CUstream stream) {
  if (!plan)
    return invalid("plan is null");
  llvm::Expected<mla::DecodeCall> checked = checkDecodeCall(call);
  if (!checked)
    return checked.takeError();
  const DecodeKernelSpec &spec = plan->decoder->getSpec();
  if (llvm::Error error = checkDecodeSpecFits(spec, call, *checked))
    return error;
  if (checked->batch > plan->maxBatch)
    return invalid("the plan holds at most " + Twine(plan->maxBatch) +
                   " requests, got " + Twine(checked->batch));
  DecodePlanArgs args;
  args.seqLens = call.seqLens->data;
  args.blockTable = call.blockTable->data;
  args.workspace = plan->workspace;
  args.workspaceBytes = plan->workspaceBytes;
  args.status = plan->status;
  args.batch = checked->batch;
  args.maxBatch = plan->maxBatch;
  args.maxPages = checked->maxPages;
  args.numPages = checked->cache.pages;
  args.numSplits = plan->numSplits;
  if (checked->varlen) {
    args.queryStartLoc = call.queryStartLoc->data;
    args.numTokens = checked->tokens;
  }
  if (llvm::Error error = checkDecodePlanArgs(spec, args))
    return error;
  if (llvm::Error error = usePlanContext(*plan))
    return error;
  if (llvm::Error error = plan->decoder->plan(stream, args))
    return error;
  plan->batch = args.batch;
  plan->maxPages = args.maxPages;
  plan->numPages = args.numPages;
  plan->numTokens = args.numTokens;
  return llvm::Error::success();
}

llvm::Error runPlan(const mlaGpuDecodePlan *plan, const DecodeArgs &given,
                    CUstream stream) {
  if (!plan)
    return invalid("plan is null");
  if (!plan->batch)
    return invalid("the plan has planned no step yet (mlaGpuDecodePlanUpdate)");
  DecodeArgs args = given;
  args.workspace = plan->workspace;
  args.workspaceBytes = plan->workspaceBytes;
  args.batch = plan->batch;
  args.maxPages = plan->maxPages;
  args.numPages = plan->numPages;
  args.numSplits = plan->numSplits;
  args.layoutBatch = plan->maxBatch;
  if (plan->decoder->getSpec().shape.varlen)
    args.numTokens = plan->numTokens;
  if (llvm::Error error = checkDecodeArgs(plan->decoder->getSpec(), args))
    return error;
  if (llvm::Error error = usePlanContext(*plan))
    return error;
  return plan->decoder->run(stream, args, &plan->tmaMaps);
}

llvm::Error checkPlanStatus(mlaGpuDecodePlan *plan, CUstream stream) {
  if (!plan)
    return invalid("plan is null");
  llvm::Expected<const CudaDriver &> driver = CudaRuntime::get();
  if (!driver)
    return driver.takeError();
  if (llvm::Error error = usePlanContext(*plan))
    return error;
  const CudaDriverApi &api = driver->api();
  if (llvm::Error error =
          driver->check(api.streamSynchronize(stream), "cuStreamSynchronize"))
    return error;
  int32_t status = 0;
  if (llvm::Error error =
          driver->check(api.memcpyDtoH(&status, plan->status, sizeof(status)),
                        "cuMemcpyDtoH(plan status)"))
    return error;
  if (!status)
    return llvm::Error::success();
  int32_t zero = 0;
  if (llvm::Error error =
          driver->check(api.memcpyHtoD(plan->status, &zero, sizeof(zero)),
                        "cuMemcpyHtoD(plan status)"))
    return error;
  return decodePlanStatusError(status);
}

//===----------------------------------------------------------------------===//
// Cache write
//===----------------------------------------------------------------------===//

/// A cache write as the C API receives it.
struct CacheWriteCall {
  const mlaGpuTensor *kvC, *kPe, *slotMapping, *cache;
  const int32_t *slotMappingHost;
};

llvm::Expected<mla::CacheWriteCall>
checkCacheWriteCall(const CacheWriteCall &call,
                    const mlaGpuCacheFormat &cFormat) {
  llvm::Expected<mla::CacheFormat> format = unwrap(cFormat);
  if (!format)
    return format.takeError();
  std::array<mla::HostTensor, 4> t;
  std::pair<const mlaGpuTensor *, const char *> in[] = {
      {call.kvC, "kv_c"},
      {call.kPe, "k_pe"},
      {call.slotMapping, "slot_mapping"},
      {call.cache, "kv_cache"}};
  for (auto [i, arg] : llvm::enumerate(in)) {
    llvm::Expected<mla::HostTensor> unwrapped =
        unwrap(arg.first, arg.second, i == 2 ? call.slotMappingHost : nullptr);
    if (!unwrapped)
      return unwrapped.takeError();
    t[i] = std::move(*unwrapped);
  }
  return mla::checkCacheWrite(mla::Device::GPU, t[0], t[1], t[3], t[2],
                              *format);
}

/// The format a call with no mlaGpuCacheFormat means: the kv_format of
/// `shape`'s rows, without a kv_scale.
mlaGpuCacheFormat formatOf(const CacheWriteShape &shape) {
  mlaGpuCacheFormat format = {};
  switch (shape.format) {
  case CacheFormat::BF16:
  case CacheFormat::F16:
  case CacheFormat::F32:
    break;
  case CacheFormat::FP8E4M3:
    format.kvFormat = "fp8_e4m3";
    break;
  case CacheFormat::FP8E4M3Token:
    format.kvFormat = "fp8_e4m3_token";
    break;
  case CacheFormat::FP8DsMla:
    format.kvFormat = "fp8_ds_mla";
    break;
  }
  return format;
}

ActType getActType(mla::DType dtype) {
  return dtype == mla::DType::bf16  ? ActType::BF16
         : dtype == mla::DType::f16 ? ActType::F16
                                    : ActType::F32;
}

/// `shape`'s row fields as a checked call over `cache` needs them: the
/// float row formats are the cache's dtype, the fp8 ones the call's format.
void setRowFields(CacheWriteShape &shape, int64_t latentDim, int64_t ropeDim,
                  mla::DType dtype, const mla::CheckedCache &cache) {
  shape.latentDim = latentDim;
  shape.ropeDim = ropeDim;
  shape.input = getActType(dtype);
  shape.format = cacheFormatOf(cache);
}

/// The spec a checked cache write needs, with `spec`'s chip.
CacheWriteKernelSpec neededSpec(const CacheWriteKernelSpec &spec,
                                const mla::CacheWriteCall &call) {
  CacheWriteKernelSpec needed = spec;
  setRowFields(needed.shape, call.latentDim, call.ropeDim, call.dtype,
               call.cache);
  needed.pageSize = call.cache.pageSize;
  return needed;
}

llvm::Error cacheWrite(const char *specText, int32_t device,
                       const CacheWriteCall &call,
                       const mlaGpuCacheFormat *format, CUstream stream) {
  llvm::Expected<CacheWriteKernelSpec> spec = parseFamily<CacheWriteKernelSpec>(
      specText, "cache_write", parseCacheWriteKernelSpec);
  if (!spec)
    return spec.takeError();
  mlaGpuCacheFormat specFormat = formatOf(spec->shape);
  if (!format)
    format = &specFormat;
  llvm::Expected<mla::CacheWriteCall> checked =
      checkCacheWriteCall(call, *format);
  if (!checked)
    return checked.takeError();
  if (llvm::Error error = checkSpecFits(*spec, neededSpec(*spec, *checked)))
    return error;
  CacheWriteArgs args;
  args.shape = spec->shape;
  args.kvC = call.kvC->data;
  args.kPe = call.kPe->data;
  args.slotMapping = call.slotMapping->data;
  args.cache = call.cache->data;
  args.tokens = checked->tokens;
  args.numSlots = checked->cache.pages * checked->cache.pageSize;
  if (args.tokens > 0) {
    llvm::Expected<CUdeviceptr> kvScale =
        getKvScalePointer(device, checked->cache, format);
    if (!kvScale)
      return kvScale.takeError();
    args.kvScale = *kvScale;
  }
  if (llvm::Error error = checkCacheWriteArgs(args))
    return error;
  if (!checked->writesAnything)
    return llvm::Error::success();

  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  llvm::Expected<CUcontext> context = useDevice(s, device);
  if (!context)
    return context.takeError();
  llvm::Expected<const CudaKernel &> kernel =
      getKernel(s, *spec, *context, loadCacheWriteKernel);
  if (!kernel)
    return kernel.takeError();
  return launchCacheWrite(*kernel, stream, args);
}

//===----------------------------------------------------------------------===//
// Projections
//===----------------------------------------------------------------------===//

llvm::Expected<mla::ProjectionCall> checkProjectionCall(ProjectionKind kind,
                                                        const mlaGpuTensor *x,
                                                        const mlaGpuTensor *w) {
  bool absorb = kind == ProjectionKind::AbsorbQ;
  llvm::Expected<mla::HostTensor> in = unwrap(x, absorb ? "q" : "o");
  if (!in)
    return in.takeError();
  llvm::Expected<mla::HostTensor> weight =
      unwrap(w, absorb ? "w_uk_t" : "w_uv");
  if (!weight)
    return weight.takeError();
  return absorb ? mla::checkAbsorbQ(mla::Device::GPU, *in, *weight)
                : mla::checkUpProjOut(mla::Device::GPU, *in, *weight);
}

llvm::Error project(ProjectionKind kind, const char *specText, int32_t device,
                    const mlaGpuTensor *x, const mlaGpuTensor *w, uint64_t out,
                    CUstream stream) {
  bool absorb = kind == ProjectionKind::AbsorbQ;
  const char *family = absorb ? "absorb_q" : "up_proj_out";
  llvm::Expected<ProjectionKernelSpec> spec = parseFamily<ProjectionKernelSpec>(
      specText, family, parseProjectionKernelSpec);
  if (!spec)
    return spec.takeError();
  if (spec->kind != kind)
    return invalid(Twine("the kernel spec '") + specText + "' is not an " +
                   family + " spec");
  llvm::Expected<mla::ProjectionCall> checked = checkProjectionCall(kind, x, w);
  if (!checked)
    return checked.takeError();
  ProjectionKernelSpec needed = *spec;
  needed.shape.numHeads = checked->numHeads;
  needed.shape.inDim = checked->inDim;
  needed.shape.outDim = checked->outDim;
  needed.shape.ropeDim = checked->ropeDim;
  needed.shape.elem = getActType(checked->dtype);
  if (llvm::Error error = checkSpecFits(*spec, needed))
    return error;
  ProjectionArgs args;
  args.shape = spec->shape;
  args.in = x->data;
  args.weight = w->data;
  args.out = out;
  args.tokens = checked->tokens;
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

/// Loads `spec`'s kernel in device `device`'s context and launches it with
/// checked `args` on `stream`.
template <typename Spec, typename Args>
llvm::Error launchKernel(
    const Spec &spec, int32_t device, const Args &args, CUstream stream,
    llvm::Expected<CudaKernel> (*load)(const Spec &, const KernelCache &),
    llvm::Error (*launch)(const CudaKernel &, CUstream, const Args &)) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  llvm::Expected<CUcontext> context = useDevice(s, device);
  if (!context)
    return context.takeError();
  llvm::Expected<const CudaKernel &> kernel =
      getKernel(s, spec, *context, load);
  if (!kernel)
    return kernel.takeError();
  return launch(*kernel, stream, args);
}

/// The descriptions of `in` (tensor, name, host copy or NULL).
template <size_t N>
llvm::Expected<std::array<mla::HostTensor, N>>
unwrapAll(const std::array<
          std::tuple<const mlaGpuTensor *, const char *, const int32_t *>, N>
              &in) {
  std::array<mla::HostTensor, N> t;
  for (auto [i, arg] : llvm::enumerate(in)) {
    llvm::Expected<mla::HostTensor> unwrapped =
        unwrap(std::get<0>(arg), std::get<1>(arg), std::get<2>(arg));
    if (!unwrapped)
      return unwrapped.takeError();
    t[i] = std::move(*unwrapped);
  }
  return t;
}

//===----------------------------------------------------------------------===//
// gather_cache
//===----------------------------------------------------------------------===//

/// A gather as the C API receives it.
struct GatherCall {
  const mlaGpuTensor *cache, *blockTable, *starts, *cuRows;
  const int32_t *blockTableHost, *startsHost, *cuRowsHost;
  const mlaGpuTensor *workspace;
};

llvm::Expected<mla::GatherCacheCall>
checkGatherCall(const GatherCall &call, int64_t latentDim,
                const mlaGpuCacheFormat &cFormat) {
  llvm::Expected<mla::CacheFormat> format = unwrap(cFormat);
  if (!format)
    return format.takeError();
  auto t = unwrapAll<5>({{{call.cache, "kv_cache", nullptr},
                          {call.blockTable, "block_table", call.blockTableHost},
                          {call.starts, "starts", call.startsHost},
                          {call.cuRows, "cu_rows", call.cuRowsHost},
                          {call.workspace, "workspace", nullptr}}});
  if (!t)
    return t.takeError();
  auto &[cache, table, starts, cuRows, ws] = *t;
  return mla::checkGatherCache(mla::Device::GPU, cache, table, starts, cuRows,
                               ws, latentDim, *format);
}

llvm::Error gatherCache(const char *specText, int32_t device,
                        const GatherCall &call, const mlaGpuCacheFormat *format,
                        CUstream stream) {
  llvm::Expected<GatherCacheKernelSpec> spec =
      parseFamily<GatherCacheKernelSpec>(specText, "gather_cache",
                                         parseGatherCacheKernelSpec);
  if (!spec)
    return spec.takeError();
  const CacheWriteShape &row = spec->shape.row;
  mlaGpuCacheFormat specFormat = formatOf(row);
  if (!format)
    format = &specFormat;
  llvm::Expected<mla::GatherCacheCall> checked =
      checkGatherCall(call, row.latentDim, *format);
  if (!checked)
    return checked.takeError();
  GatherCacheKernelSpec needed = *spec;
  setRowFields(needed.shape.row, checked->latentDim, checked->ropeDim,
               checked->dtype, checked->cache);
  needed.shape.pageSize = checked->cache.pageSize;
  if (llvm::Error error = checkSpecFits(*spec, needed))
    return error;
  GatherCacheArgs args;
  args.shape = spec->shape;
  args.cache = call.cache->data;
  args.blockTable = call.blockTable->data;
  args.starts = call.starts->data;
  args.cuRows = call.cuRows->data;
  args.workspace = call.workspace->data;
  args.batch = checked->batch;
  args.maxPages = checked->maxPages;
  args.numPages = checked->cache.pages;
  args.workspaceRows = checked->workspaceRows;
  if (args.workspaceRows > 0 && args.batch > 0) {
    llvm::Expected<CUdeviceptr> kvScale =
        getKvScalePointer(device, checked->cache, format);
    if (!kvScale)
      return kvScale.takeError();
    args.kvScale = *kvScale;
  }
  if (llvm::Error error = checkGatherCacheArgs(args))
    return error;
  if (!checked->gathersAnything)
    return llvm::Error::success();
  return launchKernel(*spec, device, args, stream, loadGatherCacheKernel,
                      launchGatherCache);
}

//===----------------------------------------------------------------------===//
// merge_states and up_proj_kv
//===----------------------------------------------------------------------===//

llvm::Expected<mla::MergeStatesCall> checkMergeCall(const mlaGpuTensor *outA,
                                                    const mlaGpuTensor *lseA,
                                                    const mlaGpuTensor *outB,
                                                    const mlaGpuTensor *lseB) {
  auto t = unwrapAll<4>({{{outA, "out_a", nullptr},
                          {lseA, "lse_a", nullptr},
                          {outB, "out_b", nullptr},
                          {lseB, "lse_b", nullptr}}});
  if (!t)
    return t.takeError();
  auto &[a, la, b, lb] = *t;
  return mla::checkMergeStates(mla::Device::GPU, a, la, b, lb);
}

llvm::Error mergeStates(const char *specText, int32_t device,
                        const mlaGpuTensor *outA, const mlaGpuTensor *lseA,
                        const mlaGpuTensor *outB, const mlaGpuTensor *lseB,
                        uint64_t out, uint64_t lse, CUstream stream) {
  llvm::Expected<MergeStatesKernelSpec> spec =
      parseFamily<MergeStatesKernelSpec>(specText, "merge_states",
                                         parseMergeStatesKernelSpec);
  if (!spec)
    return spec.takeError();
  llvm::Expected<mla::MergeStatesCall> checked =
      checkMergeCall(outA, lseA, outB, lseB);
  if (!checked)
    return checked.takeError();
  MergeStatesKernelSpec needed = *spec;
  needed.shape.numHeads = checked->numHeads;
  needed.shape.headDim = checked->headDim;
  needed.shape.elem = getActType(checked->dtype);
  if (llvm::Error error = checkSpecFits(*spec, needed))
    return error;
  MergeStatesArgs args;
  args.shape = spec->shape;
  args.outA = outA->data;
  args.lseA = lseA->data;
  args.outB = outB->data;
  args.lseB = lseB->data;
  args.out = out;
  args.lse = lse;
  args.tokens = checked->tokens;
  if (llvm::Error error = checkMergeStatesArgs(args))
    return error;
  if (args.tokens == 0)
    return llvm::Error::success();
  return launchKernel(*spec, device, args, stream, loadMergeStatesKernel,
                      launchMergeStates);
}

llvm::Expected<mla::UpProjKvCall>
checkUpProjKvCall(const mlaGpuTensor *latent, const mlaGpuTensor *kvBProj,
                  int64_t numHeads, int64_t nopeDim, int64_t valueDim) {
  auto t = unwrapAll<2>(
      {{{latent, "latent", nullptr}, {kvBProj, "kv_b_proj", nullptr}}});
  if (!t)
    return t.takeError();
  return mla::checkUpProjKv(mla::Device::GPU, (*t)[0], (*t)[1], numHeads,
                            nopeDim, valueDim);
}

llvm::Error upProjKv(const char *specText, int32_t device,
                     const mlaGpuTensor *latent, const mlaGpuTensor *kvBProj,
                     uint64_t kNope, uint64_t v, CUstream stream) {
  llvm::Expected<UpProjKvKernelSpec> spec = parseFamily<UpProjKvKernelSpec>(
      specText, "up_proj_kv", parseUpProjKvKernelSpec);
  if (!spec)
    return spec.takeError();
  const UpProjKvShape &shape = spec->shape;
  llvm::Expected<mla::UpProjKvCall> checked = checkUpProjKvCall(
      latent, kvBProj, shape.numHeads, shape.nopeDim, shape.valueDim);
  if (!checked)
    return checked.takeError();
  UpProjKvKernelSpec needed = *spec;
  needed.shape.latentDim = checked->latentDim;
  needed.shape.elem = getActType(checked->dtype);
  if (llvm::Error error = checkSpecFits(*spec, needed))
    return error;
  UpProjKvArgs args;
  args.shape = shape;
  args.chip = spec->chip;
  args.latent = latent->data;
  args.kvBProj = kvBProj->data;
  args.kNope = kNope;
  args.v = v;
  args.rows = checked->rows;
  if (llvm::Error error = checkUpProjKvArgs(args))
    return error;
  if (args.rows == 0)
    return llvm::Error::success();
  return launchKernel(*spec, device, args, stream, loadUpProjKvKernel,
                      launchUpProjKv);
}

//===----------------------------------------------------------------------===//
// mha
//===----------------------------------------------------------------------===//

/// An mha call as the C API receives it.
struct MhaCall {
  const mlaGpuTensor *q, *k, *v, *cuSeqlensQ, *cuSeqlensK;
  const int32_t *cuSeqlensQHost, *cuSeqlensKHost;
};

llvm::Expected<mla::MhaCall> checkMhaCall(const MhaCall &call, double scale,
                                          bool causal) {
  auto t =
      unwrapAll<5>({{{call.q, "q", nullptr},
                     {call.k, "k", nullptr},
                     {call.v, "v", nullptr},
                     {call.cuSeqlensQ, "cu_seqlens_q", call.cuSeqlensQHost},
                     {call.cuSeqlensK, "cu_seqlens_k", call.cuSeqlensKHost}}});
  if (!t)
    return t.takeError();
  auto &[q, k, v, cuQ, cuK] = *t;
  return mla::checkMha(mla::Device::GPU, q, k, v, cuQ, cuK, scale, causal);
}

llvm::Error mha(const char *specText, int32_t device, const MhaCall &call,
                uint64_t out, uint64_t lse, CUstream stream) {
  llvm::Expected<MhaKernelSpec> spec =
      parseFamily<MhaKernelSpec>(specText, "mha", parseMhaKernelSpec);
  if (!spec)
    return spec.takeError();
  // The kernel trusts the offsets, so they are always checked.
  if (!call.cuSeqlensQHost || !call.cuSeqlensKHost)
    return invalid("mla_mha: the host copies of cu_seqlens_q and "
                   "cu_seqlens_k are required");
  llvm::Expected<mla::MhaCall> checked =
      checkMhaCall(call, spec->shape.scale, spec->shape.causal);
  if (!checked)
    return checked.takeError();
  MhaKernelSpec needed = *spec;
  needed.shape.numHeads = checked->numHeads;
  needed.shape.qkDim = checked->qkDim;
  needed.shape.vDim = checked->valueDim;
  needed.shape.elem = getActType(checked->dtype);
  if (llvm::Error error = checkSpecFits(*spec, needed))
    return error;
  MhaArgs args;
  args.shape = spec->shape;
  args.q = call.q->data;
  args.k = call.k->data;
  args.v = call.v->data;
  args.cuSeqlensQ = call.cuSeqlensQ->data;
  args.cuSeqlensK = call.cuSeqlensK->data;
  args.out = out;
  args.lse = lse;
  args.chip = spec->chip;
  args.batch = checked->batch;
  args.tokens = checked->tokens;
  args.keys = checked->keys;
  if (llvm::Error error = checkMhaArgs(args))
    return error;
  if (args.tokens == 0)
    return llvm::Error::success();
  return launchKernel(*spec, device, args, stream, loadMhaKernel, launchMha);
}

//===----------------------------------------------------------------------===//
// Prefill
//===----------------------------------------------------------------------===//

/// A prefill as the C API receives it.
struct PrefillCall {
  const mlaGpuTensor *q, *kvC, *kPe, *kvBProj, *cache, *blockTable,
      *queryStartLoc, *seqLens;
  const int32_t *blockTableHost, *queryStartLocHost, *seqLensHost;
  const mlaGpuPrefillOptions *options;
};

/// The tensors of a prefill (a mixed batch's too), named as errors name
/// them, with their host copies.
using TensorArg =
    std::tuple<const mlaGpuTensor *, const char *, const int32_t *>;
std::array<TensorArg, 8> prefillTensors(const PrefillCall &p) {
  return {{{p.q, "q", nullptr},
           {p.kvC, "kv_c", nullptr},
           {p.kPe, "k_pe", nullptr},
           {p.kvBProj, "kv_b_proj", nullptr},
           {p.cache, "kv_cache", nullptr},
           {p.blockTable, "block_table", p.blockTableHost},
           {p.queryStartLoc, "query_start_loc", p.queryStartLocHost},
           {p.seqLens, "seq_lens", p.seqLensHost}}};
}

llvm::Expected<mla::PrefillOptions>
unwrapPrefillOptions(const mlaGpuPrefillOptions &o) {
  mla::PrefillOptions options;
  options.softmaxScale = o.softmaxScale;
  options.vHeadDim = o.vHeadDim;
  if (o.hasWorkspaceRows)
    options.workspaceRows = o.workspaceRows;
  llvm::Expected<mla::CacheFormat> format = unwrap(o.cache);
  if (!format)
    return format.takeError();
  options.cache = std::move(*format);
  return options;
}

llvm::Expected<mla::PrefillCall> checkPrefillCall(const PrefillCall &call) {
  if (!call.options)
    return invalid("options is NULL");
  auto t = unwrapAll<8>(prefillTensors(call));
  if (!t)
    return t.takeError();
  auto &[q, kvC, kPe, w, cache, table, qsl, lens] = *t;
  llvm::Expected<mla::PrefillOptions> options =
      unwrapPrefillOptions(*call.options);
  if (!options)
    return options.takeError();
  return mla::checkPrefill(mla::Device::GPU, q, kvC, kPe, w, cache, table, qsl,
                           lens, *options);
}

ChunkedPrefillShape prefillShape(const mla::PrefillCall &c) {
  ChunkedPrefillShape shape;
  shape.numHeads = c.numHeads;
  shape.nopeDim = c.nopeDim;
  shape.ropeDim = c.ropeDim;
  shape.latentDim = c.latentDim;
  shape.valueDim = c.valueDim;
  shape.elem = getActType(c.dtype);
  shape.scale = c.softmaxScale;
  shape.format = cacheFormatOf(c.cache);
  shape.pageSize = c.cache.pageSize;
  return shape;
}

/// The prefill kernels of `specs` in context `context`, loaded on first
/// use. Caller holds the state lock.
llvm::Expected<const ChunkedPrefill &>
getPrefill(State &s, const ChunkedPrefillSpecs &specs, CUcontext context) {
  std::string text = toString(specs.gather) + "; " + toString(specs.upProjKv) +
                     "; " + toString(specs.causalMha) + "; " +
                     toString(specs.contextMha) + "; " + toString(specs.merge);
  auto key = std::make_pair(text, context);
  if (auto it = s.prefills.find(key); it != s.prefills.end()) {
    ++s.stats.hits;
    return *it->second;
  }
  LoadCounter counter(s.stats);
  llvm::Expected<KernelCache> cache = KernelCache::openDefault();
  if (!cache)
    return counter.failed(cache.takeError());
  llvm::Expected<ChunkedPrefill> prefill =
      ChunkedPrefill::fromCache(specs, *cache);
  if (!prefill)
    return counter.failed(prefill.takeError());
  auto &slot = s.prefills[key];
  slot = std::make_unique<ChunkedPrefill>(std::move(*prefill));
  return *slot;
}

/// The prefill's chunk rows: the caller's, else the chip's default.
int64_t workspaceRows(const mla::PrefillCall &c, Chip chip) {
  return c.workspaceRows.value_or(
      mla::defaultPrefillWorkspaceRows(chip == Chip::SM100a ? 128 : 64));
}

/// The device pointers and counts a prefill's and a mixed batch's
/// arguments share (`p`, checked as `c`).
template <typename Args>
void setPrefillArgs(Args &args, const PrefillCall &p, const mla::PrefillCall &c,
                    uint64_t out, uint64_t workspace, size_t workspaceBytes) {
  args.q = p.q->data;
  args.kvC = p.kvC->data;
  args.kPe = p.kPe->data;
  args.kvBProj = p.kvBProj->data;
  args.cache = p.cache->data;
  args.blockTable = p.blockTable->data;
  args.out = out;
  args.workspace = workspace;
  args.workspaceBytes = workspaceBytes;
  args.tokens = c.tokens;
  args.batch = c.batch;
  args.maxPages = p.blockTable->shape[1];
  args.numPages = c.cache.pages;
}

llvm::Expected<Chip> resolveChip(const char *chip, int32_t device) {
  if (!chip)
    return CudaRuntime::getChip(device);
  Chip parsed;
  if (!parseChip(chip, parsed))
    return invalid(Twine("unknown chip '") + chip +
                   "' (expected sm_90a or sm_100a)");
  return parsed;
}

llvm::Error prefill(const char *chipName, int32_t device,
                    const PrefillCall &call, uint64_t out, uint64_t workspace,
                    size_t *workspaceBytes, CUstream stream) {
  llvm::Expected<mla::PrefillCall> checked = checkPrefillCall(call);
  if (!checked)
    return checked.takeError();
  if (!workspaceBytes)
    return invalid("workspaceBytes is null");
  llvm::Expected<Chip> chip = resolveChip(chipName, device);
  if (!chip)
    return chip.takeError();
  ChunkedPrefillShape shape = prefillShape(*checked);
  ChunkedPrefillSpecs specs = getChunkedPrefillSpecs(*chip, shape);
  if (const char *why = checkChunkedPrefillSpecs(specs); *why)
    return invalid(Twine("no GPU prefill kernels for these arguments: ") + why);
  int64_t batch = checked->batch, maxPages = call.blockTable->shape[1];
  int64_t rows = workspaceRows(*checked, *chip);
  mla::PrefillChunkPlan plan(llvm::ArrayRef(call.queryStartLocHost, batch + 1),
                             llvm::ArrayRef(call.seqLensHost, batch), rows,
                             shape.pageSize, batch * maxPages * shape.pageSize);
  ChunkedPrefillWorkspace layout = getChunkedPrefillWorkspace(
      shape, checked->tokens, batch, plan.getMaxChunkRows());
  if (!workspace) {
    *workspaceBytes = layout.totalBytes;
    return llvm::Error::success();
  }
  ChunkedPrefillArgs args;
  setPrefillArgs(args, call, *checked, out, workspace, *workspaceBytes);
  args.queryStartLoc = call.queryStartLoc->data;
  if (args.tokens > 0) {
    llvm::Expected<CUdeviceptr> kvScale =
        getKvScalePointer(device, checked->cache, &call.options->cache);
    if (!kvScale)
      return kvScale.takeError();
    args.kvScale = *kvScale;
  }
  if (llvm::Error error = ChunkedPrefill::check(specs, shape, args, plan))
    return error;
  if (args.tokens == 0)
    return llvm::Error::success();

  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  llvm::Expected<CUcontext> context = useDevice(s, device);
  if (!context)
    return context.takeError();
  llvm::Expected<const ChunkedPrefill &> runner =
      getPrefill(s, specs, *context);
  if (!runner)
    return runner.takeError();
  return runner->run(stream, shape, args, plan);
}

//===----------------------------------------------------------------------===//
// Attention (a mixed decode/prefill batch)
//===----------------------------------------------------------------------===//

/// A mixed batch as the C API receives it: a prefill and the split weights.
struct AttentionCall {
  PrefillCall prefill;
  const mlaGpuTensor *wUkT, *wUv;
  const mlaGpuAttentionOptions *options;
};

llvm::Expected<mla::AttentionCall>
checkAttentionCall(const AttentionCall &call) {
  if (!call.options)
    return invalid("options is NULL");
  auto t = unwrapAll<8>(prefillTensors(call.prefill));
  if (!t)
    return t.takeError();
  auto weights = unwrapAll<2>(
      {{{call.wUkT, "w_uk_t", nullptr}, {call.wUv, "w_uv", nullptr}}});
  if (!weights)
    return weights.takeError();
  auto &[q, kvC, kPe, w, cache, table, qsl, lens] = *t;
  auto &[wUkT, wUv] = *weights;
  mla::AttentionOptions options;
  llvm::Expected<mla::PrefillOptions> prefill =
      unwrapPrefillOptions(call.options->prefill);
  if (!prefill)
    return prefill.takeError();
  options.prefill = std::move(*prefill);
  options.decodeThreshold = call.options->decodeThreshold;
  llvm::Expected<mla::AttentionCall> checked = mla::checkAttention(
      mla::Device::GPU, q, kvC, kPe, w, cache, table, qsl, lens, options);
  if (!checked)
    return checked.takeError();
  if (llvm::Error error =
          mla::checkAttentionWeights(mla::Device::GPU, *checked, q, wUkT, wUv))
    return std::move(error);
  return checked;
}

/// Loads the kernels `plan` needs in context `context`. Caller holds the
/// state lock, which keeps them loaded while it is held.
llvm::Expected<MixedAttentionKernels>
getAttentionKernels(State &s, const MixedAttentionSpecs &specs,
                    const MixedAttentionPlan &plan, CUcontext context) {
  MixedAttentionKernels kernels;
  if (plan.numDecodes > 0) {
    llvm::Expected<const CudaKernel &> absorb =
        getKernel(s, specs.absorbQ, context, loadProjectionKernel);
    if (!absorb)
      return absorb.takeError();
    llvm::Expected<std::shared_ptr<GpuDecoder>> decoder =
        getDecoder(s, specs.decode, context);
    if (!decoder)
      return decoder.takeError();
    llvm::Expected<const CudaKernel &> up =
        getKernel(s, specs.upProjOut, context, loadProjectionKernel);
    if (!up)
      return up.takeError();
    kernels.absorbQ = &*absorb;
    kernels.decoder = decoder->get();
    kernels.upProjOut = &*up;
  }
  if (plan.prefillChunks) {
    llvm::Expected<const ChunkedPrefill &> prefill =
        getPrefill(s, specs.prefill, context);
    if (!prefill)
      return prefill.takeError();
    kernels.prefill = &*prefill;
  }
  return kernels;
}

llvm::Error attention(const char *chipName, int32_t device,
                      const AttentionCall &call, uint64_t out,
                      uint64_t workspace, size_t *workspaceBytes,
                      CUstream stream) {
  llvm::Expected<mla::AttentionCall> checked = checkAttentionCall(call);
  if (!checked)
    return checked.takeError();
  if (!workspaceBytes)
    return invalid("workspaceBytes is null");
  llvm::Expected<Chip> chip = resolveChip(chipName, device);
  if (!chip)
    return chip.takeError();
  const mla::PrefillCall &c = checked->prefill;
  ChunkedPrefillShape shape = prefillShape(c);
  MixedAttentionSpecs specs = getMixedAttentionSpecs(*chip, shape);
  if (const char *why = checkChunkedPrefillSpecs(specs.prefill); *why)
    return invalid(Twine("no GPU prefill kernels for these arguments: ") + why);
  const PrefillCall &p = call.prefill;
  MixedAttentionBatch batch;
  batch.queryStartLoc = llvm::ArrayRef(p.queryStartLocHost, c.batch + 1);
  batch.seqLens = llvm::ArrayRef(p.seqLensHost, c.batch);
  batch.maxPages = p.blockTable->shape[1];
  batch.numPages = c.cache.pages;
  batch.decodeThreshold = checked->decodeThreshold;
  batch.workspaceRows = workspaceRows(c, *chip);
  // fp8_e4m3's scale for the prefill path's gather (taken before the state
  // lock, which getKvScalePointer takes itself).
  CUdeviceptr kvScale = 0;
  if (workspace && c.tokens > 0) {
    llvm::Expected<CUdeviceptr> ptr =
        getKvScalePointer(device, c.cache, &call.options->prefill.cache);
    if (!ptr)
      return ptr.takeError();
    kvScale = *ptr;
  }

  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  // The SM count sizes the decode's split-KV pieces; without decode
  // requests no driver is needed to size the workspace.
  if (checked->numDecodes > 0) {
    llvm::Expected<int64_t> numSms = getNumSms(s, device);
    if (!numSms)
      return numSms.takeError();
    batch.numSms = *numSms;
  }
  llvm::Expected<MixedAttentionPlan> plan =
      planMixedAttention(specs, shape, batch);
  if (!plan)
    return plan.takeError();
  if (!workspace) {
    *workspaceBytes = plan->workspace.totalBytes;
    return llvm::Error::success();
  }
  MixedAttentionArgs args;
  setPrefillArgs(args, p, c, out, workspace, *workspaceBytes);
  args.wUkT = call.wUkT->data;
  args.wUv = call.wUv->data;
  args.seqLens = p.seqLens->data;
  args.kvScale = kvScale;
  if (llvm::Error error = checkMixedAttention(specs, shape, args, *plan))
    return error;
  if (c.tokens == 0)
    return llvm::Error::success();
  llvm::Expected<CUcontext> context = useDevice(s, device);
  if (!context)
    return context.takeError();
  llvm::Expected<MixedAttentionKernels> kernels =
      getAttentionKernels(s, specs, *plan, *context);
  if (!kernels)
    return kernels.takeError();
  return runMixedAttention(stream, *kernels, specs, shape, args, *plan);
}

} // namespace

/// Copies spec text `text` into the caller's buffer, NUL included, or fails
/// naming the size it needs.
static llvm::Error writeSpec(const std::string &text, char *spec,
                             size_t specLen) {
  if (!spec || specLen <= text.size())
    return invalid("the spec buffer holds " + Twine(specLen) +
                   " bytes; the spec needs " + Twine(text.size() + 1));
  writeMessage(text, spec, specLen);
  return llvm::Error::success();
}

extern "C" int mlaGpuDecodeSpec(const char *chip, int32_t device,
                                int64_t numHeads, int64_t queryRows,
                                int64_t latentDim, int64_t ropeDim,
                                int64_t pageSize, int32_t dtype, int32_t causal,
                                const char *kvFormat, const char *tile,
                                char *spec, size_t specLen, char *err,
                                size_t errLen) {
  llvm::Expected<std::string> text =
      buildSpec(chip, device, numHeads, queryRows, latentDim, ropeDim, pageSize,
                dtype, causal, kvFormat, tile, /*varlen=*/false);
  if (!text)
    return report(text.takeError(), err, errLen);
  return report(writeSpec(*text, spec, specLen), err, errLen);
}

extern "C" int
mlaGpuCheckDecode(const mlaGpuTensor *q, const mlaGpuTensor *cache,
                  const mlaGpuTensor *blockTable, const mlaGpuTensor *seqLens,
                  const int32_t *seqLensHost, const int32_t *blockTableHost,
                  const mlaGpuDecodeOptions *options, char *err,
                  size_t errLen) {
  DecodeCall call{q,           cache,          blockTable, seqLens,
                  seqLensHost, blockTableHost, options};
  return report(checkDecodeCall(call).takeError(), err, errLen);
}

extern "C" int
mlaGpuDecode(const char *spec, int32_t device, const mlaGpuTensor *q,
             const mlaGpuTensor *cache, const mlaGpuTensor *blockTable,
             const mlaGpuTensor *seqLens, const int32_t *seqLensHost,
             const int32_t *blockTableHost, const mlaGpuDecodeOptions *options,
             uint64_t out, uint64_t lse, uint64_t kvScale, uint64_t workspace,
             size_t *workspaceBytes, void *stream, char *err, size_t errLen) {
  DecodeCall call{q,           cache,          blockTable, seqLens,
                  seqLensHost, blockTableHost, options};
  return report(decode(spec, device, call, out, lse, kvScale, workspace,
                       workspaceBytes, static_cast<CUstream>(stream)),
                err, errLen);
}

extern "C" int mlaGpuDecodePlanCreate(
    const char *spec, int32_t device, const mlaGpuTensor *q,
    const mlaGpuTensor *cache, const mlaGpuTensor *blockTable,
    const mlaGpuTensor *seqLens, const mlaGpuDecodeOptions *options,
    int64_t maxBatch, int64_t maxSeqLen, uint64_t workspace,
    size_t *workspaceBytes, uint64_t status, mlaGpuDecodePlan **plan, char *err,
    size_t errLen) {
  if (!options)
    return report(invalid("options is NULL"), err, errLen);
  // The scale is mlaGpuDecodeRun's argument: a plan serves every scale.
  mlaGpuDecodeOptions planOptions = *options;
  planOptions.softmaxScale = 1.0;
  DecodeCall call{q,       cache,   blockTable,  seqLens,
                  nullptr, nullptr, &planOptions};
  return report(createPlan(spec, device, call, maxBatch, maxSeqLen, workspace,
                           workspaceBytes, status, plan),
                err, errLen);
}

extern "C" int64_t mlaGpuDecodePlanNumSplits(const mlaGpuDecodePlan *plan) {
  return plan ? plan->numSplits : 0;
}

extern "C" void mlaGpuDecodePlanDestroy(mlaGpuDecodePlan *plan) { delete plan; }

extern "C" int mlaGpuDecodePlanUpdate(mlaGpuDecodePlan *plan,
                                      const mlaGpuTensor *q,
                                      const mlaGpuTensor *cache,
                                      const mlaGpuTensor *blockTable,
                                      const mlaGpuTensor *seqLens, void *stream,
                                      char *err, size_t errLen) {
  DecodeCall call{q,
                  cache,
                  blockTable,
                  seqLens,
                  nullptr,
                  nullptr,
                  plan ? &plan->options : nullptr};
  return report(updatePlan(plan, call, static_cast<CUstream>(stream)), err,
                errLen);
}

extern "C" int mlaGpuDecodeRun(const mlaGpuDecodePlan *plan, uint64_t q,
                               uint64_t cache, uint64_t blockTable,
                               uint64_t seqLens, uint64_t out, uint64_t lse,
                               double softmaxScale, uint64_t kvScale,
                               void *stream, char *err, size_t errLen) {
  DecodeArgs args;
  args.q = q;
  args.cache = cache;
  args.blockTable = blockTable;
  args.seqLens = seqLens;
  args.out = out;
  args.lse = lse;
  args.softmaxScale = static_cast<float>(softmaxScale);
  args.kvScale = kvScale;
  return report(runPlan(plan, args, static_cast<CUstream>(stream)), err,
                errLen);
}

// The layout the header promises (the Python binding packs it as "=8Qd").
static_assert(sizeof(mlaGpuDecodeRunArgs) == 72 &&
                  offsetof(mlaGpuDecodeRunArgs, stream) == 56 &&
                  offsetof(mlaGpuDecodeRunArgs, softmaxScale) == 64,
              "mlaGpuDecodeRunArgs is nine 8-byte fields");

extern "C" int mlaGpuDecodeRunPacked(const mlaGpuDecodePlan *plan,
                                     const mlaGpuDecodeRunArgs *packed,
                                     char *err, size_t errLen) {
  if (!packed)
    return report(invalid("args is NULL"), err, errLen);
  return mlaGpuDecodeRun(plan, packed->q, packed->cache, packed->blockTable,
                         packed->seqLens, packed->out, packed->lse,
                         packed->softmaxScale, packed->kvScale,
                         reinterpret_cast<void *>(packed->stream), err, errLen);
}

extern "C" int mlaGpuDecodePlanCheck(mlaGpuDecodePlan *plan, void *stream,
                                     char *err, size_t errLen) {
  return report(checkPlanStatus(plan, static_cast<CUstream>(stream)), err,
                errLen);
}

extern "C" int
mlaGpuDecodeVarlenSpec(const char *chip, int32_t device, int64_t numHeads,
                       int64_t maxQueryRows, int64_t latentDim, int64_t ropeDim,
                       int64_t pageSize, int32_t dtype, int32_t causal,
                       const char *kvFormat, const char *tile, char *spec,
                       size_t specLen, char *err, size_t errLen) {
  llvm::Expected<std::string> text =
      buildSpec(chip, device, numHeads, maxQueryRows, latentDim, ropeDim,
                pageSize, dtype, causal, kvFormat, tile, /*varlen=*/true);
  if (!text)
    return report(text.takeError(), err, errLen);
  return report(writeSpec(*text, spec, specLen), err, errLen);
}

extern "C" int mlaGpuDecodeVarlen(
    const char *spec, int32_t device, const mlaGpuTensor *q,
    const mlaGpuTensor *cache, const mlaGpuTensor *blockTable,
    const mlaGpuTensor *seqLens, const mlaGpuTensor *queryStartLoc,
    const int32_t *seqLensHost, const int32_t *blockTableHost,
    const int32_t *queryStartLocHost, const mlaGpuDecodeOptions *options,
    uint64_t out, uint64_t lse, uint64_t kvScale, uint64_t workspace,
    size_t *workspaceBytes, void *stream, char *err, size_t errLen) {
  if (!queryStartLoc)
    return report(invalid("query_start_loc is NULL"), err, errLen);
  DecodeCall call{q,       cache,         blockTable,
                  seqLens, seqLensHost,   blockTableHost,
                  options, queryStartLoc, queryStartLocHost};
  return report(decode(spec, device, call, out, lse, kvScale, workspace,
                       workspaceBytes, static_cast<CUstream>(stream)),
                err, errLen);
}

extern "C" int mlaGpuDecodeVarlenPlanCreate(
    const char *spec, int32_t device, const mlaGpuTensor *q,
    const mlaGpuTensor *cache, const mlaGpuTensor *blockTable,
    const mlaGpuTensor *seqLens, const mlaGpuTensor *queryStartLoc,
    const mlaGpuDecodeOptions *options, int64_t maxBatch, int64_t maxSeqLen,
    uint64_t workspace, size_t *workspaceBytes, uint64_t status,
    mlaGpuDecodePlan **plan, char *err, size_t errLen) {
  if (!options)
    return report(invalid("options is NULL"), err, errLen);
  if (!queryStartLoc)
    return report(invalid("query_start_loc is NULL"), err, errLen);
  mlaGpuDecodeOptions planOptions = *options;
  planOptions.softmaxScale = 1.0;
  DecodeCall call{q,       cache,   blockTable,   seqLens,
                  nullptr, nullptr, &planOptions, queryStartLoc};
  return report(createPlan(spec, device, call, maxBatch, maxSeqLen, workspace,
                           workspaceBytes, status, plan),
                err, errLen);
}

extern "C" int mlaGpuDecodeVarlenPlanUpdate(
    mlaGpuDecodePlan *plan, const mlaGpuTensor *q, const mlaGpuTensor *cache,
    const mlaGpuTensor *blockTable, const mlaGpuTensor *seqLens,
    const mlaGpuTensor *queryStartLoc, void *stream, char *err, size_t errLen) {
  if (!queryStartLoc)
    return report(invalid("query_start_loc is NULL"), err, errLen);
  DecodeCall call{q,
                  cache,
                  blockTable,
                  seqLens,
                  nullptr,
                  nullptr,
                  plan ? &plan->options : nullptr,
                  queryStartLoc};
  return report(updatePlan(plan, call, static_cast<CUstream>(stream)), err,
                errLen);
}

extern "C" int mlaGpuDecodeVarlenRun(const mlaGpuDecodePlan *plan, uint64_t q,
                                     uint64_t cache, uint64_t blockTable,
                                     uint64_t seqLens, uint64_t queryStartLoc,
                                     uint64_t out, uint64_t lse,
                                     double softmaxScale, uint64_t kvScale,
                                     void *stream, char *err, size_t errLen) {
  DecodeArgs args;
  args.q = q;
  args.cache = cache;
  args.blockTable = blockTable;
  args.seqLens = seqLens;
  args.queryStartLoc = queryStartLoc;
  args.out = out;
  args.lse = lse;
  args.softmaxScale = static_cast<float>(softmaxScale);
  args.kvScale = kvScale;
  return report(runPlan(plan, args, static_cast<CUstream>(stream)), err,
                errLen);
}

extern "C" int mlaGpuCanonicalSpec(const char *text, char *spec, size_t specLen,
                                   char *err, size_t errLen) {
  if (!text)
    return report(invalid("the kernel spec is null"), err, errLen);
  KernelSpec parsed;
  std::string why;
  if (!parseKernelSpec(text, parsed, why))
    return report(invalid(Twine("bad kernel spec '") + text + "': " + why), err,
                  errLen);
  return report(writeSpec(toString(parsed), spec, specLen), err, errLen);
}

extern "C" int mlaGpuCheckCacheWrite(const mlaGpuTensor *kvC,
                                     const mlaGpuTensor *kPe,
                                     const mlaGpuTensor *slotMapping,
                                     const int32_t *slotMappingHost,
                                     const mlaGpuTensor *cache,
                                     const mlaGpuCacheFormat *format, char *err,
                                     size_t errLen) {
  if (!format)
    return report(invalid("the cache format is NULL"), err, errLen);
  CacheWriteCall call{kvC, kPe, slotMapping, cache, slotMappingHost};
  return report(checkCacheWriteCall(call, *format).takeError(), err, errLen);
}

extern "C" int
mlaGpuCacheWrite(const char *spec, int32_t device, const mlaGpuTensor *kvC,
                 const mlaGpuTensor *kPe, const mlaGpuTensor *slotMapping,
                 const int32_t *slotMappingHost, const mlaGpuTensor *cache,
                 const mlaGpuCacheFormat *format, void *stream, char *err,
                 size_t errLen) {
  CacheWriteCall call{kvC, kPe, slotMapping, cache, slotMappingHost};
  return report(
      cacheWrite(spec, device, call, format, static_cast<CUstream>(stream)),
      err, errLen);
}

extern "C" int mlaGpuCheckAbsorbQ(const mlaGpuTensor *q,
                                  const mlaGpuTensor *wUkT, char *err,
                                  size_t errLen) {
  return report(
      checkProjectionCall(ProjectionKind::AbsorbQ, q, wUkT).takeError(), err,
      errLen);
}

extern "C" int mlaGpuCheckUpProjOut(const mlaGpuTensor *o,
                                    const mlaGpuTensor *wUv, char *err,
                                    size_t errLen) {
  return report(
      checkProjectionCall(ProjectionKind::UpProjOut, o, wUv).takeError(), err,
      errLen);
}

extern "C" int mlaGpuAbsorbQ(const char *spec, int32_t device,
                             const mlaGpuTensor *q, const mlaGpuTensor *wUkT,
                             uint64_t out, void *stream, char *err,
                             size_t errLen) {
  return report(project(ProjectionKind::AbsorbQ, spec, device, q, wUkT, out,
                        static_cast<CUstream>(stream)),
                err, errLen);
}

extern "C" int mlaGpuUpProjOut(const char *spec, int32_t device,
                               const mlaGpuTensor *o, const mlaGpuTensor *wUv,
                               uint64_t out, void *stream, char *err,
                               size_t errLen) {
  return report(project(ProjectionKind::UpProjOut, spec, device, o, wUv, out,
                        static_cast<CUstream>(stream)),
                err, errLen);
}

extern "C" int mlaGpuCheckGatherCache(
    const mlaGpuTensor *kvCache, const mlaGpuTensor *blockTable,
    const mlaGpuTensor *starts, const mlaGpuTensor *cuRows,
    const int32_t *blockTableHost, const int32_t *startsHost,
    const int32_t *cuRowsHost, const mlaGpuTensor *workspace, int64_t latentDim,
    const mlaGpuCacheFormat *format, char *err, size_t errLen) {
  if (!format)
    return report(invalid("the cache format is NULL"), err, errLen);
  GatherCall call{kvCache,        blockTable, starts,     cuRows,
                  blockTableHost, startsHost, cuRowsHost, workspace};
  return report(checkGatherCall(call, latentDim, *format).takeError(), err,
                errLen);
}

extern "C" int
mlaGpuGatherCache(const char *spec, int32_t device, const mlaGpuTensor *kvCache,
                  const mlaGpuTensor *blockTable, const mlaGpuTensor *starts,
                  const mlaGpuTensor *cuRows, const int32_t *blockTableHost,
                  const int32_t *startsHost, const int32_t *cuRowsHost,
                  const mlaGpuTensor *workspace,
                  const mlaGpuCacheFormat *format, void *stream, char *err,
                  size_t errLen) {
  GatherCall call{kvCache,        blockTable, starts,     cuRows,
                  blockTableHost, startsHost, cuRowsHost, workspace};
  return report(
      gatherCache(spec, device, call, format, static_cast<CUstream>(stream)),
      err, errLen);
}

extern "C" int mlaGpuCheckMergeStates(const mlaGpuTensor *outA,
                                      const mlaGpuTensor *lseA,
                                      const mlaGpuTensor *outB,
                                      const mlaGpuTensor *lseB, char *err,
                                      size_t errLen) {
  return report(checkMergeCall(outA, lseA, outB, lseB).takeError(), err,
                errLen);
}

extern "C" int
mlaGpuMergeStates(const char *spec, int32_t device, const mlaGpuTensor *outA,
                  const mlaGpuTensor *lseA, const mlaGpuTensor *outB,
                  const mlaGpuTensor *lseB, uint64_t out, uint64_t lse,
                  void *stream, char *err, size_t errLen) {
  return report(mergeStates(spec, device, outA, lseA, outB, lseB, out, lse,
                            static_cast<CUstream>(stream)),
                err, errLen);
}

extern "C" int mlaGpuCheckUpProjKv(const mlaGpuTensor *latent,
                                   const mlaGpuTensor *kvBProj,
                                   int64_t numHeads, int64_t qkNopeHeadDim,
                                   int64_t vHeadDim, char *err, size_t errLen) {
  return report(
      checkUpProjKvCall(latent, kvBProj, numHeads, qkNopeHeadDim, vHeadDim)
          .takeError(),
      err, errLen);
}

extern "C" int mlaGpuUpProjKv(const char *spec, int32_t device,
                              const mlaGpuTensor *latent,
                              const mlaGpuTensor *kvBProj, uint64_t kNope,
                              uint64_t v, void *stream, char *err,
                              size_t errLen) {
  return report(upProjKv(spec, device, latent, kvBProj, kNope, v,
                         static_cast<CUstream>(stream)),
                err, errLen);
}

extern "C" int
mlaGpuCheckMha(const mlaGpuTensor *q, const mlaGpuTensor *k,
               const mlaGpuTensor *v, const mlaGpuTensor *cuSeqlensQ,
               const mlaGpuTensor *cuSeqlensK, const int32_t *cuSeqlensQHost,
               const int32_t *cuSeqlensKHost, double softmaxScale,
               int32_t causal, char *err, size_t errLen) {
  MhaCall call{q, k, v, cuSeqlensQ, cuSeqlensK, cuSeqlensQHost, cuSeqlensKHost};
  return report(checkMhaCall(call, softmaxScale, causal != 0).takeError(), err,
                errLen);
}

extern "C" int mlaGpuMha(const char *spec, int32_t device,
                         const mlaGpuTensor *q, const mlaGpuTensor *k,
                         const mlaGpuTensor *v, const mlaGpuTensor *cuSeqlensQ,
                         const mlaGpuTensor *cuSeqlensK,
                         const int32_t *cuSeqlensQHost,
                         const int32_t *cuSeqlensKHost, uint64_t out,
                         uint64_t lse, void *stream, char *err, size_t errLen) {
  MhaCall call{q, k, v, cuSeqlensQ, cuSeqlensK, cuSeqlensQHost, cuSeqlensKHost};
  return report(
      mha(spec, device, call, out, lse, static_cast<CUstream>(stream)), err,
      errLen);
}

extern "C" int mlaGpuCheckPrefill(
    const mlaGpuTensor *q, const mlaGpuTensor *kvC, const mlaGpuTensor *kPe,
    const mlaGpuTensor *kvBProj, const mlaGpuTensor *kvCache,
    const mlaGpuTensor *blockTable, const mlaGpuTensor *queryStartLoc,
    const mlaGpuTensor *seqLens, const int32_t *blockTableHost,
    const int32_t *queryStartLocHost, const int32_t *seqLensHost,
    const mlaGpuPrefillOptions *options, char *err, size_t errLen) {
  PrefillCall call{
      q,           kvC,           kPe,     kvBProj,        kvCache,
      blockTable,  queryStartLoc, seqLens, blockTableHost, queryStartLocHost,
      seqLensHost, options};
  return report(checkPrefillCall(call).takeError(), err, errLen);
}

extern "C" int
mlaGpuPrefill(const char *chip, int32_t device, const mlaGpuTensor *q,
              const mlaGpuTensor *kvC, const mlaGpuTensor *kPe,
              const mlaGpuTensor *kvBProj, const mlaGpuTensor *kvCache,
              const mlaGpuTensor *blockTable, const mlaGpuTensor *queryStartLoc,
              const mlaGpuTensor *seqLens, const int32_t *blockTableHost,
              const int32_t *queryStartLocHost, const int32_t *seqLensHost,
              const mlaGpuPrefillOptions *options, uint64_t out,
              uint64_t workspace, size_t *workspaceBytes, void *stream,
              char *err, size_t errLen) {
  PrefillCall call{
      q,           kvC,           kPe,     kvBProj,        kvCache,
      blockTable,  queryStartLoc, seqLens, blockTableHost, queryStartLocHost,
      seqLensHost, options};
  return report(prefill(chip, device, call, out, workspace, workspaceBytes,
                        static_cast<CUstream>(stream)),
                err, errLen);
}

extern "C" int mlaGpuCheckAttention(
    const mlaGpuTensor *q, const mlaGpuTensor *kvC, const mlaGpuTensor *kPe,
    const mlaGpuTensor *kvBProj, const mlaGpuTensor *wUkT,
    const mlaGpuTensor *wUv, const mlaGpuTensor *kvCache,
    const mlaGpuTensor *blockTable, const mlaGpuTensor *queryStartLoc,
    const mlaGpuTensor *seqLens, const int32_t *blockTableHost,
    const int32_t *queryStartLocHost, const int32_t *seqLensHost,
    const mlaGpuAttentionOptions *options, char *err, size_t errLen) {
  AttentionCall call{{q, kvC, kPe, kvBProj, kvCache, blockTable, queryStartLoc,
                      seqLens, blockTableHost, queryStartLocHost, seqLensHost,
                      options ? &options->prefill : nullptr},
                     wUkT,
                     wUv,
                     options};
  return report(checkAttentionCall(call).takeError(), err, errLen);
}

extern "C" int mlaGpuAttention(
    const char *chip, int32_t device, const mlaGpuTensor *q,
    const mlaGpuTensor *kvC, const mlaGpuTensor *kPe,
    const mlaGpuTensor *kvBProj, const mlaGpuTensor *wUkT,
    const mlaGpuTensor *wUv, const mlaGpuTensor *kvCache,
    const mlaGpuTensor *blockTable, const mlaGpuTensor *queryStartLoc,
    const mlaGpuTensor *seqLens, const int32_t *blockTableHost,
    const int32_t *queryStartLocHost, const int32_t *seqLensHost,
    const mlaGpuAttentionOptions *options, uint64_t out, uint64_t workspace,
    size_t *workspaceBytes, void *stream, char *err, size_t errLen) {
  AttentionCall call{{q, kvC, kPe, kvBProj, kvCache, blockTable, queryStartLoc,
                      seqLens, blockTableHost, queryStartLocHost, seqLensHost,
                      options ? &options->prefill : nullptr},
                     wUkT,
                     wUv,
                     options};
  return report(attention(chip, device, call, out, workspace, workspaceBytes,
                          static_cast<CUstream>(stream)),
                err, errLen);
}

extern "C" void mlaGpuClearDecoders(void) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.decoders.clear();
  s.kernels.clear();
  s.prefills.clear();
  s.kvScales.clear();
  s.stats = {};
}

extern "C" void mlaGpuGetRuntimeStats(mlaGpuRuntimeStats *stats) {
  if (!stats)
    return;
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  *stats = s.stats;
  stats->loadedKernels =
      s.decoders.size() + s.kernels.size() + s.prefills.size();
}

extern "C" const char *mlaGpuGetVersion(void) { return mla::getVersion(); }
