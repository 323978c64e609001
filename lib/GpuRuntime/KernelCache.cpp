//===- KernelCache.cpp - on-disk cache of compiled GPU kernels ------------===//
//
// Entries are addressed by computeKernelCacheKey (mla/Contract/CacheKey.h).
//
// An entry file is a 32-byte little-endian header followed by the spec text
// and the image:
//   [0, 8)   magic "MLAKERNL"
//   [8, 12)  entry format version (kEntryVersion)
//   [12, 16) spec text length S
//   [16, 24) image length I
//   [24, 32) 64-bit FNV-1a of the image
//   [32, 32 + S) spec text, [32 + S, 32 + S + I) image
// The spec text lets a lookup tell an entry of another spec (a key collision
// or a file copied under the wrong name) from the one it asked for.
//
//===----------------------------------------------------------------------===//

#include "mla/GpuRuntime/KernelCache.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <tuple>
#include <unistd.h>

using namespace mla::gpu;
using llvm::StringRef;

/// Bumped whenever the entry layout changes; entries of another version
/// (including v1's headerless images) are misses.
static constexpr uint32_t kEntryVersion = 2;
static constexpr StringRef kEntryMagic = "MLAKERNL";
static constexpr size_t kHeaderBytes = 32;

static uint64_t fnv1a64(llvm::ArrayRef<char> bytes) {
  uint64_t state = 0xcbf29ce484222325ULL;
  for (char c : bytes) {
    state ^= static_cast<unsigned char>(c);
    state *= 0x100000001b3ULL;
  }
  return state;
}

static void putLE(std::vector<char> &out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out.push_back(static_cast<char>(value >> (8 * i)));
}

static uint64_t getLE(const char *at, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i)
    value |= static_cast<uint64_t>(static_cast<unsigned char>(at[i]))
             << (8 * i);
  return value;
}

/// The image inside entry file `file` of spec `specText`, or what is wrong
/// with the file.
static llvm::Expected<std::vector<char>> decodeEntry(llvm::ArrayRef<char> file,
                                                     StringRef specText) {
  if (file.size() < kHeaderBytes)
    return llvm::createStringError("truncated to " + llvm::Twine(file.size()) +
                                   " bytes, shorter than the header");
  if (StringRef(file.data(), kEntryMagic.size()) != kEntryMagic)
    return llvm::createStringError("not a kernel cache entry (bad magic)");
  uint64_t version = getLE(file.data() + 8, 4);
  if (version != kEntryVersion)
    return llvm::createStringError("entry format version " +
                                   llvm::Twine(version) + ", expected " +
                                   llvm::Twine(kEntryVersion));
  uint64_t specBytes = getLE(file.data() + 12, 4);
  uint64_t imageBytes = getLE(file.data() + 16, 8);
  uint64_t body = file.size() - kHeaderBytes;
  if (specBytes > body || imageBytes != body - specBytes)
    return llvm::createStringError(
        "holds " + llvm::Twine(file.size()) + " bytes, the header says " +
        llvm::Twine(kHeaderBytes) + " + " + llvm::Twine(specBytes) + " + " +
        llvm::Twine(imageBytes));
  StringRef stored(file.data() + kHeaderBytes, specBytes);
  if (stored != specText)
    return llvm::createStringError("holds spec '" + stored + "', not '" +
                                   specText + "'");
  llvm::ArrayRef<char> image = file.drop_front(kHeaderBytes + specBytes);
  if (fnv1a64(image) != getLE(file.data() + 24, 8))
    return llvm::createStringError("image checksum mismatch");
  return std::vector<char>(image.begin(), image.end());
}

void mla::gpu::warnAboutBadEntry(StringRef message) {
  llvm::WithColor::warning(llvm::errs(), "mla") << message << "\n";
}

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

std::optional<std::vector<char>> KernelCache::lookup(StringRef key,
                                                     StringRef specText) const {
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
  if (!image)
    return std::nullopt;
  llvm::Expected<std::vector<char>> decoded = decodeEntry(*image, specText);
  if (decoded)
    return std::move(*decoded);
  std::string message = "removed damaged kernel cache entry " + path + ": " +
                        llvm::toString(decoded.takeError());
  // A concurrent writer may have renamed a good entry over the damaged one
  // since it was read; removing that costs one rebuild, never a bad image.
  llvm::sys::fs::remove(path);
  if (onBadEntry)
    onBadEntry(message);
  return std::nullopt;
}

llvm::Error KernelCache::store(StringRef key, StringRef specText,
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
    std::vector<char> header(kEntryMagic.begin(), kEntryMagic.end());
    putLE(header, kEntryVersion, 4);
    putLE(header, specText.size(), 4);
    putLE(header, image.size(), 8);
    putLE(header, fnv1a64(image), 8);
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os.write(header.data(), header.size());
    os.write(specText.data(), specText.size());
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

/// The spec text recorded in the header of the entry file at `path`, or an
/// empty string when the file is not a readable entry of this format (a
/// lookup reports and removes such an entry).
static std::string readEntrySpec(StringRef path) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> head =
      llvm::MemoryBuffer::getFileSlice(path, kHeaderBytes + 4096, 0,
                                       /*IsVolatile=*/true);
  if (!head)
    return "";
  StringRef bytes = (*head)->getBuffer();
  if (bytes.size() < kHeaderBytes || !bytes.starts_with(kEntryMagic) ||
      getLE(bytes.data() + 8, 4) != kEntryVersion)
    return "";
  uint64_t specBytes = getLE(bytes.data() + 12, 4);
  if (kHeaderBytes + specBytes > bytes.size())
    return "";
  return bytes.substr(kHeaderBytes, specBytes).str();
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
    entry.specText = readEntrySpec(entry.path);
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
    result.keptBytes -= entry.size;
    --result.keptEntries;
    result.removedBytes += entry.size;
    ++result.removedEntries;
  }
  return result;
}
