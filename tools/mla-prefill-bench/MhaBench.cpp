//===- MhaBench.cpp - --mha: mla_mha at the issue's prefill shapes --------===//
//
// Times the mha kernel through loadMhaKernel/launchMha only, so it measures
// whatever kernel sits behind that interface. One JSON line per shape, in the
// format of the PyTorch SDPA peer (bench_prefill_sdpa.py) so a wrapper can
// join the two on (b, s, causal); FLOPs = 2 * b * pairs * N * (192 + 128)
// with pairs = s^2 / 2 causal and s^2 otherwise, as the peer counts them.
//
//===----------------------------------------------------------------------===//

#include "PrefillBench.h"
#include "mla/GpuRuntime/PrefillLaunch.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

using namespace mla;
using namespace mla::bench;
using namespace mla::gpu;

namespace {

struct MhaTimingShape {
  int64_t batch, seq;
  bool causal;
};

/// The shapes: DeepSeek-V3 prefill, one to four requests.
constexpr MhaTimingShape kMhaShapes[] = {{1, 4096, true},
                                         {1, 8192, true},
                                         {1, 16384, true},
                                         {4, 2048, true},
                                         {2, 8192, false}};

llvm::Error timeShape(const BenchEnv &env, LaunchTimeline &timeline,
                      const CudaKernel &kernel, const MhaShape &shape,
                      const MhaTimingShape &s) {
  int64_t tokens = s.batch * s.seq;
  size_t qkBytes = tokens * kHeads * kQk * 2,
         vBytes = tokens * kHeads * kValue * 2;
  std::vector<DeviceBuffer> bufs;
  if (llvm::Error error =
          allocAll(env.driver,
                   {qkBytes, qkBytes, vBytes, vBytes,
                    size_t(kHeads * tokens * 4), size_t((s.batch + 1) * 4)},
                   bufs))
    return error;
  std::mt19937 rng(1234);
  for (int i = 0; i < 3; ++i)
    if (llvm::Error error = fillRandomBf16(env.driver, bufs[i].get(),
                                           (i < 2 ? qkBytes : vBytes) / 2, rng))
      return error;
  std::vector<int32_t> cu = uniformOffsets(s.batch, s.seq);
  if (llvm::Error error =
          upload(env.driver, bufs[5].get(), cu.data(), cu.size() * 4))
    return error;
  MhaArgs args;
  args.shape = shape;
  args.q = bufs[0].get();
  args.k = bufs[1].get();
  args.v = bufs[2].get();
  args.out = bufs[3].get();
  args.lse = bufs[4].get();
  args.cuSeqlensQ = args.cuSeqlensK = bufs[5].get();
  args.batch = s.batch;
  args.tokens = tokens;
  args.keys = tokens;
  args.chip = env.chip;
  llvm::Expected<double> ms =
      medianLaunchMs(env, timeline, [&](CUstream stream) {
        return launchMha(kernel, stream, args);
      });
  if (!ms)
    return ms.takeError();
  double pairs = s.causal ? double(s.seq) * s.seq / 2 : double(s.seq) * s.seq;
  double flops = 2.0 * s.batch * pairs * kHeads * (kQk + kValue);
  llvm::outs() << llvm::format(
      "{\"backend\": \"mla\", \"b\": %lld, \"s\": %lld, \"causal\": %s, "
      "\"ms\": %.4f, \"tflops\": %.1f}\n",
      (long long)s.batch, (long long)s.seq, s.causal ? "true" : "false", *ms,
      flops / (*ms * 1e-3) / 1e12);
  llvm::outs().flush();
  return llvm::Error::success();
}

} // namespace

llvm::Error mla::bench::runMhaTiming(const BenchEnv &env) {
  llvm::Expected<std::unique_ptr<LaunchTimeline>> timeline =
      LaunchTimeline::create(env.driver);
  if (!timeline)
    return timeline.takeError();
  for (bool causal : {true, false}) {
    MhaKernelSpec spec = mhaSpec(env.chip, causal);
    llvm::Expected<CudaKernel> kernel = loadMhaKernel(spec, env.cache);
    if (!kernel)
      return kernel.takeError();
    for (const MhaTimingShape &s : kMhaShapes)
      if (s.causal == causal)
        if (llvm::Error error =
                timeShape(env, **timeline, *kernel, spec.shape, s))
          return error;
  }
  return llvm::Error::success();
}
