//===- SelectLayout.cpp - the mla-select-layout pass ----------------------===//
//
// Plans the paged cache for one chip before anything is lowered: every op
// with a #mla.cache_layout gets the page size the chip's kernels accept
// (written into the layout, so later passes read a decision instead of
// re-deriving one), the row format the user asked for, and on sm100 the
// head count Cutlass MLA pads the query to. Whatever the IR already fixes
// (a static page dimension, a layout page_size, the cache's element type) is
// checked against the chip here, where the message can still point at the
// IR the user wrote, instead of surfacing later as a kernel that does not
// exist.
//
//===----------------------------------------------------------------------===//

#include "mla/Dialect/MLA/Transforms/Passes.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mla {
#define GEN_PASS_DEF_MLASELECTLAYOUT
#include "mla/Dialect/MLA/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;
using namespace mla;

static constexpr int64_t kDyn = ShapedType::kDynamic;

/// Query heads one Cutlass MLA CTA processes on sm100; smaller head counts
/// are padded up to it.
static constexpr int64_t kSm100Heads = 128;

static bool known(int64_t d) { return !ShapedType::isDynamic(d); }

static int64_t dim(Value v, unsigned i) {
  return cast<RankedTensorType>(v.getType()).getDimSize(i);
}

static int64_t lastDim(Value v) {
  auto ty = cast<RankedTensorType>(v.getType());
  return ty.getDimSize(ty.getRank() - 1);
}

namespace {
/// What the planner needs to know about one op that reads or writes the
/// paged cache. The op verifiers have already checked ranks and the
/// relations between these values.
struct CacheUse {
  Operation *op;
  StringAttr layoutName;
  CacheLayoutAttr layout;
  /// [pages, page_size, row].
  Value cache;
  /// Logical row width D = L + R and latent width L (dynamic when the
  /// operand types do not say).
  int64_t rowDim;
  int64_t latentDim;
  /// q of the ops that run the absorbed decode kernel (the ones sm100 pads),
  /// and the position of N in its shape; null for the others.
  Value query = nullptr;
  unsigned headDim = 0;

  /// The row width `layout` needs for this op, or dynamic when it depends on
  /// a width the types leave open.
  int64_t requiredRowWidth(CacheLayoutAttr layout) const {
    if (!known(rowDim))
      return kDyn;
    if (known(latentDim))
      return layout.getRowWidth(latentDim, rowDim - latentDim);
    // Only fp8_ds_mla needs to know where the latent ends; the other formats
    // depend on D alone.
    if (layout.getFormat() == RowFormat::fp8_ds_mla)
      return kDyn;
    return layout.getRowWidth(rowDim, 0);
  }
};
} // namespace

/// cache_write, prefill and attention: D = L + R from kv_c and k_pe.
template <typename OpTy> static CacheUse kvInputUse(OpTy op) {
  int64_t latent = dim(op.getKvC(), 1), rope = lastDim(op.getKPe());
  return {op,
          op.getLayoutAttrName(),
          op.getLayout(),
          op.getCache(),
          known(latent) && known(rope) ? latent + rope : kDyn,
          latent};
}

/// decode and decode_partial: D from q [B, Sq, N, D] (varlen [T, N, D]), L
/// from the output.
template <typename OpTy>
static CacheUse decodeLikeUse(OpTy op, int64_t latent) {
  return {op,
          op.getLayoutAttrName(),
          op.getLayout(),
          op.getCache(),
          op.getQueryDims().rowDim,
          latent,
          op.getQ(),
          /*headDim=*/op.isVarlen() ? 1u : 2u};
}

static std::optional<CacheUse> getCacheUse(Operation *op) {
  return TypeSwitch<Operation *, std::optional<CacheUse>>(op)
      .Case([](CacheWriteOp w) -> CacheUse { return kvInputUse(w); })
      .Case([](GatherCacheOp g) -> CacheUse {
        IntegerAttr latent = g.getLatentDimAttr();
        return {g,
                g.getLayoutAttrName(),
                g.getLayout(),
                g.getCache(),
                dim(g.getWorkspace(), 1),
                latent ? latent.getInt() : kDyn};
      })
      .Case([](DecodeOp d) -> CacheUse {
        return decodeLikeUse(d, lastDim(d.getOut()));
      })
      .Case([](DecodePartialOp d) -> CacheUse {
        return decodeLikeUse(d, lastDim(d.getPartialOut()));
      })
      .Case([](PrefillOp p) -> CacheUse { return kvInputUse(p); })
      .Case([](AttentionOp a) -> CacheUse {
        // The mixed batch's decode requests run the padded decode kernel.
        CacheUse use = kvInputUse(a);
        use.query = a.getQ();
        use.headDim = 1;
        return use;
      })
      .Default([](Operation *) { return std::nullopt; });
}

/// The cache value an op's cache operand was written from: cache_write
/// results are the same buffer, so a write and the reads of its result must
/// agree on the page size.
static Value cacheRoot(Value cache) {
  while (auto write = cache.getDefiningOp<CacheWriteOp>())
    cache = write.getCache();
  return cache;
}

/// The page size the IR already fixes for `use`, if any. The verifier keeps
/// a layout page_size and a static page dimension equal.
static std::optional<int64_t> fixedPageSize(const CacheUse &use) {
  if (std::optional<int64_t> pageSize = use.layout.getPageSize())
    return *pageSize;
  if (int64_t pageDim = dim(use.cache, 1); known(pageDim))
    return pageDim;
  return std::nullopt;
}

/// The one page size the chip's decode kernel supports, if it has only one.
static std::optional<int64_t> requiredPageSize(Chip chip) {
  switch (chip) {
  case Chip::sm90:
    return 64; // FlashMLA's paged KV layout.
  case Chip::sm100:
    return 128; // Cutlass MLA's paged KV layout.
  case Chip::cpu:
    return std::nullopt; // Any multiple of 16 (the layout verifier's rule).
  }
  llvm_unreachable("unknown chip");
}

static StringRef kernelName(Chip chip) {
  return chip == Chip::sm90 ? "FlashMLA" : "Cutlass MLA";
}

/// The page size chosen when nothing fixes one. The CPU kernels take any
/// multiple of 16; 64 matches the sm90 default so that a cache planned for
/// the CPU reference has the layout most GPU deployments use.
static int64_t defaultPageSize(Chip chip) {
  return requiredPageSize(chip).value_or(64);
}

static LogicalResult checkPageSize(Chip chip, const CacheUse &use,
                                   int64_t pageSize) {
  std::optional<int64_t> required = requiredPageSize(chip);
  if (!required || *required == pageSize)
    return success();
  InFlightDiagnostic diag = use.op->emitOpError()
                            << stringifyChip(chip) << " kernels need page size "
                            << *required << " (" << kernelName(chip)
                            << "'s layout), but the cache has page size "
                            << pageSize;
  if (use.layout.getPageSize())
    diag << " (the layout's page_size)";
  else
    diag << " (from its type " << use.cache.getType() << ")";
  diag << "; allocate the cache with " << *required
       << "-token pages, or compile for target=cpu, which takes any multiple "
          "of 16";
  return diag;
}

/// On sm100 the decode kernel runs 128 query heads per CTA; fewer heads are
/// padded (the GPU lowering reads `mla.padded_heads` to size q and the
/// output), more do not fit. sm90 and the CPU run the real head count.
static FailureOr<std::optional<int64_t>> plannedHeads(Chip chip,
                                                      const CacheUse &use) {
  if (!use.query || chip != Chip::sm100)
    return std::optional<int64_t>();
  int64_t heads = dim(use.query, use.headDim);
  if (!known(heads))
    return use.op->emitOpError()
           << "sm100 decode pads heads to " << kSm100Heads
           << ", so the head count N (q dim " << use.headDim
           << ") must be static, but q is " << use.query.getType();
  if (heads > kSm100Heads)
    return use.op->emitOpError()
           << "sm100 decode pads heads to " << kSm100Heads << "; N = " << heads
           << " does not fit (Cutlass MLA runs at most " << kSm100Heads
           << " query heads per CTA): split the heads over several decodes or "
              "compile for sm90";
  if (heads == kSm100Heads)
    return std::optional<int64_t>();
  return std::optional<int64_t>(kSm100Heads);
}

/// The row format and fp8 scale `use` ends up with: the layout's own unless
/// kv-format asks for another one that the cache tensor can hold.
static FailureOr<std::pair<RowFormat, FloatAttr>>
plannedFormat(const CacheUse &use, std::optional<RowFormat> wanted) {
  CacheLayoutAttr layout = use.layout;
  if (!wanted || *wanted == layout.getFormat())
    return std::make_pair(layout.getFormat(), layout.getScale());
  // A layout of another format never carries a scale (the attribute verifier
  // rejects one), and the scale comes from calibrating the cache's values,
  // which this pass cannot see.
  if (*wanted == RowFormat::fp8_e4m3)
    return use.op->emitOpError()
           << "kv-format=fp8_e4m3 needs a per-tensor scale, but the layout "
           << layout
           << " has none and the pass cannot invent one (it comes from "
              "calibration): write the layout as #mla.cache_layout<format = "
              "fp8_e4m3, scale = ...>, or use kv-format=fp8_e4m3_token, which "
              "stores a scale per token";

  MLIRContext *ctx = use.op->getContext();
  auto target = CacheLayoutAttr::get(ctx, *wanted, std::nullopt, FloatAttr());
  auto cacheTy = cast<RankedTensorType>(use.cache.getType());
  Type element = target.getCacheElementType(ctx);
  int64_t width = use.requiredRowWidth(target);
  int64_t row = cacheTy.getDimSize(2);
  if (cacheTy.getElementType() == element &&
      (!known(width) || !known(row) || row == width))
    return std::make_pair(*wanted, FloatAttr());

  InFlightDiagnostic diag = use.op->emitOpError()
                            << "kv-format=" << stringifyRowFormat(*wanted)
                            << " needs a cache of " << element;
  if (known(width)) {
    diag << " with rows " << width << " wide";
    if (known(use.latentDim))
      diag << " (L = " << use.latentDim
           << ", R = " << use.rowDim - use.latentDim << ")";
  }
  diag << ", but the cache is " << cacheTy
       << "; allocate the cache in that format or leave kv-format unset";
  return diag;
}

namespace {
struct SelectLayoutPass
    : public mla::impl::MLASelectLayoutBase<SelectLayoutPass> {
  using MLASelectLayoutBase::MLASelectLayoutBase;

  void runOnOperation() override;

private:
  FailureOr<Chip> resolveTarget(ModuleOp module);
};
} // namespace

/// The chip from the `target` option or the module's `mla.target`; they
/// must agree when both are given, since later passes read the attribute.
FailureOr<Chip> SelectLayoutPass::resolveTarget(ModuleOp module) {
  auto attr =
      module->getAttrOfType<TargetAttr>(MLADialect::getTargetAttrName());
  if (target.empty()) {
    if (attr)
      return attr.getChip();
    return module.emitError()
           << "mla-select-layout needs a target: pass target=sm90|sm100|cpu "
              "or give the module an '"
           << MLADialect::getTargetAttrName() << "' attribute";
  }
  std::optional<Chip> chip = symbolizeChip(target);
  if (!chip)
    return module.emitError() << "mla-select-layout: unknown target '" << target
                              << "'; expected sm90, sm100 or cpu";
  if (attr && attr.getChip() != *chip)
    return module.emitError() << "mla-select-layout: target=" << target
                              << " disagrees with the module's '"
                              << MLADialect::getTargetAttrName() << "' " << attr
                              << "; drop the option or the attribute";
  return *chip;
}

void SelectLayoutPass::runOnOperation() {
  ModuleOp module = getOperation();
  MLIRContext *ctx = &getContext();
  FailureOr<Chip> chip = resolveTarget(module);
  if (failed(chip))
    return signalPassFailure();
  std::optional<RowFormat> wantedFormat;
  if (!kvFormat.empty()) {
    wantedFormat = symbolizeRowFormat(kvFormat);
    if (!wantedFormat) {
      module.emitError() << "mla-select-layout: unknown kv-format '" << kvFormat
                         << "'; expected bf16, f16, f32, fp8_e4m3, "
                            "fp8_e4m3_token or fp8_ds_mla";
      return signalPassFailure();
    }
  }

  SmallVector<CacheUse> uses;
  module.walk([&](Operation *op) {
    if (std::optional<CacheUse> use = getCacheUse(op))
      uses.push_back(*use);
  });

  // Check everything before rewriting anything, reporting every conflict in
  // one run. A page size fixed anywhere on a cache also decides it for the
  // ops on that cache that leave it open.
  bool ok = true;
  llvm::DenseMap<Value, std::pair<int64_t, Operation *>> pageSizeOfCache;
  for (const CacheUse &use : uses) {
    std::optional<int64_t> pageSize = fixedPageSize(use);
    if (!pageSize)
      continue;
    if (failed(checkPageSize(*chip, use, *pageSize))) {
      ok = false;
      continue;
    }
    auto [it, inserted] =
        pageSizeOfCache.try_emplace(cacheRoot(use.cache), *pageSize, use.op);
    if (!inserted && it->second.first != *pageSize) {
      InFlightDiagnostic diag =
          use.op->emitOpError()
          << "uses page size " << *pageSize
          << ", but another op on the same cache uses page size "
          << it->second.first << "; a cache has one page size";
      diag.attachNote(it->second.second->getLoc())
          << "page size " << it->second.first << " fixed here";
      ok = false;
    }
  }

  struct Plan {
    RowFormat format;
    FloatAttr scale;
    std::optional<int64_t> paddedHeads;
  };
  SmallVector<Plan> plans;
  for (const CacheUse &use : uses) {
    auto format = plannedFormat(use, wantedFormat);
    auto heads = plannedHeads(*chip, use);
    if (failed(format) || failed(heads)) {
      ok = false;
      continue;
    }
    plans.push_back({format->first, format->second, *heads});
  }
  if (!ok)
    return signalPassFailure();

  for (auto [use, plan] : llvm::zip_equal(uses, plans)) {
    auto it = pageSizeOfCache.find(cacheRoot(use.cache));
    int64_t pageSize =
        it != pageSizeOfCache.end() ? it->second.first : defaultPageSize(*chip);
    use.op->setAttr(use.layoutName, CacheLayoutAttr::get(ctx, plan.format,
                                                         pageSize, plan.scale));
    // The pass owns the padding decision: a stale attribute (written by hand
    // or for another head count) would make the lowering pad wrongly.
    if (plan.paddedHeads)
      use.op->setAttr(
          MLADialect::getPaddedHeadsAttrName(),
          IntegerAttr::get(IntegerType::get(ctx, 64), *plan.paddedHeads));
    else
      use.op->removeAttr(MLADialect::getPaddedHeadsAttrName());
  }

  // Later passes (split planning, the lowerings) read the chip from here.
  if (!module->hasAttr(MLADialect::getTargetAttrName()))
    module->setAttr(MLADialect::getTargetAttrName(),
                    TargetAttr::get(ctx, *chip, std::nullopt));
}
