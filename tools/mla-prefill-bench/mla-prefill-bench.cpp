//===- mla-prefill-bench.cpp - time and check MLA prefill on the GPU ------===//
//
// Runs the cached chunked-prefill kernels (PrefillLaunch.h) without MLIR, so
// it is built here and carried to a GPU machine that has only a driver (see
// scripts/bench-prefill.sh, which runs it beside its PyTorch peers).
//
//   mla-prefill-bench --cache-dir DIR --mha          mla_mha, the 5
//   shapes mla-prefill-bench --cache-dir DIR --up-proj-kv   mla_up_proj_kv, T
//   4096/16384 mla-prefill-bench --cache-dir DIR --e2e          one layer's
//   chunked prefill mla-prefill-bench --cache-dir DIR --check        vs a
//   float64 reference mla-prefill-bench --list-specs [--chip sm_90a]   the
//   specs mla-aot must build
//
// Every timing is the median of --iters CUDA-event intervals after --warmup
// untimed runs, L2 not flushed (the operands are far larger than L2, as in
// the SDPA peer), one JSON line per result.
//
//===----------------------------------------------------------------------===//

#include "PrefillBench.h"
#include "mla/Contract/Version.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

using namespace mla;
using namespace mla::bench;
using namespace mla::gpu;
namespace cl = llvm::cl;

static cl::OptionCategory benchCategory("mla-prefill-bench options");

static cl::opt<std::string> cacheDir("cache-dir", cl::cat(benchCategory),
                                     cl::desc("Kernel cache directory"),
                                     cl::value_desc("dir"));
static cl::opt<bool> mhaMode("mha", cl::cat(benchCategory),
                             cl::desc("Time mla_mha: N=128, bf16, (b, s) = "
                                      "(1, 4096), (1, 8192), (1, 16384), "
                                      "(4, 2048) causal and (2, 8192) not"));
static cl::opt<bool> upProjMode("up-proj-kv", cl::cat(benchCategory),
                                cl::desc("Time mla_up_proj_kv: T in {4096, "
                                         "16384}, N=128, L=512, P=V=128"));
static cl::opt<bool>
    e2eMode("e2e", cl::cat(benchCategory),
            cl::desc("Time one DeepSeek-V3 layer's chunked prefill, split by "
                     "kernel kind, over bf16 and fp8_ds_mla caches"));
static cl::opt<int64_t> e2eRequests("e2e-requests", cl::cat(benchCategory),
                                    cl::init(4), cl::desc("--e2e: requests"));
static cl::opt<int64_t> e2eNew("e2e-new-tokens", cl::cat(benchCategory),
                               cl::init(2048),
                               cl::desc("--e2e: new tokens per request"));
static cl::opt<int64_t>
    e2eContext("e2e-context", cl::cat(benchCategory), cl::init(16384),
               cl::desc("--e2e: cached tokens per request"));
static cl::opt<int64_t> workspaceRows(
    "workspace-rows", cl::cat(benchCategory), cl::init(0),
    cl::desc("--e2e: context rows per chunk (default: vLLM's, "
             "min(max(8 * max_model_len, 4 * requests * page), 64K))"));
static cl::opt<bool> checkMode("check", cl::cat(benchCategory),
                               cl::desc("Compare mha and up_proj_kv with a "
                                        "float64 host reference"));
static cl::opt<bool> listSpecs("list-specs", cl::cat(benchCategory),
                               cl::desc("Print the kernel specs every mode "
                                        "uses, and exit"));
static cl::opt<std::string> chipOpt("chip", cl::cat(benchCategory),
                                    cl::init(""),
                                    cl::desc("sm_90a or sm_100a (default: "
                                             "device 0's)"));
static cl::opt<int> itersOpt("iters", cl::cat(benchCategory), cl::init(10),
                             cl::desc("Timed iterations"));
static cl::opt<int> warmupOpt("warmup", cl::cat(benchCategory), cl::init(3),
                              cl::desc("Untimed iterations first"));

namespace {

llvm::Expected<Chip> targetChip() {
  if (!chipOpt.empty()) {
    Chip chip;
    if (!parseChip(chipOpt, chip))
      return llvm::createStringError("unknown --chip '" + chipOpt + "'");
    return chip;
  }
  return CudaRuntime::getChip();
}

llvm::Expected<bool> runMain() {
  if (listSpecs) {
    llvm::Expected<Chip> chip = targetChip();
    if (!chip)
      return chip.takeError();
    for (const KernelSpec &spec : allSpecs(*chip))
      llvm::outs() << toString(spec) << "\n";
    return true;
  }
  if (!mhaMode && !upProjMode && !e2eMode && !checkMode)
    return llvm::createStringError(
        "nothing to do: give --mha, --up-proj-kv, --e2e, --check or "
        "--list-specs");
  if (cacheDir.empty())
    return llvm::createStringError("--cache-dir is required");
  if (itersOpt < 1 || warmupOpt < 0)
    return llvm::createStringError("--iters must be >= 1 and --warmup >= 0");
  if (e2eRequests < 1 || e2eNew < 1 || e2eContext < 0 || workspaceRows < 0)
    return llvm::createStringError(
        "--e2e-requests and --e2e-new-tokens must be positive, --e2e-context "
        "and --workspace-rows not negative");
  llvm::Expected<const CudaDriver &> driver = CudaRuntime::get();
  if (!driver)
    return driver.takeError();
  if (llvm::Error error = CudaRuntime::ensureContext())
    return std::move(error);
  llvm::Expected<Chip> chip = targetChip();
  if (!chip)
    return chip.takeError();
  KernelCache cache(cacheDir);
  BenchEnv env{*driver, cache, *chip, itersOpt, warmupOpt};
  bool passed = true;
  if (checkMode) {
    llvm::Expected<bool> ok = runCheck(env);
    if (!ok)
      return ok.takeError();
    passed = *ok;
    llvm::outs() << (passed ? "PASS" : "FAIL") << "\n";
  }
  if (mhaMode)
    if (llvm::Error error = runMhaTiming(env))
      return std::move(error);
  if (upProjMode)
    if (llvm::Error error = runUpProjKvTiming(env))
      return std::move(error);
  if (e2eMode)
    if (llvm::Error error =
            runE2ETiming(env, e2eRequests, e2eNew, e2eContext, workspaceRows))
      return std::move(error);
  return passed;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::AddExtraVersionPrinter(mla::printVersion);
  cl::HideUnrelatedOptions(benchCategory);
  cl::ParseCommandLineOptions(argc, argv, "mla GPU prefill benchmark\n");
  llvm::Expected<bool> passed = runMain();
  if (!passed) {
    llvm::errs() << "mla-prefill-bench: error: "
                 << llvm::toString(passed.takeError()) << "\n";
    return 1;
  }
  return *passed ? 0 : 1;
}
