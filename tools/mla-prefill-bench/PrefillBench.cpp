//===- PrefillBench.cpp - specs and device helpers of mla-prefill-bench ---===//

#include "PrefillBench.h"
#include "Bf16.h"
#include <algorithm>
#include <cmath>

using namespace mla;
using namespace mla::bench;
using namespace mla::gpu;

/// Softmax scale of the 128 + 64 wide query-key product (primer section 1).
static float deepSeekScale() {
  return static_cast<float>(1.0 / std::sqrt(double(kQk)));
}

MhaKernelSpec mla::bench::mhaSpec(Chip chip, bool causal) {
  MhaKernelSpec spec;
  spec.chip = chip;
  spec.shape = {kHeads, kQk, kValue, ActType::BF16, causal, deepSeekScale()};
  return spec;
}

UpProjKvKernelSpec mla::bench::upProjKvSpec(Chip chip) {
  UpProjKvKernelSpec spec;
  spec.chip = chip;
  spec.shape = {kHeads, kLatent, kNope, kValue, ActType::BF16};
  return spec;
}

GatherCacheKernelSpec mla::bench::gatherSpec(Chip chip, CacheFormat format) {
  GatherCacheKernelSpec spec;
  spec.chip = chip;
  spec.shape.row = {kLatent, kRope, ActType::BF16, format};
  spec.shape.pageSize = kPage;
  return spec;
}

MergeStatesKernelSpec mla::bench::mergeSpec(Chip chip) {
  MergeStatesKernelSpec spec;
  spec.chip = chip;
  spec.shape = {kHeads, kValue, ActType::BF16};
  return spec;
}

std::vector<KernelSpec> mla::bench::allSpecs(Chip chip) {
  std::vector<KernelSpec> specs = {mhaSpec(chip, true), mhaSpec(chip, false),
                                   upProjKvSpec(chip)};
  for (NamedFormat f : kE2EFormats)
    specs.push_back(gatherSpec(chip, f.format));
  specs.push_back(mergeSpec(chip));
  return specs;
}

std::vector<uint16_t> mla::bench::randomBf16(size_t count, std::mt19937 &rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<uint16_t> values(count);
  for (uint16_t &v : values)
    v = floatToBf16(dist(rng));
  return values;
}

llvm::Error mla::bench::upload(const CudaDriver &driver, CUdeviceptr dst,
                               const void *src, size_t bytes) {
  return driver.check(driver.api().memcpyHtoD(dst, src, bytes), "cuMemcpyHtoD");
}

llvm::Error mla::bench::finishUploads(const CudaDriver &driver) {
  return driver.check(driver.api().streamSynchronize(nullptr),
                      "cuStreamSynchronize");
}

llvm::Error mla::bench::download(const CudaDriver &driver, void *dst,
                                 CUdeviceptr src, size_t bytes) {
  return driver.check(driver.api().memcpyDtoH(dst, src, bytes), "cuMemcpyDtoH");
}

llvm::Error mla::bench::fillRandomBf16(const CudaDriver &driver,
                                       CUdeviceptr dst, size_t count,
                                       std::mt19937 &rng) {
  std::vector<uint16_t> pattern =
      randomBf16(std::min<size_t>(count, size_t(1) << 22), rng);
  for (size_t done = 0; done < count;) {
    size_t n = std::min(pattern.size(), count - done);
    if (llvm::Error error =
            upload(driver, dst + done * 2, pattern.data(), n * 2))
      return error;
    done += n;
  }
  return llvm::Error::success();
}

llvm::Error mla::bench::allocAll(const CudaDriver &driver,
                                 std::initializer_list<size_t> bytes,
                                 std::vector<DeviceBuffer> &out) {
  for (size_t size : bytes) {
    llvm::Expected<DeviceBuffer> buffer = DeviceBuffer::alloc(driver, size);
    if (!buffer)
      return buffer.takeError();
    out.push_back(std::move(*buffer));
  }
  return llvm::Error::success();
}

std::vector<int32_t> mla::bench::uniformOffsets(int64_t count, int64_t len) {
  std::vector<int32_t> offsets(count + 1);
  for (int64_t i = 0; i <= count; ++i)
    offsets[i] = static_cast<int32_t>(i * len);
  return offsets;
}

llvm::Expected<double>
mla::bench::medianLaunchMs(const BenchEnv &env, LaunchTimeline &timeline,
                           llvm::function_ref<llvm::Error(CUstream)> enqueue) {
  if (llvm::Error error = finishUploads(env.driver))
    return std::move(error);
  for (int i = 0; i < env.warmup; ++i)
    if (llvm::Error error = enqueue(timeline.stream()))
      return std::move(error);
  std::vector<double> times;
  for (int i = 0; i < env.iters; ++i) {
    timeline.clear();
    if (llvm::Error error = timeline.mark())
      return std::move(error);
    if (llvm::Error error = enqueue(timeline.stream()))
      return std::move(error);
    if (llvm::Error error = timeline.mark())
      return std::move(error);
    llvm::Expected<std::vector<float>> ms = timeline.intervals();
    if (!ms)
      return ms.takeError();
    times.push_back(ms->front());
  }
  return median(std::move(times));
}
