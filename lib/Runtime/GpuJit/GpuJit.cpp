//===- GpuJit.cpp - compile GPU kernel images from their specs ------------===//
//
// A spec becomes a small mla module (its shape baked into the types, its
// batch, page count and split count dynamic, since the kernels read those at
// run time), which the `mla-to-nvvm` pipeline compiles into a cubin. The
// pipeline's options are parsed from pipelineFor(spec), the very string the
// cache key hashes, so the key cannot describe another compile than the one
// that ran.
//
//===----------------------------------------------------------------------===//

#include "mla/Runtime/Gpu/GpuJit.h"
#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Pipelines/Pipelines.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <optional>

using namespace mlir;

namespace mla::gpu {

namespace {

/// The dialects the mla-to-nvvm pipeline meets, with the NVVM target (for
/// nvvm-attach-target) and the LLVM IR translations gpu-module-to-binary
/// serialises through. Built once; every context copies it.
const DialectRegistry &getJitRegistry() {
  static const DialectRegistry registry = [] {
    DialectRegistry r;
    r.insert<MLADialect>();
    registerAllDialects(r);
    registerAllExtensions(r);
    NVVM::registerNVVMTargetInterfaceExternalModels(r);
    registerAllToLLVMIRTranslations(r);
    return r;
  }();
  return registry;
}

/// Collects the diagnostics emitted while it is alive, so that a failed
/// compile returns the compiler's own messages to callers without a terminal.
class DiagnosticCollector {
public:
  explicit DiagnosticCollector(MLIRContext &context)
      : os(text), handler(&context, [this](Diagnostic &diag) {
          append(diag);
          return success();
        }) {}

  std::string take() { return std::move(text); }

private:
  void append(Diagnostic &diag) {
    os << diag.getLocation() << ": ";
    switch (diag.getSeverity()) {
    case DiagnosticSeverity::Error:
      os << "error: ";
      break;
    case DiagnosticSeverity::Warning:
      os << "warning: ";
      break;
    case DiagnosticSeverity::Note:
      os << "note: ";
      break;
    case DiagnosticSeverity::Remark:
      os << "remark: ";
      break;
    }
    os << diag << "\n";
    for (Diagnostic &note : diag.getNotes())
      os << note.getLocation() << ": note: " << note << "\n";
  }

  std::string text;
  llvm::raw_string_ostream os;
  ScopedDiagnosticHandler handler;
};

llvm::Error makeError(const DecodeKernelSpec &spec, const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "cannot compile kernel spec '" +
                                     toString(spec) + "': " + what);
}

/// The options inside pipelineFor's braces, e.g. "chip=sm_90a format=bin",
/// or std::nullopt when `pipeline` is not mla-to-nvvm with options.
std::optional<llvm::StringRef> getPipelineOptions(llvm::StringRef pipeline) {
  if (!pipeline.consume_front("mla-to-nvvm{") || !pipeline.consume_back("}"))
    return std::nullopt;
  return pipeline;
}

} // namespace

std::string getDecodeKernelsSource(const DecodeKernelSpec &spec) {
  const DecodeShape &s = spec.shape;
  const DecodeTiling &t = spec.tiling;
  const char *elem = s.elem == ElemType::BF16 ? "bf16" : "f16";
  uint32_t scaleBits;
  std::memcpy(&scaleBits, &s.scale, sizeof(scaleBits));

  std::string sq = std::to_string(s.queryRows), n = std::to_string(s.numHeads);
  std::string l = std::to_string(s.latentDim);
  std::string q = "tensor<?x" + sq + "x" + n + "x" +
                  std::to_string(s.rowDim()) + "x" + elem + ">";
  std::string cache = "tensor<?x" + std::to_string(s.pageSize) + "x" +
                      std::to_string(s.rowDim()) + "x" + elem + ">";
  std::string partialOut = "tensor<?x?x" + sq + "x" + n + "x" + l + "xf32>";
  std::string partialLse = "tensor<?x?x" + n + "x" + sq + "xf32>";
  std::string out = "tensor<?x" + sq + "x" + n + "x" + l + "x" + elem + ">";
  std::string lse = "tensor<?x" + n + "x" + sq + "xf32>";

  std::string text;
  llvm::raw_string_ostream os(text);
  os << "// " << toString(spec) << "\n"
     << "module attributes {mla.target = #mla.target<chip = "
     << (spec.chip == Chip::SM90a ? "sm90" : "sm100") << ">} {\n"
     << "  func.func @mla_decode(%q: " << q << ", %cache: " << cache
     << ", %block_table: tensor<?x?xi32>, %seq_lens: tensor<?xi32>, "
        "%bounds: tensor<?x?xi32>) -> ("
     << out << ", " << lse << ") {\n"
     << "    %po, %pl = mla.decode_partial %q, %cache[%block_table, "
        "%seq_lens] bounds %bounds layout #mla.cache_layout<format = "
     << elem << ", page_size = " << s.pageSize
     << "> scale "
     // A hexadecimal literal is the f32's bit pattern: no decimal rounding.
     << llvm::format("0x%08X", scaleBits)
     << (s.causal ? " causal" : "")
     // The kernels read the split count at run time; any positive value
     // compiles the same image.
     << " num_splits 1 {mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = "
     << t.rowsPerCta << ", warps_n = " << t.warpsN
     << ", kv_block = " << t.kvBlock << ", stages = " << t.stages << ">}"
     << " : (" << q << ", " << cache
     << ", tensor<?x?xi32>, tensor<?xi32>, tensor<?x?xi32>) -> (" << partialOut
     << ", " << partialLse << ")\n"
     << "    %o, %lse = mla.combine %po, %pl : (" << partialOut << ", "
     << partialLse << ") -> (" << out << ", " << lse << ")\n"
     << "    return %o, %lse : " << out << ", " << lse << "\n"
     << "  }\n"
     << "}\n";
  return text;
}

llvm::Expected<std::vector<char>>
compileDecodeKernels(const DecodeKernelSpec &spec) {
  std::string why = checkDecodeTiling(spec.chip, spec.shape, spec.tiling);
  if (!why.empty())
    return makeError(spec, "unusable tiling: " + why);

  MLIRContext context(getJitRegistry());
  DiagnosticCollector diagnostics(context);
  std::string source = getDecodeKernelsSource(spec);
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(source, &context, "mla-jit-decode");
  if (!module)
    return makeError(spec, "the generated module does not parse:\n" +
                               diagnostics.take());

  std::string pipeline = pipelineFor(spec);
  std::optional<llvm::StringRef> optionText = getPipelineOptions(pipeline);
  std::unique_ptr<GpuPipelineOptions> options =
      optionText ? GpuPipelineOptions::createFromString(*optionText) : nullptr;
  if (!options)
    return makeError(spec, "cannot run pipeline '" + pipeline +
                               "' (expected mla-to-nvvm{<options>})");
  PassManager pm(&context);
  buildMLAToNVVMPipeline(pm, *options);
  if (failed(pm.run(*module)))
    return makeError(spec, pipeline + " failed:\n" + diagnostics.take());

  auto binary = dyn_cast_or_null<mlir::gpu::BinaryOp>(
      SymbolTable::lookupSymbolIn(*module, "mla_kernels"));
  if (!binary || binary.getObjects().size() != 1)
    return makeError(spec,
                     pipeline + " did not produce one gpu.binary @mla_kernels");
  llvm::StringRef image =
      cast<mlir::gpu::ObjectAttr>(binary.getObjects()[0]).getObject();
  return std::vector<char>(image.begin(), image.end());
}

llvm::Expected<std::vector<char>>
getOrCompileDecodeKernels(const DecodeKernelSpec &spec,
                          const KernelCache &cache, bool *wasHit) {
  std::string key = cacheKeyFor(spec);
  if (std::optional<std::vector<char>> image = cache.lookup(key)) {
    if (wasHit)
      *wasHit = true;
    return std::move(*image);
  }
  if (wasHit)
    *wasHit = false;
  llvm::Expected<std::vector<char>> image = compileDecodeKernels(spec);
  if (!image)
    return image.takeError();
  if (llvm::Error error = cache.store(key, *image))
    return std::move(error);
  return image;
}

} // namespace mla::gpu
