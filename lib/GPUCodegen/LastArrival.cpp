//===- LastArrival.cpp - the last CTA of a group to finish ----------------===//

#include "mla/GPUCodegen/LastArrival.h"

#include "mla/GPUCodegen/InlinePTX.h"
#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mla::gpu_codegen;

Value mla::gpu_codegen::lastArrival(DeviceBuilder &d, Value counter,
                                    Value ctas) {
  // The release carries the group's writes (ordered before this thread's
  // fence by the barrier before) to whoever completes the count.
  ptx::fenceAcqRelGpu(d.b);
  Value before = ptx::atomAddGpu(d.b, counter, d.c32(1), /*release=*/true);
  Value last = d.eq(before, d.sub(ctas, d.c32(1)));
  d.ifThen(last, [&] {
    // The acquire side: the other CTAs' writes before anything after.
    ptx::fenceAcqRelGpu(d.b);
    ptx::storeRelaxedGpu(d.b, counter, d.c32(0));
  });
  return last;
}
