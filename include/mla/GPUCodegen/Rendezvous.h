//===- Rendezvous.h - CTAs of one launch waiting for each other -*- C++ -*-===//
//
// A group of CTAs of one launch meets at a counter word in global memory:
// each counts itself in with release semantics once its writes are done,
// waits (acquire) until the whole group has, and counts itself once more;
// the CTA that completes the second round puts the word back to 0, so the
// next launch over the same word starts from zero again without a memset.
// Every CTA of the group must be resident at once (a cooperative launch),
// or the waiters would hold SMs the missing CTAs need.
//
// lastArrival is the form that never waits: each CTA counts itself in once,
// and only the CTA that completes the count goes on to read the group's
// writes (and resets the word); any grid works.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_GPUCODEGEN_RENDEZVOUS_H
#define MLA_GPUCODEGEN_RENDEZVOUS_H

#include "mla/GPUCodegen/DeviceBuilder.h"

namespace mla::gpu_codegen {

/// Run by ONE thread of the CTA, between two CTA-wide barriers of the
/// threads whose writes the group must see (before) and that read the
/// group's writes (after): fences this thread, counts the CTA into
/// `counter` (an i32 in global memory that is 0 before the group's first
/// CTA arrives), spins until `ctas` (i32) CTAs have, then counts the CTA
/// again; the one whose count reaches 2 * ctas stores 0.
void rendezvous(DeviceBuilder &d, mlir::Value counter, mlir::Value ctas);

/// Run by ONE thread of the CTA, after a CTA-wide barrier behind the writes
/// the group must see: fences this thread, counts the CTA into `counter`
/// (an i32 in global memory, 0 before the group's first CTA arrives) and
/// returns whether this CTA was the last of the `ctas` (i32) to arrive (i1).
/// The last one has then acquired every other CTA's writes (its threads see
/// them after the next CTA-wide barrier) and has put the word back to 0.
mlir::Value lastArrival(DeviceBuilder &d, mlir::Value counter,
                        mlir::Value ctas);

} // namespace mla::gpu_codegen

#endif // MLA_GPUCODEGEN_RENDEZVOUS_H
