//===- UpProjKvSM90.h - the sm_90a wgmma mla.up_proj_kv kernel --*- C++ -*-===//
//
// Private to MLAToGPU: UpProjKvGPU.cpp picks this build of `mla_up_proj_kv`
// when mla::gpu::upProjKvUsesWgmma says the chip and shape allow it.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_LIB_CONVERSION_MLATOGPU_UPPROJKVSM90_H
#define MLA_LIB_CONVERSION_MLATOGPU_UPPROJKVSM90_H

#include "mla/Contract/PrefillABI.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mla::gpu_codegen::sm90 {

/// Emits `name` as the warp-specialised wgmma GEMM of PrefillABI.h at the
/// builder's insertion point (inside a gpu.module); `elem` is bf16 or f16.
void emitUpProjKvSM90(mlir::ImplicitLocOpBuilder &b, llvm::StringRef name,
                      const gpu::UpProjKvShape &shape, mlir::Type elem);

} // namespace mla::gpu_codegen::sm90

#endif // MLA_LIB_CONVERSION_MLATOGPU_UPPROJKVSM90_H
