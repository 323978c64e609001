//===- RegisterBudget.h - warpgroup register reallocation -------*- C++ -*-===//
//
// `setmaxnreg`: in a warp-specialised kernel the producer warpgroup gives
// registers back and the consumer warpgroups take them (FA3's 24/240 split
// of a 2-consumer CTA). ptxas ignores it (warning C7508) unless the kernel
// has `nvvm.maxntid` and `nvvm.minctasm = 1`; markReallocatable sets both.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_GPUCODEGEN_REGISTERBUDGET_H
#define MLA_GPUCODEGEN_REGISTERBUDGET_H

#include "mla/GPUCodegen/DeviceBuilder.h"

namespace mla::gpu_codegen {

/// Sets the attributes setmaxnreg needs on `kernel` (maxntid from its known
/// block size, minctasm = 1).
void markReallocatable(mlir::gpu::GPUFuncOp kernel);

/// setmaxnreg.inc.sync.aligned.u32: the executing warpgroup grows to
/// `registers` per thread (a multiple of 8 in [24, 256]).
void increaseRegisters(DeviceBuilder &d, int64_t registers);
/// setmaxnreg.dec.sync.aligned.u32: the executing warpgroup shrinks.
void decreaseRegisters(DeviceBuilder &d, int64_t registers);

/// The warp-specialised split of a 384-thread CTA: warpgroup 0 (tid < 128)
/// shrinks to `producerRegisters` and runs `producer`, warpgroups 1 and 2
/// grow to what is left of the 168 x 384 registers the kernel is launched
/// with, rounded down to a multiple of 8 (by default FA3's split: 128 x 24
/// + 256 x 240), and run `consumer`.
void splitWarpgroupRoles(DeviceBuilder &d, mlir::Value tid,
                         llvm::function_ref<void()> producer,
                         llvm::function_ref<void()> consumer,
                         int64_t producerRegisters = 24);

} // namespace mla::gpu_codegen

#endif // MLA_GPUCODEGEN_REGISTERBUDGET_H
