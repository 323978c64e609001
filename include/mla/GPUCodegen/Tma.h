//===- Tma.h - TMA (cp.async.bulk.tensor) tile loads ------------*- C++ -*-===//
//
// A tensor-memory-accelerator load: one thread copies a box of a global
// tensor, described by a CUtensorMap the host built with
// cuTensorMapEncodeTiled, into shared memory and signals the bytes on an
// mbarrier. The descriptor reaches the kernel as a generic pointer
// parameter (a `gpu.func` argument of the nvgpu tensormap type does not
// legalize in MLIR 22), either to global memory or by value as a
// __grid_constant__.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_GPUCODEGEN_TMA_H
#define MLA_GPUCODEGEN_TMA_H

#include "mla/GPUCodegen/MBarrier.h"

namespace mla::gpu_codegen {

class TmaDescriptor {
public:
  /// `descriptor` is a generic !llvm.ptr to the 128-byte CUtensorMap.
  TmaDescriptor(DeviceBuilder &d, mlir::Value descriptor)
      : d(d), desc(descriptor) {}

  /// Loads the box at `coords` (i32, innermost first) into `dstShared`
  /// (!llvm.ptr<3>, aligned as the descriptor's swizzle needs: 1024 bytes
  /// for 128B) and completes its bytes on `bar`. One thread issues it, after
  /// arming `bar` with the box's bytes (MBarrier::arriveExpectTx).
  /// `l2Policy` (i64, ptx::createPolicyEvictFirst), if given, is the load's L2
  /// cache hint. `multicastMask` (i16), if given, names the CTAs of the
  /// cluster (bit r: rank r) that receive the box, each at `dstShared`'s
  /// offset in its own shared memory and completing its own mbarrier at
  /// `bar`'s offset (Cluster.h).
  void loadTile(mlir::Value dstShared, MBarrier &bar,
                llvm::ArrayRef<mlir::Value> coords, mlir::Value l2Policy = {},
                mlir::Value multicastMask = {});
  /// Brings the descriptor into the TMA unit's descriptor cache
  /// (prefetch.tensormap), so the first loadTile does not wait for its
  /// fetch. One thread, at the kernel's start.
  void prefetch();

private:
  DeviceBuilder &d;
  mlir::Value desc;
};

} // namespace mla::gpu_codegen

#endif // MLA_GPUCODEGEN_TMA_H
