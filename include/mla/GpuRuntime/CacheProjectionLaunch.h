//===- CacheProjectionLaunch.h - cache write/projections --------*- C++ -*-===//
//
// Host loaders and launchers of the kernels in CacheProjectionABI.h. Each
// launcher validates its arguments (shape, counts, pointer alignment) and
// returns an llvm::Error (std::errc::invalid_argument) before anything is
// launched, then enqueues one kernel on the caller's stream. They never
// allocate, copy or synchronise, so they can be called from a C API and
// while a CUDA graph is being captured. No MLIR dependency.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_GPURUNTIME_CACHEPROJECTIONLAUNCH_H
#define MLA_GPURUNTIME_CACHEPROJECTIONLAUNCH_H

#include "mla/Contract/CacheProjectionABI.h"
#include "mla/Contract/KernelSpec.h"
#include "mla/GpuRuntime/CudaDriver.h"
#include "mla/GpuRuntime/KernelCache.h"
#include "llvm/Support/Error.h"

namespace mla::gpu {

/// Arguments of `mla_cache_write`. `shape` must be the one the kernel was
/// compiled for (it fixes L, R, the input type and the row format). The
/// kernel skips slots past `numSlots`; callers that want them reported check
/// a host copy with checkSlotValues (mla/Contract/ArgRules.h) first.
struct CacheWriteArgs {
  CacheWriteShape shape;
  CUdeviceptr kvC = 0;         // [tokens, L]
  CUdeviceptr kPe = 0;         // [tokens, R]
  CUdeviceptr slotMapping = 0; // [tokens] i32
  CUdeviceptr cache = 0;       // [numSlots, cacheRowBytes(shape)] bytes
  int64_t tokens = 0;
  int64_t numSlots = 0; // pages * page_size
  /// fp8_e4m3's scale: one f32 on the device (CacheProjectionABI.h,
  /// KvScale.h); 0 for the other formats, whose kernels have no such
  /// parameter.
  CUdeviceptr kvScale = 0;
};

/// Everything launchCacheWrite checks, without a kernel or a GPU.
llvm::Error checkCacheWriteArgs(const CacheWriteArgs &args);

/// Checks `args`, then launches `kernel` (a loaded `mla_cache_write`) on
/// `stream`. Zero tokens launch nothing.
llvm::Error launchCacheWrite(const CudaKernel &kernel, CUstream stream,
                             const CacheWriteArgs &args);

/// Arguments of `mla_absorb_q` (shape.ropeDim = R) and `mla_up_proj_out`
/// (shape.ropeDim = 0): `in` [tokens, N, K(+R)], `weight` [N, K, outDim],
/// `out` [tokens, N, outDim(+R)] (absorb_q) or [tokens, N*outDim].
struct ProjectionArgs {
  ProjectionShape shape;
  CUdeviceptr in = 0;
  CUdeviceptr weight = 0;
  CUdeviceptr out = 0;
  int64_t tokens = 0;
};

/// Everything launchAbsorbQ / launchUpProjOut check, without a kernel or a
/// GPU.
llvm::Error checkAbsorbQArgs(const ProjectionArgs &args);
llvm::Error checkUpProjOutArgs(const ProjectionArgs &args);

/// Checks `args`, then launches `kernel` (a loaded `mla_absorb_q`) on
/// `stream`. Zero tokens launch nothing.
llvm::Error launchAbsorbQ(const CudaKernel &kernel, CUstream stream,
                          const ProjectionArgs &args);

/// Same for `mla_up_proj_out`; `args.shape.ropeDim` must be 0.
llvm::Error launchUpProjOut(const CudaKernel &kernel, CUstream stream,
                            const ProjectionArgs &args);

/// Loads the kernel of the image cached under cacheKeyFor(spec) into the
/// current context. A miss is a std::errc::no_such_file_or_directory error
/// naming the `mla-aot` command that builds the entry.
llvm::Expected<CudaKernel>
loadCacheWriteKernel(const CacheWriteKernelSpec &spec,
                     const KernelCache &cache);
llvm::Expected<CudaKernel>
loadProjectionKernel(const ProjectionKernelSpec &spec,
                     const KernelCache &cache);

} // namespace mla::gpu

#endif // MLA_GPURUNTIME_CACHEPROJECTIONLAUNCH_H
