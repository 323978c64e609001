//===- KernelCacheTest.cpp - tests of the on-disk kernel cache ------------===//
//
// Key derivation must be stable and sensitive to every input (a stale hit
// would run a kernel built for another chip or toolchain), and stores must be
// atomic: readers and concurrent writers only ever see complete entries.
// Damaged entries (truncated, emptied, bit-flipped, garbage, another spec's)
// are reported, removed and misses.
//
//===----------------------------------------------------------------------===//

#include "mla/GpuRuntime/KernelCache.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "gtest/gtest.h"
#include <cstdlib>
#include <functional>
#include <optional>
#include <set>
#include <thread>

using namespace mla::gpu;

namespace {

/// A fresh temporary directory, removed with its contents afterwards.
class TempDir {
public:
  TempDir() {
    std::error_code ec =
        llvm::sys::fs::createUniqueDirectory("mla-kernel-cache-test", path);
    EXPECT_FALSE(ec) << ec.message();
  }
  ~TempDir() { llvm::sys::fs::remove_directories(path); }
  std::string sub(llvm::StringRef name) const {
    llvm::SmallString<256> result(path);
    llvm::sys::path::append(result, name);
    return std::string(result);
  }
  const llvm::SmallString<256> &get() const { return path; }

private:
  llvm::SmallString<256> path;
};

/// Sets an environment variable for one scope and restores it afterwards.
class ScopedEnv {
public:
  ScopedEnv(const char *name, const char *value) : name(name) {
    if (const char *old = std::getenv(name))
      previous = old;
    set(value);
  }
  ~ScopedEnv() { set(previous ? previous->c_str() : nullptr); }

private:
  void set(const char *value) {
    if (value)
      ::setenv(name, value, /*overwrite=*/1);
    else
      ::unsetenv(name);
  }
  const char *name;
  std::optional<std::string> previous;
};

/// Names of the files in `dir`.
std::set<std::string> listFiles(llvm::StringRef dir) {
  std::set<std::string> names;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec))
    names.insert(llvm::sys::path::filename(it->path()).str());
  return names;
}

std::vector<char> bytesOf(llvm::StringRef text) {
  return std::vector<char>(text.begin(), text.end());
}

const char *kSpec = "mla_decode{heads=128,kv_lora=512,rope=64,dtype=bf16}";
const char *kPipeline = "nvvm-attach-target{chip=sm_90a},gpu-module-to-binary";
const char *kToolchain = "mlir-22.1;ptxas-13.0";
const char *kChip = "sm_90a";

TEST(KernelCacheKey, StableAndHex) {
  std::string key = computeKernelCacheKey(kSpec, kPipeline, kToolchain, kChip);
  EXPECT_EQ(key, computeKernelCacheKey(kSpec, kPipeline, kToolchain, kChip));
  ASSERT_EQ(key.size(), 32u);
  for (char c : key)
    EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << key;
  // Pinned (values from an independent FNV-1a 128 implementation) so that a
  // change to the key derivation, which orphans every cached kernel, is
  // deliberate and comes with a new key format version.
  EXPECT_EQ(key, "c69565128036385c14d13820409047f8");
  EXPECT_EQ(computeKernelCacheKey("", "", "", ""),
            "837a23bcd768f1b65e8657e2b5fdb42f");
}

TEST(KernelCacheKey, EveryFieldMatters) {
  std::set<std::string> keys = {
      computeKernelCacheKey(kSpec, kPipeline, kToolchain, kChip),
      computeKernelCacheKey("mla_decode{heads=16}", kPipeline, kToolchain,
                            kChip),
      computeKernelCacheKey(kSpec, "nvvm-attach-target{chip=sm_90a,O=2}",
                            kToolchain, kChip),
      computeKernelCacheKey(kSpec, kPipeline, "mlir-22.1;ptxas-13.1", kChip),
      computeKernelCacheKey(kSpec, kPipeline, kToolchain, "sm_100a"),
      computeKernelCacheKey(kSpec, kPipeline, kToolchain, "sm_90"),
  };
  EXPECT_EQ(keys.size(), 6u);
}

TEST(KernelCacheKey, FieldBoundariesMatter) {
  EXPECT_NE(computeKernelCacheKey("ab", "c", "", ""),
            computeKernelCacheKey("a", "bc", "", ""));
  EXPECT_NE(computeKernelCacheKey("", "", "x", ""),
            computeKernelCacheKey("", "", "", "x"));
}

TEST(KernelCache, DefaultDirectoryFromEnvironment) {
  ScopedEnv dir("MLA_KERNEL_CACHE_DIR", "/tmp/mla-explicit");
  ScopedEnv xdg("XDG_CACHE_HOME", "/tmp/xdg");
  ScopedEnv home("HOME", "/tmp/home");
  EXPECT_EQ(llvm::cantFail(getDefaultKernelCacheDirectory()),
            "/tmp/mla-explicit");
  {
    ScopedEnv unset("MLA_KERNEL_CACHE_DIR", nullptr);
    EXPECT_EQ(llvm::cantFail(getDefaultKernelCacheDirectory()), "/tmp/xdg/mla");
    // The XDG spec says to ignore relative paths.
    ScopedEnv relative("XDG_CACHE_HOME", "relative");
    EXPECT_EQ(llvm::cantFail(getDefaultKernelCacheDirectory()),
              "/tmp/home/.cache/mla");
    ScopedEnv noHome("HOME", nullptr);
    llvm::Expected<std::string> none = getDefaultKernelCacheDirectory();
    ASSERT_FALSE(static_cast<bool>(none));
    EXPECT_NE(llvm::toString(none.takeError()).find("MLA_KERNEL_CACHE_DIR"),
              std::string::npos);
  }
}

TEST(KernelCache, StoreLookupRoundTrip) {
  TempDir tmp;
  // Nested, so store() must create the directories.
  std::string dir = tmp.sub("nested/cache");
  ScopedEnv env("MLA_KERNEL_CACHE_DIR", dir.c_str());
  llvm::Expected<KernelCache> cache = KernelCache::openDefault();
  ASSERT_TRUE(static_cast<bool>(cache)) << llvm::toString(cache.takeError());
  EXPECT_EQ(cache->getDirectory(), dir);

  std::string key = computeKernelCacheKey(kSpec, kPipeline, kToolchain, kChip);
  EXPECT_FALSE(cache->lookup(key, kSpec).has_value());

  // Binary payload with NULs and high bytes: the image is read back verbatim.
  std::vector<char> image = {'\x7f', 'E', 'L', 'F', '\0', '\xff', '\x01'};
  ASSERT_FALSE(llvm::errorToBool(cache->store(key, kSpec, image)));
  EXPECT_EQ(cache->lookup(key, kSpec), image);
  EXPECT_EQ(listFiles(dir), std::set<std::string>{key + ".cubin"});

  // Overwriting replaces the entry.
  ASSERT_FALSE(llvm::errorToBool(cache->store(key, kSpec, bytesOf("second"))));
  EXPECT_EQ(cache->lookup(key, kSpec), bytesOf("second"));

  // Other keys still miss.
  EXPECT_FALSE(cache
                   ->lookup(computeKernelCacheKey(kSpec, kPipeline, kToolchain,
                                                  "sm_100a"),
                            kSpec)
                   .has_value());
}

TEST(KernelCache, MissingDirectoryIsAMiss) {
  TempDir tmp;
  KernelCache cache(tmp.sub("does-not-exist"));
  EXPECT_FALSE(
      cache.lookup(computeKernelCacheKey("a", "b", "c", "d"), "a").has_value());
  // Lookups never create the directory.
  EXPECT_FALSE(llvm::sys::fs::exists(tmp.sub("does-not-exist")));
}

TEST(KernelCache, MalformedKeysAreRejected) {
  TempDir tmp;
  KernelCache cache(tmp.get().str().str());
  for (const char *key : {"", "../escape", "ABCDEF0123456789ABCDEF0123456789",
                          "0123456789abcdef0123456789abcde/"}) {
    EXPECT_FALSE(cache.lookup(key, kSpec).has_value()) << key;
    llvm::Error error = cache.store(key, kSpec, bytesOf("x"));
    ASSERT_TRUE(static_cast<bool>(error)) << key;
    EXPECT_NE(llvm::toString(std::move(error)).find("malformed"),
              std::string::npos);
  }
  EXPECT_TRUE(listFiles(tmp.get()).empty());
}

TEST(KernelCache, UnwritableDirectoryIsAnError) {
  TempDir tmp;
  // A regular file where a directory is needed: fails even as root, unlike a
  // permission bit.
  std::string file = tmp.sub("not-a-directory");
  {
    int fd;
    ASSERT_FALSE(llvm::sys::fs::openFileForWrite(file, fd));
    llvm::sys::fs::closeFile(fd);
  }
  std::string key = computeKernelCacheKey(kSpec, kPipeline, kToolchain, kChip);
  for (const std::string &dir : {file, file + "/below"}) {
    KernelCache cache(dir);
    llvm::Error error = cache.store(key, kSpec, bytesOf("payload"));
    ASSERT_TRUE(static_cast<bool>(error)) << dir;
    EXPECT_NE(llvm::toString(std::move(error)).find(dir), std::string::npos);
    EXPECT_FALSE(cache.lookup(key, kSpec).has_value());
  }
}

TEST(KernelCache, ConcurrentStoresLeaveOneCompletePayload) {
  TempDir tmp;
  KernelCache cache(tmp.sub("cache"));
  std::string key = computeKernelCacheKey(kSpec, kPipeline, kToolchain, kChip);

  // Large, distinct payloads so that a torn write would mix them.
  constexpr int kThreads = 8, kRounds = 20;
  std::vector<std::vector<char>> payloads;
  for (int t = 0; t < kThreads; ++t)
    payloads.emplace_back(256 * 1024 + t, static_cast<char>('A' + t));

  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        if (llvm::errorToBool(cache.store(key, kSpec, payloads[t])))
          ++failures[t];
        // Every read in the middle of the race sees a whole payload.
        if (std::optional<std::vector<char>> seen = cache.lookup(key, kSpec))
          if (llvm::find(payloads, *seen) == payloads.end())
            ++failures[t];
      }
    });
  for (std::thread &thread : threads)
    thread.join();

  EXPECT_EQ(failures, std::vector<int>(kThreads, 0));
  std::optional<std::vector<char>> final = cache.lookup(key, kSpec);
  ASSERT_TRUE(final.has_value());
  EXPECT_NE(llvm::find(payloads, *final), payloads.end());
  // No temporary file is left behind.
  EXPECT_EQ(listFiles(cache.getDirectory()),
            std::set<std::string>{key + ".cubin"});
}

/// Reads, rewrites or appends to a file's bytes.
std::vector<char> readFile(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  EXPECT_TRUE(static_cast<bool>(buffer));
  if (!buffer)
    return {};
  return std::vector<char>((*buffer)->getBufferStart(),
                           (*buffer)->getBufferEnd());
}

void writeFile(const std::string &path, const std::vector<char> &bytes) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  ASSERT_FALSE(ec) << ec.message();
  os.write(bytes.data(), bytes.size());
}

/// One way of damaging a stored entry and the words its report must carry.
struct Damage {
  const char *name;
  std::function<void(std::vector<char> &)> apply;
  const char *reported;
};

TEST(KernelCache, DamagedEntriesAreReportedRemovedAndMissed) {
  std::vector<char> image(4096);
  for (size_t i = 0; i < image.size(); ++i)
    image[i] = static_cast<char>(i * 131 + 7);
  const std::vector<Damage> damages = {
      {"truncated", [](std::vector<char> &f) { f.resize(f.size() - 100); },
       "the header says"},
      {"truncated into the header", [](std::vector<char> &f) { f.resize(20); },
       "shorter than the header"},
      {"emptied", [](std::vector<char> &f) { f.clear(); },
       "shorter than the header"},
      {"bit flip in the image",
       [](std::vector<char> &f) { f[f.size() - 1000] ^= 0x10; },
       "checksum mismatch"},
      {"bit flip in the length", [](std::vector<char> &f) { f[17] ^= 0x01; },
       "the header says"},
      {"garbage",
       [](std::vector<char> &f) { std::fill(f.begin(), f.end(), 'x'); },
       "bad magic"},
      {"old headerless image",
       [&](std::vector<char> &f) { f.assign(image.begin(), image.end()); },
       "bad magic"},
      {"other version", [](std::vector<char> &f) { f[8] = 1; },
       "entry format version 1, expected 2"},
  };
  for (const Damage &damage : damages) {
    TempDir tmp;
    std::vector<std::string> reports;
    KernelCache cache(tmp.sub("cache"), [&](llvm::StringRef message) {
      reports.push_back(message.str());
    });
    std::string key =
        computeKernelCacheKey(kSpec, kPipeline, kToolchain, kChip);
    ASSERT_FALSE(llvm::errorToBool(cache.store(key, kSpec, image)));
    std::string path = cache.getEntryPath(key);
    std::vector<char> bytes = readFile(path);
    damage.apply(bytes);
    writeFile(path, bytes);

    EXPECT_FALSE(cache.lookup(key, kSpec).has_value()) << damage.name;
    ASSERT_EQ(reports.size(), 1u) << damage.name;
    EXPECT_NE(reports[0].find(path), std::string::npos) << reports[0];
    EXPECT_NE(reports[0].find(damage.reported), std::string::npos)
        << damage.name << ": " << reports[0];
    EXPECT_FALSE(llvm::sys::fs::exists(path)) << damage.name;
    // A rebuild stores a good entry again.
    ASSERT_FALSE(llvm::errorToBool(cache.store(key, kSpec, image)));
    EXPECT_EQ(cache.lookup(key, kSpec), image) << damage.name;
    EXPECT_EQ(reports.size(), 1u) << damage.name;
  }
}

TEST(KernelCache, EntryOfAnotherSpecIsAMiss) {
  TempDir tmp;
  std::vector<std::string> reports;
  KernelCache cache(tmp.sub("cache"), [&](llvm::StringRef message) {
    reports.push_back(message.str());
  });
  std::string key = computeKernelCacheKey(kSpec, kPipeline, kToolchain, kChip);
  ASSERT_FALSE(
      llvm::errorToBool(cache.store(key, "another spec", bytesOf("x"))));
  EXPECT_FALSE(cache.lookup(key, kSpec).has_value());
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_NE(reports[0].find("holds spec 'another spec', not '" +
                            std::string(kSpec) + "'"),
            std::string::npos)
      << reports[0];
}

} // namespace
