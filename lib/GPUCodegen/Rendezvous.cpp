//===- Rendezvous.cpp - CTAs of one launch waiting for each other --------===//

#include "mla/GPUCodegen/Rendezvous.h"

#include "mla/GPUCodegen/InlinePTX.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mla::gpu_codegen;

void mla::gpu_codegen::rendezvous(DeviceBuilder &d, Value counter, Value ctas) {
  // The barrier before ordered the other threads' writes before this
  // thread's fence, which the release carries to the group.
  ptx::fenceAcqRelGpu(d.b);
  ptx::atomAddGpu(d.b, counter, d.c32(1), /*release=*/true);
  // The spin is an scf.while around single-instruction asm: a loop inside
  // one asm statement hides control flow from ptxas, which then moved the
  // whole kernel's shared-memory addressing off the uniform datapath.
  auto spin = scf::WhileOp::create(d.b, TypeRange{}, ValueRange{});
  {
    OpBuilder::InsertionGuard guard(d.b);
    d.b.setInsertionPointToStart(&spin.getBefore().emplaceBlock());
    Value seen = ptx::ldAcquireGpu(d.b, counter);
    scf::ConditionOp::create(d.b, d.cmp(arith::CmpIPredicate::ult, seen, ctas),
                             ValueRange{});
    d.b.setInsertionPointToStart(&spin.getAfter().emplaceBlock());
    ptx::nanosleep(d.b, 32);
    scf::YieldOp::create(d.b);
  }
  // The second round: every CTA counted here has passed its wait, so the
  // last one may reset the word.
  Value before = ptx::atomAddGpu(d.b, counter, d.c32(1), /*release=*/false);
  d.ifThen(d.eq(before, d.sub(d.add(ctas, ctas), d.c32(1))),
           [&] { ptx::storeRelaxedGpu(d.b, counter, d.c32(0)); });
}

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
