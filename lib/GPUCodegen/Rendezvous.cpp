//===- Rendezvous.cpp - CTAs of one launch waiting for each other --------===//

#include "mla/GPUCodegen/Rendezvous.h"

#include "mla/GPUCodegen/InlinePTX.h"

using namespace mlir;
using namespace mla::gpu_codegen;

void mla::gpu_codegen::rendezvous(DeviceBuilder &d, Value counter, Value ctas) {
  // The barrier before ordered the other threads' writes before this
  // thread's fence, which the release carries to the group.
  ptx::fenceAcqRelGpu(d.b);
  ptx::atomAddGpu(d.b, counter, d.c32(1), /*release=*/true);
  ptx::spinUntilAtLeast(d.b, counter, ctas);
  // The second round: every CTA counted here has passed its wait, so the
  // last one may reset the word.
  Value before = ptx::atomAddGpu(d.b, counter, d.c32(1), /*release=*/false);
  d.ifThen(d.eq(before, d.sub(d.add(ctas, ctas), d.c32(1))),
           [&] { ptx::storeRelaxedGpu(d.b, counter, d.c32(0)); });
}
