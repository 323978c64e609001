//===- PrefillLaunch.h - Launch the chunked-prefill kernels -----*- C++ -*-===//
//
// Host loaders and launchers of the kernels in mla/Contract/PrefillABI.h
// (gather_cache, merge_states, up_proj_kv, mha), following
// CacheProjectionLaunch.h: each launcher checks its arguments (shape,
// counts, pointer alignment) and returns an llvm::Error
// (std::errc::invalid_argument) before anything is launched, then enqueues
// one kernel on the caller's stream without allocating, copying or
// synchronising, so the launches can be captured in a CUDA graph. These
// checks are the kernels' own preconditions; the rules on the caller's
// tensors are mla/Contract/ArgRules.h's. No MLIR dependency.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_GPURUNTIME_PREFILLLAUNCH_H
#define MLA_GPURUNTIME_PREFILLLAUNCH_H

#include "mla/Contract/KernelSpec.h"
#include "mla/Contract/PrefillABI.h"
#include "mla/GpuRuntime/CudaDriver.h"
#include "mla/GpuRuntime/KernelCache.h"
#include "llvm/Support/Error.h"

namespace mla::gpu {

/// Arguments of `mla_gather_cache`; `shape` is the kernel's.
struct GatherCacheArgs {
  GatherCacheShape shape;
  CUdeviceptr cache = 0;      // [numPages, pageSize, row bytes]
  CUdeviceptr blockTable = 0; // [batch, maxPages] i32
  CUdeviceptr starts = 0;     // [batch] i32
  CUdeviceptr cuRows = 0;     // [batch + 1] i32
  CUdeviceptr workspace = 0;  // [workspaceRows, L+R] shape.row.input
  int64_t batch = 0;
  int64_t maxPages = 0;
  int64_t numPages = 0;
  int64_t workspaceRows = 0;
  /// fp8_e4m3's scale: one f32 on the device (CacheProjectionABI.h); 0 for
  /// the other formats, whose kernels have no such parameter.
  CUdeviceptr kvScale = 0;
};

llvm::Error checkGatherCacheArgs(const GatherCacheArgs &args);
/// Checks `args`, then launches a loaded `mla_gather_cache`. No workspace
/// rows or an empty batch launch nothing.
llvm::Error launchGatherCache(const CudaKernel &kernel, CUstream stream,
                              const GatherCacheArgs &args);

/// Arguments of `mla_merge_states`: outputs [tokens, N, H], LSEs [N, tokens]
/// f32. `out`/`lse` may alias the a or b side.
struct MergeStatesArgs {
  MergeStatesShape shape;
  CUdeviceptr outA = 0, lseA = 0, outB = 0, lseB = 0, out = 0, lse = 0;
  int64_t tokens = 0;
};

llvm::Error checkMergeStatesArgs(const MergeStatesArgs &args);
llvm::Error launchMergeStates(const CudaKernel &kernel, CUstream stream,
                              const MergeStatesArgs &args);

/// Arguments of `mla_up_proj_kv`: latent [rows, L], kvBProj [N*(P+V), L],
/// kNope [rows, N, P], v [rows, N, V].
/// `chip` is the spec's: on sm_90a the launch passes latent and kv_b_proj
/// (16-byte aligned, dense rows) as TMA descriptors.
struct UpProjKvArgs {
  UpProjKvShape shape;
  CUdeviceptr latent = 0, kvBProj = 0, kNope = 0, v = 0;
  int64_t rows = 0;
  Chip chip = Chip::SM90a;
};

llvm::Error checkUpProjKvArgs(const UpProjKvArgs &args);
llvm::Error launchUpProjKv(const CudaKernel &kernel, CUstream stream,
                           const UpProjKvArgs &args);

/// Arguments of `mla_mha`: q [tokens, N, qkDim], k [keys, N, qkDim],
/// v [keys, N, vDim], cuSeqlensQ/K [batch + 1] i32, out [tokens, N, vDim],
/// lse [N, tokens]. `chip` is the spec's: on sm_90a with bf16/f16 the
/// launch builds TMA descriptors over q, k and v (16-byte aligned), whose
/// row counts `tokens` and `keys` bound what the kernel can read.
struct MhaArgs {
  MhaShape shape;
  Chip chip = Chip::SM90a;
  CUdeviceptr q = 0, k = 0, v = 0, cuSeqlensQ = 0, cuSeqlensK = 0, out = 0,
              lse = 0;
  int64_t batch = 0;
  int64_t tokens = 0;
  int64_t keys = 0;
};

llvm::Error checkMhaArgs(const MhaArgs &args);
llvm::Error launchMha(const CudaKernel &kernel, CUstream stream,
                      const MhaArgs &args);

/// Loads the kernel of the image cached under cacheKeyFor(spec); a miss is
/// a std::errc::no_such_file_or_directory error naming the `mla-aot`
/// command that builds the entry.
llvm::Expected<CudaKernel>
loadGatherCacheKernel(const GatherCacheKernelSpec &spec,
                      const KernelCache &cache);
llvm::Expected<CudaKernel>
loadMergeStatesKernel(const MergeStatesKernelSpec &spec,
                      const KernelCache &cache);
llvm::Expected<CudaKernel> loadUpProjKvKernel(const UpProjKvKernelSpec &spec,
                                              const KernelCache &cache);
llvm::Expected<CudaKernel> loadMhaKernel(const MhaKernelSpec &spec,
                                         const KernelCache &cache);

} // namespace mla::gpu

#endif // MLA_GPURUNTIME_PREFILLLAUNCH_H
