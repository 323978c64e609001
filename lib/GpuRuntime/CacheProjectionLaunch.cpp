//===- CacheProjectionLaunch.cpp - Launch cache write / projections -------===//
//
// Argument checks and launches of the kernels in CacheProjectionABI.h; see
// CacheProjectionLaunch.h for the contract.
//
//===----------------------------------------------------------------------===//

#include "mla/GpuRuntime/CacheProjectionLaunch.h"
#include "mla/GpuRuntime/KvScale.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <system_error>

using namespace mla::gpu;
using llvm::Error;

namespace {

constexpr int64_t kMaxI32 = std::numeric_limits<int32_t>::max();

/// Every argument error: the C API reports these as invalid arguments.
Error fail(const llvm::Twine &msg) {
  return llvm::createStringError(
      std::make_error_code(std::errc::invalid_argument), msg);
}

/// Device pointers the kernels access with 16-byte vector instructions.
Error checkPointer(const char *kernel, const char *name, CUdeviceptr p) {
  if (p == 0)
    return fail(llvm::Twine(kernel) + ": " + name + " is null");
  if (p % 16 != 0)
    return fail(llvm::Twine(kernel) + ": " + name +
                " must be 16-byte aligned (got 0x" + llvm::Twine::utohexstr(p) +
                ")");
  return Error::success();
}

Error checkCount(const char *kernel, const char *name, int64_t v) {
  if (v < 0 || v > kMaxI32)
    return fail(llvm::Twine(kernel) + ": " + name + " = " + llvm::Twine(v) +
                " is outside [0, 2^31)");
  return Error::success();
}

Error launch(const CudaKernel &kernel, CUstream stream, const LaunchDims &d,
             void **params) {
  return kernel.launch(Dim3{d.gridX, d.gridY, d.gridZ},
                       Dim3{d.blockX, d.blockY, d.blockZ},
                       /*sharedBytes=*/0, stream, params);
}

Error checkProjection(const char *kernelName, const ProjectionArgs &args) {
  const ProjectionShape &s = args.shape;
  if (const char *why = checkProjectionShape(s); *why)
    return fail(llvm::Twine(kernelName) + ": " + why);
  if (Error err = checkCount(kernelName, "tokens", args.tokens))
    return err;
  if (args.tokens == 0)
    return Error::success();
  for (auto [name, p] : {std::pair<const char *, CUdeviceptr>{"in", args.in},
                         {"weight", args.weight},
                         {"out", args.out}})
    if (Error err = checkPointer(kernelName, name, p))
      return err;
  return Error::success();
}

Error launchProjection(const CudaKernel &kernel, CUstream stream,
                       const ProjectionArgs &args) {
  const ProjectionShape &s = args.shape;
  if (args.tokens == 0)
    return Error::success();
  CUdeviceptr in = args.in, weight = args.weight, out = args.out;
  int32_t tokens = static_cast<int32_t>(args.tokens);
  void *params[kProjectionNumParams] = {&in, &weight, &out, &tokens};
  return launch(kernel, stream, projectionLaunchDims(s, args.tokens), params);
}

} // namespace

Error mla::gpu::checkCacheWriteArgs(const CacheWriteArgs &args) {
  const char *name = kCacheWriteKernel;
  const CacheWriteShape &s = args.shape;
  if (s.latentDim <= 0 || s.ropeDim <= 0)
    return fail(llvm::Twine(name) + ": L and R must be positive (got L = " +
                llvm::Twine(s.latentDim) + ", R = " + llvm::Twine(s.ropeDim) +
                ")");
  if (s.format == CacheFormat::FP8DsMla && s.latentDim % kDsMlaTile != 0)
    return fail(llvm::Twine(name) + ": fp8_ds_mla needs L % 128 == 0, got " +
                llvm::Twine(s.latentDim));
  if (Error err = checkCount(name, "tokens", args.tokens))
    return err;
  if (Error err = checkCount(name, "numSlots", args.numSlots))
    return err;
  if (args.tokens == 0)
    return Error::success();
  for (auto [arg, p] : {std::pair<const char *, CUdeviceptr>{"kv_c", args.kvC},
                        {"k_pe", args.kPe},
                        {"slot_mapping", args.slotMapping},
                        {"cache", args.cache}})
    if (Error err = checkPointer(name, arg, p))
      return err;
  return checkKvScalePointer(name, s.format, args.kvScale);
}

Error mla::gpu::launchCacheWrite(const CudaKernel &kernel, CUstream stream,
                                 const CacheWriteArgs &args) {
  if (Error err = checkCacheWriteArgs(args))
    return err;
  if (args.tokens == 0)
    return Error::success();
  CUdeviceptr kvC = args.kvC, kPe = args.kPe, slots = args.slotMapping,
              cache = args.cache;
  int32_t tokens = static_cast<int32_t>(args.tokens);
  int32_t numSlots = static_cast<int32_t>(args.numSlots);
  CUdeviceptr kvScale = args.kvScale;
  // The kv_scale slot is past the end of the parameters the kernels of
  // other formats declare, so they never read it.
  void *params[] = {&kvC, &kPe, &slots, &cache, &tokens, &numSlots, &kvScale};
  return launch(kernel, stream, cacheWriteLaunchDims(args.tokens), params);
}

Error mla::gpu::checkAbsorbQArgs(const ProjectionArgs &args) {
  if (args.shape.ropeDim <= 0)
    return fail(llvm::Twine(kAbsorbQKernel) +
                ": the RoPE width R (shape.ropeDim) must be positive");
  return checkProjection(kAbsorbQKernel, args);
}

Error mla::gpu::checkUpProjOutArgs(const ProjectionArgs &args) {
  if (args.shape.ropeDim != 0)
    return fail(llvm::Twine(kUpProjOutKernel) +
                ": shape.ropeDim must be 0 (no RoPE part)");
  return checkProjection(kUpProjOutKernel, args);
}

Error mla::gpu::launchAbsorbQ(const CudaKernel &kernel, CUstream stream,
                              const ProjectionArgs &args) {
  if (Error err = checkAbsorbQArgs(args))
    return err;
  return launchProjection(kernel, stream, args);
}

Error mla::gpu::launchUpProjOut(const CudaKernel &kernel, CUstream stream,
                                const ProjectionArgs &args) {
  if (Error err = checkUpProjOutArgs(args))
    return err;
  return launchProjection(kernel, stream, args);
}

llvm::Expected<CudaKernel>
mla::gpu::loadCacheWriteKernel(const CacheWriteKernelSpec &spec,
                               const KernelCache &cache) {
  std::string key = cacheKeyFor(spec);
  std::optional<std::vector<char>> image = cache.lookup(key, toString(spec));
  if (!image)
    return cache.getMissingEntryError(toString(spec), key);
  return loadKernel(*image, kCacheWriteKernel);
}

llvm::Expected<CudaKernel>
mla::gpu::loadProjectionKernel(const ProjectionKernelSpec &spec,
                               const KernelCache &cache) {
  std::string key = cacheKeyFor(spec);
  std::optional<std::vector<char>> image = cache.lookup(key, toString(spec));
  if (!image)
    return cache.getMissingEntryError(toString(spec), key);
  return loadKernel(*image, spec.kind == ProjectionKind::AbsorbQ
                                ? kAbsorbQKernel
                                : kUpProjOutKernel);
}
