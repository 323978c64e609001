//===- AsyncCopy.cpp - cp.async staging and multi-stage rings -------------===//

#include "mla/GPUCodegen/AsyncCopy.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mla::gpu_codegen;

void mla::gpu_codegen::forEachStrided(DeviceBuilder &d, Value tid,
                                      int64_t threads, int64_t count,
                                      llvm::function_ref<void(Value)> body) {
  for (int64_t it = 0; it < (count + threads - 1) / threads; ++it) {
    Value idx = d.add(tid, d.c32(it * threads));
    if ((it + 1) * threads <= count)
      body(idx);
    else
      d.ifThen(d.slt(idx, d.c32(count)), [&] { body(idx); });
  }
}

Value mla::gpu_codegen::zeroFillSize(DeviceBuilder &d, Value valid) {
  return d.select(valid, d.c32(16), d.c32(0));
}

void mla::gpu_codegen::fenceProxyAsyncShared(DeviceBuilder &d) {
  MLIRContext *ctx = d.b.getContext();
  NVVM::FenceProxyOp::create(
      d.b, NVVM::ProxyKindAttr::get(ctx, NVVM::ProxyKind::async_shared),
      NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
}

Value StageRing::slotOffset(DeviceBuilder &d, Value k) const {
  return d.mul(d.remu(k, d.c32(stages)), d.c32(stageBytes));
}

Value StageRing::phase(DeviceBuilder &d, Value k) const {
  return d.bitAnd(d.divu(k, d.c32(stages)), d.c32(1));
}

void StageRing::prefill(DeviceBuilder &d,
                        llvm::function_ref<void(Value)> issue) const {
  for (int64_t k = 0; k < stages - 1; ++k) {
    issue(d.c32(k));
    d.cpAsyncCommit();
  }
}

void StageRing::waitOldest(DeviceBuilder &d) const {
  d.cpAsyncWait(stages - 2);
}

void StageRing::refill(DeviceBuilder &d, Value k,
                       llvm::function_ref<void(Value)> issue) const {
  issue(d.add(k, d.c32(stages - 1)));
  d.cpAsyncCommit();
}

void StageRing::drain(DeviceBuilder &d) const { d.cpAsyncWait(0); }

void mla::gpu_codegen::bulkCopyToShared(DeviceBuilder &d, Value dst, Value src,
                                        MBarrier &bar, Value bytes) {
  // The shared::cluster form (address space 7): a CTA's own shared memory
  // is part of that window.
  auto clusterPtr = LLVM::LLVMPointerType::get(d.b.getContext(), 7);
  Value dstCluster = LLVM::AddrSpaceCastOp::create(d.b, clusterPtr, dst);
  NVVM::CpAsyncBulkGlobalToSharedClusterOp::create(
      d.b, dstCluster, src, bar.pointer(), bytes, /*multicastMask=*/Value(),
      /*l2CacheHint=*/Value());
}

MBarrier BulkStageRing::full(DeviceBuilder &d, Value smem, Value k) const {
  Value slot = d.remu(k, d.c32(ring.stages));
  return MBarrier(
      d, d.gepBytes(smem, d.add(d.c32(barrierOff), d.mul(slot, d.c32(8)))));
}

void BulkStageRing::init(DeviceBuilder &d, Value smem) const {
  for (int64_t st = 0; st < ring.stages; ++st)
    full(d, smem, d.c32(st)).init(1);
}

void BulkStageRing::wait(DeviceBuilder &d, Value smem, Value k) const {
  full(d, smem, k).waitParity(ring.phase(d, k));
}

void BulkStageRing::issue(DeviceBuilder &d, Value smem, Value k,
                          Value dstOffset, Value src, Value bytes) const {
  MBarrier bar = full(d, smem, k);
  bar.arriveExpectTx(bytes);
  bulkCopyToShared(d, d.gepBytes(smem, dstOffset), src, bar, bytes);
}
