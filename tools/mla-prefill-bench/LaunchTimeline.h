//===- LaunchTimeline.h - CUDA-event marks between launches on a stream ---===//
//
// The end-to-end mode splits one prefill's time by kernel kind. Recording an
// event between consecutive launches measures each kernel on the GPU's own
// clock without synchronising between them, so the launches still run back
// to back as a runtime would issue them.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TOOLS_MLAPREFILLBENCH_LAUNCHTIMELINE_H
#define MLA_TOOLS_MLAPREFILLBENCH_LAUNCHTIMELINE_H

#include "mla/GpuRuntime/CudaDriver.h"
#include <memory>
#include <vector>

namespace mla::bench {

/// A non-blocking stream and events recorded on it in order.
class LaunchTimeline {
public:
  static llvm::Expected<std::unique_ptr<LaunchTimeline>>
  create(const gpu::CudaDriver &driver);
  ~LaunchTimeline();
  LaunchTimeline(const LaunchTimeline &) = delete;
  LaunchTimeline &operator=(const LaunchTimeline &) = delete;

  CUstream stream() const { return timedStream; }

  /// Forgets the marks of the previous round (its events are reused).
  void clear() { used = 0; }
  /// Records the next event on the stream.
  llvm::Error mark();
  /// Waits for the last mark and returns the milliseconds between
  /// consecutive marks (one fewer than the marks).
  llvm::Expected<std::vector<float>> intervals();

private:
  explicit LaunchTimeline(const gpu::CudaDriver &driver) : driver(driver) {}

  const gpu::CudaDriver &driver;
  CUstream timedStream = nullptr;
  std::vector<CUevent> events;
  size_t used = 0;
};

/// The median of `values` (0 when empty).
double median(std::vector<double> values);

} // namespace mla::bench

#endif // MLA_TOOLS_MLAPREFILLBENCH_LAUNCHTIMELINE_H
