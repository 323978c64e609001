//===- Wgmma.h - warpgroup MMA (wgmma.mma_async m64nNk16) -------*- C++ -*-===//
//
// Hopper's warpgroup MMA: the 128 threads of a warpgroup compute a 64 x n
// f32 tile from A (64 x 16) and B (16 x n) read from shared memory through
// matrix descriptors (WgmmaDescriptors). Thread 32w + l of the warpgroup
// holds rows 16w + l/4 and +8 of the accumulator, in the mma.sync layout
// repeated over n/8 column tiles: accumulator 4j + i is column 8j + 2(l % 4)
// + (i & 1), row 16w + l/4 + 8((i >> 1) & 1).
//
// A product is fence(); step() per 16-wide k slice; commitAndWait(). The
// first step of a fresh product does not accumulate (scale-d = 0), so the
// accumulators need no zeroing (which ptxas would move across the fence).
//
//===----------------------------------------------------------------------===//
#ifndef MLA_GPUCODEGEN_WGMMA_H
#define MLA_GPUCODEGEN_WGMMA_H

#include "mla/GPUCodegen/DeviceBuilder.h"
#include "mla/GPUCodegen/InlinePTX.h"
#include "llvm/ADT/SmallVector.h"

namespace mla::gpu_codegen {

/// The n/2 f32 accumulators one thread holds of a 64 x n wgmma tile.
struct WgmmaAccum {
  llvm::SmallVector<mlir::Value> regs;
  /// n/2 copies of `v`.
  static WgmmaAccum splat(int64_t n, mlir::Value v);

  /// The A operand of a register-A wgmma whose 16-wide k slice `kk` is
  /// columns 16kk..16kk+15 of this 64 x n tile (FA's P = softmax(S) fed
  /// straight into P V): four i32, each two columns rounded to `halfType`.
  /// The accumulator and A-fragment layouts agree, so no shuffle is needed.
  llvm::SmallVector<mlir::Value, 4> aFragments(DeviceBuilder &d, int64_t kk,
                                               mlir::Type halfType) const;
};

class WarpgroupMma {
public:
  /// m64 x `n` x k16 with bf16 (else f16) inputs.
  WarpgroupMma(DeviceBuilder &d, int64_t n, bool bf16)
      : WarpgroupMma(d, n,
                     bf16 ? ptx::WgmmaInput::BF16 : ptx::WgmmaInput::F16) {}
  /// m64 x `n` with `in` inputs (k32 for E4M3: a step reads the same 32
  /// bytes of each row as a k16 step of a two-byte type).
  WarpgroupMma(DeviceBuilder &d, int64_t n, ptx::WgmmaInput in)
      : d(d), n(n), in(in) {}

  /// wgmma.fence: orders register accesses of the accumulators before the
  /// first asynchronous MMA.
  void fence();
  /// One wgmma.mma_async: acc = A * B (+ acc if `accumulate`); `transB`
  /// reads B MN-major.
  WgmmaAccum step(const WgmmaAccum &acc, mlir::Value descA, mlir::Value descB,
                  bool accumulate, bool transB);
  /// The same with A from registers (four i32 fragments of one k slice,
  /// WgmmaAccum::aFragments).
  WgmmaAccum stepRegA(const WgmmaAccum &acc, llvm::ArrayRef<mlir::Value> a,
                      mlir::Value descB, bool accumulate, bool transB);
  /// wgmma.commit_group, then wgmma.wait_group 0: the results are in the
  /// registers.
  void commitAndWait();
  /// wgmma.commit_group alone: the MMAs issued since the last commit form a
  /// group that runs while the warpgroup does other work.
  void commit();
  /// wgmma.wait_group `pending`: all but the newest `pending` groups have
  /// completed (their accumulators may be read).
  void wait(int64_t pending);

private:
  DeviceBuilder &d;
  int64_t n;
  ptx::WgmmaInput in;
};

} // namespace mla::gpu_codegen

#endif // MLA_GPUCODEGEN_WGMMA_H
