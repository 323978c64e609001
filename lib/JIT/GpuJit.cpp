//===- GpuJit.cpp - compile GPU kernel images from their specs ------------===//
//
// A spec becomes a small mla module, built with the ops' builders (its shape
// baked into the types, the sizes the kernels read at run time dynamic:
// decode's batch, page count and split count, the token or row count of
// cache_write, gather_cache, merge_states, up_proj_kv, mha and the
// projections), which the `mla-to-nvvm` pipeline compiles into a cubin. The
// pipeline's options are parsed from pipelineFor(spec), the very string the
// cache key hashes, so the key cannot describe another compile than the one
// that ran.
//
//===----------------------------------------------------------------------===//

#include "mla/JIT/GpuJit.h"
#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mla/JIT/DiagnosticCollector.h"
#include "mla/JIT/PassOptions.h"
#include "mla/Pipelines/Pipelines.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "llvm/Support/raw_ostream.h"

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

/// The options inside pipelineFor's braces, e.g. "chip=sm_90a format=bin",
/// or std::nullopt when `pipeline` is not mla-to-nvvm with options.
std::optional<llvm::StringRef> getPipelineOptions(llvm::StringRef pipeline) {
  if (!pipeline.consume_front("mla-to-nvvm{") || !pipeline.consume_back("}"))
    return std::nullopt;
  return pipeline;
}

} // namespace

namespace {

/// A ranked tensor type; a negative dimension is dynamic (the kernels read
/// it at run time).
RankedTensorType tensorType(llvm::ArrayRef<int64_t> dims, Type elem) {
  llvm::SmallVector<int64_t> shape;
  for (int64_t d : dims)
    shape.push_back(d < 0 ? ShapedType::kDynamic : d);
  return RankedTensorType::get(shape, elem);
}

Type getActType(MLIRContext &ctx, ActType type) {
  switch (type) {
  case ActType::BF16:
    return BFloat16Type::get(&ctx);
  case ActType::F16:
    return Float16Type::get(&ctx);
  case ActType::F32:
    return Float32Type::get(&ctx);
  }
  llvm_unreachable("unknown ActType");
}

/// A module targeting `chip` with one public function of the given
/// signature, and a builder at the start of its body.
class KernelModuleBuilder {
public:
  KernelModuleBuilder(MLIRContext &ctx, Chip chip, llvm::StringRef name,
                      TypeRange args, TypeRange results)
      : loc(NameLoc::get(StringAttr::get(&ctx, name))),
        module(ModuleOp::create(loc)), builder(&ctx) {
    (*module)->setAttr(MLADialect::getTargetAttrName(),
                       TargetAttr::get(&ctx,
                                       chip == Chip::SM90a ? mla::Chip::sm90
                                                           : mla::Chip::sm100,
                                       std::nullopt));
    builder.setInsertionPointToEnd(module->getBody());
    func = func::FuncOp::create(builder, loc, name,
                                builder.getFunctionType(args, results));
    builder.setInsertionPointToStart(func.addEntryBlock());
  }

  OpBuilder &getBuilder() { return builder; }
  Location getLoc() const { return loc; }
  Value getArg(unsigned i) { return func.getArgument(i); }

  OwningOpRef<ModuleOp> finish(ValueRange results) {
    func::ReturnOp::create(builder, loc, results);
    return std::move(module);
  }

private:
  Location loc;
  OwningOpRef<ModuleOp> module;
  OpBuilder builder;
  func::FuncOp func;
};

/// The row format and cache element type of a cache format (fp8 caches hold
/// bytes).
std::pair<RowFormat, Type> getCacheFormat(MLIRContext &ctx,
                                          CacheFormat format) {
  Type byte = IntegerType::get(&ctx, 8);
  switch (format) {
  case CacheFormat::BF16:
    return {RowFormat::bf16, BFloat16Type::get(&ctx)};
  case CacheFormat::F16:
    return {RowFormat::f16, Float16Type::get(&ctx)};
  case CacheFormat::F32:
    return {RowFormat::f32, Float32Type::get(&ctx)};
  case CacheFormat::FP8E4M3:
    return {RowFormat::fp8_e4m3, byte};
  case CacheFormat::FP8E4M3Token:
    return {RowFormat::fp8_e4m3_token, byte};
  case CacheFormat::FP8DsMla:
    return {RowFormat::fp8_ds_mla, byte};
  }
  llvm_unreachable("unknown CacheFormat");
}

/// One function with an `mla.decode_partial` (dynamic batch, pages and
/// splits; the spec's tiling as `mla.gpu_tiling`) and the `mla.combine` of
/// its partials.
OwningOpRef<ModuleOp> buildDecodeModule(MLIRContext &ctx,
                                        const DecodeKernelSpec &spec) {
  const DecodeShape &s = spec.shape;
  const DecodeTiling &t = spec.tiling;
  bool bf16 = s.elem == ElemType::BF16;
  Type elem = bf16 ? Type(BFloat16Type::get(&ctx)) : Float16Type::get(&ctx);
  Type f32 = Float32Type::get(&ctx), i32 = IntegerType::get(&ctx, 32);
  int64_t sq = s.queryRows, n = s.numHeads, l = s.latentDim;
  // A varlen image packs tokens: q [T, N, L+R], partials [S, T, N, L] and
  // [S, T, N], out [T, N, L], lse [T, N].
  Type q = s.varlen ? tensorType({-1, n, s.rowDim()}, elem)
                    : tensorType({-1, sq, n, s.rowDim()}, elem);
  Type cache = tensorType({-1, s.pageSize, s.rowDim()}, elem);
  Type table = tensorType({-1, -1}, i32), lens = tensorType({-1}, i32);
  Type partialOut = s.varlen ? tensorType({-1, -1, n, l}, f32)
                             : tensorType({-1, -1, sq, n, l}, f32);
  Type partialLse = s.varlen ? tensorType({-1, -1, n}, f32)
                             : tensorType({-1, -1, n, sq}, f32);
  Type out = s.varlen ? tensorType({-1, n, l}, elem)
                      : tensorType({-1, sq, n, l}, elem);
  Type lse = s.varlen ? tensorType({-1, n}, f32) : tensorType({-1, n, sq}, f32);
  auto layout = CacheLayoutAttr::get(
      &ctx, bf16 ? RowFormat::bf16 : RowFormat::f16, s.pageSize, FloatAttr());
  if (s.fp8()) {
    auto [format, byte] = getCacheFormat(ctx, s.kvFormat);
    cache = tensorType({-1, s.pageSize, s.cacheRowBytes()}, byte);
    FloatAttr scale;
    if (s.kvFormat == CacheFormat::FP8E4M3)
      scale = FloatAttr::get(f32, 1.0f);
    layout = CacheLayoutAttr::get(&ctx, format, s.pageSize, scale);
  }
  SmallVector<Type> args = {q, cache, table, lens, table};
  if (s.varlen)
    args.push_back(lens);
  KernelModuleBuilder kb(ctx, spec.chip, "mla_decode", args, {out, lse});
  OpBuilder &b = kb.getBuilder();
  // The kernels read the split count, the softmax scale and fp8_e4m3's
  // kv_scale at run time; any positive values compile the same image.
  auto partial = DecodePartialOp::create(
      b, kb.getLoc(), partialOut, partialLse, kb.getArg(0), kb.getArg(1),
      kb.getArg(2), kb.getArg(3), kb.getArg(4),
      s.varlen ? kb.getArg(5) : Value(), layout, b.getF32FloatAttr(1.0f),
      s.causal ? b.getUnitAttr() : UnitAttr(), b.getI64IntegerAttr(1),
      /*shard=*/DcpShardAttr(),
      s.varlen ? b.getI64IntegerAttr(sq) : IntegerAttr());
  partial->setAttr(MLADialect::getGpuTilingAttrName(),
                   GpuTilingAttr::get(&ctx, t));
  auto combine =
      CombineOp::create(b, kb.getLoc(), out, lse, partial.getPartialOut(),
                        partial.getPartialLse());
  return kb.finish(combine.getResults());
}

/// The cache tensor type and `#mla.cache_layout` of rows in `s`'s format,
/// `pageSize` rows a page.
std::pair<Type, CacheLayoutAttr>
getCacheRowTypes(MLIRContext &ctx, const CacheWriteShape &s, int64_t pageSize) {
  auto [format, cacheElem] = getCacheFormat(ctx, s.format);
  int64_t elemBytes = cacheElem.getIntOrFloatBitWidth() / 8;
  Type cache =
      tensorType({-1, pageSize, cacheRowBytes(s) / elemBytes}, cacheElem);
  // The layout requires fp8_e4m3's scale, which the GPU kernels read from
  // their kv_scale parameter instead: any positive value compiles the same
  // image.
  FloatAttr scale;
  if (s.format == CacheFormat::FP8E4M3)
    scale = FloatAttr::get(Float32Type::get(&ctx), 1.0);
  return {cache, CacheLayoutAttr::get(&ctx, format, pageSize, scale)};
}

/// One function with one `mla.cache_write` whose token count T and page
/// count are dynamic (the kernel reads both at run time).
OwningOpRef<ModuleOp> buildCacheWriteModule(MLIRContext &ctx,
                                            const CacheWriteKernelSpec &spec) {
  const CacheWriteShape &s = spec.shape;
  Type in = getActType(ctx, s.input);
  auto [cache, layout] = getCacheRowTypes(ctx, s, spec.pageSize);
  Type kvC = tensorType({-1, s.latentDim}, in);
  Type kPe = tensorType({-1, s.ropeDim}, in);
  Type slots = tensorType({-1}, IntegerType::get(&ctx, 32));
  KernelModuleBuilder kb(ctx, spec.chip, "mla_cache_write",
                         {kvC, kPe, slots, cache}, {cache});
  auto write =
      CacheWriteOp::create(kb.getBuilder(), kb.getLoc(), cache, kb.getArg(0),
                           kb.getArg(1), kb.getArg(2), kb.getArg(3), layout);
  return kb.finish(write->getResults());
}

/// One function with one `mla.gather_cache` whose page count, request count
/// and workspace rows are dynamic. `latent_dim` is always set: the
/// fp8_e4m3_token format needs it and the others check it.
OwningOpRef<ModuleOp>
buildGatherCacheModule(MLIRContext &ctx, const GatherCacheKernelSpec &spec) {
  const CacheWriteShape &s = spec.shape.row;
  auto [cache, layout] = getCacheRowTypes(ctx, s, spec.shape.pageSize);
  Type i32 = IntegerType::get(&ctx, 32);
  Type table = tensorType({-1, -1}, i32), vec = tensorType({-1}, i32);
  Type workspace =
      tensorType({-1, s.latentDim + s.ropeDim}, getActType(ctx, s.input));
  KernelModuleBuilder kb(ctx, spec.chip, "mla_gather_cache",
                         {cache, table, vec, vec, workspace}, {workspace});
  OpBuilder &b = kb.getBuilder();
  auto gather = GatherCacheOp::create(
      b, kb.getLoc(), workspace, kb.getArg(0), kb.getArg(1), kb.getArg(2),
      kb.getArg(3), kb.getArg(4), layout, b.getI64IntegerAttr(s.latentDim));
  return kb.finish(gather->getResults());
}

/// One function with one `mla.merge_states` over a dynamic token count T.
OwningOpRef<ModuleOp>
buildMergeStatesModule(MLIRContext &ctx, const MergeStatesKernelSpec &spec) {
  const MergeStatesShape &s = spec.shape;
  Type out = tensorType({-1, s.numHeads, s.headDim}, getActType(ctx, s.elem));
  Type lse = tensorType({s.numHeads, -1}, Float32Type::get(&ctx));
  KernelModuleBuilder kb(ctx, spec.chip, "mla_merge_states",
                         {out, lse, out, lse}, {out, lse});
  auto merge = MergeStatesOp::create(kb.getBuilder(), kb.getLoc(), out, lse,
                                     kb.getArg(0), kb.getArg(1), kb.getArg(2),
                                     kb.getArg(3));
  return kb.finish(merge->getResults());
}

/// One function with one `mla.up_proj_kv` over a dynamic token count S.
OwningOpRef<ModuleOp> buildUpProjKvModule(MLIRContext &ctx,
                                          const UpProjKvKernelSpec &spec) {
  const UpProjKvShape &s = spec.shape;
  Type elem = getActType(ctx, s.elem);
  Type latent = tensorType({-1, s.latentDim}, elem);
  Type weight = tensorType({s.columns(), s.latentDim}, elem);
  Type kNope = tensorType({-1, s.numHeads, s.nopeDim}, elem);
  Type v = tensorType({-1, s.numHeads, s.valueDim}, elem);
  KernelModuleBuilder kb(ctx, spec.chip, "mla_up_proj_kv", {latent, weight},
                         {kNope, v});
  auto upKv = UpProjKvOp::create(kb.getBuilder(), kb.getLoc(), kNope, v,
                                 kb.getArg(0), kb.getArg(1));
  return kb.finish(upKv->getResults());
}

/// One function with one `mla.mha` over dynamic query and key row counts
/// and request count; the scale and causality are baked in.
OwningOpRef<ModuleOp> buildMhaModule(MLIRContext &ctx,
                                     const MhaKernelSpec &spec) {
  const MhaShape &s = spec.shape;
  Type elem = getActType(ctx, s.elem);
  Type qk = tensorType({-1, s.numHeads, s.qkDim}, elem);
  Type v = tensorType({-1, s.numHeads, s.vDim}, elem);
  Type cu = tensorType({-1}, IntegerType::get(&ctx, 32));
  Type lse = tensorType({s.numHeads, -1}, Float32Type::get(&ctx));
  KernelModuleBuilder kb(ctx, spec.chip, "mla_mha", {qk, qk, v, cu, cu},
                         {v, lse});
  OpBuilder &b = kb.getBuilder();
  auto mha = MhaOp::create(b, kb.getLoc(), v, lse, kb.getArg(0), kb.getArg(1),
                           kb.getArg(2), kb.getArg(3), kb.getArg(4),
                           b.getF32FloatAttr(s.scale),
                           s.causal ? b.getUnitAttr() : UnitAttr());
  return kb.finish(mha->getResults());
}

/// One function with one `mla.absorb_q` or `mla.up_proj_out` over a dynamic
/// token count T.
OwningOpRef<ModuleOp> buildProjectionModule(MLIRContext &ctx,
                                            const ProjectionKernelSpec &spec) {
  const ProjectionShape &s = spec.shape;
  Type elem = getActType(ctx, s.elem);
  bool absorb = spec.kind == ProjectionKind::AbsorbQ;
  Type in = tensorType({-1, s.numHeads, s.inDim + s.ropeDim}, elem);
  Type weight = tensorType({s.numHeads, s.inDim, s.outDim}, elem);
  Type out = absorb ? tensorType({-1, s.numHeads, s.outDim + s.ropeDim}, elem)
                    : tensorType({-1, s.numHeads * s.outDim}, elem);
  KernelModuleBuilder kb(ctx, spec.chip,
                         absorb ? "mla_absorb_q" : "mla_up_proj_out",
                         {in, weight}, {out});
  OpBuilder &b = kb.getBuilder();
  Operation *op =
      absorb
          ? AbsorbQOp::create(b, kb.getLoc(), out, kb.getArg(0), kb.getArg(1))
                .getOperation()
          : UpProjOutOp::create(b, kb.getLoc(), out, kb.getArg(0), kb.getArg(1))
                .getOperation();
  return kb.finish(op->getResults());
}

} // namespace

OwningOpRef<ModuleOp> buildKernelModule(MLIRContext &ctx,
                                        const KernelSpec &spec) {
  ctx.loadDialect<MLADialect, func::FuncDialect>();
  if (const auto *decode = std::get_if<DecodeKernelSpec>(&spec))
    return buildDecodeModule(ctx, *decode);
  if (const auto *cacheWrite = std::get_if<CacheWriteKernelSpec>(&spec))
    return buildCacheWriteModule(ctx, *cacheWrite);
  if (const auto *gather = std::get_if<GatherCacheKernelSpec>(&spec))
    return buildGatherCacheModule(ctx, *gather);
  if (const auto *merge = std::get_if<MergeStatesKernelSpec>(&spec))
    return buildMergeStatesModule(ctx, *merge);
  if (const auto *upKv = std::get_if<UpProjKvKernelSpec>(&spec))
    return buildUpProjKvModule(ctx, *upKv);
  if (const auto *mha = std::get_if<MhaKernelSpec>(&spec))
    return buildMhaModule(ctx, *mha);
  return buildProjectionModule(ctx, std::get<ProjectionKernelSpec>(spec));
}

std::string getKernelSource(const KernelSpec &spec) {
  MLIRContext context(getJitRegistry());
  OwningOpRef<ModuleOp> module = buildKernelModule(context, spec);
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "// " << toString(spec) << "\n" << *module << "\n";
  return text;
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
  OwningOpRef<ModuleOp> module = buildKernelModule(context, spec);
  if (failed(verify(*module)))
    return makeError(spec, "the built module does not verify:\n" +
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
  if (llvm::Error error = applyJitPassOptions(pm))
    return makeError(spec, llvm::toString(std::move(error)) + "\n" +
                               diagnostics.take());
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

llvm::Expected<std::vector<char>> getOrCompileKernels(const KernelSpec &spec,
                                                      const KernelCache &cache,
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
