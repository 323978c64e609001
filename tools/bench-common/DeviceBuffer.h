//===- DeviceBuffer.h - an owned device allocation, for the GPU tools -----===//
//
// The runtime itself only works on buffers its caller owns; the benchmarks
// own theirs through this handle so that every error path frees them.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TOOLS_BENCHCOMMON_DEVICEBUFFER_H
#define MLA_TOOLS_BENCHCOMMON_DEVICEBUFFER_H

#include "mla/GpuRuntime/CudaDriver.h"
#include <algorithm>
#include <utility>

namespace mla::bench {

/// A device allocation freed on scope exit.
class DeviceBuffer {
public:
  static llvm::Expected<DeviceBuffer> alloc(const gpu::CudaDriver &driver,
                                            size_t bytes) {
    CUdeviceptr ptr = 0;
    if (llvm::Error error = driver.check(
            driver.api().memAlloc(&ptr, std::max<size_t>(bytes, 1)),
            "cuMemAlloc(" + llvm::Twine(bytes) + " bytes)"))
      return std::move(error);
    return DeviceBuffer(driver, ptr);
  }
  DeviceBuffer(DeviceBuffer &&other)
      : driver(other.driver), ptr(std::exchange(other.ptr, 0)) {}
  DeviceBuffer &operator=(DeviceBuffer &&) = delete;
  ~DeviceBuffer() {
    if (ptr)
      (void)driver->api().memFree(ptr);
  }
  CUdeviceptr get() const { return ptr; }

private:
  DeviceBuffer(const gpu::CudaDriver &driver, CUdeviceptr ptr)
      : driver(&driver), ptr(ptr) {}
  const gpu::CudaDriver *driver;
  CUdeviceptr ptr;
};

} // namespace mla::bench

#endif // MLA_TOOLS_BENCHCOMMON_DEVICEBUFFER_H
