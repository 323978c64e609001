//===- mla-run.cpp - run a function of mla ops on the CPU -----------------===//
//
//   mla-run file.mlir [--entry=name] [--input=a.npy ...] [--random-seed=N]
//           [--seq-len=N] [--output-dir=dir] [--save-inputs] [--repeat=N]
//           [--check [--check-tol=X]] [--workspace-rows=N]
//           [--split-policy=P] [--num-sms=N] [--decode-threshold=N]
//
// JIT-compiles a function through `mla-to-llvm-cpu` (exactly what the Python
// package runs), calls it on arguments read from .npy files or drawn at
// random (valid tables derived from the mla ops that use them), writes every
// result as <entry>_out<k>.npy and prints compile and run times: it is the
// benchmark driver as well as a debugging tool.
//
// --check compares the results with the numpy reference
// (test/python/mla_reference.py) through check.py. It supports functions
// whose body is a single mla op on the function's arguments (decode,
// cache_write, prefill, merge_states, the projections, ...); mla-run saves
// the inputs next to the outputs so the reference sees the same values.
//
//===----------------------------------------------------------------------===//

#include "HostArray.h"
#include "InputChecks.h"
#include "RandomInputs.h"
#include "mla/Contract/Version.h"
#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mla/JIT/CpuExecutor.h"
#include "mla/JIT/KernelBuilder.h"
#include "mla/JIT/PassOptions.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/WithColor.h"
#include <chrono>
#include <cmath>

using namespace mla;
using namespace mlir;
using llvm::Twine;
namespace cl = llvm::cl;

/// mla-run's own options: the only ones --help lists (libLLVM and libMLIR
/// register hundreds more in every process that loads them).
static cl::OptionCategory runCategory("mla-run options");

static cl::opt<std::string> inputFilename(cl::Positional,
                                          cl::desc("<input .mlir file>"),
                                          cl::Required, cl::cat(runCategory));
static cl::opt<std::string>
    entryName("entry",
              cl::desc("Function to run (default: the module's only public "
                       "function)"),
              cl::cat(runCategory));
static cl::list<std::string>
    inputFiles("input",
               cl::desc("A .npy file per argument, in order (default: "
                        "random arguments)"),
               cl::cat(runCategory));
static cl::opt<uint64_t> randomSeed("random-seed",
                                    cl::desc("Seed of the random arguments"),
                                    cl::init(0), cl::cat(runCategory));
static cl::opt<int64_t>
    seqLen("seq-len",
           cl::desc("Give every request this seq_len instead of a random "
                    "one (for benchmarks)"),
           cl::init(-1), cl::cat(runCategory));
static cl::opt<std::string> outputDir("output-dir",
                                      cl::desc("Where .npy files are written"),
                                      cl::init("."), cl::cat(runCategory));
static cl::opt<bool>
    saveInputs("save-inputs",
               cl::desc("Also write the arguments as <entry>_in<k>.npy"),
               cl::cat(runCategory));
static cl::opt<unsigned>
    repeat("repeat", cl::desc("Run this many times and report the timing"),
           cl::init(1), cl::cat(runCategory));
static cl::opt<bool>
    check("check",
          cl::desc("Compare the results with the numpy reference "
                   "(single-op functions; implies --save-inputs)"),
          cl::cat(runCategory));
static cl::opt<double>
    checkTol("check-tol",
             cl::desc("With --check, fail if a result's max relative error "
                      "exceeds this (default: report only)"),
             cl::init(0.0), cl::cat(runCategory));
static cl::opt<int64_t> workspaceRows(
    "workspace-rows",
    cl::desc("mla-to-llvm-cpu's workspace-rows option (0: the default)"),
    cl::init(0), cl::cat(runCategory));

static cl::opt<std::string> splitPolicy(
    "split-policy",
    cl::desc("Split-KV policy: heuristic, balanced or batch-invariant "
             "(default: the CPU's, batch-invariant)"),
    cl::init(""), cl::cat(runCategory));
static cl::opt<int64_t>
    numSms("num-sms",
           cl::desc("SMs the split planner spreads work over (0: 132)"),
           cl::init(0), cl::cat(runCategory));
static cl::opt<int64_t> decodeThreshold(
    "decode-threshold",
    cl::desc("mla.attention requests with q_len <= this take the decode path"),
    cl::init(1), cl::cat(runCategory));

static llvm::Error error(const Twine &message) {
  return llvm::createStringError(message);
}

static std::string typeString(Type type) {
  std::string text;
  llvm::raw_string_ostream(text) << type;
  return text;
}

static double millisecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - start)
      .count();
}

static std::string outputPath(StringRef kind, size_t index) {
  llvm::SmallString<128> path(outputDir);
  llvm::sys::path::append(path, entryName + "_" + kind + Twine(index) + ".npy");
  return std::string(path);
}

static llvm::Expected<func::FuncOp> findEntry(ModuleOp module) {
  if (!entryName.empty()) {
    auto func = module.lookupSymbol<func::FuncOp>(entryName);
    if (!func || func.isExternal())
      return error("the module has no function @" + entryName + " with a body");
    return func;
  }
  SmallVector<func::FuncOp> candidates;
  for (auto func : module.getOps<func::FuncOp>())
    if (func.isPublic() && !func.isExternal())
      candidates.push_back(func);
  if (candidates.size() != 1)
    return error("the module has " + Twine(candidates.size()) +
                 " public functions; choose one with --entry");
  entryName = candidates.front().getSymName().str();
  return candidates.front();
}

/// The function's argument types as host specs.
static llvm::Expected<SmallVector<TensorSpec>> getSpecs(TypeRange types,
                                                        StringRef what) {
  SmallVector<TensorSpec> specs;
  for (auto [i, type] : llvm::enumerate(types)) {
    auto shaped = dyn_cast<ShapedType>(type);
    std::optional<DType> dtype = shaped && shaped.hasRank()
                                     ? getDTypeOf(shaped.getElementType())
                                     : std::nullopt;
    if (!dtype)
      return error(what + " " + Twine(i) + " has type " + typeString(type) +
                   "; mla-run passes ranked f32, f16, bf16, i32 and i8 "
                   "tensors and memrefs");
    specs.push_back({*dtype, SmallVector<int64_t, 4>(shaped.getShape())});
  }
  return specs;
}

/// What check.py needs to evaluate the reference of a single-op function:
/// the op, its attributes, and the files of its operands and results. The
/// op's operands are arguments, or tensor views of memref arguments whose
/// results the function materializes back into them (the in-place form the
/// runtime's kernels use).
static llvm::Expected<llvm::json::Object> describeForCheck(func::FuncOp func) {
  auto fail = [&](const Twine &why) {
    return error("--check needs a function whose body is one mla op on its "
                 "arguments; @" +
                 entryName + " " + why);
  };
  Operation *mlaOp = nullptr;
  DenseMap<Value, unsigned> materializedInto;
  auto argOf = [&](Value v) -> std::optional<unsigned> {
    if (auto view = v.getDefiningOp<bufferization::ToTensorOp>())
      v = view.getBuffer();
    if (auto arg = dyn_cast<BlockArgument>(v))
      return arg.getArgNumber();
    return std::nullopt;
  };
  for (Operation &op : func.getBody().front().without_terminator()) {
    if (isa<bufferization::ToTensorOp>(op))
      continue;
    if (auto m = dyn_cast<bufferization::MaterializeInDestinationOp>(op)) {
      std::optional<unsigned> dest = argOf(m.getDest());
      if (!dest)
        return fail("materializes into a value that is not an argument");
      materializedInto[m.getSource()] = *dest;
      continue;
    }
    if (mlaOp || !isa<MLADialect>(op.getDialect()))
      return fail("also has '" + op.getName().getStringRef() + "'");
    mlaOp = &op;
  }
  if (!mlaOp)
    return fail("has none");

  llvm::json::Array operands;
  for (Value v : mlaOp->getOperands()) {
    std::optional<unsigned> arg = argOf(v);
    if (!arg)
      return fail("computes an operand of the op");
    operands.push_back(outputPath("in", *arg));
  }
  auto returnOp = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  llvm::json::Array results;
  for (Value r : mlaOp->getResults()) {
    auto use = llvm::find(returnOp.getOperands(), r);
    if (use != returnOp.getOperands().end())
      results.push_back(
          outputPath("out", use - returnOp.getOperands().begin()));
    else if (auto it = materializedInto.find(r); it != materializedInto.end())
      results.push_back(outputPath("arg", it->second));
    else
      results.push_back(nullptr);
  }

  llvm::json::Object attrs;
  for (NamedAttribute attr : mlaOp->getAttrs()) {
    Attribute value = attr.getValue();
    if (auto layout = dyn_cast<CacheLayoutAttr>(value)) {
      llvm::json::Object obj{
          {"format", stringifyRowFormat(layout.getFormat())}};
      if (layout.getScale())
        obj["scale"] = layout.getScale().getValueAsDouble();
      attrs[attr.getName().strref()] = std::move(obj);
    } else if (auto f = dyn_cast<FloatAttr>(value)) {
      attrs[attr.getName().strref()] = f.getValueAsDouble();
    } else if (auto i = dyn_cast<IntegerAttr>(value)) {
      attrs[attr.getName().strref()] = i.getInt();
    } else if (isa<UnitAttr>(value)) {
      attrs[attr.getName().strref()] = true;
    }
  }
  return llvm::json::Object{
      {"op", mlaOp->getName().stripDialect()},
      {"attributes", std::move(attrs)},
      {"operands", std::move(operands)},
      {"results", std::move(results)},
  };
}

static llvm::Error runCheck(llvm::json::Object spec) {
  llvm::SmallString<128> specPath(outputDir);
  llvm::sys::path::append(specPath, entryName + "_check.json");
  std::error_code ec;
  llvm::raw_fd_ostream os(specPath, ec);
  if (ec)
    return error("cannot write " + specPath + ": " + ec.message());
  os << llvm::json::Value(std::move(spec)) << "\n";
  os.close();

  std::string tol = std::to_string(checkTol.getValue());
  SmallVector<StringRef> args{MLA_PYTHON, MLA_CHECK_SCRIPT, specPath};
  if (checkTol > 0) {
    args.push_back("--tol");
    args.push_back(tol);
  }
  llvm::outs().flush();
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(MLA_PYTHON, args, std::nullopt, {}, 0, 0,
                                     &message);
  if (rc < 0)
    return error("cannot run " + Twine(MLA_PYTHON) + " " + MLA_CHECK_SCRIPT +
                 ": " + message);
  if (rc != 0)
    return error("the check failed (check.py exited with " + Twine(rc) + ")");
  return llvm::Error::success();
}

/// "min -1.2 max 3.4 mean 0.01" over finite values, plus how many are not
/// finite (-inf LSEs of empty rows, or NaNs that leaked).
static std::string summarize(const HostArray &a) {
  double lo = INFINITY, hi = -INFINITY, sum = 0.0;
  int64_t finite = 0;
  for (int64_t i = 0; i < a.getNumElements(); ++i) {
    double v = a.get(i);
    if (!std::isfinite(v))
      continue;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
    ++finite;
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  if (finite)
    os << llvm::format("min %.6g max %.6g mean %.6g", lo, hi, sum / finite);
  os << " nonfinite " << a.getNumElements() - finite;
  return text;
}

/// FLOPs and bytes of the function's decode, if it has exactly one whose
/// seq_lens are an argument, counted as FlashMLA's benchmark does (primer
/// section 9): FLOPs = 2 * s_q * sum(seq_lens) * N * (D + L), bytes = the
/// cache rows read plus q and out.
static std::optional<std::pair<double, double>>
getDecodeWork(func::FuncOp func, llvm::ArrayRef<HostArray> inputs) {
  SmallVector<DecodeOp> decodes(func.getOps<DecodeOp>());
  if (decodes.size() != 1)
    return std::nullopt;
  DecodeOp op = decodes.front();
  auto lens = dyn_cast<BlockArgument>(op.getSeqLens());
  if (!lens || lens.getOwner()->getParentOp() != func)
    return std::nullopt;
  const HostArray &seqLens = inputs[lens.getArgNumber()];
  double tokens = 0;
  for (int64_t b = 0; b < seqLens.getNumElements(); ++b)
    tokens += seqLens.get(b);
  auto q = cast<RankedTensorType>(op.getQ().getType());
  auto cache = cast<RankedTensorType>(op.getCache().getType());
  double batch = q.getDimSize(0), sq = q.getDimSize(1), heads = q.getDimSize(2);
  double rowDim = q.getDimSize(3);
  double latent = cast<RankedTensorType>(op.getOut().getType()).getDimSize(3);
  double actBytes = q.getElementTypeBitWidth() / 8;
  double rowBytes = cache.getDimSize(2) * (cache.getElementTypeBitWidth() / 8);
  double flops = 2 * sq * tokens * heads * (rowDim + latent);
  double bytes =
      tokens * rowBytes + batch * sq * heads * (rowDim + latent) * actBytes;
  return std::pair(flops, bytes);
}

/// Writes `array` to `path` and prints a line describing it.
static llvm::Error writeResult(const HostArray &array, StringRef path) {
  if (llvm::Error err =
          writeNpy(path, array.getDType(), array.getShape(), array.getData()))
    return err;
  llvm::outs() << "  " << llvm::sys::path::stem(path) << ": "
               << getDTypeIRName(array.getDType()) << " "
               << formatShape(array.getShape()) << " " << summarize(array)
               << " -> " << path << "\n";
  return llvm::Error::success();
}

static llvm::Error runMain() {
  CpuExecutor executor;
  MLIRContext &context = executor.getContext();
  // Read the file first so that a missing or unreadable one is reported
  // once, as such, and not also as a parse failure.
  std::string openError;
  std::unique_ptr<llvm::MemoryBuffer> input =
      openInputFile(inputFilename, &openError);
  if (!input)
    return error(openError);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return error("cannot parse " + inputFilename);
  llvm::Expected<func::FuncOp> func = findEntry(*module);
  if (!func)
    return func.takeError();
  auto argSpecs = getSpecs(func->getArgumentTypes(), "argument");
  if (!argSpecs)
    return argSpecs.takeError();
  if (std::error_code ec = llvm::sys::fs::create_directories(outputDir))
    return error("cannot create " + outputDir + ": " + ec.message());

  std::optional<llvm::json::Object> checkSpec;
  if (check) {
    auto spec = describeForCheck(*func);
    if (!spec)
      return spec.takeError();
    checkSpec = std::move(*spec);
  }

  std::vector<HostArray> inputs;
  std::vector<std::string> inputNames;
  if (inputFiles.empty()) {
    RandomInputOptions options;
    options.seed = randomSeed;
    if (seqLen >= 0)
      options.seqLen = seqLen;
    auto random = makeRandomInputs(*func, options);
    if (!random)
      return random.takeError();
    inputs = std::move(*random);
    for (size_t i = 0; i < inputs.size(); ++i)
      inputNames.push_back("random argument " + std::to_string(i));
  } else {
    if (inputFiles.size() != argSpecs->size())
      return error("@" + entryName + " takes " + Twine(argSpecs->size()) +
                   " arguments but " + Twine(inputFiles.size()) +
                   " --input files were given (give one per argument, or "
                   "none for random arguments)");
    for (auto [file, spec] : llvm::zip(inputFiles, *argSpecs)) {
      auto array = readNpy(file, spec.dtype, spec.shape);
      if (!array)
        return array.takeError();
      inputs.push_back(std::move(*array));
      inputNames.push_back("argument " + std::to_string(inputs.size() - 1) +
                           ", --input " + file);
    }
  }
  if (llvm::Error err = checkInputTables(*func, inputs, inputNames))
    return err;
  if (saveInputs || check)
    for (auto [i, array] : llvm::enumerate(inputs))
      if (llvm::Error err = writeNpy(outputPath("in", i), array.getDType(),
                                     array.getShape(), array.getData()))
        return err;

  std::optional<std::pair<double, double>> decodeWork =
      getDecodeWork(*func, inputs);
  SmallVector<unsigned> memrefArgs;
  for (auto [i, type] : llvm::enumerate(func->getArgumentTypes()))
    if (isa<MemRefType>(type))
      memrefArgs.push_back(i);

  CpuPipelineOptions pipelineOptions;
  pipelineOptions.workspaceRows = workspaceRows;
  pipelineOptions.splitPolicy = splitPolicy;
  pipelineOptions.numSms = numSms;
  pipelineOptions.decodeThreshold = decodeThreshold;
  auto fn = executor.compile(*module, entryName, pipelineOptions);
  if (!fn)
    return fn.takeError();
  llvm::outs() << "mla-run: compiled @" << entryName << " in "
               << llvm::format("%.1f", (*fn)->getCompileSeconds() * 1e3)
               << " ms\n";

  SmallVector<HostTensor> args;
  for (HostArray &array : inputs)
    args.push_back(array.getTensor());
  SmallVector<ResultBuffer> results;
  SmallVector<double> times;
  for (unsigned r = 0; r < std::max(1u, repeat.getValue()); ++r) {
    auto start = std::chrono::steady_clock::now();
    auto buffers = (*fn)->call(args);
    times.push_back(millisecondsSince(start));
    if (!buffers)
      return buffers.takeError();
    results = std::move(*buffers);
  }
  double mean = 0.0;
  for (double t : times)
    mean += t / times.size();
  llvm::outs() << "mla-run: ran @" << entryName << " " << times.size()
               << (times.size() == 1 ? " time" : " times") << ": "
               << llvm::format("min %.3f ms, mean %.3f ms",
                               *llvm::min_element(times), mean)
               << "\n";
  if (decodeWork) {
    double seconds = *llvm::min_element(times) * 1e-3;
    llvm::outs() << llvm::format(
        "mla-run: decode at the min time: %.2f GFLOP/s, %.2f GB/s\n",
        decodeWork->first / seconds * 1e-9,
        decodeWork->second / seconds * 1e-9);
  }

  for (auto [k, buffer] : llvm::enumerate(results)) {
    HostArray array(buffer.getDType(), buffer.getShape());
    std::memcpy(array.getData(), buffer.getData(), buffer.getSizeInBytes());
    if (llvm::Error err = writeResult(array, outputPath("out", k)))
      return err;
  }
  // Memref arguments are the function's way to update arrays in place.
  for (unsigned i : memrefArgs)
    if (llvm::Error err = writeResult(inputs[i], outputPath("arg", i)))
      return err;

  if (checkSpec)
    return runCheck(std::move(*checkSpec));
  return llvm::Error::success();
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  registerJitPassOptions();
  cl::OptionCategory passCategory("MLIR pass-manager options (of the compile)");
  addJitPassOptionsToCategory(passCategory);
  cl::AddExtraVersionPrinter(printVersion);
  cl::HideUnrelatedOptions({&runCategory, &passCategory});
  cl::ParseCommandLineOptions(
      argc, argv,
      "mla-run: JIT-compile a function of mla ops and run it on the CPU\n");
  if (llvm::Error err = runMain()) {
    llvm::outs().flush();
    llvm::WithColor::error(llvm::errs(), "mla-run")
        << llvm::toString(std::move(err)) << "\n";
    return 1;
  }
  return 0;
}
