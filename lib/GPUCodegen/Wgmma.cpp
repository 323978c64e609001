//===- Wgmma.cpp - warpgroup MMA (wgmma.mma_async m64nNk16) ---------------===//

#include "mla/GPUCodegen/Wgmma.h"
#include "mla/GPUCodegen/InlinePTX.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mla::gpu_codegen;

WgmmaAccum WgmmaAccum::splat(int64_t n, Value v) {
  return {SmallVector<Value>(n / 2, v)};
}

void WarpgroupMma::fence() { NVVM::WgmmaFenceAlignedOp::create(d.b); }

WgmmaAccum WarpgroupMma::step(const WgmmaAccum &acc, Value descA, Value descB,
                              bool accumulate, bool transB) {
  assert(static_cast<int64_t>(acc.regs.size()) == n / 2 &&
         "one accumulator per two columns");
  // The scale-d operand is a register (see InlinePTX.h).
  return {ptx::wgmmaMmaAsyncSS(d.b, n, bf16, acc.regs, descA, descB,
                               d.c32(accumulate ? 1 : 0), transB)};
}

void WarpgroupMma::commitAndWait() {
  NVVM::WgmmaGroupSyncAlignedOp::create(d.b);
  NVVM::WgmmaWaitGroupSyncOp::create(d.b, d.b.getI64IntegerAttr(0));
}
