//===- MLAToGPU.h - GPU kernel emitters for mla ops -------------*- C++ -*-===//
//
// Each emitter creates one `gpu.func` kernel at the builder's insertion point,
// which must be inside a `gpu.module`. The kernel's name, parameters and
// launch geometry follow mla/Contract/KernelABI.h. Emitters report
// unsupported shapes with an error at `loc` and return failure.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_CONVERSION_MLATOGPU_MLATOGPU_H
#define MLA_CONVERSION_MLATOGPU_MLATOGPU_H

#include "mla/Contract/KernelABI.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"

namespace mla::gpu_codegen {

/// `mla_decode_partial` for sm_90a: mma.sync or wgmma fed by cp.async, or
/// the warp-specialised TMA + wgmma build (an llvm.func kernel).
mlir::LogicalResult emitDecodePartialSM90(mlir::OpBuilder &builder,
                                          mlir::Location loc,
                                          llvm::StringRef name,
                                          const gpu::DecodeShape &shape,
                                          const gpu::DecodeTiling &tiling);

/// `mla_decode_partial` for sm_100a: tcgen05 MMAs with tensor memory.
mlir::FailureOr<mlir::gpu::GPUFuncOp>
emitDecodePartialSM100(mlir::OpBuilder &builder, mlir::Location loc,
                       llvm::StringRef name, const gpu::DecodeShape &shape,
                       const gpu::DecodeTiling &tiling);

/// `mla_decode_plan` (any chip): the split bounds of the uniform plan from
/// device seq_lens, with the host's seq_len and block-table checks as a
/// status flag (KernelABI.h).
mlir::FailureOr<mlir::gpu::GPUFuncOp>
emitDecodePlan(mlir::OpBuilder &builder, mlir::Location loc,
               llvm::StringRef name, const gpu::DecodeShape &shape);

/// `mla_combine` (any chip).
mlir::FailureOr<mlir::gpu::GPUFuncOp>
emitCombine(mlir::OpBuilder &builder, mlir::Location loc, llvm::StringRef name,
            const gpu::DecodeShape &shape);

/// Kernels of the cache and projection ops (CacheWriteGPU.cpp,
/// ProjectionGPU.cpp); their contracts are in
/// mla/Contract/CacheProjectionABI.h. Each reads shapes, dtypes and the
/// cache layout from `op` and emits at the builder's insertion point.
mlir::LogicalResult emitCacheWriteKernels(mlir::OpBuilder &builder,
                                          mlir::Operation *cacheWriteOp,
                                          gpu::Chip chip);
mlir::LogicalResult emitAbsorbQKernels(mlir::OpBuilder &builder,
                                       mlir::Operation *absorbQOp,
                                       gpu::Chip chip);
mlir::LogicalResult emitUpProjOutKernels(mlir::OpBuilder &builder,
                                         mlir::Operation *upProjOutOp,
                                         gpu::Chip chip);

/// Kernels of the chunked-prefill ops (GatherCacheGPU.cpp,
/// MergeStatesGPU.cpp, UpProjKvGPU.cpp, MhaGPU.cpp); their contracts are in
/// mla/Contract/PrefillABI.h.
mlir::LogicalResult emitGatherCacheKernels(mlir::OpBuilder &builder,
                                           mlir::Operation *gatherCacheOp,
                                           gpu::Chip chip);
mlir::LogicalResult emitMergeStatesKernels(mlir::OpBuilder &builder,
                                           mlir::Operation *mergeStatesOp,
                                           gpu::Chip chip);
mlir::LogicalResult emitUpProjKvKernels(mlir::OpBuilder &builder,
                                        mlir::Operation *upProjKvOp,
                                        gpu::Chip chip);
mlir::LogicalResult emitMhaKernels(mlir::OpBuilder &builder,
                                   mlir::Operation *mhaOp, gpu::Chip chip);

} // namespace mla::gpu_codegen

#endif // MLA_CONVERSION_MLATOGPU_MLATOGPU_H
