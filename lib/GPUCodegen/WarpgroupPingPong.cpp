//===- WarpgroupPingPong.cpp - two warpgroups taking turns ----------------===//

#include "mla/GPUCodegen/WarpgroupPingPong.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mla::gpu_codegen;

static constexpr int64_t kTwoWarpgroups = 256;

void WarpgroupPingPong::start() {
  d.ifThen(d.eq(wg, d.c32(1)), [&] {
    NVVM::BarrierArriveOp::create(d.b, d.c32(firstId), d.c32(kTwoWarpgroups));
  });
}

void WarpgroupPingPong::waitTurn() {
  NVVM::BarrierOp::create(d.b, TypeRange{}, d.add(d.c32(firstId), wg),
                          d.c32(kTwoWarpgroups), NVVM::BarrierReductionAttr(),
                          Value());
}

void WarpgroupPingPong::passTurn() {
  Value other = d.add(d.c32(firstId), d.sub(d.c32(1), wg));
  NVVM::BarrierArriveOp::create(d.b, other, d.c32(kTwoWarpgroups));
}
