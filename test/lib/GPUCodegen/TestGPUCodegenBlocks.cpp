//===- TestGPUCodegenBlocks.cpp - kernels built from the GPUCodegen blocks ===//
//
// `mla-test-gpu-codegen-blocks` adds a gpu.module of small kernels that use
// the blocks no production kernel uses yet (TMA, mbarrier phases, the stage
// ring, setmaxnreg) together with the wgmma, descriptor, cp.async and
// softmax blocks, so that lit can check their IR and the PTX they lower to
// (test/GPUCodegen/blocks.mlir assembles it with ptxas for sm_90a).
//
//===----------------------------------------------------------------------===//

#include "mla/GPUCodegen/AsyncCopy.h"
#include "mla/GPUCodegen/DeviceBuilder.h"
#include "mla/GPUCodegen/MBarrier.h"
#include "mla/GPUCodegen/OnlineSoftmax.h"
#include "mla/GPUCodegen/RegisterBudget.h"
#include "mla/GPUCodegen/SmemTile.h"
#include "mla/GPUCodegen/Tma.h"
#include "mla/GPUCodegen/Wgmma.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

using namespace mlir;
using namespace mla::gpu_codegen;

namespace {

/// 128 threads stream four 64x64 bf16 TMA boxes (columns 64k..) through a
/// two-slot ring, one mbarrier per slot: thread 0 arms the slot's barrier
/// and issues the load, everyone waits for the slot's phase, reads a word
/// and sums it; at the end all threads arrive on a CTA-wide barrier.
void emitTmaRingKernel(ImplicitLocOpBuilder &b) {
  DeviceBuilder d(b);
  auto generic = LLVM::LLVMPointerType::get(b.getContext());
  auto fn = createKernel(b, "test_tma_ring", {generic, d.ptrGlobal}, 128);
  Value desc = fn.getArgument(0), out = fn.getArgument(1);
  Value smem = dynamicSharedBase(b);
  const StageRing ring{2, 64 * 64 * 2};
  const int64_t barOff = ring.stages * ring.stageBytes;
  auto slotBarrier = [&](Value k) {
    Value slot = d.remu(k, d.c32(ring.stages));
    return MBarrier(
        d, d.gepBytes(smem, d.add(d.c32(barOff), d.mul(slot, d.c32(8)))));
  };
  MBarrier done(d, d.gepBytes(smem, d.c32(barOff + 8 * ring.stages)));

  Value tid = d.threadIdX();
  Value leader = d.eq(tid, d.c32(0));
  d.ifThen(leader, [&] {
    for (int64_t s = 0; s < ring.stages; ++s)
      slotBarrier(d.c32(s)).init(1);
    done.init(128);
  });
  d.barrier();
  TmaDescriptor tma(d, desc);
  Value sum = d.forLoop(4, {d.f(0.0f)}, [&](Value k, ValueRange acc) {
    MBarrier full = slotBarrier(k);
    Value tile = d.gepBytes(smem, ring.slotOffset(d, k));
    d.ifThen(leader, [&] {
      full.arriveExpectTx(d.c32(ring.stageBytes));
      tma.loadTile(tile, full, {d.mul(k, d.c32(64)), d.c32(0)});
    });
    full.waitParity(ring.phase(d, k));
    Value v = d.load(d.f32, d.gep(tile, d.f32, tid), 4);
    // Every thread has read the slot before the next use reloads it.
    d.barrier();
    return SmallVector<Value>{d.fadd(acc[0], v)};
  })[0];
  done.arrive();
  done.waitParity(d.c32(0));
  d.store(sum, d.gep(out, d.f32, tid), 4);
  mlir::gpu::ReturnOp::create(b);
}

/// Two warpgroups: warpgroup 1 gives registers back and leaves; warpgroup 0
/// takes them, computes S = A B^T (64 x 64 x 64, bf16) with wgmma from
/// Box128B tiles staged by cp.async (rows past `rows` zero-filled), and
/// writes each row's natural-log LSE of the scores.
void emitWgmmaSoftmaxKernel(ImplicitLocOpBuilder &b) {
  DeviceBuilder d(b);
  auto fn = createKernel(b, "test_wgmma_softmax",
                         {d.ptrGlobal, d.ptrGlobal, d.ptrGlobal, d.i32}, 256);
  markReallocatable(fn);
  Value aPtr = fn.getArgument(0), bPtr = fn.getArgument(1),
        out = fn.getArgument(2), rows = fn.getArgument(3);
  Value smem = dynamicSharedBase(b);
  const SmemTile a = SmemTile::box128B(0, 64), bt = SmemTile::box128B(8192, 64);
  Value tid = d.threadIdX();
  forEachStrided(d, tid, 256, 64 * 8, [&](Value idx) {
    Value row = d.divu(idx, d.c32(8)), ch = d.remu(idx, d.c32(8));
    Value size = zeroFillSize(d, d.slt(row, rows));
    Value elem = d.add(d.mul(row, d.c32(64)), d.mul(ch, d.c32(8)));
    for (const SmemTile *t : {&a, &bt}) {
      Value src = d.gep(t == &a ? aPtr : bPtr, d.i16, elem);
      Value dst =
          d.gepBytes(smem, d.add(d.c32(t->base), t->byteOffset(d, row, ch)));
      d.cpAsync16(dst, src, size);
    }
  });
  d.cpAsyncCommit();
  d.cpAsyncWait(0);
  fenceProxyAsyncShared(d);
  d.barrier();
  Value group = d.divu(tid, d.c32(128));
  d.ifThen(d.eq(group, d.c32(1)), [&] { decreaseRegisters(d, 40); });
  d.ifThen(d.eq(group, d.c32(0)), [&] {
    increaseRegisters(d, 232);
    WgmmaDescriptors descs(d, smem);
    WarpgroupMma mma(d, 64, /*bf16=*/true);
    WgmmaAccum acc = WgmmaAccum::splat(64, d.f(0.0f));
    mma.fence();
    for (int64_t kk = 0; kk < 4; ++kk)
      acc = mma.step(acc, descs.kMajor(d.c32(a.base + a.kSliceOffset(kk))),
                     descs.kMajor(d.c32(bt.base + bt.kSliceOffset(kk))), kk > 0,
                     /*transB=*/false);
    mma.commitAndWait();
    // This thread's first row: max, then the sum of 2^(s - max).
    Value m = d.negInf();
    for (int64_t j = 0; j < 8; ++j)
      m = d.fmax(m, d.fmax(acc.regs[4 * j], acc.regs[4 * j + 1]));
    m = softmax::quadMax(d, m);
    Value l = d.f(0.0f);
    for (int64_t j = 0; j < 8; ++j)
      for (int e = 0; e < 2; ++e)
        l = d.fadd(l, softmax::probability(d, acc.regs[4 * j + e], m));
    l = softmax::quadSum(d, l);
    softmax::Normaliser norm = softmax::normaliser(d, l);
    d.store(softmax::naturalLse(d, m, l, norm.nonEmpty), d.gep(out, d.f32, tid),
            4);
  });
  mlir::gpu::ReturnOp::create(b);
}

struct TestGPUCodegenBlocksPass
    : public PassWrapper<TestGPUCodegenBlocksPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestGPUCodegenBlocksPass)

  StringRef getArgument() const final { return "mla-test-gpu-codegen-blocks"; }
  StringRef getDescription() const final {
    return "Adds kernels built from the GPUCodegen blocks (test only)";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<arith::ArithDialect, mlir::gpu::GPUDialect,
                    LLVM::LLVMDialect, NVVM::NVVMDialect, scf::SCFDialect>();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    OpBuilder top(module.getBodyRegion());
    top.setInsertionPointToEnd(module.getBody());
    auto kernels =
        mlir::gpu::GPUModuleOp::create(top, module.getLoc(), "mla_test_blocks");
    ImplicitLocOpBuilder b(module.getLoc(), kernels.getBody(),
                           kernels.getBody()->end());
    emitTmaRingKernel(b);
    b.setInsertionPointToEnd(kernels.getBody());
    emitWgmmaSoftmaxKernel(b);
    module->setAttr(mlir::gpu::GPUDialect::getContainerModuleAttrName(),
                    top.getUnitAttr());
  }
};

} // namespace

namespace mla::test {
void registerTestGPUCodegenBlocksPass() {
  PassRegistration<TestGPUCodegenBlocksPass>();
}
} // namespace mla::test
