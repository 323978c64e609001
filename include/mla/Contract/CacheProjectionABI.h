//===- CacheProjectionABI.h - Cache write and projection kernel contract --===//
//
// Kernel names, parameter lists and launch geometry of the GPU kernels of
// `mla.cache_write`, `mla.absorb_q` and `mla.up_proj_out`, shared by the
// emitters in lib/Conversion/MLAToGPU and the launchers in
// mla/GpuRuntime/CacheProjectionLaunch.h. Like KernelABI.h it depends on
// the C++ standard library only.
//
// Every kernel takes raw device pointers (`!llvm.ptr<1>` in the IR, a
// CUdeviceptr on the host) followed by i32 scalars. Tensors are dense and
// row-major, and every tensor pointer must be 16-byte aligned (the kernels
// use 16-byte vector accesses wherever the row widths allow). Dimensions in
// the shape structs below are baked into a kernel; the i32 parameters may
// differ per launch. No kernel here uses dynamic shared memory.
//
// fp8_e4m3's per-tensor scale (vLLM's `k_scale`) is not baked in: the
// cache_write and gather_cache kernels of that format take one more
// parameter, last, `kv_scale`, a pointer to one f32 in global memory (4-byte
// aligned) that the kernel reads when it runs, so one image serves every
// scale and a captured CUDA graph sees the value the tensor holds at replay.
// Kernels of the other formats have no such parameter (kernelTakesKvScale):
// their images and parameter lists are the same as before the scale moved.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_CONTRACT_CACHEPROJECTIONABI_H
#define MLA_CONTRACT_CACHEPROJECTIONABI_H

#include <cstdint>

namespace mla::gpu {

/// Element type of activations (kv_c, k_pe, q, o, weights and results).
enum class ActType { BF16, F16, F32 };

/// "bf16", "f16" or "f32": the spelling of spec texts and of MLIR types.
inline const char *actTypeName(ActType type) {
  switch (type) {
  case ActType::BF16:
    return "bf16";
  case ActType::F16:
    return "f16";
  case ActType::F32:
    return "f32";
  }
  return "";
}

inline int64_t actBytes(ActType type) { return type == ActType::F32 ? 4 : 2; }

/// Grid and block of a launch, in the order cuLaunchKernel takes them.
struct LaunchDims {
  uint32_t gridX = 1, gridY = 1, gridZ = 1;
  uint32_t blockX = 1, blockY = 1, blockZ = 1;
};

//===----------------------------------------------------------------------===//
// cache_write: mla_cache_write
//===----------------------------------------------------------------------===//

/// Row formats of #mla.cache_layout (MLAAttrs.td has the byte layouts).
enum class CacheFormat { BF16, F16, F32, FP8E4M3, FP8E4M3Token, FP8DsMla };

/// fp8_ds_mla latent entries per scale.
inline constexpr int64_t kDsMlaTile = 128;
/// Byte offset of an fp8_ds_mla row's bf16 RoPE values: past the L e4m3
/// latent codes and their L / kDsMlaTile f32 scales (at byte L + 4 t).
inline constexpr int64_t dsMlaRopeOffset(int64_t latentDim) {
  return latentDim + 4 * (latentDim / kDsMlaTile);
}

/// The baked parameters of a cache_write kernel.
struct CacheWriteShape {
  int64_t latentDim = 512;       // L
  int64_t ropeDim = 64;          // R
  ActType input = ActType::BF16; // kv_c and k_pe
  CacheFormat format = CacheFormat::BF16;
};

/// Whether the cache_write and gather_cache kernels of `format` take the
/// trailing `kv_scale` parameter: fp8_e4m3 only, the one format whose scale
/// is not stored in the rows.
inline bool kernelTakesKvScale(CacheFormat format) {
  return format == CacheFormat::FP8E4M3;
}

/// Bytes of one stored cache row.
inline int64_t cacheRowBytes(const CacheWriteShape &s) {
  int64_t d = s.latentDim + s.ropeDim;
  switch (s.format) {
  case CacheFormat::BF16:
  case CacheFormat::F16:
    return 2 * d;
  case CacheFormat::F32:
    return 4 * d;
  case CacheFormat::FP8E4M3:
    return d;
  case CacheFormat::FP8E4M3Token:
    return d + 8;
  case CacheFormat::FP8DsMla:
    return dsMlaRopeOffset(s.latentDim) + 2 * s.ropeDim;
  }
  return 0;
}

/// Kernel `mla_cache_write`: one warp per token, kCacheWriteTokensPerCta
/// tokens per CTA. Parameters, in order:
///   kv_c          [T, L]                    input
///   k_pe          [T, R] (or [T, 1, R])     input
///   slot_mapping  [T]                       i32
///   cache         [num_slots, row bytes]    the format's rows
///   T, num_slots                            i32
///   kv_scale                                f32* (fp8_e4m3 only, see above)
/// Token t with slot s = slot_mapping[t] writes cache row s when
/// 0 <= s < num_slots and nothing otherwise (negative slots are padding;
/// larger ones are a caller error the kernel ignores rather than writing out
/// of bounds). Quantisation matches the CPU lowering byte for byte: x / scale
/// as an f32 division (each warp loads *kv_scale once), float8 E4M3FN
/// round-to-nearest-even saturated at
/// +-448, scales max(amax, 1e-4) / 448 (per row half for fp8_e4m3_token, per
/// 128-entry tile for fp8_ds_mla), bf16 round-to-nearest-even.
inline constexpr const char *kCacheWriteKernel = "mla_cache_write";
inline constexpr int64_t kCacheWriteTokensPerCta = 4;
inline constexpr int64_t kCacheWriteThreadsPerCta =
    32 * kCacheWriteTokensPerCta;

inline LaunchDims cacheWriteLaunchDims(int64_t tokens) {
  LaunchDims dims;
  dims.gridX = static_cast<uint32_t>((tokens + kCacheWriteTokensPerCta - 1) /
                                     kCacheWriteTokensPerCta);
  dims.blockX = static_cast<uint32_t>(kCacheWriteThreadsPerCta);
  return dims;
}

//===----------------------------------------------------------------------===//
// absorb_q and up_proj_out: mla_absorb_q, mla_up_proj_out
//===----------------------------------------------------------------------===//

/// The baked parameters of a per-head projection: for every head n,
/// out_n[T, outDim] = in_n[T, inDim] @ w[n] with w [N, inDim, outDim].
/// absorb_q: inDim = P, outDim = L, ropeDim = R (copied through).
/// up_proj_out: inDim = L, outDim = V, ropeDim = 0.
struct ProjectionShape {
  int64_t numHeads = 128; // N
  int64_t inDim = 128;    // K of the per-head product
  int64_t outDim = 512;   // columns of the per-head product
  int64_t ropeDim = 0;
  ActType elem = ActType::BF16;
};

/// bf16/f16 kernels use tensor cores (mma.sync m16n8k16, f32 accumulation,
/// one rounding to the element type at the end): a CTA of 4 warps computes a
/// kProjTileM x kProjTileN tile of one head, staging kProjTileK-deep slices
/// of the input and the weight in static shared memory. f32 kernels use one
/// thread per output element and f32 FMAs.
inline constexpr int64_t kProjTileM = 64;
inline constexpr int64_t kProjTileN = 64;
inline constexpr int64_t kProjMmaThreadsPerCta = 128;
inline constexpr int64_t kProjFmaThreadsPerCta = 128;

/// Empty when the tensor-core or FMA kernel can run `shape`, else why not
/// (bf16/f16 need inDim % 16 == 0 and outDim % 8 == 0).
inline const char *checkProjectionShape(const ProjectionShape &s) {
  if (s.numHeads <= 0 || s.inDim <= 0 || s.outDim <= 0 || s.ropeDim < 0)
    return "N, K and the output width must be positive";
  if (s.numHeads > 65535)
    return "N must be at most 65535 (it is the grid's z extent)";
  if (s.elem != ActType::F32 && (s.inDim % 16 != 0 || s.outDim % 8 != 0))
    return "bf16/f16 projections need K % 16 == 0 and an output width "
           "% 8 == 0 (mma.sync m16n8k16 tiles)";
  return "";
}

/// K slice staged per shared-memory step of the tensor-core kernels.
inline int64_t projectionTileK(const ProjectionShape &s) {
  return s.inDim % 32 == 0 ? 32 : 16;
}

/// Static shared memory of the tensor-core kernels: the input tile
/// [kProjTileM][tileK + 8] and the transposed weight tile
/// [kProjTileN][tileK + 8], 2-byte elements (the +8 pads rows against bank
/// conflicts and keeps them 16-byte aligned).
inline int64_t projectionSharedBytes(const ProjectionShape &s) {
  if (s.elem == ActType::F32)
    return 0;
  return (kProjTileM + kProjTileN) * (projectionTileK(s) + 8) * 2;
}

/// Kernel `mla_absorb_q`. Parameters, in order:
///   q       [T, N, P+R]   elem
///   w_uk_t  [N, P, L]     elem
///   out     [T, N, L+R]   elem (out[t, n, L:] = q[t, n, P:])
///   T                     i32
inline constexpr const char *kAbsorbQKernel = "mla_absorb_q";
/// Kernel `mla_up_proj_out`. Parameters, in order:
///   o       [T, N, L]     elem
///   w_uv    [N, L, V]     elem
///   out     [T, N*V]      elem
///   T                     i32
inline constexpr const char *kUpProjOutKernel = "mla_up_proj_out";
inline constexpr int kProjectionNumParams = 4;

/// Grid: bf16/f16 (ceil(T / 64), ceil(outDim / 64), N), block 128;
/// f32 (T, ceil(outDim / 128), N), block 128. T-tiles go first so that
/// consecutive CTAs share one weight tile in L2.
inline LaunchDims projectionLaunchDims(const ProjectionShape &s,
                                       int64_t tokens) {
  LaunchDims dims;
  dims.gridZ = static_cast<uint32_t>(s.numHeads);
  if (s.elem == ActType::F32) {
    dims.gridX = static_cast<uint32_t>(tokens);
    dims.gridY = static_cast<uint32_t>((s.outDim + kProjFmaThreadsPerCta - 1) /
                                       kProjFmaThreadsPerCta);
    dims.blockX = static_cast<uint32_t>(kProjFmaThreadsPerCta);
    return dims;
  }
  dims.gridX = static_cast<uint32_t>((tokens + kProjTileM - 1) / kProjTileM);
  dims.gridY = static_cast<uint32_t>((s.outDim + kProjTileN - 1) / kProjTileN);
  dims.blockX = static_cast<uint32_t>(kProjMmaThreadsPerCta);
  return dims;
}

} // namespace mla::gpu

#endif // MLA_CONTRACT_CACHEPROJECTIONABI_H
