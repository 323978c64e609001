//===- KernelCache.h - on-disk cache of compiled GPU kernels ----*- C++ -*-===//
//
// Compiling a decode kernel (MLIR pipeline + ptxas) takes far longer than a
// decode step, so compiled images are kept on disk across processes. An entry
// is one file `<key>.cubin` whose key hashes everything the image depends on:
// the kernel spec, the pass pipeline, the toolchain version and the chip.
// Writers publish entries with rename(), so concurrent processes never see a
// partially written image. Disks, copies and people still damage files, so an
// entry carries a header (magic, format version, the spec text, the image
// length and a checksum of the image); a lookup that finds a damaged entry
// reports it, removes it and answers a miss, so the driver never receives a
// damaged image and the caller rebuilds the entry.
//
// Depends on LLVM Support only: the host runtime links it without MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_GPURUNTIME_KERNELCACHE_H
#define MLA_GPURUNTIME_KERNELCACHE_H

#include "mla/Contract/CacheKey.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CachePruning.h"
#include "llvm/Support/Chrono.h"
#include "llvm/Support/Error.h"
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace mla::gpu {

/// Returns the directory the cache uses by default: $MLA_KERNEL_CACHE_DIR,
/// else $XDG_CACHE_HOME/mla, else $HOME/.cache/mla. Empty variables (and a
/// relative XDG_CACHE_HOME, which the XDG spec says to ignore) are skipped;
/// fails when none applies.
llvm::Expected<std::string> getDefaultKernelCacheDirectory();

/// One entry of a kernel cache directory, as KernelCache::listEntries finds it.
struct KernelCacheEntry {
  std::string key;
  std::string path;
  /// Bytes of the entry file (header and spec text included).
  uint64_t size = 0;
  /// When the entry was last read or written (as the file system records it).
  llvm::sys::TimePoint<> lastUsed;
  /// The spec the entry was compiled from (from its header); empty when the
  /// file is not a readable entry.
  std::string specText;
};

/// What KernelCache::prune removed.
struct KernelCachePruneResult {
  unsigned removedEntries = 0;
  uint64_t removedBytes = 0;
  unsigned keptEntries = 0;
  uint64_t keptBytes = 0;
};

/// Receives one line describing each damaged entry a lookup removed.
using BadEntryHandler = std::function<void(llvm::StringRef message)>;

/// The default BadEntryHandler: prints "mla: warning: <message>" to stderr.
void warnAboutBadEntry(llvm::StringRef message);

/// A directory of compiled kernel images addressed by computeKernelCacheKey.
/// The directory is created on the first store; lookups never create it.
class KernelCache {
public:
  /// A cache rooted at `directory`; damaged entries are reported to
  /// `onBadEntry`.
  explicit KernelCache(std::string directory,
                       BadEntryHandler onBadEntry = warnAboutBadEntry)
      : directory(std::move(directory)), onBadEntry(std::move(onBadEntry)) {}

  /// A cache rooted at getDefaultKernelCacheDirectory().
  static llvm::Expected<KernelCache> openDefault();

  const std::string &getDirectory() const { return directory; }

  /// The file that holds (or would hold) the entry for `key`.
  std::string getEntryPath(llvm::StringRef key) const;

  /// Returns the image of spec `specText` stored under `key`, or std::nullopt
  /// when there is no readable entry (a malformed key is a miss, too). An
  /// entry that is truncated, of another format version, for another spec
  /// or whose image fails its checksum is reported, removed and a miss.
  std::optional<std::vector<char>> lookup(llvm::StringRef key,
                                          llvm::StringRef specText) const;

  /// Stores `image` of spec `specText` under `key`, replacing any previous
  /// entry atomically: the bytes go to a unique temporary file in the cache
  /// directory, which is then renamed over the entry. Fails (without leaving
  /// a temporary file behind) when the key is malformed or the directory
  /// cannot be created or written.
  llvm::Error store(llvm::StringRef key, llvm::StringRef specText,
                    llvm::ArrayRef<char> image) const;

  /// Every entry of the directory, least recently used first (a missing
  /// directory has none). Temporary files of unfinished stores are skipped.
  llvm::Expected<std::vector<KernelCacheEntry>> listEntries() const;

  /// Removes entries, least recently used first, until the cache satisfies
  /// `policy`'s limits: entries unused for longer than its Expiration, then
  /// any beyond MaxSizeBytes or MaxSizeFiles (0 disables a limit; the
  /// policy's interval and percentage of free disk space are not used).
  /// llvm::pruneCache applies the same policy but only to files named
  /// `llvmcache-*`, which kernel cache entries are not.
  llvm::Expected<KernelCachePruneResult>
  prune(const llvm::CachePruningPolicy &policy) const;

  /// The error of a process without a compiler that finds no entry for the
  /// spec `specText` (key `key`): std::errc::no_such_file_or_directory, with
  /// the `mla-aot` command that builds the entry.
  llvm::Error getMissingEntryError(llvm::StringRef specText,
                                   llvm::StringRef key) const;

private:
  std::string directory;
  BadEntryHandler onBadEntry;
};

} // namespace mla::gpu

#endif // MLA_GPURUNTIME_KERNELCACHE_H
