//===- KernelCache.cpp - on-disk cache of compiled GPU kernels ------------===//
//
// Keys are 128-bit FNV-1a hashes: a wrong cache hit would silently run the
// wrong kernel, so the key is wide enough that collisions are not a concern,
// and the hash is written out here so that it never changes with a library
// version.
//
//===----------------------------------------------------------------------===//

#include "mla/Runtime/Gpu/KernelCache.h"

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

namespace {
/// Incremental 128-bit FNV-1a (offset basis and prime from the FNV spec).
class Fnv1a128 {
public:
  void add(StringRef bytes) {
    for (unsigned char c : bytes.bytes()) {
      state ^= c;
      state *= kPrime;
    }
  }

  /// Adds `field` prefixed by its length, so that ("ab", "c") and ("a", "bc")
  /// hash differently.
  void addField(StringRef field) {
    uint64_t size = field.size();
    char sizeBytes[8];
    for (int i = 0; i < 8; ++i)
      sizeBytes[i] = static_cast<char>(size >> (8 * i));
    add(StringRef(sizeBytes, sizeof(sizeBytes)));
    add(field);
  }

  std::string hex() const {
    auto word = [](uint64_t value) {
      return llvm::utohexstr(value, /*LowerCase=*/true, /*Width=*/16);
    };
    return word(static_cast<uint64_t>(state >> 64)) +
           word(static_cast<uint64_t>(state));
  }

private:
  static constexpr unsigned __int128 kPrime =
      (static_cast<unsigned __int128>(1) << 88) + 0x13b;
  unsigned __int128 state =
      (static_cast<unsigned __int128>(0x6c62272e07bb0142ULL) << 64) |
      0x62b821756295c58dULL;
};
} // namespace

/// Bumped whenever the entry format or the key derivation changes, so that
/// old entries are never read back under new rules.
static constexpr StringRef kKeyFormat = "mla-kernel-cache-v1";

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

std::string mla::gpu::computeKernelCacheKey(StringRef kernelSpec,
                                            StringRef pipeline,
                                            StringRef toolchainVersion,
                                            StringRef chip) {
  Fnv1a128 hash;
  for (StringRef field :
       {kKeyFormat, kernelSpec, pipeline, toolchainVersion, chip})
    hash.addField(field);
  return hash.hex();
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
