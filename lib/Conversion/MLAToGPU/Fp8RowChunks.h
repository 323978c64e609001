//===- Fp8RowChunks.h - KV-tile chunks of staged fp8 cache rows -*- C++ -*-===//
//
// The decode kernels that stage an fp8 cache's raw rows in shared memory and
// dequantise them into a bf16/f16 KV tile (DecodeSM90Kernel::dequantSlice,
// the sm_100a decode) read a row's chunks the same way: chunk c of the
// (L+R)/8 16-byte chunks of a KV-tile row, from the raw row at a shared
// byte offset:
//
//   * fp8_e4m3: the codes' exact values (the kernel folds the per-tensor
//     scale into the softmax scale and the output);
//   * fp8_e4m3_token: codes times the row's latent (first f32 after the D
//     codes) or RoPE (second) scale;
//   * fp8_ds_mla: latent codes times their 128-column tile's f32 scale, the
//     RoPE part the row's bf16 values.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_LIB_CONVERSION_MLATOGPU_FP8ROWCHUNKS_H
#define MLA_LIB_CONVERSION_MLATOGPU_FP8ROWCHUNKS_H

#include "mla/Contract/KernelABI.h"
#include "mla/GPUCodegen/DeviceBuilder.h"

namespace mla::gpu_codegen {

class Fp8RowChunks {
public:
  /// Rows staged in the shared memory at `smem` (a shared pointer), chunks
  /// as `halfType` (bf16 or f16).
  Fp8RowChunks(DeviceBuilder &d, const gpu::DecodeShape &shape,
               mlir::Value smem, mlir::Type halfType);
  /// Whether the RoPE chunks (c >= L/8) decode differently from the latent
  /// ones (every format but fp8_e4m3).
  bool splitsRope() const;
  /// Chunk `c` (i32) of the row at shared byte offset `row` (i32): a latent
  /// chunk, or any chunk when !splitsRope().
  mlir::Value latent(mlir::Value row, mlir::Value c);
  /// Chunk `c` (i32, at least L/8) of a format that splitsRope().
  mlir::Value rope(mlir::Value row, mlir::Value c);

private:
  /// Eight codes from byte `first` of the row.
  mlir::Value codesAt(mlir::Value row, mlir::Value first);
  /// An f32 at byte `byteOff` of the row.
  mlir::Value scaleAt(mlir::Value row, mlir::Value byteOff);
  /// The first code byte of chunk `c`.
  mlir::Value eightCodes(mlir::Value c);
  /// Eight codes from byte `first` of the row, times `scale`.
  mlir::Value fp8Chunk(mlir::Value row, mlir::Value first, mlir::Value scale);

  DeviceBuilder &d;
  const gpu::DecodeShape &shape;
  mlir::Value smem;
  mlir::Type halfType;
  int64_t rowBytes, rawAlign;
};

} // namespace mla::gpu_codegen

#endif // MLA_LIB_CONVERSION_MLATOGPU_FP8ROWCHUNKS_H
