//===- PlanPipeline.cpp - the mla-plan pipeline ---------------------------===//
//
// The planning passes in the order their decisions depend on each other:
// the layout (page size, row format) first, then which algorithm each
// request takes, the split-KV plan of the decodes that creates, the split
// itself, and the prefill chunking.
//
//===----------------------------------------------------------------------===//

#include "mla/Dialect/MLA/Transforms/Passes.h"
#include "mla/Pipelines/Pipelines.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;

void mla::buildMLAPlanPipeline(OpPassManager &pm,
                               const PlanPipelineOptions &options) {
  MLASelectLayoutOptions layout;
  layout.target = options.target;
  layout.kvFormat = options.kvFormat;
  pm.addPass(createMLASelectLayout(layout));

  MLASelectAlgorithmOptions algorithm;
  algorithm.decodeThreshold = options.decodeThreshold;
  pm.addNestedPass<func::FuncOp>(createMLASelectAlgorithm(algorithm));

  MLAPlanSplitsOptions splits;
  // Unless the user chose, the policy follows the target select-layout
  // settled on (mla-plan-splits' "auto").
  splits.policy = options.splitPolicy.empty()
                      ? std::string("auto")
                      : std::string(options.splitPolicy);
  splits.numSms = options.numSms;
  splits.maxSeqLen = options.maxSeqLen;
  pm.addPass(createMLAPlanSplits(splits));
  pm.addNestedPass<func::FuncOp>(createMLASplitKV());

  MLAChunkPrefillOptions chunk;
  chunk.workspaceRows = options.workspaceRows;
  chunk.maxModelLen = options.maxModelLen;
  chunk.maxNumSeqs = options.maxNumSeqs;
  // The default budget counts pages of the target's size (select-layout
  // enforces it on GPUs; the CPU takes the common 64).
  chunk.pageSize = options.target == "sm100" ? 128 : 64;
  pm.addNestedPass<func::FuncOp>(createMLAChunkPrefill(chunk));
}
