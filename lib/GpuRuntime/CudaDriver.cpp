//===- CudaDriver.cpp - CUDA driver API loaded at run time ----------------===//
//
// Symbols are looked up under the names <cuda.h> maps them to (MLA_CU_SYMBOL),
// so each function pointer has exactly the ABI of the prototype it is typed
// with, whatever versioned variant the header selects.
//
//===----------------------------------------------------------------------===//

#include "mla/GpuRuntime/CudaDriver.h"

#include <algorithm>
#include <dlfcn.h>
#include <iterator>
#include <system_error>
#include <type_traits>

using namespace mla::gpu;

#define MLA_CU_STRINGIFY(x) #x
/// The symbol name of driver function `fn` after <cuda.h>'s macros.
#define MLA_CU_SYMBOL(fn) MLA_CU_STRINGIFY(fn)

llvm::Expected<std::unique_ptr<CudaDriver>>
CudaDriver::load(const char *library) {
  void *handle = ::dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    return llvm::createStringError(llvm::Twine("no CUDA driver: cannot load ") +
                                   library + " (" + ::dlerror() + ")");

  CudaDriverApi api;
  const char *missing = nullptr;
  auto resolve = [&](auto &entry, const char *symbol) {
    entry = reinterpret_cast<std::remove_reference_t<decltype(entry)>>(
        ::dlsym(handle, symbol));
    if (!entry && !missing)
      missing = symbol;
  };
  resolve(api.init, MLA_CU_SYMBOL(cuInit));
  resolve(api.getErrorString, MLA_CU_SYMBOL(cuGetErrorString));
  resolve(api.deviceGet, MLA_CU_SYMBOL(cuDeviceGet));
  resolve(api.deviceGetAttribute, MLA_CU_SYMBOL(cuDeviceGetAttribute));
  resolve(api.ctxGetCurrent, MLA_CU_SYMBOL(cuCtxGetCurrent));
  resolve(api.ctxSetCurrent, MLA_CU_SYMBOL(cuCtxSetCurrent));
  resolve(api.devicePrimaryCtxRetain, MLA_CU_SYMBOL(cuDevicePrimaryCtxRetain));
  resolve(api.moduleLoadData, MLA_CU_SYMBOL(cuModuleLoadData));
  resolve(api.moduleUnload, MLA_CU_SYMBOL(cuModuleUnload));
  resolve(api.moduleGetFunction, MLA_CU_SYMBOL(cuModuleGetFunction));
  resolve(api.funcSetAttribute, MLA_CU_SYMBOL(cuFuncSetAttribute));
  resolve(api.launchKernel, MLA_CU_SYMBOL(cuLaunchKernel));
  resolve(api.streamSynchronize, MLA_CU_SYMBOL(cuStreamSynchronize));
  resolve(api.memAlloc, MLA_CU_SYMBOL(cuMemAlloc));
  resolve(api.memFree, MLA_CU_SYMBOL(cuMemFree));
  resolve(api.memcpyHtoD, MLA_CU_SYMBOL(cuMemcpyHtoD));
  resolve(api.memcpyDtoH, MLA_CU_SYMBOL(cuMemcpyDtoH));
  resolve(api.ctxGetDevice, MLA_CU_SYMBOL(cuCtxGetDevice));
  resolve(api.memcpyHtoDAsync, MLA_CU_SYMBOL(cuMemcpyHtoDAsync));
  resolve(api.tensorMapEncodeTiled, MLA_CU_SYMBOL(cuTensorMapEncodeTiled));
  resolve(api.memcpy2DAsync, MLA_CU_SYMBOL(cuMemcpy2DAsync));
  resolve(api.memsetD32Async, MLA_CU_SYMBOL(cuMemsetD32Async));
  resolve(api.memsetD8Async, MLA_CU_SYMBOL(cuMemsetD8Async));
  resolve(api.streamCreate, MLA_CU_SYMBOL(cuStreamCreate));
  resolve(api.streamDestroy, MLA_CU_SYMBOL(cuStreamDestroy));
  resolve(api.eventCreate, MLA_CU_SYMBOL(cuEventCreate));
  resolve(api.eventDestroy, MLA_CU_SYMBOL(cuEventDestroy));
  resolve(api.eventRecord, MLA_CU_SYMBOL(cuEventRecord));
  resolve(api.eventSynchronize, MLA_CU_SYMBOL(cuEventSynchronize));
  resolve(api.eventElapsedTime, MLA_CU_SYMBOL(cuEventElapsedTime));
  if (missing) {
    ::dlclose(handle);
    return llvm::createStringError(llvm::Twine("no CUDA driver: ") + library +
                                   " lacks " + missing +
                                   " (driver older than the CUDA headers?)");
  }

  std::unique_ptr<CudaDriver> driver(new CudaDriver(handle, api));
  if (llvm::Error error = driver->check(api.init(0), "cuInit"))
    return llvm::createStringError("CUDA driver unusable: " +
                                   llvm::toString(std::move(error)));
  return driver;
}

CudaDriver::~CudaDriver() { ::dlclose(handle); }

llvm::Error CudaDriver::check(CUresult result, const llvm::Twine &what) const {
  if (result == CUDA_SUCCESS)
    return llvm::Error::success();
  const char *text = nullptr;
  if (entryPoints.getErrorString(result, &text) != CUDA_SUCCESS || !text)
    text = "unknown error";
  return llvm::createStringError(what + " failed: " + text + " (CUresult " +
                                 llvm::Twine(static_cast<int>(result)) + ")");
}

llvm::Expected<const CudaDriver &> CudaRuntime::get() {
  // Loaded once; a failure is remembered as its message, since an llvm::Error
  // can be consumed only once.
  static const auto loaded =
      []() -> std::pair<std::unique_ptr<CudaDriver>, std::string> {
    llvm::Expected<std::unique_ptr<CudaDriver>> driver = CudaDriver::load();
    if (!driver)
      return {nullptr, llvm::toString(driver.takeError())};
    return {std::move(*driver), ""};
  }();
  if (!loaded.first)
    return llvm::createStringError(loaded.second);
  return *loaded.first;
}

bool CudaRuntime::available() {
  llvm::Expected<const CudaDriver &> driver = get();
  if (!driver) {
    llvm::consumeError(driver.takeError());
    return false;
  }
  return true;
}

llvm::Error CudaRuntime::ensureContext(int ordinal) {
  llvm::Expected<const CudaDriver &> driver = get();
  if (!driver)
    return driver.takeError();
  const CudaDriverApi &api = driver->api();
  CUcontext context = nullptr;
  if (llvm::Error error =
          driver->check(api.ctxGetCurrent(&context), "cuCtxGetCurrent"))
    return error;
  if (context)
    return llvm::Error::success();
  CUdevice device;
  if (llvm::Error error =
          driver->check(api.deviceGet(&device, ordinal), "cuDeviceGet"))
    return error;
  if (llvm::Error error =
          driver->check(api.devicePrimaryCtxRetain(&context, device),
                        "cuDevicePrimaryCtxRetain"))
    return error;
  return driver->check(api.ctxSetCurrent(context), "cuCtxSetCurrent");
}

llvm::Expected<std::pair<int, int>>
CudaRuntime::getComputeCapability(int ordinal) {
  llvm::Expected<const CudaDriver &> driver = get();
  if (!driver)
    return driver.takeError();
  const CudaDriverApi &api = driver->api();
  CUdevice device;
  int major = 0, minor = 0;
  if (llvm::Error error =
          driver->check(api.deviceGet(&device, ordinal), "cuDeviceGet"))
    return std::move(error);
  if (llvm::Error error = driver->check(
          api.deviceGetAttribute(
              &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device),
          "cuDeviceGetAttribute"))
    return std::move(error);
  if (llvm::Error error = driver->check(
          api.deviceGetAttribute(
              &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device),
          "cuDeviceGetAttribute"))
    return std::move(error);
  return std::make_pair(major, minor);
}

llvm::Expected<Chip> CudaRuntime::getChip(int ordinal) {
  llvm::Expected<std::pair<int, int>> cc = getComputeCapability(ordinal);
  if (!cc)
    return cc.takeError();
  if (cc->first == 9)
    return Chip::SM90a;
  if (cc->first == 10)
    return Chip::SM100a;
  return llvm::createStringError(
      std::make_error_code(std::errc::invalid_argument),
      "device " + llvm::Twine(ordinal) + " is sm_" + llvm::Twine(cc->first) +
          llvm::Twine(cc->second) +
          "; mla's GPU kernels target sm_90a and sm_100a");
}

CudaKernel &CudaKernel::operator=(CudaKernel &&other) noexcept {
  // The previous module is unloaded when `old` goes out of scope.
  CudaKernel old(std::move(other));
  std::swap(driver, old.driver);
  std::swap(module, old.module);
  std::swap(function, old.function);
  return *this;
}

CudaKernel::~CudaKernel() {
  // Unloading may fail at process exit, after the driver tore its contexts
  // down; there is nothing left to release then.
  if (module)
    (void)driver->api().moduleUnload(module);
}

llvm::Error CudaKernel::setMaxDynamicSharedBytes(int bytes) const {
  return driver->check(
      driver->api().funcSetAttribute(
          function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes),
      "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
}

llvm::Error CudaKernel::launch(Dim3 grid, Dim3 block, unsigned sharedBytes,
                               CUstream stream, void **params) const {
  return driver->check(
      driver->api().launchKernel(function, grid.x, grid.y, grid.z, block.x,
                                 block.y, block.z, sharedBytes, stream, params,
                                 /*extra=*/nullptr),
      "cuLaunchKernel");
}

/// Whether `image` is a cubin (ELF) or fatbin, which cuModuleLoadData sizes
/// from their headers; anything else is taken as PTX text, which it reads up
/// to a NUL.
static bool isBinaryImage(const std::vector<char> &image) {
  static constexpr char kElfMagic[] = {0x7f, 'E', 'L', 'F'};
  static constexpr unsigned char kFatbinMagic[] = {0x50, 0xed, 0x55, 0xba};
  auto startsWith = [&](const auto &magic) {
    return image.size() >= sizeof(magic) &&
           std::equal(std::begin(magic), std::end(magic), image.begin(),
                      [](auto m, char c) {
                        return static_cast<unsigned char>(m) ==
                               static_cast<unsigned char>(c);
                      });
  };
  return startsWith(kElfMagic) || startsWith(kFatbinMagic);
}

llvm::Expected<CudaKernel> mla::gpu::loadKernel(const std::vector<char> &image,
                                                const char *name) {
  llvm::Expected<const CudaDriver &> driver = CudaRuntime::get();
  if (!driver)
    return driver.takeError();
  if (llvm::Error error = CudaRuntime::ensureContext())
    return std::move(error);
  const CudaDriverApi &api = driver->api();

  const void *data = image.data();
  std::vector<char> terminatedPtx;
  if (!isBinaryImage(image) && (image.empty() || image.back() != '\0')) {
    terminatedPtx.reserve(image.size() + 1);
    terminatedPtx.assign(image.begin(), image.end());
    terminatedPtx.push_back('\0');
    data = terminatedPtx.data();
  }

  CUmodule module;
  if (llvm::Error error =
          driver->check(api.moduleLoadData(&module, data), "cuModuleLoadData"))
    return std::move(error);
  CUfunction function;
  if (llvm::Error error =
          driver->check(api.moduleGetFunction(&function, module, name),
                        llvm::Twine("cuModuleGetFunction(") + name + ")")) {
    (void)api.moduleUnload(module);
    return std::move(error);
  }
  return CudaKernel(*driver, module, function);
}
