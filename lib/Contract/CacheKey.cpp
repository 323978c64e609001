//===- CacheKey.cpp - kernel-cache keys -----------------------------------===//
//
// Keys are 128-bit FNV-1a hashes: a wrong cache hit would silently run the
// wrong kernel, so the key is wide enough that collisions are not a concern,
// and the hash is written out here so that it never changes with a library
// version.
//
//===----------------------------------------------------------------------===//

#include "mla/Contract/CacheKey.h"

#include "llvm/ADT/StringExtras.h"
#include <cstdint>

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
