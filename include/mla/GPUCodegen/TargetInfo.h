//===- TargetInfo.h - what differs between GPU targets ----------*- C++ -*-===//
//
// Kernel emitters ask a TargetInfo for the facts that differ between chips
// (which MMA instructions exist, shared memory, tensor memory, the PTX
// version a feature needs) instead of testing `chip == ...`. One
// implementation per chip; a new target (an AMD one included) is one more.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_GPUCODEGEN_TARGETINFO_H
#define MLA_GPUCODEGEN_TARGETINFO_H

#include "mla/Contract/KernelABI.h"
#include "llvm/ADT/StringRef.h"

namespace mla::gpu_codegen {

/// Tensor-core instruction families, oldest first.
enum class MmaFamily {
  /// Warp-level mma.sync (sm_80+).
  MmaSync,
  /// Warpgroup wgmma.mma_async with shared-memory descriptors (sm_90a only).
  Wgmma,
  /// Single-thread-issued tcgen05.mma into tensor memory (sm_100a).
  Tcgen05,
};

class TargetInfo {
public:
  virtual ~TargetInfo() = default;

  /// The chip name of the NVVM target ("sm_90a").
  virtual llvm::StringRef name() const = 0;
  /// The PTX ISA feature the kernels need ("+ptx80").
  virtual llvm::StringRef ptxFeatures() const = 0;
  /// The most dynamic shared memory one CTA may opt in to, in bytes.
  virtual int64_t maxSharedBytesPerCta() const = 0;
  /// Streaming multiprocessors of the reference part (H200, B200), for
  /// planning when no device can be queried.
  virtual int64_t defaultSmCount() const = 0;
  virtual bool hasMma(MmaFamily family) const = 0;
  /// The MMA the decode kernel of this target is built around.
  virtual MmaFamily decodeMma() const = 0;
  /// Tensor memory (tcgen05.alloc/ld) for accumulators.
  virtual bool hasTensorMemory() const = 0;
  /// Threads that issue one warpgroup-wide MMA or setmaxnreg.
  virtual int64_t warpgroupSize() const { return 128; }
};

/// The TargetInfo of `chip` (a static instance).
const TargetInfo &getTargetInfo(gpu::Chip chip);

} // namespace mla::gpu_codegen

#endif // MLA_GPUCODEGEN_TARGETINFO_H
