//===- KvScale.cpp - fp8_e4m3's per-tensor scale on the device ------------===//

#include "mla/GpuRuntime/KvScale.h"

#include <cstring>
#include <system_error>

using namespace mla::gpu;
using llvm::Twine;

llvm::Error mla::gpu::checkKvScalePointer(const char *kernel,
                                          CacheFormat format,
                                          CUdeviceptr kvScale) {
  auto fail = [&](const Twine &what) {
    return llvm::createStringError(
        std::make_error_code(std::errc::invalid_argument),
        Twine(kernel) + ": " + what);
  };
  if (!kernelTakesKvScale(format))
    return kvScale ? fail("kv_scale is only read by fp8_e4m3 kernels")
                   : llvm::Error::success();
  if (kvScale == 0)
    return fail("fp8_e4m3 needs kv_scale, a device pointer to one f32");
  if (kvScale % 4 != 0)
    return fail("kv_scale must be 4-byte aligned (got 0x" +
                Twine::utohexstr(kvScale) + ")");
  return llvm::Error::success();
}

llvm::Expected<CUdeviceptr> KvScaleBuffers::get(CUcontext context,
                                                float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  auto key = std::make_pair(context, bits);
  if (auto it = buffers.find(key); it != buffers.end())
    return it->second;
  llvm::Expected<const CudaDriver &> driver = CudaRuntime::get();
  if (!driver)
    return driver.takeError();
  const CudaDriverApi &api = driver->api();
  CUdeviceptr buffer = 0;
  if (llvm::Error err = driver->check(api.memAlloc(&buffer, sizeof(value)),
                                      "cuMemAlloc(kv_scale)"))
    return std::move(err);
  // Waited for, so that a launch on any stream (blocking or not) finds the
  // value in place.
  llvm::Error err =
      driver->check(api.memcpyHtoDAsync(buffer, &value, sizeof(value), nullptr),
                    "cuMemcpyHtoDAsync(kv_scale)");
  if (!err)
    err = driver->check(api.streamSynchronize(nullptr),
                        "cuStreamSynchronize(kv_scale)");
  if (err) {
    (void)api.memFree(buffer);
    return std::move(err);
  }
  buffers.emplace(key, buffer);
  return buffer;
}

void KvScaleBuffers::clear() {
  llvm::Expected<const CudaDriver &> driver = CudaRuntime::get();
  if (!driver) {
    llvm::consumeError(driver.takeError());
    buffers.clear();
    return;
  }
  const CudaDriverApi &api = driver->api();
  CUcontext current = nullptr;
  (void)api.ctxGetCurrent(&current);
  // Freeing may fail at process exit, after the driver tore its contexts
  // down; there is nothing left to release then.
  for (auto [key, buffer] : buffers)
    if (api.ctxSetCurrent(key.first) == CUDA_SUCCESS)
      (void)api.memFree(buffer);
  (void)api.ctxSetCurrent(current);
  buffers.clear();
}
