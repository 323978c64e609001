//===- CpuPipeline.cpp - the mla-to-llvm-cpu pipeline ---------------------===//
//
// The CPU path: the same dialect the GPU path compiles, lowered through
// linalg to LLVM and run in-process.
//
//===----------------------------------------------------------------------===//

#include "mla/Conversion/Passes.h"
#include "mla/Dialect/MLA/Transforms/Passes.h"
#include "mla/Pipelines/Pipelines.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void mla::buildMLAToLLVMCpuPipeline(OpPassManager &pm,
                                    const CpuPipelineOptions &options) {
  // 1. Plan for the CPU, then lower mla to tensor-level upstream dialects.
  PlanPipelineOptions plan;
  mla::forwardPlanningOptions(options, "cpu", plan);
  buildMLAPlanPipeline(pm, plan);
  pm.addPass(createConvertMLAToLinalg());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());

  // 2. Bufferize across function boundaries with plain (identity) layouts:
  // a cache operand written by cache_write is updated in the caller's
  // buffer, and results equivalent to an argument are dropped.
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  // Canonicalization forwards loop-carried buffers to the arguments they
  // alias, which is what lets equivalent results be recognised and dropped.
  pm.addPass(createCanonicalizerPass());
  pm.addPass(bufferization::createDropEquivalentBufferResultsPass());
  pm.addPass(createMLAPrepareCpuEntry());
  bufferization::buildBufferDeallocationPipeline(pm);
  pm.addPass(createConvertBufferizationToMemRefPass());

  // 3. Loops and LLVM.
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  pm.addNestedPass<func::FuncOp>(createConvertVectorToSCFPass());
  // Strided-metadata expansion emits affine.apply, so affine goes after it.
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  pm.addPass(createSCFToControlFlowPass());
  // Dot products reduce whole rows: let LLVM reassociate them into a tree
  // instead of a strictly ordered chain.
  ConvertVectorToLLVMPassOptions vectorToLLVM;
  vectorToLLVM.reassociateFPReductions = true;
  pm.addPass(createConvertVectorToLLVMPass(vectorToLLVM));
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void mla::registerMLAPipelines() {
  PassPipelineRegistration<PlanPipelineOptions>(
      "mla-plan",
      "Make every compiler decision on the mla dialect: page size and row "
      "format, decode-vs-prefill algorithm, split-KV plan, prefill chunking",
      buildMLAPlanPipeline);
  PassPipelineRegistration<CpuPipelineOptions>(
      "mla-to-llvm-cpu",
      "Lower mla to the LLVM dialect for in-process CPU execution "
      "(mla-plan{target=cpu}, convert-mla-to-linalg, one-shot bufferization, "
      "loops, LLVM)",
      buildMLAToLLVMCpuPipeline);
  PassPipelineRegistration<GpuPipelineOptions>(
      "mla-to-nvvm",
      "Compile mla to GPU kernels for sm_90a or sm_100a (mla-plan, "
      "mla-select-gpu-tiling, convert-mla-to-gpu, NVVM, gpu-module-to-binary)",
      buildMLAToNVVMPipeline);
}
