//===- RegisterBudget.cpp - warpgroup register reallocation ---------------===//

#include "mla/GPUCodegen/RegisterBudget.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mla::gpu_codegen;

void mla::gpu_codegen::markReallocatable(mlir::gpu::GPUFuncOp kernel) {
  Builder b(kernel.getContext());
  if (DenseI32ArrayAttr block = kernel.getKnownBlockSizeAttr())
    kernel->setAttr("nvvm.maxntid", block);
  kernel->setAttr("nvvm.minctasm", b.getI32IntegerAttr(1));
}

static void setMaxRegisters(DeviceBuilder &d, int64_t registers,
                            NVVM::SetMaxRegisterAction action) {
  assert(registers >= 24 && registers <= 256 && registers % 8 == 0 &&
         "setmaxnreg takes a multiple of 8 in [24, 256]");
  NVVM::SetMaxRegisterOp::create(d.b, static_cast<uint32_t>(registers), action);
}

void mla::gpu_codegen::increaseRegisters(DeviceBuilder &d, int64_t registers) {
  setMaxRegisters(d, registers, NVVM::SetMaxRegisterAction::increase);
}

void mla::gpu_codegen::decreaseRegisters(DeviceBuilder &d, int64_t registers) {
  setMaxRegisters(d, registers, NVVM::SetMaxRegisterAction::decrease);
}

void mla::gpu_codegen::splitWarpgroupRoles(DeviceBuilder &d, Value tid,
                                           function_ref<void()> producer,
                                           function_ref<void()> consumer,
                                           int64_t producerRegisters) {
  // The CTA is launched with what ptxas gives 384 threads at one CTA per SM
  // (65536 / 384 rounded down to a multiple of 8: 168 each); the consumers
  // get what the producer leaves.
  constexpr int64_t pool = 65536 / 384 / 8 * 8 * 384;
  int64_t consumerRegisters = (pool - 128 * producerRegisters) / 256 / 8 * 8;
  d.ifThenElse(
      d.slt(tid, d.c32(128)),
      [&] {
        decreaseRegisters(d, producerRegisters);
        producer();
      },
      [&] {
        increaseRegisters(d, consumerRegisters);
        consumer();
      });
}
