//===- GpuJit.cpp - C API of the GPU kernel compiler ----------------------===//
//
// The C face of getOrCompileKernels, so that the Python package built with
// MLIR can fill the kernel cache when the MLIR-free GPU library misses.
//
//===----------------------------------------------------------------------===//

#include "mla-c/GpuJit.h"
#include "mla/JIT/GpuJit.h"
#include <algorithm>
#include <cstring>
#include <string>

using namespace mla::gpu;

namespace {

void copyOut(const std::string &text, char *buffer, size_t size) {
  if (!buffer || !size)
    return;
  size_t n = std::min(text.size(), size - 1);
  std::memcpy(buffer, text.data(), n);
  buffer[n] = '\0';
}

int fail(int code, const std::string &message, char *err, size_t errLen) {
  copyOut(message, err, errLen);
  return code;
}

} // namespace

int mlaCompileGpuKernel(const char *specText, const char *cacheDir,
                        int32_t *wasHit, char *path, size_t pathLen, char *err,
                        size_t errLen) {
  if (!specText)
    return fail(MLA_ERROR_INVALID_ARGUMENT, "the kernel spec is NULL", err,
                errLen);
  KernelSpec spec;
  std::string why;
  if (!parseKernelSpec(specText, spec, why))
    return fail(MLA_ERROR_INVALID_ARGUMENT,
                "invalid kernel spec '" + std::string(specText) + "': " + why,
                err, errLen);

  std::string directory;
  if (cacheDir) {
    directory = cacheDir;
  } else {
    llvm::Expected<std::string> found = getDefaultKernelCacheDirectory();
    if (!found)
      return fail(MLA_ERROR_INVALID_ARGUMENT, llvm::toString(found.takeError()),
                  err, errLen);
    directory = std::move(*found);
  }

  KernelCache cache(directory);
  bool hit = false;
  llvm::Expected<std::vector<char>> image =
      getOrCompileKernels(spec, cache, &hit);
  if (!image)
    return fail(MLA_ERROR_COMPILE, llvm::toString(image.takeError()), err,
                errLen);
  if (wasHit)
    *wasHit = hit ? 1 : 0;
  copyOut(cache.getEntryPath(cacheKeyFor(spec)), path, pathLen);
  return MLA_SUCCESS;
}
