//===- CpuExecutor.cpp - JIT compilation and execution on the host --------===//
//
// Compiled functions are called through their `_mlir_ciface_<name>` wrapper
// (the pipeline marks public functions with `llvm.emit_c_interface`): every
// memref crosses as a pointer to a descriptor {allocated, aligned, offset,
// sizes[r], strides[r]}, and results come back through a leading pointer to
// a struct of such descriptors. All descriptor fields are 8 bytes, so a
// descriptor, and a struct of them, is a plain array of 64-bit words.
//
//===----------------------------------------------------------------------===//

#include "mla/JIT/CpuExecutor.h"
#include "mla/Contract/Error.h"
#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/JIT/DiagnosticCollector.h"
#include "mla/JIT/HostTypes.h"
#include "mla/JIT/KernelBuilder.h"
#include "mla/JIT/PassOptions.h"
#include "mla/JIT/RuntimeSymbols.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include <chrono>
#include <cstring>

using namespace mla;
using namespace mlir;

namespace {

std::string toString(Type type) {
  std::string text;
  llvm::raw_string_ostream(text) << type;
  return text;
}

/// The host type and static shape of a memref or tensor, or an error naming
/// `what`.
llvm::Expected<TensorSpec> getTensorSpec(Type type, const llvm::Twine &what) {
  auto shaped = dyn_cast<ShapedType>(type);
  if (!shaped || !shaped.hasRank() || !isa<MemRefType, TensorType>(type))
    return makeCompileError(what + " has type " + toString(type) +
                            "; only ranked tensors and memrefs can be "
                            "passed to compiled functions");
  std::optional<DType> dtype = getDTypeOf(shaped.getElementType());
  if (!dtype)
    return makeCompileError(what + " has element type " +
                            toString(shaped.getElementType()) +
                            "; supported are f32, f16, bf16, i32 and i8");
  return TensorSpec{*dtype, llvm::SmallVector<int64_t, 4>(shaped.getShape())};
}

/// The source signature of `func`.
llvm::Expected<FunctionSignature> getSignature(func::FuncOp func) {
  FunctionSignature sig;
  for (auto [i, type] : llvm::enumerate(func.getArgumentTypes())) {
    if (auto memref = dyn_cast<MemRefType>(type);
        memref && !memref.getLayout().isIdentity())
      return makeCompileError("argument " + llvm::Twine(i) + " of @" +
                              func.getSymName() +
                              " has a non-identity memref layout");
    llvm::Expected<TensorSpec> spec =
        getTensorSpec(type, "argument " + llvm::Twine(i));
    if (!spec)
      return spec.takeError();
    sig.args.push_back(std::move(*spec));
  }
  for (auto [i, type] : llvm::enumerate(func.getResultTypes())) {
    llvm::Expected<TensorSpec> spec =
        getTensorSpec(type, "result " + llvm::Twine(i));
    if (!spec)
      return spec.takeError();
    sig.results.push_back(std::move(*spec));
  }
  return sig;
}

/// Words of one memref descriptor of rank `rank`.
size_t descriptorWords(size_t rank) { return 3 + 2 * rank; }

/// Checks that the lowered `func` takes and returns the memref descriptors
/// `sig` implies: each argument expanded into 3 + 2 * rank scalars, results
/// returned as one descriptor or a struct of them. Guards the executor's
/// calling convention against pipeline changes (say, a pass that drops
/// results) that would otherwise corrupt memory.
LogicalResult checkLoweredSignature(LLVM::LLVMFuncOp func,
                                    const FunctionSignature &sig) {
  size_t params = 0;
  for (const TensorSpec &arg : sig.args)
    params += descriptorWords(arg.shape.size());
  if (func.getNumArguments() != params)
    return failure();
  auto isDescriptor = [](Type type, size_t rank) {
    auto st = dyn_cast<LLVM::LLVMStructType>(type);
    return st && st.getBody().size() == (rank ? 5u : 3u);
  };
  Type result = func.getFunctionType().getReturnType();
  if (sig.results.empty())
    return success(isa<LLVM::LLVMVoidType>(result));
  if (sig.results.size() == 1)
    return success(isDescriptor(result, sig.results[0].shape.size()));
  auto st = dyn_cast<LLVM::LLVMStructType>(result);
  if (!st || st.getBody().size() != sig.results.size())
    return failure();
  for (auto [type, spec] : llvm::zip(st.getBody(), sig.results))
    if (!isDescriptor(type, spec.shape.size()))
      return failure();
  return success();
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

} // namespace

//===----------------------------------------------------------------------===//
// CompiledFunction
//===----------------------------------------------------------------------===//

CompiledFunction::CompiledFunction(std::unique_ptr<ExecutionEngine> engine,
                                   void (*entry)(void **),
                                   FunctionSignature signature,
                                   double compileSeconds)
    : engine(std::move(engine)), entry(entry), signature(std::move(signature)),
      compileSeconds(compileSeconds) {}

CompiledFunction::~CompiledFunction() = default;

llvm::Expected<llvm::SmallVector<ResultBuffer>>
CompiledFunction::call(llvm::ArrayRef<HostTensor> args) const {
  if (args.size() != signature.args.size())
    return makeInvalidArgumentError(
        "the function takes " + llvm::Twine(signature.args.size()) +
        " arguments, got " + llvm::Twine(args.size()));

  // Argument descriptors: dense row-major, so strides follow from sizes.
  std::vector<std::vector<int64_t>> descriptors(args.size());
  for (auto [i, arg] : llvm::enumerate(args)) {
    const TensorSpec &spec = signature.args[i];
    bool shapeMatches = arg.shape.size() == spec.shape.size();
    for (size_t d = 0; shapeMatches && d < spec.shape.size(); ++d)
      shapeMatches =
          ShapedType::isDynamic(spec.shape[d]) || spec.shape[d] == arg.shape[d];
    if (!shapeMatches || !isCompatibleDType(arg.dtype, spec.dtype))
      return makeInvalidArgumentError(
          "argument " + llvm::Twine(i) + " must be " +
          getDTypeName(spec.dtype) + " " + formatShape(spec.shape) + ", got " +
          getDTypeName(arg.dtype) + " " + formatShape(arg.shape));
    std::vector<int64_t> &desc = descriptors[i];
    size_t rank = arg.shape.size();
    desc.assign(descriptorWords(rank), 0);
    desc[0] = desc[1] = reinterpret_cast<intptr_t>(arg.data);
    int64_t stride = 1;
    for (size_t d = rank; d-- > 0;) {
      desc[3 + d] = arg.shape[d];
      desc[3 + rank + d] = stride;
      stride *= arg.shape[d];
    }
  }

  size_t resultWords = 0;
  for (const TensorSpec &spec : signature.results)
    resultWords += descriptorWords(spec.shape.size());
  std::vector<int64_t> results(resultWords, 0);

  // Packed calling convention: one pointer per ciface parameter, each
  // pointing at the parameter's value (itself a pointer here).
  void *resultPtr = results.data();
  SmallVector<void *> descriptorPtrs;
  for (std::vector<int64_t> &desc : descriptors)
    descriptorPtrs.push_back(desc.data());
  SmallVector<void *> packed;
  if (!signature.results.empty())
    packed.push_back(&resultPtr);
  for (void *&ptr : descriptorPtrs)
    packed.push_back(&ptr);
  entry(packed.data());

  llvm::SmallVector<ResultBuffer> buffers;
  llvm::DenseSet<void *> owned;
  size_t offset = 0;
  for (const TensorSpec &spec : signature.results) {
    size_t rank = spec.shape.size();
    const int64_t *desc = results.data() + offset;
    offset += descriptorWords(rank);
    auto *allocated = reinterpret_cast<void *>(desc[0]);
    char *data =
        reinterpret_cast<char *>(desc[1]) + desc[2] * getDTypeSize(spec.dtype);
    llvm::SmallVector<int64_t, 4> shape(desc + 3, desc + 3 + rank);
    // Deallocation gives every returned buffer to the caller; should two
    // results share one, copy the second so each is freed exactly once.
    if (!owned.insert(allocated).second) {
      size_t bytes = getNumElements(shape) * getDTypeSize(spec.dtype);
      void *copy = std::malloc(std::max<size_t>(bytes, 1));
      std::memcpy(copy, data, bytes);
      allocated = copy;
      data = static_cast<char *>(copy);
    }
    buffers.emplace_back(allocated, data, spec.dtype, std::move(shape));
  }
  return buffers;
}

//===----------------------------------------------------------------------===//
// CpuExecutor
//===----------------------------------------------------------------------===//

CpuExecutor::CpuExecutor() {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  DialectRegistry registry;
  registry.insert<MLADialect>();
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  context = std::make_unique<MLIRContext>(registry);
  // Every dialect loaded up front: callers build modules in this context
  // from several threads while another thread's compile runs the pipeline,
  // and loading a dialect (which the pipeline would do on its first use of
  // arith, scf, vector, LLVM, ...) is not thread-safe.
  context->loadAllAvailableDialects();
}

CpuExecutor::~CpuExecutor() = default;

llvm::Expected<std::unique_ptr<CompiledFunction>>
CpuExecutor::compile(ModuleOp module, StringRef entry,
                     const CpuPipelineOptions &options) {
  std::lock_guard<std::mutex> lock(mutex);
  return compileLocked(module, entry, options,
                       std::chrono::steady_clock::now());
}

llvm::Expected<std::unique_ptr<CompiledFunction>>
CpuExecutor::compileLocked(ModuleOp module, StringRef entry,
                           const CpuPipelineOptions &options,
                           std::chrono::steady_clock::time_point start) {
  auto func = module.lookupSymbol<func::FuncOp>(entry);
  if (!func || func.isExternal() || !func.isPublic())
    return makeInvalidArgumentError("the module has no public function @" +
                                    entry + " with a body");

  llvm::Expected<FunctionSignature> signature = getSignature(func);
  if (!signature)
    return signature.takeError();
  // Tensor arguments are the caller's arrays and must survive the call;
  // left writable, one-shot bufferization may compute a result in an
  // argument's buffer. In-place updates take a memref argument instead.
  for (auto [i, type] : llvm::enumerate(func.getArgumentTypes()))
    if (isa<TensorType>(type) &&
        !func.getArgAttr(
            i, bufferization::BufferizationDialect::kWritableAttrName))
      func.setArgAttr(i, bufferization::BufferizationDialect::kWritableAttrName,
                      BoolAttr::get(context.get(), false));

  DiagnosticCollector diagnostics(*context);
  PassManager pm(context.get(), ModuleOp::getOperationName());
  buildMLAToLLVMCpuPipeline(pm, options);
  if (llvm::Error error = applyJitPassOptions(pm))
    return makeCompileError(llvm::toString(std::move(error)) + "\n" +
                            diagnostics.take());
  if (failed(pm.run(module)))
    return makeCompileError("mla-to-llvm-cpu failed on @" + entry + ":\n" +
                            diagnostics.take());
  auto lowered = module.lookupSymbol<LLVM::LLVMFuncOp>(entry);
  if (!lowered || failed(checkLoweredSignature(lowered, *signature)))
    return makeCompileError("mla-to-llvm-cpu changed the signature of @" +
                            entry +
                            "; the executor passes memref descriptors "
                            "matching the source signature");

  // Host CPU and features for both the LLVM optimiser (vector widths) and
  // code generation; -O3 because kernels run far longer than they compile.
  auto tmBuilder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!tmBuilder)
    return makeCompileError("cannot target the host: " +
                            llvm::toString(tmBuilder.takeError()));
  tmBuilder->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  auto tm = tmBuilder->createTargetMachine();
  if (!tm)
    return makeCompileError("cannot target the host: " +
                            llvm::toString(tm.takeError()));
  std::function<llvm::Error(llvm::Module *)> optimize =
      makeOptimizingTransformer(/*optLevel=*/3, /*sizeLevel=*/0, tm->get());
  // memrefCopy and friends, for copies lowered to runtime calls.
  StringRef sharedLibs[] = {MLA_C_RUNNER_UTILS_PATH};
  ExecutionEngineOptions engineOptions;
  engineOptions.transformer = optimize;
  engineOptions.jitCodeGenOptLevel = llvm::CodeGenOptLevel::Aggressive;
  engineOptions.sharedLibPaths = sharedLibs;
  engineOptions.enableGDBNotificationListener = false;
  engineOptions.enablePerfNotificationListener = false;
  auto engine = ExecutionEngine::create(module, engineOptions, std::move(*tm));
  if (!engine)
    return makeCompileError("cannot JIT-compile @" + entry + ": " +
                            llvm::toString(engine.takeError()) + "\n" +
                            diagnostics.take());
  (*engine)->registerSymbols(runtimeSymbols);
  (*engine)->initialize();
  // The lookup materialises (optimises and compiles) the module, which must
  // happen while `optimize` is alive.
  auto fn = (*engine)->lookupPacked(("_mlir_ciface_" + entry).str());
  if (!fn)
    return makeCompileError("cannot find the C interface of @" + entry + ": " +
                            llvm::toString(fn.takeError()));
  return std::make_unique<CompiledFunction>(
      std::move(*engine), *fn, std::move(*signature), secondsSince(start));
}

llvm::Expected<std::shared_ptr<const CompiledFunction>>
CpuExecutor::getOrCompile(ModuleOp module, StringRef entry,
                          const CpuPipelineOptions &options) {
  assert(module.getContext() == context.get() &&
         "modules must be built in the executor's context");
  std::string key;
  llvm::raw_string_ostream keyOS(key);
  keyOS << entry << '\0';
  options.print(keyOS);
  keyOS << '\0';
  module.print(keyOS, OpPrintingFlags().printGenericOpForm());

  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(key);
  if (it != cache.end()) {
    ++stats.hits;
    return it->second;
  }

  auto start = std::chrono::steady_clock::now();
  ++stats.compiles;
  // Built modules were never parsed, so nothing has run the verifiers yet.
  DiagnosticCollector diagnostics(*context);
  if (failed(verify(module))) {
    stats.compileSeconds += secondsSince(start);
    return makeCompileError("the module of @" + entry + " does not verify:\n" +
                            diagnostics.take());
  }
  auto compiled = compileLocked(module, entry, options, start);
  stats.compileSeconds += secondsSince(start);
  if (!compiled)
    return compiled.takeError();
  std::shared_ptr<const CompiledFunction> fn = std::move(*compiled);
  cache[key] = fn;
  stats.cached = cache.size();
  return fn;
}

CpuExecutor::Stats CpuExecutor::getStats() const {
  std::lock_guard<std::mutex> lock(mutex);
  return stats;
}

void CpuExecutor::clearCache() {
  std::lock_guard<std::mutex> lock(mutex);
  cache.clear();
  stats = Stats();
}
