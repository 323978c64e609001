//===- AsyncCopy.h - cp.async staging and multi-stage rings -----*- C++ -*-===//
//
// Global-to-shared staging with 16-byte `cp.async.cg` copies, spread over
// the threads of a CTA, and the ring of `stages` shared-memory buffers a
// software pipeline cycles through. A copy whose source is out of bounds
// reads 0 bytes and zero-fills its destination, so that a NaN or stale value
// of an unused slot never enters shared memory. A ring may instead take one
// bulk copy (`cp.async.bulk`) per step, issued by one thread, completing on
// the buffer's mbarrier (BulkStageRing); its caller zeroes what the copy
// leaves out.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_GPUCODEGEN_ASYNCCOPY_H
#define MLA_GPUCODEGEN_ASYNCCOPY_H

#include "mla/GPUCodegen/DeviceBuilder.h"
#include "mla/GPUCodegen/MBarrier.h"

namespace mla::gpu_codegen {

/// Calls `body(idx)` for idx = tid, tid + threads, ... below `count`: fully
/// unrolled, with a bounds check only on the last, partial round.
void forEachStrided(DeviceBuilder &d, mlir::Value tid, int64_t threads,
                    int64_t count, llvm::function_ref<void(mlir::Value)> body);

/// The source size (i32) of a 16-byte cp.async (DeviceBuilder::cpAsync16)
/// that copies when `valid` (i1) and otherwise reads nothing and zero-fills.
mlir::Value zeroFillSize(DeviceBuilder &d, mlir::Value valid);

/// fence.proxy.async.shared::cta: this thread's generic-proxy writes to
/// shared memory (st.shared, cp.async) become visible to async-proxy reads
/// (wgmma operands, TMA stores) after the next barrier.
void fenceProxyAsyncShared(DeviceBuilder &d);

/// A ring of `stages` equal shared-memory buffers of `stageBytes` each, filled
/// by cp.async groups: step k uses buffer k % stages and its mbarrier phase
/// bit is (k / stages) & 1. Group g holds the copies of step g.
struct StageRing {
  int64_t stages;
  int64_t stageBytes;

  /// Byte offset (i32) of step `k`'s buffer from the ring's base.
  mlir::Value slotOffset(DeviceBuilder &d, mlir::Value k) const;
  /// The phase bit (i32, 0 or 1) step `k` waits for on its buffer's barrier.
  mlir::Value phase(DeviceBuilder &d, mlir::Value k) const;

  /// Issues steps 0..stages-2 (one commit group each) before the main loop.
  void prefill(DeviceBuilder &d,
               llvm::function_ref<void(mlir::Value)> issue) const;
  /// Waits until step k's group (the oldest in flight) has landed for this
  /// thread; a barrier then makes it visible to all.
  void waitOldest(DeviceBuilder &d) const;
  /// Issues step k + stages - 1 into the buffer step k - 1 released.
  void refill(DeviceBuilder &d, mlir::Value k,
              llvm::function_ref<void(mlir::Value)> issue) const;
  /// Waits for every group (no copy in flight at kernel exit).
  void drain(DeviceBuilder &d) const;
};

/// cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes: one
/// thread copies `bytes` (i32, a multiple of 16) from `src` (global, 16-byte
/// aligned) to `dst` (shared, 16-byte aligned); the bytes count against the
/// transactions `bar` was armed with (MBarrier::arriveExpectTx).
void bulkCopyToShared(DeviceBuilder &d, mlir::Value dst, mlir::Value src,
                      MBarrier &bar, mlir::Value bytes);

/// A StageRing whose steps are each one bulk copy (bulkCopyToShared) that
/// completes on the buffer's own mbarrier (8 bytes each from `barrierOff` of
/// the shared base): no per-thread copies, no commit groups. Every copy a
/// step issues must be waited for before the kernel exits.
struct BulkStageRing {
  StageRing ring;
  int64_t barrierOff;

  /// Step `k`'s barrier (buffer k % stages).
  MBarrier full(DeviceBuilder &d, mlir::Value smem, mlir::Value k) const;
  /// One thread: initialises the barriers (one arrival each). The CTA must
  /// synchronise before any thread waits on them.
  void init(DeviceBuilder &d, mlir::Value smem) const;
  /// Blocks until step `k`'s copy has landed (phase (k / stages) & 1).
  void wait(DeviceBuilder &d, mlir::Value smem, mlir::Value k) const;
  /// One thread: arms step `k`'s barrier with `bytes` and copies them from
  /// `src` to byte `dstOffset` of the shared base.
  void issue(DeviceBuilder &d, mlir::Value smem, mlir::Value k,
             mlir::Value dstOffset, mlir::Value src, mlir::Value bytes) const;
};

} // namespace mla::gpu_codegen

#endif // MLA_GPUCODEGEN_ASYNCCOPY_H
