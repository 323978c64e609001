//===- CudaDriver.h - CUDA driver API loaded at run time --------*- C++ -*-===//
//
// mla launches its GPU kernels through the CUDA driver API (there is no MLIR
// CUDA runtime library; see docs/gpu-codegen-notes.md). libcuda.so.1 is opened
// with dlopen when first needed instead of being linked, so that mla builds and
// runs on machines without a GPU or driver and reports "no CUDA driver" there
// instead of failing to start.
//
// Only <cuda.h> is used at build time, for the types and prototypes; its
// macros also pick the versioned symbol names (cuMemAlloc -> cuMemAlloc_v2)
// that match those prototypes.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_GPURUNTIME_CUDADRIVER_H
#define MLA_GPURUNTIME_CUDADRIVER_H

#include "mla/Contract/KernelABI.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"
#include <cuda.h>
#include <memory>
#include <utility>
#include <vector>

namespace mla::gpu {

/// The driver entry points mla uses, resolved from a loaded libcuda.
struct CudaDriverApi {
  decltype(&::cuInit) init;
  decltype(&::cuGetErrorString) getErrorString;
  decltype(&::cuDeviceGet) deviceGet;
  decltype(&::cuDeviceGetAttribute) deviceGetAttribute;
  decltype(&::cuCtxGetCurrent) ctxGetCurrent;
  decltype(&::cuCtxSetCurrent) ctxSetCurrent;
  decltype(&::cuDevicePrimaryCtxRetain) devicePrimaryCtxRetain;
  decltype(&::cuModuleLoadData) moduleLoadData;
  decltype(&::cuModuleUnload) moduleUnload;
  decltype(&::cuModuleGetFunction) moduleGetFunction;
  decltype(&::cuFuncSetAttribute) funcSetAttribute;
  decltype(&::cuLaunchKernel) launchKernel;
  decltype(&::cuStreamSynchronize) streamSynchronize;
  decltype(&::cuCtxGetDevice) ctxGetDevice;
  /// TMA descriptors of the kernels that take them (TensorMap.h).
  decltype(&::cuTensorMapEncodeTiled) tensorMapEncodeTiled;
  /// Uploads split bounds ahead of a decode (GpuDecoder::uploadBounds).
  decltype(&::cuMemcpyHtoDAsync) memcpyHtoDAsync;
  /// Strided device copies of a chunked prefill: the keys' RoPE broadcast
  /// and the dense latent (ChunkedPrefill::run).
  decltype(&::cuMemcpy2DAsync) memcpy2DAsync;
  /// Zeroes a device plan's combine counters (GpuDecoder::plan).
  decltype(&::cuMemsetD32Async) memsetD32Async;
  /// Memory management, streams and events, for tests and tools only: the
  /// runtime itself works on buffers and streams its caller owns.
  decltype(&::cuMemAlloc) memAlloc;
  decltype(&::cuMemFree) memFree;
  decltype(&::cuMemcpyHtoD) memcpyHtoD;
  decltype(&::cuMemcpyDtoH) memcpyDtoH;
  decltype(&::cuMemsetD8Async) memsetD8Async;
  decltype(&::cuStreamCreate) streamCreate;
  decltype(&::cuStreamDestroy) streamDestroy;
  decltype(&::cuEventCreate) eventCreate;
  decltype(&::cuEventDestroy) eventDestroy;
  decltype(&::cuEventRecord) eventRecord;
  decltype(&::cuEventSynchronize) eventSynchronize;
  decltype(&::cuEventElapsedTime) eventElapsedTime;
};

/// A loaded libcuda with its resolved entry points.
class CudaDriver {
public:
  /// Opens `library`, resolves every entry point and calls cuInit(0). Fails
  /// with a message starting "no CUDA driver" when the library is missing or
  /// incomplete, and naming cuInit when the driver finds no usable device.
  static llvm::Expected<std::unique_ptr<CudaDriver>>
  load(const char *library = "libcuda.so.1");

  ~CudaDriver();
  CudaDriver(const CudaDriver &) = delete;
  CudaDriver &operator=(const CudaDriver &) = delete;

  const CudaDriverApi &api() const { return entryPoints; }

  /// Returns success for CUDA_SUCCESS, else an error "<what>: <driver text>".
  llvm::Error check(CUresult result, const llvm::Twine &what) const;

private:
  CudaDriver(void *handle, const CudaDriverApi &entryPoints)
      : handle(handle), entryPoints(entryPoints) {}

  void *handle;
  CudaDriverApi entryPoints;
};

/// The process-wide driver: libcuda.so.1, loaded and initialised on first use
/// (thread-safe) and kept for the life of the process.
class CudaRuntime {
public:
  /// True when the driver loaded and cuInit succeeded.
  static bool available();

  /// The driver, or the reason there is none.
  static llvm::Expected<const CudaDriver &> get();

  /// Makes a context current on the calling thread: keeps the current one if
  /// there is one, else retains and sets the primary context of `ordinal`
  /// (never released: it lives as long as the process). Call once per thread
  /// before loading or launching kernels.
  static llvm::Error ensureContext(int ordinal = 0);

  /// The (major, minor) compute capability of device `ordinal`.
  static llvm::Expected<std::pair<int, int>>
  getComputeCapability(int ordinal = 0);

  /// The chip mla's kernels are built for on device `ordinal`: sm_90a on a
  /// compute capability 9.x device, sm_100a on 10.x; other devices fail with
  /// std::errc::invalid_argument naming the device.
  static llvm::Expected<Chip> getChip(int ordinal = 0);
};

/// Grid or block extents of a launch.
struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

/// A loaded module and one kernel in it. Owns the module: destroying the
/// handle unloads it.
class CudaKernel {
public:
  CudaKernel(CudaKernel &&other) noexcept
      : driver(other.driver), module(std::exchange(other.module, nullptr)),
        function(std::exchange(other.function, nullptr)) {}
  CudaKernel &operator=(CudaKernel &&other) noexcept;
  CudaKernel(const CudaKernel &) = delete;
  CudaKernel &operator=(const CudaKernel &) = delete;
  ~CudaKernel();

  CUfunction getFunction() const { return function; }

  /// Allows launches with up to `bytes` of dynamic shared memory; needed above
  /// 48 KiB. Call once after loading, not per launch.
  llvm::Error setMaxDynamicSharedBytes(int bytes) const;

  /// Enqueues the kernel on `stream`; `params` points at one pointer per
  /// kernel parameter, each to the argument's value. Does not allocate on
  /// success, so it may be called while a CUDA graph is being captured.
  llvm::Error launch(Dim3 grid, Dim3 block, unsigned sharedBytes,
                     CUstream stream, void **params) const;

private:
  friend llvm::Expected<CudaKernel> loadKernel(const std::vector<char> &,
                                               const char *);
  CudaKernel(const CudaDriver &driver, CUmodule module, CUfunction function)
      : driver(&driver), module(module), function(function) {}

  const CudaDriver *driver;
  CUmodule module;
  CUfunction function;
};

/// Loads a cubin, fatbin or PTX image and looks up kernel `name`. The module
/// goes into the calling thread's context (CudaRuntime::ensureContext(0) is
/// applied first). PTX need not be NUL-terminated.
llvm::Expected<CudaKernel> loadKernel(const std::vector<char> &image,
                                      const char *name);

} // namespace mla::gpu

#endif // MLA_GPURUNTIME_CUDADRIVER_H
