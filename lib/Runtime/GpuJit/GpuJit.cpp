//===- GpuJit.cpp - compile GPU kernel images from their specs ------------===//
//
// A spec becomes a small mla module (its shape baked into the types, the
// sizes the kernels read at run time dynamic: decode's batch, page count and
// split count, the token count of cache_write and the projections), which
// the `mla-to-nvvm` pipeline compiles into a cubin. The
// pipeline's options are parsed from pipelineFor(spec), the very string the
// cache key hashes, so the key cannot describe another compile than the one
// that ran.
//
//===----------------------------------------------------------------------===//

#include "mla/Runtime/Gpu/GpuJit.h"
#include "mla/Runtime/DiagnosticCollector.h"
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
#include <initializer_list>
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

llvm::Error makeError(const KernelSpec &spec, const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "cannot compile kernel spec '" +
                                     toString(spec) + "': " + what);
}

const char *targetChip(Chip chip) {
  return chip == Chip::SM90a ? "sm90" : "sm100";
}

/// `tensor<` + dims joined by 'x' + `x<elem>>`; a negative dim is dynamic.
std::string tensorType(std::initializer_list<int64_t> dims,
                       llvm::StringRef elem) {
  std::string text = "tensor<";
  for (int64_t d : dims)
    text += (d < 0 ? std::string("?") : std::to_string(d)) + "x";
  return text + elem.str() + ">";
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
     << targetChip(spec.chip) << ">} {\n"
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
     << ", kv_block = " << t.kvBlock << ", stages = " << t.stages
     << (t.wgmma ? ", wgmma = true" : "") << ">}"
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

std::string getCacheWriteKernelSource(const CacheWriteKernelSpec &spec) {
  const CacheWriteShape &s = spec.shape;
  const char *in = actTypeName(s.input);
  // Float caches hold elements of their format; fp8 caches hold bytes.
  const char *cacheElem = "i8";
  int64_t elemSize = 1;
  const char *format = "";
  switch (s.format) {
  case CacheFormat::BF16:
    cacheElem = format = "bf16";
    elemSize = 2;
    break;
  case CacheFormat::F16:
    cacheElem = format = "f16";
    elemSize = 2;
    break;
  case CacheFormat::F32:
    cacheElem = format = "f32";
    elemSize = 4;
    break;
  case CacheFormat::FP8E4M3:
    format = "fp8_e4m3";
    break;
  case CacheFormat::FP8E4M3Token:
    format = "fp8_e4m3_token";
    break;
  case CacheFormat::FP8DsMla:
    format = "fp8_ds_mla";
    break;
  }
  std::string kvC = tensorType({-1, s.latentDim}, in);
  std::string kPe = tensorType({-1, s.ropeDim}, in);
  std::string slots = tensorType({-1}, "i32");
  std::string cache = tensorType(
      {-1, spec.pageSize, cacheRowBytes(s) / elemSize}, cacheElem);

  std::string text;
  llvm::raw_string_ostream os(text);
  os << "// " << toString(spec) << "\n"
     << "module attributes {mla.target = #mla.target<chip = "
     << targetChip(spec.chip) << ">} {\n"
     << "  func.func @mla_cache_write(%kv_c: " << kvC << ", %k_pe: " << kPe
     << ", %slot_mapping: " << slots << ", %cache: " << cache << ") -> "
     << cache << " {\n"
     << "    %r = mla.cache_write %kv_c, %k_pe, %slot_mapping layout "
        "#mla.cache_layout<format = "
     << format << ", page_size = " << spec.pageSize;
  if (s.format == CacheFormat::FP8E4M3) {
    uint32_t bits;
    std::memcpy(&bits, &s.scale, sizeof(bits));
    // The f32 bit pattern, as in the spec text: no decimal rounding.
    os << ", scale = " << llvm::format("0x%08X", bits) << " : f32";
  }
  os << "> into %cache : " << kvC << ", " << kPe << ", " << slots << " into "
     << cache << "\n"
     << "    return %r : " << cache << "\n"
     << "  }\n"
     << "}\n";
  return text;
}

std::string getProjectionKernelSource(const ProjectionKernelSpec &spec) {
  const ProjectionShape &s = spec.shape;
  const char *elem = actTypeName(s.elem);
  bool absorb = spec.kind == ProjectionKind::AbsorbQ;
  std::string in = tensorType({-1, s.numHeads, s.inDim + s.ropeDim}, elem);
  std::string weight = tensorType({s.numHeads, s.inDim, s.outDim}, elem);
  std::string out =
      absorb ? tensorType({-1, s.numHeads, s.outDim + s.ropeDim}, elem)
             : tensorType({-1, s.numHeads * s.outDim}, elem);
  const char *op = absorb ? "absorb_q" : "up_proj_out";

  std::string text;
  llvm::raw_string_ostream os(text);
  os << "// " << toString(spec) << "\n"
     << "module attributes {mla.target = #mla.target<chip = "
     << targetChip(spec.chip) << ">} {\n"
     << "  func.func @mla_" << op << "(%in: " << in << ", %weight: " << weight
     << ") -> " << out << " {\n"
     << "    %r = mla." << op << " %in, %weight : " << in << ", " << weight
     << " -> " << out << "\n"
     << "    return %r : " << out << "\n"
     << "  }\n"
     << "}\n";
  return text;
}

std::string getKernelSource(const KernelSpec &spec) {
  if (const auto *decode = std::get_if<DecodeKernelSpec>(&spec))
    return getDecodeKernelsSource(*decode);
  if (const auto *cacheWrite = std::get_if<CacheWriteKernelSpec>(&spec))
    return getCacheWriteKernelSource(*cacheWrite);
  return getProjectionKernelSource(std::get<ProjectionKernelSpec>(spec));
}

llvm::Expected<std::vector<char>> compileKernels(const KernelSpec &spec) {
  if (const auto *decode = std::get_if<DecodeKernelSpec>(&spec)) {
    std::string why =
        checkDecodeTiling(decode->chip, decode->shape, decode->tiling);
    if (!why.empty())
      return makeError(spec, "unusable tiling: " + why);
  }

  MLIRContext context(getJitRegistry());
  DiagnosticCollector diagnostics(context);
  std::string source = getKernelSource(spec);
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(source, &context, "mla-jit");
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
compileDecodeKernels(const DecodeKernelSpec &spec) {
  return compileKernels(spec);
}

llvm::Expected<std::vector<char>>
getOrCompileDecodeKernels(const DecodeKernelSpec &spec,
                          const KernelCache &cache, bool *wasHit) {
  return getOrCompileKernels(spec, cache, wasHit);
}

llvm::Expected<std::vector<char>>
getOrCompileKernels(const KernelSpec &spec, const KernelCache &cache,
                    bool *wasHit) {
  std::string key = cacheKeyFor(spec);
  std::string specText = toString(spec);
  if (std::optional<std::vector<char>> image = cache.lookup(key, specText)) {
    if (wasHit)
      *wasHit = true;
    return std::move(*image);
  }
  if (wasHit)
    *wasHit = false;
  llvm::Expected<std::vector<char>> image = compileKernels(spec);
  if (!image)
    return image.takeError();
  if (llvm::Error error = cache.store(key, specText, *image))
    return std::move(error);
  return image;
}

} // namespace mla::gpu
