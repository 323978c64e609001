//===- PrepareCpuEntry.cpp - the mla-prepare-cpu-entry pass ---------------===//
//
// Public functions are the JIT's entry points. After bufferization they may
// return a memref argument they wrote in place (a cache); such results are
// dropped so nothing clones the cache, and the functions get C interfaces.
//
//===----------------------------------------------------------------------===//

#include "mla/Dialect/MLA/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"

namespace mla {
#define GEN_PASS_DEF_MLAPREPARECPUENTRY
#include "mla/Dialect/MLA/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;

namespace {
struct PrepareCpuEntryPass
    : public mla::impl::MLAPrepareCpuEntryBase<PrepareCpuEntryPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> entries;
    for (auto fn : module.getOps<func::FuncOp>())
      if (fn.isPublic() && !fn.isExternal())
        entries.push_back(fn);

    // Upstream's rewrite only touches private functions; hide the entries'
    // visibility from it for the duration of the call.
    for (func::FuncOp fn : entries)
      fn.setPrivate();
    LogicalResult dropped = bufferization::dropEquivalentBufferResults(module);
    for (func::FuncOp fn : entries) {
      fn.setPublic();
      fn->setAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName(),
                  UnitAttr::get(&getContext()));
    }
    if (failed(dropped))
      signalPassFailure();
  }
};
} // namespace
