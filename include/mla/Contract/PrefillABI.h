//===- PrefillABI.h - Kernel contract of the chunked-prefill ops ---------===//
//
// Kernel names, parameter lists and launch geometry of the GPU kernels of
// `mla.gather_cache`, `mla.merge_states`, `mla.up_proj_kv` and `mla.mha`
// (the pieces of a chunked prefill, primer section 7), shared by the emitters
// in lib/Conversion/MLAToGPU and the launchers in
// mla/GpuRuntime/PrefillLaunch.h. Like CacheProjectionABI.h it depends on
// the C++ standard library only and follows its conventions: raw device
// pointers then i32 scalars, dense row-major tensors, 16-byte aligned
// pointers; dimensions in the shape structs are baked into a kernel.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_CONTRACT_PREFILLABI_H
#define MLA_CONTRACT_PREFILLABI_H

#include "mla/Contract/CacheProjectionABI.h"
#include "mla/Contract/KernelABI.h"

#include <cstdint>

namespace mla::gpu {

//===----------------------------------------------------------------------===//
// gather_cache: mla_gather_cache
//===----------------------------------------------------------------------===//

/// The baked parameters of a gather kernel: the cache rows' format (L, R and
/// format in `row`; `row.input` is the workspace's element type, the type
/// rows are dequantised to) and the page size.
struct GatherCacheShape {
  CacheWriteShape row;
  int64_t pageSize = 64;
};

/// Kernel `mla_gather_cache`: one warp per workspace row,
/// kGatherRowsPerCta rows per CTA. Parameters, in order:
///   cache        [numPages, pageSize, row bytes]  the format's rows
///   block_table  [B, maxPages]                    i32
///   starts       [B]                              i32
///   cu_rows      [B+1]                            i32, non-decreasing
///   workspace    [W, L+R]                         row.input
///   B, maxPages, numPages, W                      i32
///   kv_scale  f32* (fp8_e4m3 only: the trailing parameter
///             CacheProjectionABI.h describes; each warp loads it once)
/// Workspace row r with cu_rows[b] <= r < cu_rows[b+1] (found by binary
/// search) receives the cache row at logical position
/// starts[b] + r - cu_rows[b] of request b, dequantised exactly as the CPU
/// lowering does (e4m3 bytes times their f32 scale, bf16 RoPE entries of
/// fp8_ds_mla widened, then one rounding to the workspace type). Rows
/// outside [cu_rows[0], cu_rows[B]) and rows whose logical page is past
/// maxPages or whose physical page is outside [0, numPages) are left as they
/// were (the argument rules reject such calls; the kernel never reads out of
/// bounds).
inline constexpr const char *kGatherCacheKernel = "mla_gather_cache";
inline constexpr int64_t kGatherRowsPerCta = 4;
inline constexpr int64_t kGatherThreadsPerCta = 32 * kGatherRowsPerCta;

inline LaunchDims gatherCacheLaunchDims(int64_t workspaceRows) {
  LaunchDims dims;
  dims.gridX = static_cast<uint32_t>((workspaceRows + kGatherRowsPerCta - 1) /
                                     kGatherRowsPerCta);
  dims.blockX = static_cast<uint32_t>(kGatherThreadsPerCta);
  return dims;
}

/// Empty when a gather kernel can be built for `s`, else why not.
inline const char *checkGatherCacheShape(const GatherCacheShape &s) {
  if (s.row.latentDim <= 0 || s.row.ropeDim <= 0 || s.pageSize <= 0)
    return "L, R and the page size must be positive";
  if (s.row.format == CacheFormat::FP8DsMla && s.row.latentDim % kDsMlaTile)
    return "fp8_ds_mla needs L % 128 == 0";
  return "";
}

//===----------------------------------------------------------------------===//
// merge_states: mla_merge_states
//===----------------------------------------------------------------------===//

/// The baked parameters of a merge kernel: out [T, N, H] of `elem`.
struct MergeStatesShape {
  int64_t numHeads = 128; // N
  int64_t headDim = 128;  // H
  ActType elem = ActType::BF16;
};

/// Kernel `mla_merge_states`: one warp per (token, head) row,
/// kMergeRowsPerCta rows per CTA (row r = t * N + n). Parameters, in order:
///   out_a [T, N, H] elem, lse_a [N, T] f32,
///   out_b [T, N, H] elem, lse_b [N, T] f32,
///   out   [T, N, H] elem, lse   [N, T] f32,
///   T                               i32
/// vLLM's merge_attn_states as the CPU lowering computes it: a side whose
/// LSE is not finite (+-inf or NaN) does not contribute and its output is
/// never read into the result; with neither side live, out = 0 and
/// lse = -inf. `out`/`lse` may be `out_a`/`lse_a` (or the b side): every
/// element is read before it is written by the same warp.
inline constexpr const char *kMergeStatesKernel = "mla_merge_states";
inline constexpr int kMergeStatesNumParams = 7;
inline constexpr int64_t kMergeRowsPerCta = 4;
inline constexpr int64_t kMergeThreadsPerCta = 32 * kMergeRowsPerCta;

inline LaunchDims mergeStatesLaunchDims(const MergeStatesShape &s,
                                        int64_t tokens) {
  LaunchDims dims;
  int64_t rows = tokens * s.numHeads;
  dims.gridX =
      static_cast<uint32_t>((rows + kMergeRowsPerCta - 1) / kMergeRowsPerCta);
  dims.blockX = static_cast<uint32_t>(kMergeThreadsPerCta);
  return dims;
}

inline const char *checkMergeStatesShape(const MergeStatesShape &s) {
  if (s.numHeads <= 0 || s.headDim <= 0)
    return "N and H must be positive";
  return "";
}

//===----------------------------------------------------------------------===//
// up_proj_kv: mla_up_proj_kv
//===----------------------------------------------------------------------===//

/// The baked parameters of the latent up-projection:
/// kv[s, :] = latent[s, :] @ kv_b_proj^T viewed as [N, P+V], split into
/// k_nope [S, N, P] and v [S, N, V].
struct UpProjKvShape {
  int64_t numHeads = 128;  // N
  int64_t latentDim = 512; // L (the GEMM's K)
  int64_t nopeDim = 128;   // P
  int64_t valueDim = 128;  // V
  ActType elem = ActType::BF16;
  int64_t columns() const { return numHeads * (nopeDim + valueDim); }
};

/// A CTA of 4 warps (2 x 2, each 32 x 32) computes a kUpKvTileM x
/// kUpKvTileN tile of the [S, N*(P+V)] product with mma.sync m16n8k16 (f32
/// accumulation, one rounding at the end); 64-deep K slices of latent rows
/// and kv_b_proj rows (both K-contiguous, so no transpose) stream through a
/// kUpKvStages-deep cp.async ring in dynamic shared memory.
inline constexpr int64_t kUpKvTileM = 64;
inline constexpr int64_t kUpKvTileN = 64;
inline constexpr int64_t kUpKvTileK = 64;
inline constexpr int64_t kUpKvStages = 2;
inline constexpr int64_t kUpKvThreadsPerCta = 128;

/// Empty when the kernel can run `s`, else why not.
inline const char *checkUpProjKvShape(const UpProjKvShape &s) {
  if (s.numHeads <= 0 || s.latentDim <= 0 || s.nopeDim <= 0 || s.valueDim <= 0)
    return "N, L, P and V must be positive";
  if (s.elem == ActType::F32)
    return "the tensor-core kernel reads bf16 or f16, not f32";
  if (s.latentDim % kUpKvTileK != 0)
    return "L must be a multiple of 64 (the staged K slice)";
  if (s.nopeDim % 8 != 0 || s.valueDim % 8 != 0)
    return "P and V must be multiples of 8";
  if (s.columns() > (int64_t(1) << 30))
    return "N*(P+V) is too large";
  return "";
}

/// Dynamic shared memory of mla_up_proj_kv: kUpKvStages x (A + B tiles) of
/// kUpKvTileK two-byte columns (128-byte rows, ChunkXor-swizzled).
inline int64_t upProjKvSharedBytes() {
  return kUpKvStages * (kUpKvTileM + kUpKvTileN) * kUpKvTileK * 2;
}

/// The sm_90a build (upProjKvUsesWgmma): a warp-specialised wgmma GEMM,
/// kUpKvWgTileM x kUpKvWgTileN output tiles, 384 threads (a TMA producer
/// warpgroup and two m64n256 consumer warpgroups), a kUpKvWgStages-deep ring
/// of kUpKvTileK-deep slices, latent and kv_b_proj passed as by-value TMA
/// descriptors over [rows, 1, L] with 64-column 128B-swizzled boxes.
inline constexpr int64_t kUpKvWgTileM = 128;
inline constexpr int64_t kUpKvWgTileN = 256;
inline constexpr int64_t kUpKvWgStages = 4;
inline constexpr int64_t kUpKvWgThreads = 384;

/// Shared memory of the sm_90a build: the A (latent) and B (kv_b_proj)
/// rings, then a full and an empty mbarrier per stage.
struct UpProjKvWgSmemLayout {
  int64_t a, b, barriers, total, aStageBytes, bStageBytes;
};

inline UpProjKvWgSmemLayout upProjKvWgSmemLayout() {
  UpProjKvWgSmemLayout l;
  l.aStageBytes = kUpKvWgTileM * kUpKvTileK * 2;
  l.bStageBytes = kUpKvWgTileN * kUpKvTileK * 2;
  l.a = 0;
  l.b = kUpKvWgStages * l.aStageBytes;
  l.barriers = l.b + kUpKvWgStages * l.bStageBytes;
  l.total = l.barriers + 8 * 2 * kUpKvWgStages;
  return l;
}

/// Whether `chip` runs the wgmma build for `s` (checkUpProjKvShape already
/// holds L to whole 64-column slices).
inline bool upProjKvUsesWgmma(Chip chip, const UpProjKvShape &s) {
  return chip == Chip::SM90a && s.elem != ActType::F32;
}

/// Kernel `mla_up_proj_kv`. The mma.sync build: grid (ceil(S / 64),
/// ceil(N*(P+V) / 64)), block 128, dynamic shared memory
/// upProjKvSharedBytes(). The wgmma build: grid (ceil(N*(P+V) / 256),
/// ceil(S / 128)), block 384, upProjKvWgSmemLayout().total bytes, latent and
/// kv_b_proj as TMA descriptors. Parameters, in order:
///   latent     [S, L]          elem (a pointer, or a descriptor)
///   kv_b_proj  [N*(P+V), L]    elem (a pointer, or a descriptor)
///   k_nope     [S, N, P]       elem
///   v          [S, N, V]       elem
///   S                          i32
inline constexpr const char *kUpProjKvKernel = "mla_up_proj_kv";
inline constexpr int kUpProjKvNumParams = 5;

inline LaunchDims upProjKvLaunchDims(Chip chip, const UpProjKvShape &s,
                                     int64_t rows) {
  LaunchDims dims;
  if (upProjKvUsesWgmma(chip, s)) {
    dims.gridX =
        static_cast<uint32_t>((s.columns() + kUpKvWgTileN - 1) / kUpKvWgTileN);
    dims.gridY =
        static_cast<uint32_t>((rows + kUpKvWgTileM - 1) / kUpKvWgTileM);
    dims.blockX = static_cast<uint32_t>(kUpKvWgThreads);
    return dims;
  }
  dims.gridX = static_cast<uint32_t>((rows + kUpKvTileM - 1) / kUpKvTileM);
  dims.gridY =
      static_cast<uint32_t>((s.columns() + kUpKvTileN - 1) / kUpKvTileN);
  dims.blockX = static_cast<uint32_t>(kUpKvThreadsPerCta);
  return dims;
}

//===----------------------------------------------------------------------===//
// mha: mla_mha
//===----------------------------------------------------------------------===//

/// The baked parameters of a varlen attention kernel: q and k rows of
/// qkDim (P+R), v and out rows of vDim (V), per head.
struct MhaShape {
  int64_t numHeads = 128; // N
  int64_t qkDim = 192;    // P+R
  int64_t vDim = 128;     // V
  ActType elem = ActType::BF16;
  bool causal = true;
  float scale = 0.0721687824f; // (P+R)^-0.5
};

/// Kernel `mla_mha`, in one of two builds that share the launch contract
/// below except for how q, k and v are passed (mhaUsesWgmma picks):
///  * sm_90a with bf16/f16 and head widths the tiles hold: FlashAttention-3
///    structure. A CTA is a 128-row tile of one request's queries
///    (blockIdx.x) and one head (blockIdx.y), three warpgroups: the first
///    issues TMA loads of 128-key K and V blocks into kMhaStages-deep mbarrier
///    rings and gives its registers away (setmaxnreg); the other two own 64
///    query rows each, compute S = Q K^T with wgmma from shared memory, a
///    base-2 online softmax in registers, and O += P V with P fed to wgmma
///    from registers, overlapping one block's softmax with the previous
///    block's P V and taking turns (ping-pong) on the tensor cores. q, k and
///    v come as CUtensorMap descriptors (by value) over [rows, N, width]
///    with 64-column, 128B-swizzled boxes.
///  * otherwise (f32, sm_100a, other widths): a first, correct version on
///    CUDA cores, one warp per (query token, head) row, kMhaRowsPerCta rows
///    per CTA (row r = t * N + n), one key at a time; q, k, v as pointers.
/// Parameters:
///   q [T, N, qkDim], k [S, N, qkDim], v [S, N, vDim]   elem (maps or ptrs)
///   cu_seqlens_q [B+1], cu_seqlens_k [B+1]              i32, non-decreasing
///   out [T, N, vDim] elem, lse [N, T] f32
///   B, T                                                i32
/// Request b's query i (of q_len) sees keys [0, k_len) or, causal and
/// bottom-right aligned, [0, k_len - q_len + i]. Rows that see no key, and
/// rows outside [cu_seqlens_q[0], cu_seqlens_q[B]), get out = 0,
/// lse = -inf.
inline constexpr const char *kMhaKernel = "mla_mha";
inline constexpr int kMhaNumParams = 9;
inline constexpr int64_t kMhaRowsPerCta = 4;
inline constexpr int64_t kMhaThreadsPerCta = 32 * kMhaRowsPerCta;

/// The tensor-core build: query rows per CTA, keys per block, ring depth,
/// threads (one producer and two consumer warpgroups), and the TMA box
/// (64 two-byte columns = one 128-byte swizzle row).
inline constexpr int64_t kMhaTileM = 128;
inline constexpr int64_t kMhaTileN = 128;
inline constexpr int64_t kMhaStages = 2;
inline constexpr int64_t kMhaWgmmaThreads = 384;
inline constexpr int64_t kMhaBoxColumns = 64;

/// Shared-memory byte offsets of the tensor-core build: the Q tile, the K
/// and V rings (each box of kMhaBoxColumns columns x rows is 128 * rows
/// bytes, 1024-aligned for the 128B swizzle), then the mbarriers: Q full,
/// then per stage K full, V full, K empty and V empty.
struct MhaSmemLayout {
  int64_t q, k, v, barriers, total;
  int64_t kStageBytes, vStageBytes;
};

inline MhaSmemLayout mhaSmemLayout(const MhaShape &s) {
  MhaSmemLayout l;
  l.kStageBytes = kMhaTileN * s.qkDim * 2;
  l.vStageBytes = kMhaTileN * s.vDim * 2;
  l.q = 0;
  l.k = kMhaTileM * s.qkDim * 2;
  l.v = l.k + kMhaStages * l.kStageBytes;
  l.barriers = l.v + kMhaStages * l.vStageBytes;
  l.total = l.barriers + 8 * (1 + 4 * kMhaStages);
  return l;
}

/// The H100/H200 per-CTA shared-memory limit (227 KiB).
inline constexpr int64_t kSm90MaxSharedBytes = 232448;

/// Whether `chip` runs the tensor-core (wgmma, TMA) build for `s`.
inline bool mhaUsesWgmma(Chip chip, const MhaShape &s) {
  return chip == Chip::SM90a && s.elem != ActType::F32 &&
         s.qkDim % kMhaBoxColumns == 0 && s.qkDim <= 256 &&
         s.vDim % kMhaBoxColumns == 0 && s.vDim <= 128 &&
         mhaSmemLayout(s).total <= kSm90MaxSharedBytes;
}

/// Dynamic shared memory of a launch (0 for the CUDA-core build).
inline int64_t mhaSharedBytes(Chip chip, const MhaShape &s) {
  return mhaUsesWgmma(chip, s) ? mhaSmemLayout(s).total : 0;
}

inline LaunchDims mhaLaunchDims(Chip chip, const MhaShape &s, int64_t tokens,
                                int64_t batch) {
  LaunchDims dims;
  if (mhaUsesWgmma(chip, s)) {
    // Request b needs ceil(q_len_b / 128) tiles, and so do the rows before
    // the first and after the last request (which only store out 0 and
    // lse -inf); their sum is at most ceil(T / 128) + B + 2, and CTAs past
    // the last tile exit at once. Tiles vary fastest: the CTAs running at
    // once are the tiles of a few heads, which read the same K and V, so
    // those stay in L2 (heads fastest made every CTA of a wave stream its
    // own head's K and V from DRAM). Each request's tiles go last-first, so
    // a head's longest causal tiles start first.
    dims.gridX =
        static_cast<uint32_t>((tokens + kMhaTileM - 1) / kMhaTileM + batch + 2);
    dims.gridY = static_cast<uint32_t>(s.numHeads);
    dims.blockX = static_cast<uint32_t>(kMhaWgmmaThreads);
    return dims;
  }
  int64_t rows = tokens * s.numHeads;
  dims.gridX =
      static_cast<uint32_t>((rows + kMhaRowsPerCta - 1) / kMhaRowsPerCta);
  dims.blockX = static_cast<uint32_t>(kMhaThreadsPerCta);
  return dims;
}

inline const char *checkMhaShape(const MhaShape &s) {
  if (s.numHeads <= 0 || s.qkDim <= 0 || s.vDim <= 0)
    return "N and the head widths must be positive";
  if (!(s.scale > 0.0f))
    return "the softmax scale must be positive";
  return "";
}

} // namespace mla::gpu

#endif // MLA_CONTRACT_PREFILLABI_H
