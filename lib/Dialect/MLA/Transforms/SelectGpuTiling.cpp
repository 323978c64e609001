//===- SelectGpuTiling.cpp - the mla-select-gpu-tiling pass ---------------===//
//
// Chooses the tile parameters of every GPU decode kernel (rows per CTA, warp
// grid, KV block, staging depth) from the target and the op's shape, and
// records them as `mla.gpu_tiling` so the lowering reads a decision instead
// of a constant. The choice itself is mla::gpu::chooseDecodeTiling, shared
// with the host runtime.
//
//===----------------------------------------------------------------------===//

#include "mla/Contract/KernelABI.h"
#include "mla/Dialect/MLA/Transforms/Passes.h"
#include "mlir/IR/BuiltinOps.h"

namespace mla {
#define GEN_PASS_DEF_MLASELECTGPUTILING
#include "mla/Dialect/MLA/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;
using namespace mla;

namespace {

/// The decode shape of `op` as the tiling needs it, or failure (with a
/// diagnostic) when its sizes are not static.
FailureOr<gpu::DecodeShape> tilingShape(Operation *op) {
  auto qType = cast<RankedTensorType>(op->getOperand(0).getType());
  auto outType = cast<RankedTensorType>(op->getResult(0).getType());
  auto decode = [&](auto fn) {
    if (auto d = dyn_cast<DecodeOp>(op))
      return fn(d);
    return fn(cast<DecodePartialOp>(op));
  };
  DecodeQueryDims dims =
      decode([](auto d) -> DecodeQueryDims { return d.getQueryDims(); });
  if (ShapedType::isDynamic(dims.queryRows) ||
      ShapedType::isDynamic(dims.numHeads) ||
      ShapedType::isDynamic(dims.rowDim) ||
      outType.isDynamicDim(outType.getRank() - 1))
    return op->emitError() << "mla-select-gpu-tiling needs static Sq, N, L "
                              "and L+R; q is "
                           << qType;
  gpu::DecodeShape shape;
  shape.queryRows = dims.queryRows;
  shape.numHeads = dims.numHeads;
  shape.varlen = decode([](auto d) { return d.isVarlen(); });
  shape.latentDim = outType.getDimSize(outType.getRank() - 1);
  shape.ropeDim = dims.rowDim - shape.latentDim;
  auto layout = op->getAttrOfType<CacheLayoutAttr>("layout");
  if (!layout.getPageSize())
    return op->emitError() << "mla-select-gpu-tiling needs a planned page "
                              "size (run mla-select-layout first)";
  shape.pageSize = *layout.getPageSize();
  // The fp8 formats stage raw rows next to the dequantised tile: their
  // shared memory, and so the variant that fits, differ.
  switch (layout.getFormat()) {
  case RowFormat::fp8_e4m3:
    shape.kvFormat = gpu::CacheFormat::FP8E4M3;
    break;
  case RowFormat::fp8_e4m3_token:
    shape.kvFormat = gpu::CacheFormat::FP8E4M3Token;
    break;
  case RowFormat::fp8_ds_mla:
    shape.kvFormat = gpu::CacheFormat::FP8DsMla;
    break;
  case RowFormat::bf16:
  case RowFormat::f16:
  case RowFormat::f32:
    break;
  }
  return shape;
}

struct SelectGpuTilingPass
    : public mla::impl::MLASelectGpuTilingBase<SelectGpuTilingPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto target =
        module->getAttrOfType<TargetAttr>(MLADialect::getTargetAttrName());
    if (!target || target.getChip() == Chip::cpu)
      return;
    gpu::Chip chip =
        target.getChip() == Chip::sm90 ? gpu::Chip::SM90a : gpu::Chip::SM100a;
    StringAttr name =
        StringAttr::get(&getContext(), MLADialect::getGpuTilingAttrName());
    WalkResult result = module.walk([&](Operation *op) {
      if (!isa<DecodeOp, DecodePartialOp>(op))
        return WalkResult::advance();
      FailureOr<gpu::DecodeShape> shape = tilingShape(op);
      if (failed(shape))
        return WalkResult::interrupt();
      if (auto given = op->getAttrOfType<GpuTilingAttr>(name)) {
        gpu::DecodeTiling tiling = given.getTiling();
        std::string why = gpu::checkDecodeTiling(chip, *shape, tiling);
        if (!why.empty()) {
          op->emitError() << "the given " << given << " cannot run this "
                          << "decode on " << gpu::chipName(chip) << ": " << why;
          return WalkResult::interrupt();
        }
        return WalkResult::advance();
      }
      gpu::DecodeTiling tiling = gpu::chooseDecodeTiling(chip, *shape);
      std::string why = gpu::checkDecodeTiling(chip, *shape, tiling);
      if (!why.empty()) {
        op->emitError() << "no GPU decode tiling for this shape on "
                        << gpu::chipName(chip) << ": " << why;
        return WalkResult::interrupt();
      }
      op->setAttr(name, GpuTilingAttr::get(&getContext(), tiling));
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
