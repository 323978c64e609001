//===- MBarrier.h - shared-memory transaction barriers ----------*- C++ -*-===//
//
// An mbarrier in shared memory (8 bytes, 8-aligned): the completion signal
// of TMA and bulk copies. One thread initialises it with an arrival count
// and, per phase, arms it with the bytes it expects; consumers wait for the
// phase's parity bit to flip. Phase k of a ring slot used every `stages`
// steps has parity (k / stages) & 1 (StageRing::phase).
//
//===----------------------------------------------------------------------===//
#ifndef MLA_GPUCODEGEN_MBARRIER_H
#define MLA_GPUCODEGEN_MBARRIER_H

#include "mla/GPUCodegen/DeviceBuilder.h"

namespace mla::gpu_codegen {

class MBarrier {
public:
  /// The barrier at `sharedPtr` (!llvm.ptr<3>).
  MBarrier(DeviceBuilder &d, mlir::Value sharedPtr) : d(d), ptr(sharedPtr) {}

  /// mbarrier.init with `arrivals` expected arrivals per phase, then the
  /// fence that makes the init visible to the async proxy (TMA). One thread
  /// only; the CTA must synchronise before anyone waits.
  void init(int64_t arrivals);
  /// mbarrier.arrive (one arrival of this thread).
  void arrive();
  /// mbarrier.arrive.expect_tx: one arrival, and `bytes` (i32) more bytes
  /// must land before the phase completes.
  void arriveExpectTx(mlir::Value bytes);
  /// Blocks until the phase with parity `phase` (i32) has completed.
  void waitParity(mlir::Value phase);

  mlir::Value pointer() const { return ptr; }

private:
  DeviceBuilder &d;
  mlir::Value ptr;
};

} // namespace mla::gpu_codegen

#endif // MLA_GPUCODEGEN_MBARRIER_H
