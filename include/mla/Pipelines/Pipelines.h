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

/// Options shared by every pipeline that plans (mla-plan and the lowering
/// pipelines that start with it).
template <typename Derived>
struct PlanningOptions : public mlir::PassPipelineOptions<Derived> {
  using Base = mlir::PassPipelineOptions<Derived>;
  typename Base::template Option<std::string> splitPolicy{
      *this, "split-policy",
      llvm::cl::desc("heuristic | balanced | batch-invariant (default: "
                     "balanced on GPUs, batch-invariant on the CPU)"),
      llvm::cl::init("")};
  typename Base::template Option<int64_t> numSms{
      *this, "num-sms",
      llvm::cl::desc("Streaming multiprocessors (0: the target's)"),
      llvm::cl::init(0)};
  typename Base::template Option<int64_t> maxSeqLen{
      *this, "max-seq-len",
      llvm::cl::desc("Longest sequence of a dynamic batch (sizes split plans)"),
      llvm::cl::init(32768)};
  typename Base::template Option<int64_t> decodeThreshold{
      *this, "decode-threshold",
      llvm::cl::desc("Requests with q_len <= this take the absorbed decode "
                     "path in mla.attention"),
      llvm::cl::init(1)};
  typename Base::template Option<int64_t> workspaceRows{
      *this, "workspace-rows",
      llvm::cl::desc("Prefill context rows up-projected at once (0: the op's "
                     "attribute or the primer's default budget)"),
      llvm::cl::init(0)};
  typename Base::template Option<int64_t> maxModelLen{
      *this, "max-model-len",
      llvm::cl::desc("Longest sequence served (the default prefill budget)"),
      llvm::cl::init(4096)};
  typename Base::template Option<int64_t> maxNumSeqs{
      *this, "max-num-seqs",
      llvm::cl::desc("Most concurrent sequences (the default prefill budget)"),
      llvm::cl::init(128)};
  typename Base::template Option<std::string> kvFormat{
      *this, "kv-format",
      llvm::cl::desc("Required cache row format (empty: as the IR says)"),
      llvm::cl::init("")};
};

/// Options of `mla-plan`.
struct PlanPipelineOptions : public PlanningOptions<PlanPipelineOptions> {
  Option<std::string> target{
      *this, "target",
      llvm::cl::desc("sm90 | sm100 | cpu (empty: the module's mla.target)"),
      llvm::cl::init("")};
};

/// Sets `plan` to the planning options of a lowering pipeline, for
/// `target` (pass options cannot be copied, hence the out-parameter).
template <typename Derived>
void forwardPlanningOptions(const PlanningOptions<Derived> &options,
                            llvm::StringRef target, PlanPipelineOptions &plan) {
  plan.target = target.str();
  plan.splitPolicy = options.splitPolicy;
  plan.numSms = options.numSms;
  plan.maxSeqLen = options.maxSeqLen;
  plan.decodeThreshold = options.decodeThreshold;
  plan.workspaceRows = options.workspaceRows;
  plan.maxModelLen = options.maxModelLen;
  plan.maxNumSeqs = options.maxNumSeqs;
  plan.kvFormat = options.kvFormat;
}

/// Options of `mla-to-llvm-cpu` (it plans for target=cpu first).
struct CpuPipelineOptions : public PlanningOptions<CpuPipelineOptions> {};

/// Options of `mla-to-nvvm` (it plans for the chip's target first).
struct GpuPipelineOptions : public PlanningOptions<GpuPipelineOptions> {
  Option<std::string> chip{*this, "chip", llvm::cl::desc("sm_90a | sm_100a"),
                           llvm::cl::init("sm_90a")};
  Option<std::string> format{
      *this, "format",
      llvm::cl::desc("gpu.binary payload: bin (cubin, runs ptxas), isa "
                     "(PTX), fatbin or llvm"),
      llvm::cl::init("bin")};
};

/// The planning passes in order: select-layout, select-algorithm,
/// plan-splits, split-kv, chunk-prefill. Every decision of the compiler is
/// made here and is visible in the IR afterwards.
void buildMLAPlanPipeline(mlir::OpPassManager &pm,
                          const PlanPipelineOptions &options);

/// mla -> linalg/tensor/scf -> one-shot bufferization (function boundaries
/// included, so cache writes happen in place in the caller's buffer) ->
/// loops -> LLVM dialect, ready for the ExecutionEngine. Functions get C
/// interfaces (`_mlir_ciface_<name>`).
void buildMLAToLLVMCpuPipeline(mlir::OpPassManager &pm,
                               const CpuPipelineOptions &options);

/// mla-plan{target} -> mla-select-gpu-tiling -> convert-mla-to-gpu ->
/// nvvm-attach-target -> NVVM/LLVM inside the gpu.module ->
/// gpu-module-to-binary. The result is a module holding one gpu.binary
/// `@mla_kernels` whose kernels follow mla/Contract/KernelABI.h.
void buildMLAToNVVMPipeline(mlir::OpPassManager &pm,
                            const GpuPipelineOptions &options);

/// Registers every named pipeline with the pass registry.
void registerMLAPipelines();

} // namespace mla

#endif // MLA_PIPELINES_PIPELINES_H
