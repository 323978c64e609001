//===- mla-aot.cpp - pre-build the GPU kernel cache -----------------------===//
//
// Compiling a kernel image takes seconds; a serving process should never pay
// that on its first request. mla-aot compiles every listed kernel spec
// (decode, cache_write, absorb_q, up_proj_out) into the on-disk kernel cache
// ahead of time (a hit costs a file read), and can
// print the keys, time warm lookups, or print the module the JIT compiles so
// that `mla-opt` can replay it.
//
//===----------------------------------------------------------------------===//

#include "mla/Contract/ChunkedPrefill.h"
#include "mla/Contract/KernelSpec.h"
#include "mla/Contract/Version.h"
#include "mla/GpuRuntime/KernelCache.h"
#include "mla/JIT/GpuJit.h"
#include "mla/JIT/PassOptions.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CachePruning.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

using namespace mla::gpu;
namespace cl = llvm::cl;

namespace {

cl::OptionCategory category("mla-aot options");

cl::opt<std::string> cacheDir(
    "cache-dir",
    cl::desc("Kernel cache directory (default: $MLA_KERNEL_CACHE_DIR, else "
             "$XDG_CACHE_HOME/mla, else ~/.cache/mla)"),
    cl::value_desc("dir"), cl::cat(category));
cl::list<std::string>
    specs("spec",
          cl::desc("A kernel spec, e.g. \"decode chip=sm_90a N=128 Sq=1 L=512 "
                   "R=64 page=64 dtype=bf16 causal=0\", "
                   "\"cache_write chip=sm_90a L=512 R=64 page=64 dtype=bf16 "
                   "format=fp8_ds_mla\" or \"absorb_q chip=sm_90a N=128 P=128 "
                   "L=512 R=64 dtype=bf16\" (repeatable)"),
          cl::value_desc("text"), cl::cat(category));
cl::list<std::string>
    specFiles("spec-file",
              cl::desc("A file of kernel specs, one per line; '#' starts a "
                       "comment (repeatable)"),
              cl::value_desc("file"), cl::cat(category));
cl::list<std::string>
    shapes("shapes",
           cl::desc("Named spec sets: 'deepseek' is sm_90a, bf16, page 64, "
                    "L=512 R=64: decode for N in {16,32,64,128} x (Sq=1, "
                    "Sq=2 causal), decode over each fp8 cache format for N "
                    "in {16,128} x (Sq in {1,2,4}, Sq=2 causal), cache_write "
                    "into every row format (fp8_e4m3: any kv_scale), "
                    "absorb_q (P=128) and "
                    "up_proj_out (V=128) for N in {16,128}, then prefill's "
                    "gather_cache from every row format into bf16, "
                    "up_proj_kv (P=V=128), merge_states (H=128) and mha "
                    "(D=192, V=128, causal and not) for N in {16,128}, "
                    "and mha with D=V in {64,128} for N=16"),
           cl::value_desc("name"), cl::cat(category));
cl::opt<bool> printKey("print-key",
                       cl::desc("Print each spec's key and entry path; "
                                "compile nothing"),
                       cl::cat(category));
cl::opt<bool>
    lookupOnly("lookup-only",
               cl::desc("Look each spec up and time the lookup; compile "
                        "nothing and fail when an entry is missing"),
               cl::cat(category));
cl::opt<unsigned>
    repeat("repeat",
           cl::desc("With --lookup-only: look each spec up this many times "
                    "and also report the fastest"),
           cl::init(1), cl::cat(category));
cl::opt<bool> list("list",
                   cl::desc("List the cache's entries (key, size, time since "
                            "last use, spec), least recently used first"),
                   cl::cat(category));
cl::opt<std::string>
    prunePolicy("prune",
                cl::desc("Remove least recently used entries until the cache "
                         "meets an LLVM cache pruning policy, e.g. "
                         "\"cache_size_bytes=512m\" or "
                         "\"prune_after=720h:cache_size_files=100\""),
                cl::value_desc("policy"), cl::cat(category));
cl::opt<bool> emitMlir("emit-mlir",
                       cl::desc("Print the mla module compiled for each spec; "
                                "compile nothing"),
                       cl::cat(category));

int fail(const llvm::Twine &message) {
  llvm::errs() << "mla-aot: error: " << message << "\n";
  return 1;
}

/// The benchmark shapes of DeepSeek-V3 on Hopper: decode, the cache write
/// before it and the projections around it.
std::vector<KernelSpec> getDeepSeekSpecs() {
  std::vector<KernelSpec> result;
  for (int64_t heads : {16, 32, 64, 128}) {
    for (bool mtp : {false, true}) {
      DecodeKernelSpec spec;
      spec.chip = Chip::SM90a;
      spec.shape.numHeads = heads;
      spec.shape.queryRows = mtp ? 2 : 1;
      spec.shape.causal = mtp;
      spec.shape.latentDim = 512;
      spec.shape.ropeDim = 64;
      spec.shape.pageSize = 64;
      spec.shape.elem = ElemType::BF16;
      spec.tiling = chooseDecodeTiling(spec.chip, spec.shape);
      result.push_back(spec);
    }
  }
  // Decode over fp8 caches: what mla-bench --kv-format and the GPU tests
  // run, Sq in {1, 2, 4} plus Sq=2 causal.
  for (CacheFormat format :
       {CacheFormat::FP8E4M3, CacheFormat::FP8E4M3Token, CacheFormat::FP8DsMla})
    for (int64_t heads : {16, 128})
      for (auto [rows, causal] : {std::pair<int64_t, bool>{1, false},
                                  {2, false},
                                  {4, false},
                                  {2, true}}) {
        DecodeKernelSpec spec;
        spec.chip = Chip::SM90a;
        spec.shape.numHeads = heads;
        spec.shape.queryRows = rows;
        spec.shape.causal = causal;
        spec.shape.kvFormat = format;
        spec.tiling = chooseDecodeTiling(spec.chip, spec.shape);
        result.push_back(spec);
      }
  for (CacheFormat format :
       {CacheFormat::BF16, CacheFormat::F16, CacheFormat::F32,
        CacheFormat::FP8E4M3, CacheFormat::FP8E4M3Token,
        CacheFormat::FP8DsMla}) {
    CacheWriteKernelSpec spec;
    spec.chip = Chip::SM90a;
    spec.shape.latentDim = 512;
    spec.shape.ropeDim = 64;
    spec.shape.input = ActType::BF16;
    spec.shape.format = format; // fp8_e4m3's scale is a launch argument
    spec.pageSize = 64;
    result.push_back(spec);
  }
  for (int64_t heads : {16, 128}) {
    ProjectionKernelSpec absorb;
    absorb.kind = ProjectionKind::AbsorbQ;
    absorb.chip = Chip::SM90a;
    absorb.shape = {heads, /*inDim=P*/ 128, /*outDim=L*/ 512, /*ropeDim=*/64,
                    ActType::BF16};
    result.push_back(absorb);
    ProjectionKernelSpec up;
    up.kind = ProjectionKind::UpProjOut;
    up.chip = Chip::SM90a;
    up.shape = {heads, /*inDim=L*/ 512, /*outDim=V*/ 128, /*ropeDim=*/0,
                ActType::BF16};
    result.push_back(up);
  }
  // Chunked prefill: the kernels mlaGpuPrefill runs (getChunkedPrefillSpecs)
  // on sm_90a in bf16: the gather from every row format, then for N in
  // {16, 128} the up-projection, the LSE merge of V = 128 outputs and the
  // attention (non-causal to the context, causal among the new tokens).
  auto prefillSpecs = [](int64_t heads, CacheFormat format) {
    ChunkedPrefillShape shape; // DeepSeek-V3's widths, bf16
    shape.numHeads = heads;
    shape.scale = static_cast<float>(1.0 / std::sqrt(192.0));
    shape.format = format;
    shape.pageSize = 64;
    return getChunkedPrefillSpecs(Chip::SM90a, shape);
  };
  for (CacheFormat format :
       {CacheFormat::BF16, CacheFormat::F16, CacheFormat::F32,
        CacheFormat::FP8E4M3, CacheFormat::FP8E4M3Token, CacheFormat::FP8DsMla})
    result.push_back(prefillSpecs(16, format).gather);
  for (int64_t heads : {16, 128}) {
    ChunkedPrefillSpecs set = prefillSpecs(heads, CacheFormat::BF16);
    result.push_back(set.upProjKv);
    result.push_back(set.merge);
    result.push_back(set.contextMha);
    result.push_back(set.causalMha);
  }
  // Equal qk and v widths, the generality check of the tensor-core mha.
  for (int64_t width : {64, 128})
    for (bool causal : {false, true}) {
      MhaKernelSpec mha;
      mha.shape = {16,     width,
                   width,  ActType::BF16,
                   causal, static_cast<float>(1.0 / std::sqrt(double(width)))};
      result.push_back(mha);
    }
  return result;
}

/// Parses one spec, naming `where` it came from in the error.
bool addSpec(llvm::StringRef text, const llvm::Twine &where,
             std::vector<KernelSpec> &out) {
  KernelSpec spec;
  std::string error;
  if (!parseKernelSpec(text.str(), spec, error)) {
    fail(where + ": invalid kernel spec '" + text + "': " + error);
    return false;
  }
  out.push_back(spec);
  return true;
}

/// Every spec named on the command line, in order, or std::nullopt after
/// reporting the first malformed one (before anything is compiled).
std::optional<std::vector<KernelSpec>> collectSpecs() {
  std::vector<KernelSpec> result;
  for (const std::string &name : shapes) {
    if (name != "deepseek") {
      fail("unknown --shapes '" + name + "' (known: deepseek)");
      return std::nullopt;
    }
    std::vector<KernelSpec> set = getDeepSeekSpecs();
    result.insert(result.end(), set.begin(), set.end());
  }
  for (const auto &[i, text] : llvm::enumerate(specs))
    if (!addSpec(text, "--spec #" + llvm::Twine(i + 1), result))
      return std::nullopt;
  for (const std::string &file : specFiles) {
    llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
        llvm::MemoryBuffer::getFile(file);
    if (!buffer) {
      fail("cannot read --spec-file '" + file +
           "': " + buffer.getError().message());
      return std::nullopt;
    }
    llvm::SmallVector<llvm::StringRef> lines;
    (*buffer)->getBuffer().split(lines, '\n');
    for (const auto &[i, line] : llvm::enumerate(lines)) {
      llvm::StringRef text = line.split('#').first.trim();
      if (!text.empty() &&
          !addSpec(text, file + ":" + llvm::Twine(i + 1), result))
        return std::nullopt;
    }
  }
  return result;
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

/// "42s", "7m", "5h" or "3d": how long ago `time` was.
std::string formatAge(llvm::sys::TimePoint<> time) {
  auto seconds = std::chrono::duration_cast<std::chrono::seconds>(
                     std::chrono::system_clock::now() - time)
                     .count();
  seconds = std::max<int64_t>(seconds, 0);
  if (seconds < 120)
    return std::to_string(seconds) + "s";
  if (seconds < 2 * 3600)
    return std::to_string(seconds / 60) + "m";
  if (seconds < 2 * 86400)
    return std::to_string(seconds / 3600) + "h";
  return std::to_string(seconds / 86400) + "d";
}

int listEntries(const KernelCache &cache) {
  llvm::Expected<std::vector<KernelCacheEntry>> entries = cache.listEntries();
  if (!entries)
    return fail(llvm::toString(entries.takeError()));
  uint64_t total = 0;
  for (const KernelCacheEntry &entry : *entries) {
    llvm::outs() << entry.key << "  " << llvm::format("%9llu", entry.size)
                 << " bytes  "
                 << llvm::format("%4s", formatAge(entry.lastUsed).c_str())
                 << "  "
                 << (entry.specText.empty() ? "(no readable entry header)"
                                            : entry.specText)
                 << "\n";
    total += entry.size;
  }
  llvm::outs() << entries->size() << " entries, " << total << " bytes in "
               << cache.getDirectory() << "\n";
  return 0;
}

int pruneEntries(const KernelCache &cache) {
  llvm::Expected<llvm::CachePruningPolicy> policy =
      llvm::parseCachePruningPolicy(prunePolicy);
  if (!policy)
    return fail("invalid --prune policy '" + prunePolicy +
                "': " + llvm::toString(policy.takeError()));
  llvm::Expected<KernelCachePruneResult> pruned = cache.prune(*policy);
  if (!pruned)
    return fail(llvm::toString(pruned.takeError()));
  llvm::outs() << "mla-aot: removed " << pruned->removedEntries << " entries ("
               << pruned->removedBytes << " bytes), kept "
               << pruned->keptEntries << " (" << pruned->keptBytes
               << " bytes) in " << cache.getDirectory() << "\n";
  return 0;
}

/// What became of one spec.
enum class Outcome { Hit, Compiled, Failed };

/// Times what a serving process pays per image on a warm cache: the key and
/// one file read. The first lookup of the process is the one a request waits
/// for; repeats show the cost without first-touch effects.
Outcome lookUp(const KernelSpec &spec, const KernelCache &cache) {
  std::string text = toString(spec);
  std::optional<std::vector<char>> image;
  std::string key;
  double first = 0, best = 0;
  for (unsigned i = 0; i < std::max(1u, unsigned(repeat)); ++i) {
    auto start = std::chrono::steady_clock::now();
    key = cacheKeyFor(spec);
    image = cache.lookup(key, text);
    double micros = secondsSince(start) * 1e6;
    best = i == 0 ? micros : std::min(best, micros);
    if (i == 0)
      first = micros;
  }
  llvm::outs() << key << (image ? "  hit " : "  miss") << "  lookup "
               << llvm::format("%.1f", first) << " us  ";
  if (repeat > 1)
    llvm::outs() << "(best " << llvm::format("%.1f", best) << " us of "
                 << repeat << ")  ";
  if (!image) {
    llvm::outs() << text << "\n";
    llvm::errs() << "mla-aot: error: '" << text << "' is not in "
                 << cache.getDirectory() << "\n";
    return Outcome::Failed;
  }
  llvm::outs() << image->size() << " bytes  " << text << "\n";
  return Outcome::Hit;
}

/// Makes sure the cache holds `spec`'s image, compiling it on a miss.
Outcome fill(const KernelSpec &spec, const KernelCache &cache) {
  std::string text = toString(spec);
  std::string key = cacheKeyFor(spec);
  auto start = std::chrono::steady_clock::now();
  bool wasHit = false;
  llvm::Expected<std::vector<char>> image =
      getOrCompileKernels(spec, cache, &wasHit);
  double seconds = secondsSince(start);
  if (!image) {
    llvm::outs() << key << "  fail  " << text << "\n";
    std::string message = llvm::toString(image.takeError());
    llvm::errs() << "mla-aot: error: " << message
                 << (llvm::StringRef(message).ends_with("\n") ? "" : "\n");
    return Outcome::Failed;
  }
  if (wasHit)
    llvm::outs() << key << "  hit   lookup "
                 << llvm::format("%.1f", seconds * 1e6) << " us  ";
  else
    llvm::outs() << key << "  miss  compile " << llvm::format("%.2f", seconds)
                 << " s  ";
  llvm::outs() << image->size() << " bytes  " << text << "\n";
  return wasHit ? Outcome::Hit : Outcome::Compiled;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  mla::registerJitPassOptions();
  cl::OptionCategory passCategory(
      "MLIR pass-manager options (of every compile)");
  mla::addJitPassOptionsToCategory(passCategory);
  cl::AddExtraVersionPrinter(mla::printVersion);
  cl::HideUnrelatedOptions({&category, &passCategory});
  cl::ParseCommandLineOptions(argc, argv,
                              "mla-aot: compile GPU kernel specs into the "
                              "kernel cache ahead of time\n");

  bool prune = prunePolicy.getNumOccurrences() != 0;
  if (printKey + lookupOnly + emitMlir + list + prune > 1)
    return fail("--print-key, --lookup-only, --emit-mlir, --list and --prune "
                "exclude each other");
  std::optional<std::vector<KernelSpec>> all = collectSpecs();
  if (!all)
    return 1;
  bool maintenance = list || prune;
  if (maintenance && !all->empty())
    return fail("--list and --prune take no kernel specs");
  if (!maintenance && all->empty())
    return fail("no kernel specs: give --spec, --spec-file or --shapes");

  if (emitMlir) {
    // One module per spec, in mla-opt's --split-input-file form.
    for (const auto &[i, spec] : llvm::enumerate(*all))
      llvm::outs() << (i ? "// -----\n" : "") << getKernelSource(spec);
    return 0;
  }

  std::optional<KernelCache> cache;
  if (!cacheDir.empty()) {
    cache.emplace(cacheDir);
  } else {
    llvm::Expected<KernelCache> opened = KernelCache::openDefault();
    if (!opened)
      return fail("no kernel cache directory: " +
                  llvm::toString(opened.takeError()));
    cache.emplace(std::move(*opened));
  }

  if (list)
    return listEntries(*cache);
  if (prune)
    return pruneEntries(*cache);

  if (printKey) {
    for (const KernelSpec &spec : *all) {
      std::string key = cacheKeyFor(spec);
      llvm::outs() << key << "  " << cache->getEntryPath(key) << "  "
                   << toString(spec) << "\n";
    }
    return 0;
  }

  int counts[3] = {0, 0, 0};
  for (const KernelSpec &spec : *all)
    ++counts[static_cast<int>(lookupOnly ? lookUp(spec, *cache)
                                         : fill(spec, *cache))];
  llvm::outs().flush();
  llvm::errs() << "mla-aot: " << all->size()
               << " specs: " << counts[static_cast<int>(Outcome::Hit)]
               << " cached, " << counts[static_cast<int>(Outcome::Compiled)]
               << " compiled, " << counts[static_cast<int>(Outcome::Failed)]
               << " failed (" << cache->getDirectory() << ")\n";
  return counts[static_cast<int>(Outcome::Failed)] ? 1 : 0;
}
