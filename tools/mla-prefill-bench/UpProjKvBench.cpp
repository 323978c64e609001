//===- UpProjKvBench.cpp - --up-proj-kv: the workspace up-projection ------===//
//
// Times mla_up_proj_kv (latent [T, 512] x kv_b_proj [128 * 256, 512]^T ->
// k_nope, v [T, 128, 128]) at the T the bar names. One JSON line per
// T, in the format of scripts/bench-gemm-peer.py (torch.matmul of the same
// bf16 shapes through cuBLAS); FLOPs = 2 * T * L * N * (P + V).
//
//===----------------------------------------------------------------------===//

#include "PrefillBench.h"
#include "mla/GpuRuntime/PrefillLaunch.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

using namespace mla;
using namespace mla::bench;
using namespace mla::gpu;

llvm::Error mla::bench::runUpProjKvTiming(const BenchEnv &env) {
  UpProjKvKernelSpec spec = upProjKvSpec(env.chip);
  llvm::Expected<CudaKernel> kernel = loadUpProjKvKernel(spec, env.cache);
  if (!kernel)
    return kernel.takeError();
  llvm::Expected<std::unique_ptr<LaunchTimeline>> timeline =
      LaunchTimeline::create(env.driver);
  if (!timeline)
    return timeline.takeError();
  const UpProjKvShape &shape = spec.shape;
  for (int64_t rows : {4096, 16384}) {
    size_t latentBytes = rows * shape.latentDim * 2,
           weightBytes = shape.columns() * shape.latentDim * 2;
    std::vector<DeviceBuffer> bufs;
    if (llvm::Error error = allocAll(env.driver,
                                     {latentBytes, weightBytes,
                                      size_t(rows * kHeads * kNope * 2),
                                      size_t(rows * kHeads * kValue * 2)},
                                     bufs))
      return error;
    std::mt19937 rng(99);
    if (llvm::Error error =
            fillRandomBf16(env.driver, bufs[0].get(), latentBytes / 2, rng))
      return error;
    if (llvm::Error error =
            fillRandomBf16(env.driver, bufs[1].get(), weightBytes / 2, rng))
      return error;
    UpProjKvArgs args;
    args.shape = shape;
    args.latent = bufs[0].get();
    args.kvBProj = bufs[1].get();
    args.kNope = bufs[2].get();
    args.v = bufs[3].get();
    args.rows = rows;
    llvm::Expected<double> ms =
        medianLaunchMs(env, **timeline, [&](CUstream stream) {
          return launchUpProjKv(*kernel, stream, args);
        });
    if (!ms)
      return ms.takeError();
    double flops = 2.0 * rows * shape.latentDim * shape.columns();
    llvm::outs() << llvm::format(
        "{\"backend\": \"mla\", \"op\": \"up_proj_kv\", \"T\": %lld, "
        "\"ms\": %.4f, \"tflops\": %.1f}\n",
        (long long)rows, *ms, flops / (*ms * 1e-3) / 1e12);
    llvm::outs().flush();
  }
  return llvm::Error::success();
}
