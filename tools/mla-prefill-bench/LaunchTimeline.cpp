//===- LaunchTimeline.cpp - CUDA-event marks between launches -------------===//

#include "LaunchTimeline.h"
#include <algorithm>

using namespace mla::bench;

llvm::Expected<std::unique_ptr<LaunchTimeline>>
LaunchTimeline::create(const gpu::CudaDriver &driver) {
  std::unique_ptr<LaunchTimeline> timeline(new LaunchTimeline(driver));
  if (llvm::Error error =
          driver.check(driver.api().streamCreate(&timeline->timedStream,
                                                 CU_STREAM_NON_BLOCKING),
                       "cuStreamCreate"))
    return std::move(error);
  return timeline;
}

LaunchTimeline::~LaunchTimeline() {
  for (CUevent event : events)
    (void)driver.api().eventDestroy(event);
  if (timedStream)
    (void)driver.api().streamDestroy(timedStream);
}

llvm::Error LaunchTimeline::mark() {
  if (used == events.size()) {
    CUevent event;
    if (llvm::Error error =
            driver.check(driver.api().eventCreate(&event, CU_EVENT_DEFAULT),
                         "cuEventCreate"))
      return error;
    events.push_back(event);
  }
  return driver.check(driver.api().eventRecord(events[used++], timedStream),
                      "cuEventRecord");
}

llvm::Expected<std::vector<float>> LaunchTimeline::intervals() {
  std::vector<float> result;
  if (used == 0)
    return result;
  if (llvm::Error error =
          driver.check(driver.api().eventSynchronize(events[used - 1]),
                       "cuEventSynchronize"))
    return std::move(error);
  for (size_t i = 1; i < used; ++i) {
    float ms = 0;
    if (llvm::Error error = driver.check(
            driver.api().eventElapsedTime(&ms, events[i - 1], events[i]),
            "cuEventElapsedTime"))
      return std::move(error);
    result.push_back(ms);
  }
  return result;
}

double mla::bench::median(std::vector<double> values) {
  if (values.empty())
    return 0;
  std::sort(values.begin(), values.end());
  size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}
