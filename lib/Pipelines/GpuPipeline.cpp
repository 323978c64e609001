//===- GpuPipeline.cpp - the mla-to-nvvm pipeline -------------------------===//
//
// Planning for the chip, kernel emission, then the device-side NVVM lowering
// known to work with MLIR 22 (vector and scf before the nvgpu/nvvm
// conversions; bare-pointer kernel parameters) and serialisation of the
// gpu.module into a gpu.binary.
//
//===----------------------------------------------------------------------===//

#include "mla/Contract/KernelABI.h"
#include "mla/Conversion/Passes.h"
#include "mla/Dialect/MLA/Transforms/Passes.h"
#include "mla/GPUCodegen/TargetInfo.h"
#include "mla/Pipelines/Pipelines.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void mla::buildMLAToNVVMPipeline(OpPassManager &pm,
                                 const GpuPipelineOptions &options) {
  gpu::Chip chip = gpu::Chip::SM90a;
  // An unknown chip is reported by convert-mla-to-gpu, which gets it as is.
  bool known = gpu::parseChip(options.chip, chip);

  PlanPipelineOptions plan;
  mla::forwardPlanningOptions(
      options, chip == gpu::Chip::SM90a ? "sm90" : "sm100", plan);
  buildMLAPlanPipeline(pm, plan);
  pm.addPass(createMLASelectGpuTiling());

  ConvertMLAToGPUOptions toGpu;
  toGpu.chip = options.chip;
  pm.addPass(createConvertMLAToGPU(toGpu));
  if (!known)
    return;

  GpuNVVMAttachTargetOptions attach;
  attach.triple = "nvptx64-nvidia-cuda";
  attach.chip = gpu::chipName(chip);
  attach.features = gpu_codegen::getTargetInfo(chip).ptxFeatures().str();
  attach.optLevel = 3;
  pm.addPass(createGpuNVVMAttachTarget(attach));

  OpPassManager &dev = pm.nest<mlir::gpu::GPUModuleOp>();
  dev.addPass(createConvertVectorToLLVMPass());
  dev.addPass(createSCFToControlFlowPass());
  dev.addPass(createConvertNVGPUToNVVMPass());
  dev.addPass(createConvertNVVMToLLVMPass());
  dev.addPass(memref::createExpandStridedMetadataPass());
  ConvertGpuOpsToNVVMOpsOptions toNvvm;
  toNvvm.useBarePtrCallConv = true;
  dev.addPass(createConvertGpuOpsToNVVMOps(toNvvm));
  dev.addPass(createCanonicalizerPass());
  dev.addPass(createCSEPass());
  dev.addPass(createReconcileUnrealizedCastsPass());

  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = options.format;
  pm.addPass(createGpuModuleToBinaryPass(binary));
}
