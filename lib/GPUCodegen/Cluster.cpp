//===- Cluster.cpp - thread-block clusters (sm_90a) -----------------------===//

#include "mla/GPUCodegen/Cluster.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mla::gpu_codegen;

void mla::gpu_codegen::setClusterShape(LLVM::LLVMFuncOp kernel, int64_t ctas) {
  Builder b(kernel.getContext());
  kernel->setAttr(NVVM::NVVMDialect::getClusterDimAttrName(),
                  b.getDenseI32ArrayAttr({int32_t(ctas), 1, 1}));
}

Value mla::gpu_codegen::clusterCtaRank(DeviceBuilder &d) {
  return NVVM::ClusterId::create(d.b, d.i32);
}

void mla::gpu_codegen::clusterSync(DeviceBuilder &d) {
  NVVM::ClusterArriveOp::create(d.b, /*aligned=*/UnitAttr());
  NVVM::ClusterWaitOp::create(d.b, /*aligned=*/UnitAttr());
}

void mla::gpu_codegen::arriveOnPeer(DeviceBuilder &d, MBarrier &bar, Value rank,
                                    int64_t count) {
  // mapa turns the CTA's own shared address into the peer's in the
  // shared::cluster window; a remote arrival must discard its state (_).
  // No .cluster scope (Cluster.h).
  Value own = LLVM::PtrToIntOp::create(d.b, d.i32, bar.pointer());
  LLVM::InlineAsmOp::create(
      d.b, TypeRange{}, ValueRange{own, rank, d.c32(count)},
      "{\n\t.reg .b32 remote;\n\tmapa.shared::cluster.u32 remote, $0, $1;\n\t"
      "mbarrier.arrive.shared::cluster.b64 _, [remote], "
      "$2;\n\t}",
      "r,r,r,~{memory}", /*has_side_effects=*/true, /*is_align_stack=*/false,
      LLVM::tailcallkind::TailCallKind::None, LLVM::AsmDialectAttr(),
      ArrayAttr());
}
