//===- Wgmma.cpp - warpgroup MMA (wgmma.mma_async m64nNk16) ---------------===//

#include "mla/GPUCodegen/Wgmma.h"
#include "mla/GPUCodegen/InlinePTX.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mla::gpu_codegen;

WgmmaAccum WgmmaAccum::splat(int64_t n, Value v) {
  return {SmallVector<Value>(n / 2, v)};
}

SmallVector<Value, 4> WgmmaAccum::aFragments(DeviceBuilder &d, int64_t kk,
                                             Type halfType) const {
  assert(static_cast<int64_t>(regs.size()) >= 8 * (kk + 1) &&
         "the k slice lies inside the tile");
  // Column tile 2kk gives A's columns 0-7, tile 2kk+1 columns 8-15; in each,
  // accumulators 0-1 are row l/4 and 2-3 row l/4 + 8 (Wgmma.h), which is the
  // order of the A fragment's registers.
  ArrayRef<Value> lo = ArrayRef<Value>(regs).slice(8 * kk, 4);
  ArrayRef<Value> hi = ArrayRef<Value>(regs).slice(8 * kk + 4, 4);
  return {d.pack2(lo[0], lo[1], halfType), d.pack2(lo[2], lo[3], halfType),
          d.pack2(hi[0], hi[1], halfType), d.pack2(hi[2], hi[3], halfType)};
}

void WarpgroupMma::fence() { NVVM::WgmmaFenceAlignedOp::create(d.b); }

WgmmaAccum WarpgroupMma::step(const WgmmaAccum &acc, Value descA, Value descB,
                              bool accumulate, bool transB) {
  assert(static_cast<int64_t>(acc.regs.size()) == n / 2 &&
         "one accumulator per two columns");
  // The scale-d operand is a register (see InlinePTX.h).
  return {ptx::wgmmaMmaAsyncSS(d.b, n, in, acc.regs, descA, descB,
                               d.c32(accumulate ? 1 : 0), transB)};
}

WgmmaAccum WarpgroupMma::stepRegA(const WgmmaAccum &acc, ArrayRef<Value> a,
                                  Value descB, bool accumulate, bool transB) {
  assert(static_cast<int64_t>(acc.regs.size()) == n / 2 &&
         "one accumulator per two columns");
  return {ptx::wgmmaMmaAsyncRS(d.b, n, in, acc.regs, a, descB,
                               d.c32(accumulate ? 1 : 0), transB)};
}

void WarpgroupMma::commitAndWait() {
  commit();
  wait(0);
}

void WarpgroupMma::commit() { NVVM::WgmmaGroupSyncAlignedOp::create(d.b); }

void WarpgroupMma::wait(int64_t pending) {
  NVVM::WgmmaWaitGroupSyncOp::create(d.b, d.b.getI64IntegerAttr(pending));
}
