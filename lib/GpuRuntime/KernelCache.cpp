//===- KernelCache.cpp - on-disk cache of compiled GPU kernels ------------===//
//
// Entries are addressed by computeKernelCacheKey (mla/Contract/CacheKey.h).
//
//===----------------------------------------------------------------------===//

#include "mla/GpuRuntime/KernelCache.h"

#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"
#include <cstdint>

using namespace mla::gpu;
using llvm::StringRef;

/// Keys name files, so only what computeKernelCacheKey produces is accepted:
/// anything else (e.g. "../x") could escape the cache directory.
static bool isValidKey(StringRef key) {
  return key.size() == 32 && llvm::all_of(key, [](char c) {
           return llvm::isDigit(c) || (c >= 'a' && c <= 'f');
         });
}

static llvm::Error makeKeyError(StringRef key) {
  return llvm::createStringError("malformed kernel cache key '" + key +
                                 "' (expected 32 lowercase hex digits)");
}

llvm::Expected<std::string> mla::gpu::getDefaultKernelCacheDirectory() {
  if (std::optional<std::string> dir =
          llvm::sys::Process::GetEnv("MLA_KERNEL_CACHE_DIR");
      dir && !dir->empty())
    return *dir;
  if (std::optional<std::string> xdg =
          llvm::sys::Process::GetEnv("XDG_CACHE_HOME");
      xdg && llvm::sys::path::is_absolute(*xdg)) {
    llvm::SmallString<256> dir(*xdg);
    llvm::sys::path::append(dir, "mla");
    return std::string(dir);
  }
  if (std::optional<std::string> home = llvm::sys::Process::GetEnv("HOME");
      home && !home->empty()) {
    llvm::SmallString<256> dir(*home);
    llvm::sys::path::append(dir, ".cache", "mla");
    return std::string(dir);
  }
  return llvm::createStringError(
      "no kernel cache directory: set MLA_KERNEL_CACHE_DIR, XDG_CACHE_HOME or "
      "HOME");
}

llvm::Expected<KernelCache> KernelCache::openDefault() {
  llvm::Expected<std::string> dir = getDefaultKernelCacheDirectory();
  if (!dir)
    return dir.takeError();
  return KernelCache(std::move(*dir));
}

std::string KernelCache::getEntryPath(StringRef key) const {
  llvm::SmallString<256> path(directory);
  llvm::sys::path::append(path, key + ".cubin");
  return std::string(path);
}

std::optional<std::vector<char>> KernelCache::lookup(StringRef key) const {
  if (!isValidKey(key))
    return std::nullopt;
  // One read() into a vector sized by fstat: a memory-mapped buffer costs
  // page faults on first touch, which dominated warm lookups.
  std::string path = getEntryPath(key);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return std::nullopt;
  struct stat info;
  std::optional<std::vector<char>> image;
  if (::fstat(fd, &info) == 0 && info.st_size >= 0) {
    std::vector<char> bytes(static_cast<size_t>(info.st_size));
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      done += static_cast<size_t>(n);
    }
    if (done == bytes.size())
      image = std::move(bytes);
  }
  ::close(fd);
  return image;
}

llvm::Error KernelCache::store(StringRef key,
                               llvm::ArrayRef<char> image) const {
  if (!isValidKey(key))
    return makeKeyError(key);
  if (std::error_code ec = llvm::sys::fs::create_directories(directory))
    return llvm::createStringError(ec,
                                   "cannot create kernel cache directory '" +
                                       directory + "': " + ec.message());

  // The temporary file lives in the cache directory itself: rename() is only
  // atomic within one file system.
  llvm::SmallString<256> tempPath;
  int fd = -1;
  if (std::error_code ec = llvm::sys::fs::createUniqueFile(
          getEntryPath(key) + ".tmp-%%%%%%%%%%%%", fd, tempPath))
    return llvm::createStringError(ec, "cannot create a temporary file in '" +
                                           directory + "': " + ec.message());

  std::error_code writeError;
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os.write(image.data(), image.size());
    os.close();
    writeError = os.error();
    // The error is reported below; clear it so the stream does not abort.
    os.clear_error();
  }
  if (!writeError)
    writeError = llvm::sys::fs::rename(tempPath, getEntryPath(key));
  if (writeError) {
    llvm::sys::fs::remove(tempPath);
    return llvm::createStringError(
        writeError, "cannot write kernel cache entry '" + getEntryPath(key) +
                        "': " + writeError.message());
  }
  return llvm::Error::success();
}

llvm::Error KernelCache::getMissingEntryError(StringRef specText,
                                              StringRef key) const {
  return llvm::createStringError(
      std::make_error_code(std::errc::no_such_file_or_directory),
      "no compiled kernel for '" + specText + "' in the kernel cache " +
          directory + " (entry " + getEntryPath(key) +
          "); build it where MLIR is installed with\n  mla-aot --cache-dir " +
          directory + " --spec \"" + specText + "\"\nand copy the entry here");
}
