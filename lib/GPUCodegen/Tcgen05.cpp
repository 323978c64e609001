//===- Tcgen05.cpp - sm_100a tensor-core (tcgen05) building blocks --------===//

#include "mla/GPUCodegen/Tcgen05.h"

#include "mla/GPUCodegen/DeviceBuilder.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;

namespace mla::gpu_codegen::tcgen05 {

/// The LLVM address space of tensor memory.
constexpr unsigned kTmemAddressSpace = 6;

/// The mbarrier wait's suspend-time hint in nanoseconds: long enough that a
/// waiting warp sleeps rather than spins through a whole MMA chain.
constexpr int64_t kWaitSuspendHintNs = 10000000;

//===----------------------------------------------------------------------===//
// Descriptors
//===----------------------------------------------------------------------===//

int64_t instrDescriptorF16(bool bf16, bool bMnMajor, int64_t m, int64_t n) {
  // Bits 4-5: D format (1 = f32); 7-9 / 10-12: A / B format (0 = f16,
  // 1 = bf16); 16: B major-ness; 17-22: N >> 3; 24-28: M >> 4.
  int64_t ab = bf16 ? 1 : 0;
  return (int64_t(1) << 4) | (ab << 7) | (ab << 10) |
         (int64_t(bMnMajor) << 16) | ((n >> 3) << 17) | ((m >> 4) << 24);
}

Value smemDescriptor(DeviceBuilder &kb, Value smemAddr, int64_t leadingBytes,
                     int64_t strideBytes) {
  uint64_t fixed = (uint64_t(leadingBytes >> 4) << 16) |
                   (uint64_t(strideBytes >> 4) << 32) | (uint64_t(1) << 46);
  Value start =
      kb.zext64(kb.divu(kb.andi(smemAddr, kb.c32(0x3FFFF)), kb.c32(16)));
  return kb.ori(start, kb.c64(static_cast<int64_t>(fixed)));
}

Value coreMatrixOffset(DeviceBuilder &kb, Value row, Value col, int64_t cols) {
  Value c8 = kb.c32(8);
  Value cm =
      kb.add(kb.mul(kb.divu(row, c8), kb.c32(cols / 8)), kb.divu(col, c8));
  return kb.add(
      kb.add(kb.mul(cm, kb.c32(128)), kb.mul(kb.remu(row, c8), kb.c32(16))),
      kb.mul(kb.remu(col, c8), kb.c32(2)));
}

//===----------------------------------------------------------------------===//
// Tensor memory
//===----------------------------------------------------------------------===//

Value tmemPointer(DeviceBuilder &kb, Value addr) {
  return LLVM::IntToPtrOp::create(
      kb.b, LLVM::LLVMPointerType::get(kb.b.getContext(), kTmemAddressSpace),
      addr);
}

void allocTmem(DeviceBuilder &kb, Value slot, int64_t columns) {
  NVVM::Tcgen05AllocOp::create(kb.b, kb.b.getLoc(), slot, kb.c32(columns));
}

void relinquishAllocPermit(DeviceBuilder &kb) {
  NVVM::Tcgen05RelinquishAllocPermitOp::create(kb.b, kb.b.getLoc());
}

void deallocTmem(DeviceBuilder &kb, Value base, int64_t columns) {
  NVVM::Tcgen05DeallocOp::create(kb.b, kb.b.getLoc(), tmemPointer(kb, base),
                                 kb.c32(columns));
}

Value load32x32b(DeviceBuilder &kb, Value addr, int64_t columns) {
  Type type = VectorType::get({columns}, kb.i32);
  return NVVM::Tcgen05LdOp::create(kb.b, kb.b.getLoc(), type, /*pack=*/false,
                                   NVVM::Tcgen05LdStShape::SHAPE_32X32B,
                                   tmemPointer(kb, addr), Value());
}

void store32x32b(DeviceBuilder &kb, Value addr, Value values) {
  NVVM::Tcgen05StOp::create(kb.b, kb.b.getLoc(), /*unpack=*/false,
                            NVVM::Tcgen05LdStShape::SHAPE_32X32B,
                            tmemPointer(kb, addr), values, Value());
}

void waitLoads(DeviceBuilder &kb) {
  NVVM::Tcgen05WaitOp::create(kb.b, kb.b.getLoc(), NVVM::Tcgen05WaitKind::LOAD);
}

void waitStores(DeviceBuilder &kb) {
  NVVM::Tcgen05WaitOp::create(kb.b, kb.b.getLoc(),
                              NVVM::Tcgen05WaitKind::STORE);
}

//===----------------------------------------------------------------------===//
// MMA issue and completion
//===----------------------------------------------------------------------===//

void mmaF16(DeviceBuilder &kb, Value d, Value aDesc, Value bDesc,
            int64_t instrDescriptor, Value accumulate) {
  NVVM::Tcgen05MMAOp::create(
      kb.b, kb.b.getLoc(), NVVM::Tcgen05MMAKind::F16, NVVM::CTAGroupKind::CTA_1,
      NVVM::Tcgen05MMACollectorOp::DISCARD,
      /*aShift=*/false, d, aDesc, bDesc, kb.c32(instrDescriptor), accumulate,
      /*scaleInputD=*/Value(), /*disableOutputLane=*/Value());
}

void commit(DeviceBuilder &kb, Value mbar) {
  NVVM::Tcgen05CommitOp::create(kb.b, kb.b.getLoc(), mbar,
                                /*multicastMask=*/Value());
}

void waitCommitted(DeviceBuilder &kb, Value mbar, Value phase) {
  NVVM::MBarrierTryWaitParityOp::create(kb.b, kb.b.getLoc(), mbar, phase,
                                        kb.c32(kWaitSuspendHintNs));
  fenceAfterThreadSync(kb);
}

//===----------------------------------------------------------------------===//
// Fences and CTA synchronisation
//===----------------------------------------------------------------------===//

void fenceBeforeThreadSync(DeviceBuilder &kb) {
  NVVM::Tcgen05FenceOp::create(kb.b, kb.b.getLoc(),
                               NVVM::Tcgen05FenceKind::BEFORE_THREAD_SYNC);
}

void fenceAfterThreadSync(DeviceBuilder &kb) {
  NVVM::Tcgen05FenceOp::create(kb.b, kb.b.getLoc(),
                               NVVM::Tcgen05FenceKind::AFTER_THREAD_SYNC);
}

void syncThreads(DeviceBuilder &kb) {
  fenceBeforeThreadSync(kb);
  kb.barrier();
  fenceAfterThreadSync(kb);
}

void publishSharedToTensorCores(DeviceBuilder &kb) {
  NVVM::FenceProxyOp::create(
      kb.b, kb.b.getLoc(), NVVM::ProxyKind::async_shared,
      NVVM::SharedSpaceAttr::get(kb.b.getContext(),
                                 NVVM::SharedSpace::shared_cta));
  syncThreads(kb);
}

} // namespace mla::gpu_codegen::tcgen05
