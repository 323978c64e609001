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

#ifndef MLA_RUNTIME_GPU_KERNELCACHE_H
#define MLA_RUNTIME_GPU_KERNELCACHE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace mla::gpu {

/// Returns the cache key of a kernel image: 32 lowercase hex digits of a
/// 128-bit FNV-1a hash over the four inputs. The key is stable across runs,
/// processes and machines, and changes when any input changes (inputs are
/// length-prefixed, so moving text from one field to the next changes it too).
std::string computeKernelCacheKey(llvm::StringRef kernelSpec,
                                  llvm::StringRef pipeline,
                                  llvm::StringRef toolchainVersion,
                                  llvm::StringRef chip);

/// Returns the directory the cache uses by default: $MLA_KERNEL_CACHE_DIR,
/// else $XDG_CACHE_HOME/mla, else $HOME/.cache/mla. Empty variables (and a
/// relative XDG_CACHE_HOME, which the XDG spec says to ignore) are skipped;
/// fails when none applies.
llvm::Expected<std::string> getDefaultKernelCacheDirectory();

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

#endif // MLA_RUNTIME_GPU_KERNELCACHE_H
