//===- PrefillLaunch.cpp - Launch the chunked-prefill kernels -------------===//
//
// Argument checks and launches of the kernels in PrefillABI.h; see
// PrefillLaunch.h for the contract.
//
//===----------------------------------------------------------------------===//

#include "mla/GpuRuntime/PrefillLaunch.h"
#include "mla/GpuRuntime/KvScale.h"
#include "mla/GpuRuntime/TensorMap.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <system_error>
#include <tuple>

using namespace mla::gpu;
using llvm::Error;
using llvm::Twine;

namespace {

constexpr int64_t kMaxI32 = std::numeric_limits<int32_t>::max();

Error fail(const Twine &msg) {
  return llvm::createStringError(
      std::make_error_code(std::errc::invalid_argument), msg);
}

/// A non-null device pointer aligned to `align` bytes (16 where the kernel
/// uses 16-byte vectors or cp.async, 4 for i32/f32 tables).
Error checkPointer(const char *kernel, const char *name, CUdeviceptr p,
                   unsigned align) {
  if (p == 0)
    return fail(Twine(kernel) + ": " + name + " is null");
  if (p % align != 0)
    return fail(Twine(kernel) + ": " + name + " must be " + Twine(align) +
                "-byte aligned (got 0x" + Twine::utohexstr(p) + ")");
  return Error::success();
}

Error checkCount(const char *kernel, const char *name, int64_t v) {
  if (v < 0 || v > kMaxI32)
    return fail(Twine(kernel) + ": " + name + " = " + Twine(v) +
                " is outside [0, 2^31)");
  return Error::success();
}

Error launch(const CudaKernel &kernel, CUstream stream, const LaunchDims &d,
             unsigned sharedBytes, void **params) {
  return kernel.launch(Dim3{d.gridX, d.gridY, d.gridZ},
                       Dim3{d.blockX, d.blockY, d.blockZ}, sharedBytes, stream,
                       params);
}

template <typename Spec>
llvm::Expected<CudaKernel> loadFor(const Spec &spec, const KernelCache &cache,
                                   const char *name) {
  std::string key = cacheKeyFor(spec);
  std::optional<std::vector<char>> image = cache.lookup(key, toString(spec));
  if (!image)
    return cache.getMissingEntryError(toString(spec), key);
  return loadKernel(*image, name);
}

} // namespace

Error mla::gpu::checkGatherCacheArgs(const GatherCacheArgs &a) {
  const char *name = kGatherCacheKernel;
  if (const char *why = checkGatherCacheShape(a.shape); *why)
    return fail(Twine(name) + ": " + why);
  for (auto [arg, v] : {std::pair<const char *, int64_t>{"batch", a.batch},
                        {"maxPages", a.maxPages},
                        {"numPages", a.numPages},
                        {"workspaceRows", a.workspaceRows}})
    if (Error err = checkCount(name, arg, v))
      return err;
  if (a.workspaceRows == 0 || a.batch == 0)
    return Error::success();
  if (Error err = checkPointer(name, "cache", a.cache, 16))
    return err;
  if (Error err = checkPointer(name, "workspace", a.workspace, 16))
    return err;
  for (auto [arg, p] :
       {std::pair<const char *, CUdeviceptr>{"block_table", a.blockTable},
        {"starts", a.starts},
        {"cu_rows", a.cuRows}})
    if (Error err = checkPointer(name, arg, p, 4))
      return err;
  return checkKvScalePointer(name, a.shape.row.format, a.kvScale);
}

Error mla::gpu::launchGatherCache(const CudaKernel &kernel, CUstream stream,
                                  const GatherCacheArgs &a) {
  if (Error err = checkGatherCacheArgs(a))
    return err;
  if (a.workspaceRows == 0 || a.batch == 0)
    return Error::success();
  CUdeviceptr cache = a.cache, table = a.blockTable, starts = a.starts,
              cuRows = a.cuRows, ws = a.workspace;
  int32_t batch = int32_t(a.batch), maxPages = int32_t(a.maxPages),
          numPages = int32_t(a.numPages), rows = int32_t(a.workspaceRows);
  CUdeviceptr kvScale = a.kvScale;
  // The kv_scale slot is past the end of the parameters the kernels of
  // other formats declare, so they never read it.
  void *params[] = {&cache, &table,    &starts,   &cuRows, &ws,
                    &batch, &maxPages, &numPages, &rows,   &kvScale};
  return launch(kernel, stream, gatherCacheLaunchDims(a.workspaceRows), 0,
                params);
}

Error mla::gpu::checkMergeStatesArgs(const MergeStatesArgs &a) {
  const char *name = kMergeStatesKernel;
  if (const char *why = checkMergeStatesShape(a.shape); *why)
    return fail(Twine(name) + ": " + why);
  if (Error err = checkCount(name, "tokens", a.tokens))
    return err;
  if (a.tokens * a.shape.numHeads > kMaxI32)
    return fail(Twine(name) + ": tokens * N = " +
                Twine(a.tokens * a.shape.numHeads) + " is past 2^31 - 1");
  if (a.tokens == 0)
    return Error::success();
  for (auto [arg, p] : {std::pair<const char *, CUdeviceptr>{"out_a", a.outA},
                        {"out_b", a.outB},
                        {"out", a.out}})
    if (Error err = checkPointer(name, arg, p, 16))
      return err;
  for (auto [arg, p] : {std::pair<const char *, CUdeviceptr>{"lse_a", a.lseA},
                        {"lse_b", a.lseB},
                        {"lse", a.lse}})
    if (Error err = checkPointer(name, arg, p, 4))
      return err;
  return Error::success();
}

Error mla::gpu::launchMergeStates(const CudaKernel &kernel, CUstream stream,
                                  const MergeStatesArgs &a) {
  if (Error err = checkMergeStatesArgs(a))
    return err;
  if (a.tokens == 0)
    return Error::success();
  CUdeviceptr outA = a.outA, lseA = a.lseA, outB = a.outB, lseB = a.lseB,
              out = a.out, lse = a.lse;
  int32_t tokens = int32_t(a.tokens);
  void *params[kMergeStatesNumParams] = {&outA, &lseA, &outB,  &lseB,
                                         &out,  &lse,  &tokens};
  return launch(kernel, stream, mergeStatesLaunchDims(a.shape, a.tokens), 0,
                params);
}

Error mla::gpu::checkUpProjKvArgs(const UpProjKvArgs &a) {
  const char *name = kUpProjKvKernel;
  if (const char *why = checkUpProjKvShape(a.shape); *why)
    return fail(Twine(name) + ": " + why);
  if (Error err = checkCount(name, "rows", a.rows))
    return err;
  if (a.rows == 0)
    return Error::success();
  // cp.async reads 16-byte chunks; results are stored as element pairs.
  if (Error err = checkPointer(name, "latent", a.latent, 16))
    return err;
  if (Error err = checkPointer(name, "kv_b_proj", a.kvBProj, 16))
    return err;
  // The wgmma build stores 16-byte vectors, the mma.sync one element pairs.
  unsigned align = upProjKvUsesWgmma(a.chip, a.shape) ? 16 : 4;
  if (Error err = checkPointer(name, "k_nope", a.kNope, align))
    return err;
  return checkPointer(name, "v", a.v, align);
}

Error mla::gpu::launchUpProjKv(const CudaKernel &kernel, CUstream stream,
                               const UpProjKvArgs &a) {
  if (Error err = checkUpProjKvArgs(a))
    return err;
  if (a.rows == 0)
    return Error::success();
  CUdeviceptr latent = a.latent, weight = a.kvBProj, kNope = a.kNope, v = a.v;
  int32_t rows = int32_t(a.rows);
  LaunchDims dims = upProjKvLaunchDims(a.chip, a.shape, a.rows);
  if (!upProjKvUsesWgmma(a.chip, a.shape)) {
    void *params[kUpProjKvNumParams] = {&latent, &weight, &kNope, &v, &rows};
    return launch(kernel, stream, dims, unsigned(upProjKvSharedBytes()),
                  params);
  }
  llvm::Expected<const CudaDriver &> driver = CudaRuntime::get();
  if (!driver)
    return driver.takeError();
  const UpProjKvShape &s = a.shape;
  llvm::Expected<CUtensorMap> aMap = encodeHeadRowsMap(
      *driver, latent, s.elem, a.rows, 1, s.latentDim, kUpKvWgTileM);
  if (!aMap)
    return aMap.takeError();
  llvm::Expected<CUtensorMap> wMap = encodeHeadRowsMap(
      *driver, weight, s.elem, s.columns(), 1, s.latentDim, kUpKvWgTileN);
  if (!wMap)
    return wMap.takeError();
  void *params[kUpProjKvNumParams] = {&*aMap, &*wMap, &kNope, &v, &rows};
  return launch(kernel, stream, dims, unsigned(upProjKvWgSmemLayout().total),
                params);
}

Error mla::gpu::checkMhaArgs(const MhaArgs &a) {
  const char *name = kMhaKernel;
  if (const char *why = checkMhaShape(a.shape); *why)
    return fail(Twine(name) + ": " + why);
  if (Error err = checkCount(name, "batch", a.batch))
    return err;
  if (Error err = checkCount(name, "tokens", a.tokens))
    return err;
  if (Error err = checkCount(name, "keys", a.keys))
    return err;
  if (a.tokens * a.shape.numHeads > kMaxI32)
    return fail(Twine(name) + ": tokens * N = " +
                Twine(a.tokens * a.shape.numHeads) + " is past 2^31 - 1");
  if (a.tokens == 0)
    return Error::success();
  // With no keys k and v are never read (an empty tensor may be null).
  // TMA reads q, k and v from 16-byte aligned rows.
  unsigned align = mhaUsesWgmma(a.chip, a.shape) ? 16 : 4;
  for (auto [arg, p, used] :
       {std::tuple<const char *, CUdeviceptr, bool>{"q", a.q, true},
        {"k", a.k, a.keys > 0},
        {"v", a.v, a.keys > 0},
        {"out", a.out, true}})
    if (used)
      if (Error err = checkPointer(name, arg, p, arg[0] == 'o' ? 4 : align))
        return err;
  for (auto [arg, p] :
       {std::pair<const char *, CUdeviceptr>{"cu_seqlens_q", a.cuSeqlensQ},
        {"cu_seqlens_k", a.cuSeqlensK},
        {"lse", a.lse}})
    if (Error err = checkPointer(name, arg, p, 4))
      return err;
  return Error::success();
}

/// The tensor-core build: q, k and v go by value as TMA descriptors.
static Error launchMhaWgmma(const CudaKernel &kernel, CUstream stream,
                            const MhaArgs &a) {
  llvm::Expected<const CudaDriver &> driver = CudaRuntime::get();
  if (!driver)
    return driver.takeError();
  const MhaShape &s = a.shape;
  // With no keys at all no K/V tile is ever loaded; the maps still need a
  // valid tensor, so they cover one row of q's memory.
  int64_t keyRows = std::max<int64_t>(a.keys, 1);
  CUdeviceptr k = a.keys ? a.k : a.q, v = a.keys ? a.v : a.q;
  llvm::Expected<CUtensorMap> qMap = encodeHeadRowsMap(
      *driver, a.q, s.elem, a.tokens, s.numHeads, s.qkDim, kMhaTileM);
  if (!qMap)
    return qMap.takeError();
  llvm::Expected<CUtensorMap> kMap = encodeHeadRowsMap(
      *driver, k, s.elem, keyRows, s.numHeads, s.qkDim, kMhaTileN);
  if (!kMap)
    return kMap.takeError();
  llvm::Expected<CUtensorMap> vMap = encodeHeadRowsMap(
      *driver, v, s.elem, keyRows, s.numHeads, s.vDim, kMhaTileN);
  if (!vMap)
    return vMap.takeError();
  CUdeviceptr cuQ = a.cuSeqlensQ, cuK = a.cuSeqlensK, out = a.out, lse = a.lse;
  int32_t batch = int32_t(a.batch), tokens = int32_t(a.tokens);
  void *params[kMhaNumParams] = {&*qMap, &*kMap, &*vMap, &cuQ,   &cuK,
                                 &out,   &lse,   &batch, &tokens};
  return launch(kernel, stream, mhaLaunchDims(a.chip, s, a.tokens, a.batch),
                unsigned(mhaSharedBytes(a.chip, s)), params);
}

Error mla::gpu::launchMha(const CudaKernel &kernel, CUstream stream,
                          const MhaArgs &a) {
  if (Error err = checkMhaArgs(a))
    return err;
  if (a.tokens == 0)
    return Error::success();
  if (mhaUsesWgmma(a.chip, a.shape))
    return launchMhaWgmma(kernel, stream, a);
  CUdeviceptr q = a.q, k = a.k, v = a.v, cuQ = a.cuSeqlensQ, cuK = a.cuSeqlensK,
              out = a.out, lse = a.lse;
  int32_t batch = int32_t(a.batch), tokens = int32_t(a.tokens);
  void *params[kMhaNumParams] = {&q,   &k,   &v,     &cuQ,   &cuK,
                                 &out, &lse, &batch, &tokens};
  return launch(kernel, stream,
                mhaLaunchDims(a.chip, a.shape, a.tokens, a.batch), 0, params);
}

llvm::Expected<CudaKernel>
mla::gpu::loadGatherCacheKernel(const GatherCacheKernelSpec &spec,
                                const KernelCache &cache) {
  return loadFor(spec, cache, kGatherCacheKernel);
}

llvm::Expected<CudaKernel>
mla::gpu::loadMergeStatesKernel(const MergeStatesKernelSpec &spec,
                                const KernelCache &cache) {
  return loadFor(spec, cache, kMergeStatesKernel);
}

llvm::Expected<CudaKernel>
mla::gpu::loadUpProjKvKernel(const UpProjKvKernelSpec &spec,
                             const KernelCache &cache) {
  llvm::Expected<CudaKernel> kernel = loadFor(spec, cache, kUpProjKvKernel);
  if (!kernel)
    return kernel;
  int64_t bytes = upProjKvUsesWgmma(spec.chip, spec.shape)
                      ? upProjKvWgSmemLayout().total
                      : upProjKvSharedBytes();
  if (Error err = kernel->setMaxDynamicSharedBytes(int(bytes)))
    return std::move(err);
  return kernel;
}

llvm::Expected<CudaKernel> mla::gpu::loadMhaKernel(const MhaKernelSpec &spec,
                                                   const KernelCache &cache) {
  llvm::Expected<CudaKernel> kernel = loadFor(spec, cache, kMhaKernel);
  if (!kernel)
    return kernel;
  if (int64_t bytes = mhaSharedBytes(spec.chip, spec.shape))
    if (Error err = kernel->setMaxDynamicSharedBytes(int(bytes)))
      return std::move(err);
  return kernel;
}
