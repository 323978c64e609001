//===- ConvertMLAToGPU.cpp - the convert-mla-to-gpu pass ------------------===//
//
// Emits the device kernels of every mla op of the module into one
// `gpu.module @mla_kernels` and removes the host functions (the host side of
// the GPU path is the runtime, which follows mla/Contract/KernelABI.h).
//
//===----------------------------------------------------------------------===//

#include "mla/Conversion/MLAToGPU/MLAToGPU.h"
#include "mla/Conversion/Passes.h"
#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mla/GPUCodegen/DeviceBuilder.h"
#include "mla/GPUCodegen/TargetInfo.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mla {
#define GEN_PASS_DEF_CONVERTMLATOGPU
#include "mla/Conversion/Passes.h.inc"
} // namespace mla

using namespace mlir;
using namespace mla;
namespace abi = mla::gpu;

namespace {

/// The chip from the option, else from the module's `mla.target`.
FailureOr<abi::Chip> resolveChip(ModuleOp module, StringRef option) {
  abi::Chip chip;
  if (!option.empty()) {
    if (!abi::parseChip(option.str(), chip))
      return module.emitError() << "convert-mla-to-gpu: unknown chip '"
                                << option << "' (expected sm_90a or sm_100a)";
    return chip;
  }
  auto target =
      module->getAttrOfType<TargetAttr>(MLADialect::getTargetAttrName());
  if (!target)
    return module.emitError()
           << "convert-mla-to-gpu needs a chip: pass chip=sm_90a|sm_100a or "
              "set the module's 'mla.target'";
  switch (target.getChip()) {
  case Chip::sm90:
    return abi::Chip::SM90a;
  case Chip::sm100:
    return abi::Chip::SM100a;
  case Chip::cpu:
    break;
  }
  return module.emitError() << "convert-mla-to-gpu: the module targets the "
                               "CPU; use mla-to-llvm-cpu instead";
}

} // namespace

namespace mla::gpu_codegen {

/// The baked dimensions of a decode op (mla.decode or mla.decode_partial);
/// a varlen one bakes its largest query length as Sq.
FailureOr<abi::DecodeShape> getDecodeShape(Operation *op) {
  auto qType = cast<RankedTensorType>(op->getOperand(0).getType());
  auto cacheType = cast<RankedTensorType>(op->getOperand(1).getType());
  auto layout = op->getAttrOfType<CacheLayoutAttr>("layout");
  auto outType = cast<RankedTensorType>(op->getResult(0).getType());
  auto queryDims = [&](auto decode) {
    return std::make_pair(decode.getQueryDims(), decode.isVarlen());
  };
  auto [dims, varlen] = isa<DecodeOp>(op)
                            ? queryDims(cast<DecodeOp>(op))
                            : queryDims(cast<DecodePartialOp>(op));
  if (ShapedType::isDynamic(dims.queryRows) ||
      ShapedType::isDynamic(dims.numHeads) ||
      ShapedType::isDynamic(dims.rowDim))
    return op->emitError() << "GPU decode needs static Sq, N and L+R in q, got "
                           << qType;
  abi::DecodeShape shape;
  shape.queryRows = dims.queryRows;
  shape.numHeads = dims.numHeads;
  shape.varlen = varlen;
  int64_t rowDim = dims.rowDim;
  shape.latentDim = outType.getDimSize(outType.getRank() - 1);
  if (ShapedType::isDynamic(shape.latentDim))
    return op->emitError() << "GPU decode needs a static latent width L";
  shape.ropeDim = rowDim - shape.latentDim;
  if (!layout.getPageSize())
    return op->emitError() << "GPU decode needs a planned page size in "
                           << layout << " (run mla-select-layout)";
  shape.pageSize = *layout.getPageSize();
  Type elem = cacheType.getElementType();
  switch (layout.getFormat()) {
  case RowFormat::bf16:
  case RowFormat::f16:
    if (qType.getElementType() != elem)
      return op->emitError()
             << "GPU decode needs q in the cache's element type " << elem
             << ", got " << qType.getElementType();
    break;
  case RowFormat::f32:
    return op->emitError() << "GPU decode reads bf16, f16 and fp8 caches; "
                              "the f32 format runs on the CPU path only";
  case RowFormat::fp8_e4m3:
    // The kernel takes the per-tensor scale at launch (kv_scale), like the
    // softmax scale: the layout's value is the CPU path's.
    shape.kvFormat = abi::CacheFormat::FP8E4M3;
    break;
  case RowFormat::fp8_e4m3_token:
    shape.kvFormat = abi::CacheFormat::FP8E4M3Token;
    break;
  case RowFormat::fp8_ds_mla:
    shape.kvFormat = abi::CacheFormat::FP8DsMla;
    break;
  }
  Type qElem = qType.getElementType();
  if (!qElem.isBF16() && !qElem.isF16())
    return op->emitError() << "GPU decode takes a bf16 or f16 q, got " << qElem;
  shape.elem = qElem.isBF16() ? abi::ElemType::BF16 : abi::ElemType::F16;
  shape.causal = op->hasAttr("causal");
  return shape;
}

FailureOr<abi::DecodeTiling> getDecodeTiling(Operation *op, abi::Chip chip,
                                             const abi::DecodeShape &shape) {
  auto attr =
      op->getAttrOfType<GpuTilingAttr>(MLADialect::getGpuTilingAttrName());
  if (!attr)
    return op->emitError() << "GPU decode needs '"
                           << MLADialect::getGpuTilingAttrName()
                           << "': run mla-select-gpu-tiling (part of mla-plan "
                              "for GPU targets) first";
  abi::DecodeTiling tiling = attr.getTiling();
  std::string why = abi::checkDecodeTiling(chip, shape, tiling);
  if (!why.empty())
    return op->emitError() << "unusable " << attr << ": " << why;
  return tiling;
}

} // namespace mla::gpu_codegen

namespace {

using namespace mla::gpu_codegen;

/// Emits `kind` kernel(s) for one op, with unique symbol names when a module
/// holds several ops of a kind (the first keeps the ABI name).
struct KernelEmitter {
  ::mlir::gpu::GPUModuleOp kernels;
  abi::Chip chip;
  OpBuilder builder;

  std::string uniqueName(StringRef base) {
    return mla::gpu_codegen::uniqueSymbolName(kernels, base);
  }

  LogicalResult emitDecode(Operation *op, bool withCombine) {
    FailureOr<abi::DecodeShape> shape = getDecodeShape(op);
    if (failed(shape))
      return failure();
    FailureOr<abi::DecodeTiling> tiling = getDecodeTiling(op, chip, *shape);
    if (failed(tiling))
      return failure();
    std::string name = uniqueName(abi::kDecodePartialKernel);
    LogicalResult emitted =
        getTargetInfo(chip).decodeMma() == MmaFamily::Tcgen05
            ? LogicalResult(emitDecodePartialSM100(builder, op->getLoc(), name,
                                                   *shape, *tiling))
            : emitDecodePartialSM90(builder, op->getLoc(), name, *shape,
                                    *tiling);
    if (failed(emitted))
      return failure();
    // The device planner goes with every partial kernel: it plans for the
    // page size, Sq and causality that kernel was built for.
    if (failed(emitDecodePlan(builder, op->getLoc(),
                              uniqueName(abi::kDecodePlanKernel), *shape)))
      return failure();
    if (!withCombine)
      return success();
    return emitCombine(builder, op->getLoc(), uniqueName(abi::kCombineKernel),
                       combineShape(*shape));
  }

  /// A varlen decode's token-packed partials combine as T requests of one
  /// query row (KernelABI.h).
  static abi::DecodeShape combineShape(abi::DecodeShape shape) {
    if (shape.varlen)
      shape.queryRows = 1;
    shape.varlen = false;
    return shape;
  }

  LogicalResult emitCombineOp(CombineOp op) {
    auto partType = cast<RankedTensorType>(op.getPartialOut().getType());
    auto outType = cast<RankedTensorType>(op.getOut().getType());
    // Token-packed [S, T, N, L] partials are [S, T, 1, N, L].
    bool packed = partType.getRank() == 4;
    for (int64_t i = 2; i < partType.getRank(); ++i)
      if (partType.isDynamicDim(i))
        return op.emitError()
               << "GPU combine needs static Sq, N and L, got " << partType;
    abi::DecodeShape shape;
    shape.queryRows = packed ? 1 : partType.getDimSize(2);
    shape.numHeads = partType.getDimSize(partType.getRank() - 2);
    shape.latentDim = partType.getDimSize(partType.getRank() - 1);
    Type elem = outType.getElementType();
    if (!elem.isBF16() && !elem.isF16())
      return op.emitError() << "GPU combine writes bf16 or f16, got " << elem;
    shape.elem = elem.isBF16() ? abi::ElemType::BF16 : abi::ElemType::F16;
    return emitCombine(builder, op.getLoc(), uniqueName(abi::kCombineKernel),
                       shape);
  }

  LogicalResult emit(Operation *op) {
    return llvm::TypeSwitch<Operation *, LogicalResult>(op)
        .Case<DecodeOp>([&](auto) { return emitDecode(op, true); })
        .Case<DecodePartialOp>([&](DecodePartialOp d) -> LogicalResult {
          // The kernel reads seq_lens as the cache's own lengths; DCP ranks
          // launch it with their local lengths (python/mla/dcp.py).
          if (d.getShardAttr())
            return d.emitOpError(
                "with a DCP shard (global seq_lens) has no GPU kernel: "
                "launch the decode per rank with local seq_lens (mla.dcp)");
          return emitDecode(op, false);
        })
        .Case<CombineOp>([&](CombineOp c) { return emitCombineOp(c); })
        .Case<CacheWriteOp>(
            [&](auto) { return emitCacheWriteKernels(builder, op, chip); })
        .Case<AbsorbQOp>(
            [&](auto) { return emitAbsorbQKernels(builder, op, chip); })
        .Case<UpProjOutOp>(
            [&](auto) { return emitUpProjOutKernels(builder, op, chip); })
        .Case<GatherCacheOp>(
            [&](auto) { return emitGatherCacheKernels(builder, op, chip); })
        .Case<MergeStatesOp>(
            [&](auto) { return emitMergeStatesKernels(builder, op, chip); })
        .Case<UpProjKvOp>(
            [&](auto) { return emitUpProjKvKernels(builder, op, chip); })
        .Case<MhaOp>([&](auto) { return emitMhaKernels(builder, op, chip); })
        .Case<PlanSplitsOp>([](auto) { return success(); })
        .Default([](Operation *other) {
          return other->emitError()
                 << "'" << other->getName()
                 << "' has no GPU lowering yet; run it on the CPU path "
                    "(mla-to-llvm-cpu)";
        });
  }
};

struct ConvertMLAToGPUPass
    : public mla::impl::ConvertMLAToGPUBase<ConvertMLAToGPUPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<abi::Chip> chipOr = resolveChip(module, chip);
    if (failed(chipOr))
      return signalPassFailure();

    SmallVector<func::FuncOp> hostFuncs;
    SmallVector<Operation *> mlaOps;
    for (auto fn : module.getOps<func::FuncOp>()) {
      bool hasMla = false;
      fn.walk([&](Operation *op) {
        if (isa<MLADialect>(op->getDialect())) {
          mlaOps.push_back(op);
          hasMla = true;
        }
      });
      if (hasMla)
        hostFuncs.push_back(fn);
    }

    MLIRContext *ctx = &getContext();
    if (mlaOps.empty())
      return;
    OpBuilder moduleBuilder(ctx);
    moduleBuilder.setInsertionPointToEnd(module.getBody());
    auto kernels = ::mlir::gpu::GPUModuleOp::create(
        moduleBuilder, module.getLoc(), "mla_kernels");
    KernelEmitter emitter{kernels, *chipOr, OpBuilder(ctx)};
    bool failedAny = false;
    for (Operation *op : mlaOps) {
      emitter.builder.setInsertionPointToEnd(kernels.getBody());
      if (failed(emitter.emit(op)))
        failedAny = true;
    }
    if (failedAny)
      return signalPassFailure();

    for (func::FuncOp fn : hostFuncs)
      fn.erase();
    module->setAttr(::mlir::gpu::GPUDialect::getContainerModuleAttrName(),
                    UnitAttr::get(ctx));
    module->removeAttr(MLADialect::getTargetAttrName());
  }
};

} // namespace
