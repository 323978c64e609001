//===- MBarrier.cpp - shared-memory transaction barriers ------------------===//

#include "mla/GPUCodegen/MBarrier.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mla::gpu_codegen;

void MBarrier::init(int64_t arrivals) {
  NVVM::MBarrierInitOp::create(d.b, ptr, d.c32(arrivals), Value());
  NVVM::FenceMbarrierInitOp::create(d.b);
}

void MBarrier::arrive() {
  NVVM::MBarrierArriveOp::create(d.b, Type(), ptr, Value());
}

void MBarrier::arriveExpectTx(Value bytes) {
  NVVM::MBarrierArriveExpectTxOp::create(d.b, Type(), ptr, bytes,
                                         NVVM::MemScopeKind::CTA,
                                         /*relaxed=*/false, Value());
}

void MBarrier::waitParity(Value phase) {
  // try_wait.parity lowers to a retry loop; the tick hint 0 lets the
  // hardware pick the suspend time.
  NVVM::MBarrierTryWaitParityOp::create(d.b, ptr, phase, d.c32(0));
}
