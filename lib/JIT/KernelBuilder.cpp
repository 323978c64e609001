//===- KernelBuilder.cpp - mla IR for one API call ------------------------===//
//
// The IR is built with the ops' builders rather than printed as text, so a
// change of an op's assembly format or attributes breaks this file at
// compile time, not a user's call at run time. Every builder runs the
// operation's argument rules first and builds from the checked call they
// return.
//
//===----------------------------------------------------------------------===//

#include "mla/JIT/KernelBuilder.h"
#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mla;
using namespace mlir;

namespace {

using ResultShapes =
    llvm::SmallVector<std::pair<DType, llvm::SmallVector<int64_t, 4>>>;

RankedTensorType tensorType(MLIRContext &ctx, llvm::ArrayRef<int64_t> shape,
                            DType dtype) {
  return RankedTensorType::get(shape, getElementType(ctx, dtype));
}

RankedTensorType tensorType(MLIRContext &ctx, const HostTensor &t) {
  return tensorType(ctx, t.shape, t.dtype);
}

CacheLayoutAttr getLayout(MLIRContext &ctx, const CheckedCache &cache) {
  std::optional<RowFormat> format = symbolizeRowFormat(cache.layoutFormat);
  assert(format && "the rules accept only row formats the dialect has");
  FloatAttr scale;
  if (cache.scale)
    scale = FloatAttr::get(Float32Type::get(&ctx), *cache.scale);
  return CacheLayoutAttr::get(&ctx, *format, cache.pageSize, scale);
}

FloatAttr getF32Attr(MLIRContext &ctx, float value) {
  return FloatAttr::get(Float32Type::get(&ctx), value);
}

IntegerAttr getOptionalI64Attr(OpBuilder &b, std::optional<int64_t> value) {
  return value ? b.getI64IntegerAttr(*value) : IntegerAttr();
}

/// A module holding one public function `@entry` of the given signature,
/// with a builder at the start of its body.
class EntryBuilder {
public:
  EntryBuilder(MLIRContext &ctx, llvm::StringRef entry, TypeRange args,
               TypeRange results)
      : loc(NameLoc::get(StringAttr::get(&ctx, "mla-runtime"))),
        module(ModuleOp::create(loc)), builder(&ctx), entry(entry.str()) {
    builder.setInsertionPointToEnd(module->getBody());
    func = func::FuncOp::create(builder, loc, entry,
                                builder.getFunctionType(args, results));
    builder.setInsertionPointToStart(func.addEntryBlock());
  }

  OpBuilder &getBuilder() { return builder; }
  Location getLoc() const { return loc; }
  Value getArg(unsigned i) { return func.getArgument(i); }

  /// Returns `values` from the entry and hands the module over with the
  /// host shapes of those results.
  Kernel finish(ValueRange values, ResultShapes results) {
    func::ReturnOp::create(builder, loc, values);
    Kernel kernel;
    kernel.module = std::move(module);
    kernel.entry = entry;
    kernel.isEmpty = !results.empty() && llvm::all_of(results, [](auto &r) {
      return getNumElements(r.second) == 0;
    });
    kernel.results = std::move(results);
    return kernel;
  }

private:
  Location loc;
  OwningOpRef<ModuleOp> module;
  OpBuilder builder;
  func::FuncOp func;
  std::string entry;
};

} // namespace

//===----------------------------------------------------------------------===//
// Decode and cache write
//===----------------------------------------------------------------------===//

llvm::Expected<Kernel> mla::buildDecode(MLIRContext &ctx, const HostTensor &q,
                                        const HostTensor &kvCache,
                                        const HostTensor &blockTable,
                                        const HostTensor &seqLens,
                                        const DecodeOptions &options) {
  llvm::Expected<DecodeCall> call =
      checkDecode(Device::CPU, q, kvCache, blockTable, seqLens, options);
  if (!call)
    return call.takeError();
  llvm::SmallVector<int64_t, 4> outShape{call->batch, call->queryRows,
                                         call->numHeads, call->latentDim};
  llvm::SmallVector<int64_t, 4> lseShape{call->batch, call->numHeads,
                                         call->queryRows};
  Type outTy = tensorType(ctx, outShape, q.dtype);
  Type lseTy = tensorType(ctx, lseShape, DType::f32);
  EntryBuilder eb(ctx, "decode",
                  {tensorType(ctx, q), tensorType(ctx, kvCache),
                   tensorType(ctx, blockTable), tensorType(ctx, seqLens)},
                  {outTy, lseTy});
  OpBuilder &b = eb.getBuilder();
  auto op = DecodeOp::create(
      b, eb.getLoc(), outTy, lseTy, eb.getArg(0), eb.getArg(1), eb.getArg(2),
      eb.getArg(3), Value(), getLayout(ctx, call->cache),
      getF32Attr(ctx, call->softmaxScale),
      call->causal ? b.getUnitAttr() : UnitAttr(),
      getOptionalI64Attr(b, call->numSplits), SplitPlanAttr(), IntegerAttr());
  return eb.finish(op.getResults(),
                   {{q.dtype, outShape}, {DType::f32, lseShape}});
}

llvm::Expected<Kernel> mla::buildVarlenDecode(
    MLIRContext &ctx, const HostTensor &q, const HostTensor &kvCache,
    const HostTensor &blockTable, const HostTensor &seqLens,
    const HostTensor &queryStartLoc, const DecodeOptions &options) {
  llvm::Expected<DecodeCall> call = checkVarlenDecode(
      Device::CPU, q, kvCache, blockTable, seqLens, queryStartLoc, options);
  if (!call)
    return call.takeError();
  llvm::SmallVector<int64_t, 4> outShape{call->tokens, call->numHeads,
                                         call->latentDim};
  llvm::SmallVector<int64_t, 4> lseShape{call->tokens, call->numHeads};
  Type outTy = tensorType(ctx, outShape, q.dtype);
  Type lseTy = tensorType(ctx, lseShape, DType::f32);
  EntryBuilder eb(ctx, "decode",
                  {tensorType(ctx, q), tensorType(ctx, kvCache),
                   tensorType(ctx, blockTable), tensorType(ctx, seqLens),
                   tensorType(ctx, queryStartLoc)},
                  {outTy, lseTy});
  OpBuilder &b = eb.getBuilder();
  // The batch's largest query length bounds the compiled per-request loops.
  auto op = DecodeOp::create(
      b, eb.getLoc(), outTy, lseTy, eb.getArg(0), eb.getArg(1), eb.getArg(2),
      eb.getArg(3), eb.getArg(4), getLayout(ctx, call->cache),
      getF32Attr(ctx, call->softmaxScale),
      call->causal ? b.getUnitAttr() : UnitAttr(),
      getOptionalI64Attr(b, call->numSplits), SplitPlanAttr(),
      b.getI64IntegerAttr(call->queryRows));
  return eb.finish(op.getResults(),
                   {{q.dtype, outShape}, {DType::f32, lseShape}});
}

llvm::Expected<Kernel>
mla::buildCacheWrite(MLIRContext &ctx, const HostTensor &kvC,
                     const HostTensor &kPe, const HostTensor &kvCache,
                     const HostTensor &slotMapping, const CacheFormat &format) {
  llvm::Expected<CacheWriteCall> call =
      checkCacheWrite(Device::CPU, kvC, kPe, kvCache, slotMapping, format);
  if (!call)
    return call.takeError();
  // The cache is a memref argument viewed as a tensor for the op; the op's
  // result is materialized back into it, which bufferizes to writing the
  // caller's buffer in place.
  RankedTensorType cacheTy = tensorType(ctx, kvCache);
  auto cacheMemrefTy =
      MemRefType::get(cacheTy.getShape(), cacheTy.getElementType());
  EntryBuilder eb(ctx, "cache_write",
                  {tensorType(ctx, kvC), tensorType(ctx, kPe),
                   tensorType(ctx, slotMapping), cacheMemrefTy},
                  {});
  OpBuilder &b = eb.getBuilder();
  Location loc = eb.getLoc();
  auto cache = bufferization::ToTensorOp::create(
      b, loc, cacheTy, eb.getArg(3), /*restrict=*/true, /*writable=*/true);
  auto written =
      CacheWriteOp::create(b, loc, cacheTy, eb.getArg(0), eb.getArg(1),
                           eb.getArg(2), cache, getLayout(ctx, call->cache));
  bufferization::MaterializeInDestinationOp::create(
      b, loc, /*result=*/Type(), written, eb.getArg(3), /*restrict=*/true,
      /*writable=*/true);
  Kernel kernel = eb.finish({}, {});
  kernel.isEmpty = !call->writesAnything;
  return kernel;
}

//===----------------------------------------------------------------------===//
// Weight preparation, projections and merges
//===----------------------------------------------------------------------===//

llvm::Expected<Kernel> mla::buildSplitKvBProj(MLIRContext &ctx,
                                              const HostTensor &kvBProj,
                                              int64_t numHeads,
                                              int64_t qkNopeHeadDim,
                                              int64_t vHeadDim) {
  llvm::Expected<SplitKvBProjCall> call =
      checkSplitKvBProj(kvBProj, numHeads, qkNopeHeadDim, vHeadDim);
  if (!call)
    return call.takeError();
  llvm::SmallVector<int64_t, 4> ukShape{call->numHeads, call->nopeDim,
                                        call->latentDim};
  llvm::SmallVector<int64_t, 4> uvShape{call->numHeads, call->latentDim,
                                        call->valueDim};
  Type ukTy = tensorType(ctx, ukShape, kvBProj.dtype);
  Type uvTy = tensorType(ctx, uvShape, kvBProj.dtype);
  EntryBuilder eb(ctx, "split_kv_b_proj", {tensorType(ctx, kvBProj)},
                  {ukTy, uvTy});
  auto op = SplitKvBProjOp::create(eb.getBuilder(), eb.getLoc(), ukTy, uvTy,
                                   eb.getArg(0));
  return eb.finish(op.getResults(),
                   {{kvBProj.dtype, ukShape}, {kvBProj.dtype, uvShape}});
}

llvm::Expected<Kernel> mla::buildAbsorbQ(MLIRContext &ctx, const HostTensor &q,
                                         const HostTensor &wUkT) {
  llvm::Expected<ProjectionCall> call = checkAbsorbQ(Device::CPU, q, wUkT);
  if (!call)
    return call.takeError();
  llvm::SmallVector<int64_t, 4> outShape{call->tokens, call->numHeads,
                                         call->outDim + call->ropeDim};
  Type outTy = tensorType(ctx, outShape, q.dtype);
  EntryBuilder eb(ctx, "absorb_q", {tensorType(ctx, q), tensorType(ctx, wUkT)},
                  {outTy});
  auto op = AbsorbQOp::create(eb.getBuilder(), eb.getLoc(), outTy, eb.getArg(0),
                              eb.getArg(1));
  return eb.finish(op->getResults(), {{q.dtype, outShape}});
}

llvm::Expected<Kernel> mla::buildUpProjOut(MLIRContext &ctx,
                                           const HostTensor &o,
                                           const HostTensor &wUv) {
  llvm::Expected<ProjectionCall> call = checkUpProjOut(Device::CPU, o, wUv);
  if (!call)
    return call.takeError();
  llvm::SmallVector<int64_t, 4> outShape{call->tokens,
                                         call->numHeads * call->outDim};
  Type outTy = tensorType(ctx, outShape, o.dtype);
  EntryBuilder eb(ctx, "up_proj_out",
                  {tensorType(ctx, o), tensorType(ctx, wUv)}, {outTy});
  auto op = UpProjOutOp::create(eb.getBuilder(), eb.getLoc(), outTy,
                                eb.getArg(0), eb.getArg(1));
  return eb.finish(op->getResults(), {{o.dtype, outShape}});
}

llvm::Expected<Kernel> mla::buildMergeStates(MLIRContext &ctx,
                                             const HostTensor &outA,
                                             const HostTensor &lseA,
                                             const HostTensor &outB,
                                             const HostTensor &lseB) {
  llvm::Expected<MergeStatesCall> call =
      checkMergeStates(Device::CPU, outA, lseA, outB, lseB);
  if (!call)
    return call.takeError();
  Type outTy = tensorType(ctx, outA), lseTy = tensorType(ctx, lseA);
  EntryBuilder eb(ctx, "merge_states",
                  {outTy, lseTy, tensorType(ctx, outB), tensorType(ctx, lseB)},
                  {outTy, lseTy});
  auto op = MergeStatesOp::create(eb.getBuilder(), eb.getLoc(), outTy, lseTy,
                                  eb.getArg(0), eb.getArg(1), eb.getArg(2),
                                  eb.getArg(3));
  return eb.finish(op.getResults(),
                   {{outA.dtype, outA.shape}, {DType::f32, lseA.shape}});
}

//===----------------------------------------------------------------------===//
// Chunked-prefill pieces: gather_cache, up_proj_kv and mha
//===----------------------------------------------------------------------===//

llvm::Expected<Kernel>
mla::buildGatherCache(MLIRContext &ctx, const HostTensor &kvCache,
                      const HostTensor &blockTable, const HostTensor &starts,
                      const HostTensor &cuRows, const HostTensor &workspace,
                      int64_t latentDim, const CacheFormat &format) {
  llvm::Expected<GatherCacheCall> call =
      checkGatherCache(Device::CPU, kvCache, blockTable, starts, cuRows,
                       workspace, latentDim, format);
  if (!call)
    return call.takeError();
  // The workspace is written in place, as cache_write writes its cache.
  RankedTensorType wsTy = tensorType(ctx, workspace);
  auto wsMemrefTy = MemRefType::get(wsTy.getShape(), wsTy.getElementType());
  EntryBuilder eb(ctx, "gather_cache",
                  {tensorType(ctx, kvCache), tensorType(ctx, blockTable),
                   tensorType(ctx, starts), tensorType(ctx, cuRows),
                   wsMemrefTy},
                  {});
  OpBuilder &b = eb.getBuilder();
  Location loc = eb.getLoc();
  auto ws = bufferization::ToTensorOp::create(
      b, loc, wsTy, eb.getArg(4), /*restrict=*/true, /*writable=*/true);
  auto gathered = GatherCacheOp::create(
      b, loc, wsTy, eb.getArg(0), eb.getArg(1), eb.getArg(2), eb.getArg(3), ws,
      getLayout(ctx, call->cache), b.getI64IntegerAttr(call->latentDim));
  bufferization::MaterializeInDestinationOp::create(
      b, loc, /*result=*/Type(), gathered, eb.getArg(4), /*restrict=*/true,
      /*writable=*/true);
  Kernel kernel = eb.finish({}, {});
  kernel.isEmpty = !call->gathersAnything;
  return kernel;
}

llvm::Expected<Kernel>
mla::buildUpProjKv(MLIRContext &ctx, const HostTensor &latent,
                   const HostTensor &kvBProj, int64_t numHeads,
                   int64_t qkNopeHeadDim, int64_t vHeadDim) {
  llvm::Expected<UpProjKvCall> call = checkUpProjKv(
      Device::CPU, latent, kvBProj, numHeads, qkNopeHeadDim, vHeadDim);
  if (!call)
    return call.takeError();
  llvm::SmallVector<int64_t, 4> kShape{call->rows, call->numHeads,
                                       call->nopeDim};
  llvm::SmallVector<int64_t, 4> vShape{call->rows, call->numHeads,
                                       call->valueDim};
  Type kTy = tensorType(ctx, kShape, call->dtype);
  Type vTy = tensorType(ctx, vShape, call->dtype);
  EntryBuilder eb(ctx, "up_proj_kv",
                  {tensorType(ctx, latent), tensorType(ctx, kvBProj)},
                  {kTy, vTy});
  auto op = UpProjKvOp::create(eb.getBuilder(), eb.getLoc(), kTy, vTy,
                               eb.getArg(0), eb.getArg(1));
  return eb.finish(op.getResults(),
                   {{call->dtype, kShape}, {call->dtype, vShape}});
}

llvm::Expected<Kernel> mla::buildMha(MLIRContext &ctx, const HostTensor &q,
                                     const HostTensor &k, const HostTensor &v,
                                     const HostTensor &cuSeqlensQ,
                                     const HostTensor &cuSeqlensK,
                                     double softmaxScale, bool causal) {
  llvm::Expected<MhaCall> call = checkMha(Device::CPU, q, k, v, cuSeqlensQ,
                                          cuSeqlensK, softmaxScale, causal);
  if (!call)
    return call.takeError();
  llvm::SmallVector<int64_t, 4> outShape{call->tokens, call->numHeads,
                                         call->valueDim};
  llvm::SmallVector<int64_t, 4> lseShape{call->numHeads, call->tokens};
  Type outTy = tensorType(ctx, outShape, call->dtype);
  Type lseTy = tensorType(ctx, lseShape, DType::f32);
  EntryBuilder eb(ctx, "mha",
                  {tensorType(ctx, q), tensorType(ctx, k), tensorType(ctx, v),
                   tensorType(ctx, cuSeqlensQ), tensorType(ctx, cuSeqlensK)},
                  {outTy, lseTy});
  OpBuilder &b = eb.getBuilder();
  auto op = MhaOp::create(b, eb.getLoc(), outTy, lseTy, eb.getArg(0),
                          eb.getArg(1), eb.getArg(2), eb.getArg(3),
                          eb.getArg(4), getF32Attr(ctx, call->softmaxScale),
                          call->causal ? b.getUnitAttr() : UnitAttr());
  return eb.finish(op.getResults(),
                   {{call->dtype, outShape}, {DType::f32, lseShape}});
}

//===----------------------------------------------------------------------===//
// Prefill
//===----------------------------------------------------------------------===//

llvm::Expected<Kernel>
mla::buildPrefill(MLIRContext &ctx, const HostTensor &q, const HostTensor &kvC,
                  const HostTensor &kPe, const HostTensor &kvBProj,
                  const HostTensor &kvCache, const HostTensor &blockTable,
                  const HostTensor &queryStartLoc, const HostTensor &seqLens,
                  const PrefillOptions &options) {
  llvm::Expected<PrefillCall> call =
      checkPrefill(Device::CPU, q, kvC, kPe, kvBProj, kvCache, blockTable,
                   queryStartLoc, seqLens, options);
  if (!call)
    return call.takeError();
  llvm::SmallVector<int64_t, 4> outShape{call->tokens, call->numHeads,
                                         call->valueDim};
  Type outTy = tensorType(ctx, outShape, q.dtype);
  llvm::SmallVector<Type> argTypes;
  for (const HostTensor *t : {&q, &kvC, &kPe, &kvBProj, &kvCache, &blockTable,
                              &queryStartLoc, &seqLens})
    argTypes.push_back(tensorType(ctx, *t));
  EntryBuilder eb(ctx, "prefill", argTypes, {outTy});
  OpBuilder &b = eb.getBuilder();
  auto op = PrefillOp::create(
      b, eb.getLoc(), outTy, eb.getArg(0), eb.getArg(1), eb.getArg(2),
      eb.getArg(3), eb.getArg(4), eb.getArg(5), eb.getArg(6), eb.getArg(7),
      getLayout(ctx, call->cache), getF32Attr(ctx, call->softmaxScale),
      getOptionalI64Attr(b, call->workspaceRows));
  return eb.finish(op->getResults(), {{q.dtype, outShape}});
}

llvm::Expected<Kernel> mla::buildAttention(
    MLIRContext &ctx, const HostTensor &q, const HostTensor &kvC,
    const HostTensor &kPe, const HostTensor &kvBProj, const HostTensor &kvCache,
    const HostTensor &blockTable, const HostTensor &queryStartLoc,
    const HostTensor &seqLens, const AttentionOptions &options) {
  llvm::Expected<AttentionCall> call =
      checkAttention(Device::CPU, q, kvC, kPe, kvBProj, kvCache, blockTable,
                     queryStartLoc, seqLens, options);
  if (!call)
    return call.takeError();
  const PrefillCall &c = call->prefill;
  llvm::SmallVector<int64_t, 4> outShape{c.tokens, c.numHeads, c.valueDim};
  Type outTy = tensorType(ctx, outShape, q.dtype);
  llvm::SmallVector<Type> argTypes;
  for (const HostTensor *t : {&q, &kvC, &kPe, &kvBProj, &kvCache, &blockTable,
                              &queryStartLoc, &seqLens})
    argTypes.push_back(tensorType(ctx, *t));
  EntryBuilder eb(ctx, "attention", argTypes, {outTy});
  OpBuilder &b = eb.getBuilder();
  auto op = AttentionOp::create(
      b, eb.getLoc(), outTy, eb.getArg(0), eb.getArg(1), eb.getArg(2),
      eb.getArg(3), eb.getArg(4), eb.getArg(5), eb.getArg(6), eb.getArg(7),
      getLayout(ctx, c.cache), getF32Attr(ctx, c.softmaxScale),
      getOptionalI64Attr(b, c.workspaceRows));
  Kernel kernel = eb.finish(op->getResults(), {{q.dtype, outShape}});
  kernel.decodeThreshold = call->decodeThreshold;
  return kernel;
}
