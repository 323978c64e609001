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
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <cstdint>
#include <tuple>

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

/// The file that records the spec text of `key`'s entry, next to the entry.
static std::string getSpecPath(const KernelCache &cache, StringRef key) {
  llvm::SmallString<256> path(cache.getDirectory());
  llvm::sys::path::append(path, key + ".spec");
  return std::string(path);
}

llvm::Error KernelCache::storeSpecText(StringRef key,
                                       StringRef specText) const {
  if (!isValidKey(key))
    return makeKeyError(key);
  std::string path = getSpecPath(*this, key);
  llvm::SmallString<256> tempPath;
  int fd = -1;
  if (std::error_code ec = llvm::sys::fs::createUniqueFile(
          path + ".tmp-%%%%%%%%%%%%", fd, tempPath))
    return llvm::createStringError(ec, "cannot create a temporary file in '" +
                                           directory + "': " + ec.message());
  std::error_code writeError;
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << specText << "\n";
    os.close();
    writeError = os.error();
    os.clear_error();
  }
  if (!writeError)
    writeError = llvm::sys::fs::rename(tempPath, path);
  if (writeError) {
    llvm::sys::fs::remove(tempPath);
    return llvm::createStringError(
        writeError, "cannot write '" + path + "': " + writeError.message());
  }
  return llvm::Error::success();
}

llvm::Expected<std::vector<KernelCacheEntry>> KernelCache::listEntries() const {
  std::vector<KernelCacheEntry> entries;
  if (!llvm::sys::fs::is_directory(directory))
    return entries;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(directory, ec), end;
       it != end && !ec; it.increment(ec)) {
    StringRef name = llvm::sys::path::filename(it->path());
    if (!name.consume_back(".cubin") || !isValidKey(name))
      continue;
    llvm::ErrorOr<llvm::sys::fs::basic_file_status> status = it->status();
    if (!status)
      continue; // Removed since the directory was read.
    KernelCacheEntry entry;
    entry.key = name.str();
    entry.path = it->path();
    entry.size = status->getSize();
    entry.lastUsed = std::max(status->getLastAccessedTime(),
                              status->getLastModificationTime());
    if (llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> spec =
            llvm::MemoryBuffer::getFile(getSpecPath(*this, name))) {
      entry.specText = (*spec)->getBuffer().trim().str();
      entry.size += (*spec)->getBufferSize();
    }
    entries.push_back(std::move(entry));
  }
  if (ec)
    return llvm::createStringError(ec, "cannot list kernel cache directory '" +
                                           directory + "': " + ec.message());
  llvm::sort(entries, [](const KernelCacheEntry &a, const KernelCacheEntry &b) {
    return std::tie(a.lastUsed, a.key) < std::tie(b.lastUsed, b.key);
  });
  return entries;
}

llvm::Expected<KernelCachePruneResult>
KernelCache::prune(const llvm::CachePruningPolicy &policy) const {
  llvm::Expected<std::vector<KernelCacheEntry>> entries = listEntries();
  if (!entries)
    return entries.takeError();
  KernelCachePruneResult result;
  for (const KernelCacheEntry &entry : *entries) {
    result.keptBytes += entry.size;
    ++result.keptEntries;
  }
  auto now = std::chrono::system_clock::now();
  for (const KernelCacheEntry &entry : *entries) {
    bool expired = policy.Expiration.count() > 0 &&
                   now - entry.lastUsed > policy.Expiration;
    bool tooBig =
        policy.MaxSizeBytes > 0 && result.keptBytes > policy.MaxSizeBytes;
    bool tooMany =
        policy.MaxSizeFiles > 0 && result.keptEntries > policy.MaxSizeFiles;
    // Least recently used first: once none of these holds, none will for
    // the entries after this one either (they are newer).
    if (!expired && !tooBig && !tooMany)
      break;
    if (std::error_code ec = llvm::sys::fs::remove(entry.path))
      return llvm::createStringError(ec, "cannot remove kernel cache entry '" +
                                             entry.path + "': " + ec.message());
    llvm::sys::fs::remove(getSpecPath(*this, entry.key));
    result.keptBytes -= entry.size;
    --result.keptEntries;
    result.removedBytes += entry.size;
    ++result.removedEntries;
  }
  return result;
}
