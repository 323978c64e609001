//===- PrefillBench.h - what the modes of mla-prefill-bench share ---------===//
//
// The kernel specs the tool needs (DeepSeek-V3: N=128, P=V=128, R=64,
// L=512, bf16, page 64, scale 192^-0.5), the device and cache it runs on,
// and the helpers that fill device buffers and print result lines.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TOOLS_MLAPREFILLBENCH_PREFILLBENCH_H
#define MLA_TOOLS_MLAPREFILLBENCH_PREFILLBENCH_H

#include "DeviceBuffer.h"
#include "LaunchTimeline.h"
#include "mla/Contract/KernelSpec.h"
#include "mla/GpuRuntime/CudaDriver.h"
#include "mla/GpuRuntime/KernelCache.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include <random>
#include <string>
#include <vector>

namespace mla::bench {

inline constexpr int64_t kHeads = 128;
inline constexpr int64_t kLatent = 512;
inline constexpr int64_t kRope = 64;
inline constexpr int64_t kNope = 128;
inline constexpr int64_t kValue = 128;
inline constexpr int64_t kQk = kNope + kRope;
inline constexpr int64_t kPage = 64;

gpu::MhaKernelSpec mhaSpec(gpu::Chip chip, bool causal);
gpu::UpProjKvKernelSpec upProjKvSpec(gpu::Chip chip);
gpu::GatherCacheKernelSpec gatherSpec(gpu::Chip chip, gpu::CacheFormat format);
gpu::MergeStatesKernelSpec mergeSpec(gpu::Chip chip);

/// The cache formats of --e2e, with their spelling in spec texts.
struct NamedFormat {
  gpu::CacheFormat format;
  const char *name;
};
inline constexpr NamedFormat kE2EFormats[] = {
    {gpu::CacheFormat::BF16, "bf16"},
    {gpu::CacheFormat::FP8DsMla, "fp8_ds_mla"}};

/// Every spec the modes load, each once.
std::vector<gpu::KernelSpec> allSpecs(gpu::Chip chip);

/// What every timing mode runs with.
struct BenchEnv {
  const gpu::CudaDriver &driver;
  const gpu::KernelCache &cache;
  gpu::Chip chip;
  int iters;
  int warmup;
};

/// `count` bf16 values uniform in [-1, 1) at `dst`: a random pattern of at
/// most 4M values repeated (the values do not change the timings).
llvm::Error fillRandomBf16(const gpu::CudaDriver &driver, CUdeviceptr dst,
                           size_t count, std::mt19937 &rng);
/// `count` random bf16 values uniform in [-1, 1), as bit patterns.
std::vector<uint16_t> randomBf16(size_t count, std::mt19937 &rng);

llvm::Error upload(const gpu::CudaDriver &driver, CUdeviceptr dst,
                   const void *src, size_t bytes);
/// Waits for every upload: cuMemcpyHtoD from pageable memory may return
/// before its DMA lands, and the timed stream does not wait for the legacy
/// stream the copies run on.
llvm::Error finishUploads(const gpu::CudaDriver &driver);
llvm::Error download(const gpu::CudaDriver &driver, void *dst, CUdeviceptr src,
                     size_t bytes);

/// Allocates each of `bytes`, in order, into `out`.
llvm::Error allocAll(const gpu::CudaDriver &driver,
                     std::initializer_list<size_t> bytes,
                     std::vector<DeviceBuffer> &out);

/// The median milliseconds of env.iters runs of `enqueue` on the timeline's
/// stream, each between two events, after env.warmup untimed runs.
llvm::Expected<double>
medianLaunchMs(const BenchEnv &env, LaunchTimeline &timeline,
               llvm::function_ref<llvm::Error(CUstream)> enqueue);

/// `[0, len, 2 len, ...]`: cumulative offsets of `count` equal requests.
std::vector<int32_t> uniformOffsets(int64_t count, int64_t len);

/// The modes; each prints its result lines to stdout.
llvm::Error runMhaTiming(const BenchEnv &env);
llvm::Error runUpProjKvTiming(const BenchEnv &env);
llvm::Error runE2ETiming(const BenchEnv &env, int64_t requests,
                         int64_t newTokens, int64_t context,
                         int64_t workspaceRows);
/// Compares mha (causal and not) and up_proj_kv with the float64 host
/// reference; false on a mismatch.
llvm::Expected<bool> runCheck(const BenchEnv &env);

} // namespace mla::bench

#endif // MLA_TOOLS_MLAPREFILLBENCH_PREFILLBENCH_H
