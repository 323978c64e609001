//===- Pipelines.h - named mla pass pipelines -------------------*- C++ -*-===//
//
// Pipelines live in C++ so that `mla-opt` replays exactly what the runtime
// JIT runs.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_PIPELINES_PIPELINES_H
#define MLA_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mla {

/// Options of `mla-to-llvm-cpu`.
struct CpuPipelineOptions : public mlir::PassPipelineOptions<CpuPipelineOptions> {
  Option<int64_t> workspaceRows{
      *this, "workspace-rows",
      llvm::cl::desc("Prefill context rows up-projected at once (0: the op's "
                     "attribute or the primer's default budget)"),
      llvm::cl::init(0)};
};

/// mla -> linalg/tensor/scf -> one-shot bufferization (function boundaries
/// included, so cache writes happen in place in the caller's buffer) ->
/// loops -> LLVM dialect, ready for the ExecutionEngine. Functions get C
/// interfaces (`_mlir_ciface_<name>`).
void buildMLAToLLVMCpuPipeline(mlir::OpPassManager &pm,
                               const CpuPipelineOptions &options);

/// Registers every named pipeline with the pass registry.
void registerMLAPipelines();

} // namespace mla

#endif // MLA_PIPELINES_PIPELINES_H
