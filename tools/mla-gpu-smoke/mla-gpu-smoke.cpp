//===- mla-gpu-smoke.cpp - end-to-end check of the GPU launch path --------===//
//
// Loads a cubin or PTX file, launches a kernel with the signature
// (float *out, int n) that writes out[i] = 2 * i, copies the result back and
// checks it. Exercises exactly the driver calls the runtime depends on
// (context, module load, launch, sync), so a failure here isolates the host
// side from kernel code generation. Prints PASS or FAIL; exits 0 on PASS.
//
//===----------------------------------------------------------------------===//

#include "mla/Contract/Version.h"
#include "mla/GpuRuntime/CudaDriver.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"
#include <vector>

using namespace mla::gpu;

static llvm::cl::opt<std::string> imagePath(llvm::cl::Positional,
                                            llvm::cl::Required,
                                            llvm::cl::desc("<cubin or ptx>"));
static llvm::cl::opt<std::string> kernelName(llvm::cl::Positional,
                                             llvm::cl::Required,
                                             llvm::cl::desc("<kernel name>"));
static llvm::cl::opt<int>
    numElements("n", llvm::cl::init(1000),
                llvm::cl::desc("Elements to write (not a multiple of the block "
                               "size by default, to test the bounds check)"));

/// Runs the check; returns whether every element matched.
static llvm::Expected<bool> runSmoke() {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(imagePath, /*IsText=*/false,
                                  /*RequiresNullTerminator=*/false);
  if (!file)
    return llvm::createStringError("cannot read '" + imagePath +
                                   "': " + file.getError().message());
  llvm::StringRef bytes = (*file)->getBuffer();
  std::vector<char> image(bytes.begin(), bytes.end());

  llvm::Expected<CudaKernel> kernel = loadKernel(image, kernelName.c_str());
  if (!kernel)
    return kernel.takeError();
  const CudaDriver &driver = cantFail(CudaRuntime::get());
  const CudaDriverApi &api = driver.api();
  if (llvm::Expected<std::pair<int, int>> cc =
          CudaRuntime::getComputeCapability())
    llvm::outs() << "device 0: sm_" << cc->first << cc->second << "\n";
  else
    return cc.takeError();

  int n = numElements;
  if (n <= 0)
    return llvm::createStringError("-n must be positive");
  size_t bytesOut = sizeof(float) * n;
  CUdeviceptr out;
  if (llvm::Error error =
          driver.check(api.memAlloc(&out, bytesOut), "cuMemAlloc"))
    return std::move(error);
  // Poison the buffer so that elements the kernel skips fail the check.
  std::vector<float> host(n, -1.0f);
  llvm::Error error =
      driver.check(api.memcpyHtoD(out, host.data(), bytesOut), "cuMemcpyHtoD");
  if (!error) {
    void *params[] = {&out, &n};
    constexpr unsigned kBlock = 128;
    error = kernel->launch({(n + kBlock - 1) / kBlock}, {kBlock},
                           /*sharedBytes=*/0, /*stream=*/nullptr, params);
  }
  if (!error)
    error = driver.check(api.streamSynchronize(nullptr), "cuStreamSynchronize");
  if (!error)
    error = driver.check(api.memcpyDtoH(host.data(), out, bytesOut),
                         "cuMemcpyDtoH");
  (void)api.memFree(out);
  if (error)
    return std::move(error);

  int mismatches = 0;
  for (int i = 0; i < n; ++i) {
    if (host[i] == 2.0f * i)
      continue;
    if (++mismatches <= 5)
      llvm::errs() << "out[" << i << "] = " << host[i] << ", expected "
                   << 2.0f * i << "\n";
  }
  if (mismatches)
    llvm::errs() << mismatches << " of " << n << " elements wrong\n";
  return mismatches == 0;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  llvm::cl::AddExtraVersionPrinter(mla::printVersion);
  llvm::cl::ParseCommandLineOptions(argc, argv,
                                    "mla GPU launch-path smoke test\n");
  llvm::Expected<bool> passed = runSmoke();
  if (!passed) {
    llvm::errs() << "error: " << llvm::toString(passed.takeError()) << "\n";
    llvm::outs() << "FAIL\n";
    return 1;
  }
  llvm::outs() << (*passed ? "PASS" : "FAIL") << "\n";
  return *passed ? 0 : 1;
}
