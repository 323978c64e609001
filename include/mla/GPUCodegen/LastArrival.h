//===- LastArrival.h - the last CTA of a group to finish -------*- C++ -*-===//
//
// A group of CTAs of one launch counts itself at a counter word in global
// memory: each CTA counts itself in once (release) after its writes, and
// only the CTA that completes the count goes on, having acquired the
// group's writes, to read them; it puts the word back to 0, so the next
// launch over the same word starts from zero without a memset. No CTA waits
// for another, so any grid works (no cooperative launch).
//
//===----------------------------------------------------------------------===//
#ifndef MLA_GPUCODEGEN_LASTARRIVAL_H
#define MLA_GPUCODEGEN_LASTARRIVAL_H

#include "mla/GPUCodegen/DeviceBuilder.h"

namespace mla::gpu_codegen {

/// Run by ONE thread of the CTA, after a CTA-wide barrier behind the writes
/// the group must see: fences this thread, counts the CTA into `counter`
/// (an i32 in global memory, 0 before the group's first CTA arrives) and
/// returns whether this CTA was the last of the `ctas` (i32) to arrive (i1).
/// The last one has then acquired every other CTA's writes (its threads see
/// them after the next CTA-wide barrier) and has put the word back to 0.
mlir::Value lastArrival(DeviceBuilder &d, mlir::Value counter,
                        mlir::Value ctas);

} // namespace mla::gpu_codegen

#endif // MLA_GPUCODEGEN_LASTARRIVAL_H
