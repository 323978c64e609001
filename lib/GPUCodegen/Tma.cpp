//===- Tma.cpp - TMA (cp.async.bulk.tensor) tile loads --------------------===//

#include "mla/GPUCodegen/Tma.h"
#include "mla/GPUCodegen/InlinePTX.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mla::gpu_codegen;

void TmaDescriptor::loadTile(Value dstShared, MBarrier &bar,
                             ArrayRef<Value> coords, Value l2Policy,
                             Value multicastMask) {
  // The bulk-tensor op addresses the destination in the shared::cluster
  // window (address space 7); a CTA's own shared memory is part of it.
  auto clusterPtr = LLVM::LLVMPointerType::get(d.b.getContext(), 7);
  Value dst = LLVM::AddrSpaceCastOp::create(d.b, clusterPtr, dstShared);
  NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp::create(
      d.b, dst, desc, coords, bar.pointer(), /*im2colOffsets=*/ValueRange(),
      multicastMask, /*l2CacheHint=*/l2Policy, NVVM::TMALoadMode::TILE,
      /*isCTAOnly=*/false,
      /*group=*/NVVM::CTAGroupKindAttr(), /*predicate=*/Value());
}

void TmaDescriptor::prefetch() { ptx::prefetchTensormap(d.b, desc); }
