//===- MhaSM90.h - the sm_90a tensor-core mla.mha kernel --------*- C++ -*-===//
//
// Private to MLAToGPU: MhaGPU.cpp picks this build of `mla_mha` when
// mla::gpu::mhaUsesWgmma says the chip and shape allow it.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_LIB_CONVERSION_MLATOGPU_MHASM90_H
#define MLA_LIB_CONVERSION_MLATOGPU_MHASM90_H

#include "mla/Contract/PrefillABI.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mla::gpu_codegen::sm90 {

/// Emits `name` as the FlashAttention-3-structured kernel of PrefillABI.h at
/// the builder's insertion point (inside a gpu.module); `elem` is bf16 or
/// f16.
void emitMhaSM90(mlir::ImplicitLocOpBuilder &b, llvm::StringRef name,
                 const gpu::MhaShape &shape, mlir::Type elem);

} // namespace mla::gpu_codegen::sm90

#endif // MLA_LIB_CONVERSION_MLATOGPU_MHASM90_H
