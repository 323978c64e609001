//===- CudaDriverTest.cpp - tests of the run-time loaded CUDA driver ------===//
//
// These run everywhere: without a driver they check that every entry point
// fails cleanly with a message naming the driver (never an abort or a missing
// library at start-up); with one, that a bad image is an error, not a crash.
// Real launches are covered by mla-gpu-smoke (test/Gpu/smoke.test).
//
//===----------------------------------------------------------------------===//

#include "mla/GpuRuntime/CudaDriver.h"
#include "gtest/gtest.h"

using namespace mla::gpu;

namespace {

bool contains(const std::string &text, llvm::StringRef part) {
  return llvm::StringRef(text).contains(part);
}

TEST(CudaDriver, MissingLibraryIsReported) {
  llvm::Expected<std::unique_ptr<CudaDriver>> driver =
      CudaDriver::load("libmla-no-such-cuda-driver.so.1");
  ASSERT_FALSE(static_cast<bool>(driver));
  std::string message = llvm::toString(driver.takeError());
  EXPECT_TRUE(contains(message, "no CUDA driver")) << message;
  EXPECT_TRUE(contains(message, "libmla-no-such-cuda-driver.so.1")) << message;
}

TEST(CudaDriver, LibraryWithoutEntryPointsIsReported) {
  // libm loads fine but is no driver: the missing symbol is named.
  llvm::Expected<std::unique_ptr<CudaDriver>> driver =
      CudaDriver::load("libm.so.6");
  ASSERT_FALSE(static_cast<bool>(driver));
  std::string message = llvm::toString(driver.takeError());
  EXPECT_TRUE(contains(message, "no CUDA driver")) << message;
  EXPECT_TRUE(contains(message, "lacks cuInit")) << message;
}

TEST(CudaDriver, ProcessRuntimeFailsCleanlyOrLoads) {
  const std::vector<char> garbage = {'n', 'o', 't', ' ', 'p', 't', 'x'};
  llvm::Expected<CudaKernel> kernel = loadKernel(garbage, "iota2");
  ASSERT_FALSE(static_cast<bool>(kernel));
  std::string message = llvm::toString(kernel.takeError());

  if (!CudaRuntime::available()) {
    // No driver (or no usable device): every entry point says so.
    EXPECT_TRUE(contains(message, "CUDA driver")) << message;
    llvm::Error context = CudaRuntime::ensureContext();
    ASSERT_TRUE(static_cast<bool>(context));
    EXPECT_TRUE(contains(llvm::toString(std::move(context)), "CUDA driver"));
    llvm::Expected<std::pair<int, int>> cc =
        CudaRuntime::getComputeCapability();
    ASSERT_FALSE(static_cast<bool>(cc));
    EXPECT_TRUE(contains(llvm::toString(cc.takeError()), "CUDA driver"));
    return;
  }
  // A working driver rejects the image itself.
  EXPECT_TRUE(contains(message, "cuModuleLoadData failed")) << message;
  llvm::Expected<std::pair<int, int>> cc = CudaRuntime::getComputeCapability();
  ASSERT_TRUE(static_cast<bool>(cc)) << llvm::toString(cc.takeError());
  EXPECT_GE(cc->first, 1);
}

} // namespace
