//===- KernelABI.h - Contract between GPU kernels and their launcher -----===//
//
// What the GPU lowering (`convert-mla-to-gpu`) emits and what the host
// runtime launches must agree on kernel names, parameter lists, grid, block
// and shared-memory sizes. Both sides include this header; it depends on
// nothing but the C++ standard library so that a serving process can launch
// cached kernels without MLIR or LLVM.
//
// Every kernel takes raw device pointers (`!llvm.ptr<1>` in the IR, a
// CUdeviceptr on the host) followed by i32 scalars; every tensor is dense and
// row-major. Dimensions baked into a kernel are part of its spec (and of its
// cache key); dimensions listed as kernel parameters may differ per launch.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_CONTRACT_KERNELABI_H
#define MLA_CONTRACT_KERNELABI_H

#include "mla/Contract/CacheProjectionABI.h"

#include <cstdint>
#include <string>

namespace mla::gpu {

enum class Chip { SM90a, SM100a };
enum class ElemType { BF16, F16 };

/// "sm_90a" / "sm_100a".
const char *chipName(Chip chip);
/// Parses "sm_90a"/"sm90" and "sm_100a"/"sm100"; false when unknown.
bool parseChip(const std::string &text, Chip &chip);
inline int64_t elemBytes(ElemType) { return 2; }

//===----------------------------------------------------------------------===//
// Decode: mla_decode_partial + mla_combine
//===----------------------------------------------------------------------===//

/// Whether `format` is one of the fp8 row formats.
inline bool isFp8(CacheFormat format) {
  return format == CacheFormat::FP8E4M3 ||
         format == CacheFormat::FP8E4M3Token || format == CacheFormat::FP8DsMla;
}

/// The baked dimensions of a decode kernel. The softmax scale is not one of
/// them: it is a launch argument, so one image serves every scale.
/// `kvFormat` is the cache's row format: an fp8 format (rows of
/// cacheRowBytes, dequantised to `elem` in shared memory), or any other
/// value for rows of L+R `elem` values (q's own type).
struct DecodeShape {
  int64_t numHeads = 128;  // N
  int64_t queryRows = 1;   // Sq
  int64_t latentDim = 512; // L
  int64_t ropeDim = 64;    // R
  int64_t pageSize = 64;
  ElemType elem = ElemType::BF16;
  bool causal = false;
  CacheFormat kvFormat = CacheFormat::BF16;
  /// Variable-length queries (speculative decoding with mixed draft
  /// lengths): request b owns the q_b = query_start_loc[b+1] -
  /// query_start_loc[b] tokens of a packed q [T, N, L+R], and `queryRows`
  /// is the largest q_b a launch may hold (at most kMaxVarlenQueryRows).
  bool varlen = false;
  int64_t rowDim() const { return latentDim + ropeDim; }
  bool fp8() const { return isFp8(kvFormat); }
  /// Bytes of one cache row.
  int64_t cacheRowBytes() const {
    if (!fp8())
      return 2 * rowDim();
    return gpu::cacheRowBytes({latentDim, ropeDim, ActType::BF16, kvFormat});
  }
};

/// The largest per-request query length of a varlen decode (MTP drafts).
inline constexpr int64_t kMaxVarlenQueryRows = 8;

/// Tile parameters of the decode partial kernel (set by the planning pass
/// `mla-select-gpu-tiling` as `#mla.gpu_tiling`, chosen by
/// `chooseDecodeTiling`).
///
/// A CTA owns `rowsPerCta` query rows (row = token-major (i, n) pairs of one
/// request: row r is query token r / N, head r % N) and one split of one
/// request. Warps form a (rowsPerCta/16) x warpsN grid: for QK^T warp (i, j)
/// scores KV tokens [j*kvBlock/warpsN, (j+1)*kvBlock/warpsN) of each block for
/// rows 16i..16i+15; for PV it owns output columns
/// [j*L/warpsN, (j+1)*L/warpsN). KV blocks of `kvBlock` tokens are staged in
/// shared memory `stages` deep.
/// `wgmma` (sm_90a only) computes QK^T and PV with warpgroup MMAs reading
/// both operands from shared memory laid out in 128-byte-swizzled 64-column
/// boxes (the TMA/wgmma canonical layout) instead of ldmatrix + mma.sync;
/// it needs rowsPerCta 64, warpsN 2 (two warpgroups), kvBlock 64.
/// With an fp8 cache, `stages` raw fp8 blocks are in flight and each is
/// dequantised into one elem KV tile before the MMAs read it.
struct DecodeTiling {
  int64_t rowsPerCta = 64;
  int64_t warpsN = 2;
  int64_t kvBlock = 32;
  int64_t stages = 2;
  bool wgmma = false;
  /// With `wgmma`: the warp-specialised build (DecodeSM90Pipelined.cpp): a
  /// producer warpgroup loads Q and the KV blocks by TMA into a ring of
  /// `stages` slots with mbarriers, and the two consumer warpgroups overlap
  /// one block's softmax with the previous block's P V. The kernel takes
  /// kDecodePipelinedNumParams parameters (two CUtensorMaps appended).
  bool pipelined = false;
  /// With `pipelined`: FlashMLA's seesaw schedule (DecodeSM90Seesaw.cpp):
  /// each consumer warpgroup scores whole alternate 64-token blocks (n = 64
  /// wgmmas, Q read once per block), one warpgroup's softmax running while
  /// the other's wgmmas do; P goes to the RoPE box of its block's slot, so
  /// the build has no P tile and exactly two slots. Same parameters as the
  /// pipelined build.
  bool seesaw = false;
  /// With `seesaw`: the persistent build (tile suffix b): the grid is
  /// (row blocks, SM parts) and each CTA walks its part of a balanced split
  /// plan (mla::plan::SplitPolicy::Balanced, FlashMLA's schedule) piece by
  /// piece, the ring's phases running on across pieces, so short and long
  /// requests share the SMs without tail waves. It takes
  /// kDecodePersistentExtraParams more parameters (decodeKernelNumParams).
  bool persistent = false;
  /// With `seesaw` (tile suffix m): the two CTAs of each pair of row blocks
  /// of a query token (grid x 2i and 2i + 1) form a cluster of two that
  /// shares the KV boxes: each CTA's producer loads half of a block's boxes
  /// and the TMA unit multicasts them into both CTAs' slots, so every box
  /// crosses from L2 once per pair instead of twice. A slot is refilled once
  /// the consumers of both CTAs have released it. The kernel carries its
  /// cluster shape (decodeClusterCtas); the launch is unchanged.
  bool multicast = false;
};

/// The CTAs per cluster of a decode kernel built with `tiling`: 2 with
/// DecodeTiling::multicast, else 1 (no cluster).
int64_t decodeClusterCtas(const DecodeTiling &tiling);
/// The tile text of `tiling`, as spec texts and `--tile` take it:
/// `RxWxKxS` and the build's suffix (w, p, s, m or b; none for mma.sync).
std::string decodeTileText(const DecodeTiling &tiling);

/// The tiling the planning passes use for `chip` and `shape`.
DecodeTiling chooseDecodeTiling(Chip chip, const DecodeShape &shape);
/// Empty when `tiling` can run `shape`, else why not.
std::string checkDecodeTiling(Chip chip, const DecodeShape &shape,
                              const DecodeTiling &tiling);
int64_t decodeThreadsPerCta(const DecodeTiling &tiling);
/// Whether the sm_90a mma.sync decode of an fp8 cache (bf16 activations)
/// takes its MMA fragments straight from the raw fp8 blocks, with no
/// dequantised KV tile: K fragments are 16 codes of one row per lane (Q
/// staged with the matching k order), V fragments four rows' codes
/// transposed in registers (P stored with the matching token order). Needs
/// the codes in 64-column groups, output slices of whole 128 columns (L /
/// warpsN a multiple of 128: 16 columns per lane) and 16-token k-steps.
/// fp8_e4m3 (per-tensor scale); fp8_ds_mla when each warp's output slice
/// is one scale tile (L / warpsN == kDsMlaTile) and its rows, scales and
/// RoPE values sit on 16-byte boundaries (L = 512: 656-byte rows): the
/// scores of each tile are scaled per token after their MMAs, the RoPE
/// part is a bf16 MMA, and P is stored once per scale tile, scaled per
/// token (decodeRawScaleTiles).
bool decodeReadsRawFp8(const DecodeShape &shape, const DecodeTiling &tiling);
/// Whether the seesaw build (tiling.seesaw) reads an fp8_e4m3 cache (bf16
/// activations, R = 64): its producer loads the raw codes by TMA in boxes
/// of 128 bytes x 64 tokens (a uint8 map of the cache rows, 128B swizzle),
/// Q K^T runs as E4M3 wgmmas on those codes and on Q staged as two E4M3
/// parts (hi + lo: every bf16 value of at least 2^-2 times the largest,
/// exactly), and each consumer
/// warpgroup converts its half of V into an f16 V tile before its P V
/// (DecodeSM90Seesaw.cpp). Also over fp8_ds_mla: the four scale tiles' scores
/// in one accumulator, rescaled per token between tiles, and each tile's scale
/// folded into its V columns (decodeSeesawScaleTiles). Opt-in (tile suffix s)
/// until measured.
bool decodeSeesawReadsE4M3(const DecodeShape &shape,
                           const DecodeTiling &tiling);
/// The scale tiles of that build over fp8_ds_mla (L / kDsMlaTile; 0 for
/// the other formats and builds). Such a kernel takes a third map after
/// the cache's, of the rows' f32 scales (16-byte x kvBlock boxes from byte
/// L, no swizzle: encodeByteRowsMap's scale map).
int64_t decodeSeesawScaleTiles(const DecodeShape &shape,
                               const DecodeTiling &tiling);
/// The per-token scale tiles of a raw-fp8 decode, each with its own P tile:
/// L / kDsMlaTile for fp8_ds_mla, 0 where there are none (fp8_e4m3, whose
/// one scale is folded out, or a decode that does not read raw blocks).
int64_t decodeRawScaleTiles(const DecodeShape &shape,
                            const DecodeTiling &tiling);
/// Dynamic shared memory of mla_decode_partial, in bytes.
int64_t decodeSharedBytes(Chip chip, const DecodeShape &shape,
                          const DecodeTiling &tiling);

/// Kernel `mla_decode_partial`, grid (ceil(Sq*N / rowsPerCta), S, B),
/// block (decodeThreadsPerCta), dynamic shared memory decodeSharedBytes.
/// Parameters, in order:
///   q             [B, Sq, N, L+R]   elem
///   cache         [pages, pageSize, L+R] elem
///   block_table   [B, maxPages]      i32
///   seq_lens      [B]                i32
///   split_bounds  [B, S+1]          i32 (piece s = [b[s], b[s+1]),
///                                         clamped to seq_len)
///   partial_out   [S, B, Sq, N, L]  f32 (normalised within the piece)
///   partial_lse   [S, B, N, Sq]     f32 (natural log; -inf for an empty
///                                         piece)
///   B, maxPages, S                  i32
///   softmax_scale                   f32 (the (P+R)^-0.5 of the primer)
///   kv_scale      [1]               f32 (fp8_e4m3 caches only: the
///                                         per-tensor scale, read once)
/// With an fp8 cache, `cache` holds rows of cacheRowBytes bytes
/// ([pages, pageSize, row bytes] u8) and `q` stays elem.
///
/// A varlen kernel (DecodeShape::varlen, sm_90a only) takes q [T, N, L+R]
/// packed by request, writes token-packed partials
///   partial_out   [S, T, N, L]      f32
///   partial_lse   [S, T, N]         f32
/// and takes two more parameters after softmax_scale:
///   query_start_loc [B+1]           i32 (request b owns tokens
///                                         [qsl[b], qsl[b+1]))
///   T                               i32
/// Its grid is the same, with Sq the largest q_b the image holds; the CTAs
/// past request b's q_b*N rows exit at once. A request whose q_b falls
/// outside [0, Sq] or whose tokens leave [0, T) is treated as empty (nothing
/// read or written), so a bad query_start_loc cannot take a kernel out of
/// bounds. Causal row i of request b sees positions [0, S_b - q_b + i].
///
/// With S = 1 on sm_90a (decodeWritesFinalRows), partial_out and
/// partial_lse are the final out [B, Sq, N, L] elem (varlen [T, N, L]) and
/// lse [B, N, Sq] f32 (varlen [T, N]) that mla_combine would write: the
/// kernel stores its rows in the activation type there, and no combine
/// runs. (The partial layouts at S = 1 are these layouts.)
///
/// The optional parameters follow the eleven above in one order: kv_scale
/// (fp8_e4m3), then query_start_loc and T (varlen), then the pipelined
/// build's two tensor maps. checkDecodeTiling rejects varlen with the
/// pipelined build (or its seesaw schedule), so the tensor maps never meet
/// the varlen group.
inline constexpr const char *kDecodePartialKernel = "mla_decode_partial";
/// Whether mla_decode_partial of `chip` launched with `numSplits` pieces
/// writes the final out and lse itself (see above).
inline bool decodeWritesFinalRows(Chip chip, int64_t numSplits) {
  return chip == Chip::SM90a && numSplits == 1;
}
inline constexpr int kDecodePartialNumParams = 11;
inline constexpr int kDecodePartialVarlenNumParams = 13;
/// The partial kernel's parameter count for `shape` (kv_scale is the 12th;
/// a varlen kernel's query_start_loc and T the 12th and 13th).
inline int decodePartialNumParams(const DecodeShape &shape) {
  return kDecodePartialNumParams +
         (shape.kvFormat == CacheFormat::FP8E4M3 ? 1 : 0) +
         (shape.varlen ? 2 : 0);
}

/// The pipelined build (DecodeTiling::pipelined) takes two more, by-value
/// (__grid_constant__) CUtensorMap parameters after those eleven:
///   q_map      q as [B*Sq*N, 1, L+R] rows, boxes of 64 columns x
///              rowsPerCta rows, 128B swizzle
///   cache_map  the cache as [pages*pageSize, 1, L+R] rows, boxes of 64
///              columns x kvBlock rows, 128B swizzle
/// (mla::gpu::encodeHeadRowsMap with one head).
inline constexpr int kDecodePipelinedNumParams = 13;

/// The seesaw build (DecodeTiling::seesaw) takes three more after the two
/// maps (and after kv_scale before them, over an fp8_e4m3 cache; after a
/// third, the scale map, over fp8_ds_mla), for the combine it can run
/// itself (decodeCombinesInKernel):
///   counters   [B, ceil(Sq*N / rowsPerCta)] i32, zero before the launch and
///              zero again after it (the kernel's last CTA of each row block
///              resets its counter); null: no combine in the kernel
///   out        [B, Sq, N, L] elem, lse [B, N, Sq] f32 (mla_combine's)
/// With counters, each CTA writes its partial rows and counts itself in its
/// row block's counter; the CTA whose count completes the S pieces puts the
/// counter back to 0 and merges all rows of the block into out and lse as
/// mla_combine would. No CTA waits for another, so any grid merges in the
/// kernel, in an ordinary launch.
inline constexpr int kDecodeSeesawNumParams = 16;
/// The persistent seesaw build (DecodeTiling::persistent) takes two more
/// after those three:
///   schedule   [parts, kScheduleRowSize] i32, the balanced plan's rows
///              (SplitPlanner.h's ScheduleColumn); CTA (x, part) runs
///              row block x of every piece of row `part`
///   cu_splits  [B + 1] i32, the plan's cumulative piece counts
/// and is launched over (row blocks, parts). `bounds` is not read and S is
/// the plan's maxSplits: piece s of request b writes partial slot s * B + b.
/// Counters are required: the last piece of a request's row block to
/// finish merges the block's rows (no CTA waits, an ordinary launch); a
/// request of one piece writes out and lse directly.
inline constexpr int kDecodePersistentExtraParams = 2;
/// The mma.sync and wgmma builds (neither pipelined nor seesaw) of a
/// uniform shape on sm_90a take the same three last, after kv_scale:
///   counters   [B, ceil(Sq*N / rowsPerCta)] i32, zero before the launch and
///              zero again after it; null: no combine in the kernel
///   out, lse   as above
/// and merge as the last piece: each CTA writes its partial rows and counts
/// itself in its row block's counter; the CTA whose count completes the S
/// pieces puts the counter back to 0 and merges all rows of the block into
/// out and lse as mla_combine would. No CTA waits for another, so the
/// launch need not be cooperative.
inline bool decodeMergesAsLastPiece(Chip chip, const DecodeShape &shape,
                                    const DecodeTiling &tiling) {
  return chip == Chip::SM90a && !tiling.pipelined && !shape.varlen;
}
/// Whether mla_decode_partial of `shape` and `tiling` on `chip` can merge
/// its pieces itself (and takes counters, out and lse).
inline bool decodeCanCombineInKernel(Chip chip, const DecodeShape &shape,
                                     const DecodeTiling &tiling) {
  return (chip == Chip::SM90a && tiling.seesaw) ||
         decodeMergesAsLastPiece(chip, shape, tiling);
}
/// Whether a decode of `shape` and `tiling` on `chip` cut into `numSplits`
/// pieces merges them in the partial kernel, with no mla_combine; its
/// workspace then holds the counters. Every build that can does so at any
/// grid, in an ordinary launch (the last piece merges; no CTA waits). The
/// persistent build always does, whatever the plan's S (its requests have
/// their own piece counts).
inline bool decodeCombinesInKernel(Chip chip, const DecodeShape &shape,
                                   const DecodeTiling &tiling,
                                   int64_t numSplits) {
  return decodeCanCombineInKernel(chip, shape, tiling) &&
         (numSplits > 1 || tiling.persistent);
}
/// The in-kernel combine's parameters (counters, out, lse).
inline constexpr int kDecodeCombineNumParams = 3;
/// Row blocks of a request: the partial grid's x extent, and the counters
/// per request of a kernel that merges its pieces.
inline int64_t decodeRowBlocks(const DecodeShape &shape,
                               const DecodeTiling &tiling) {
  return (shape.queryRows * shape.numHeads + tiling.rowsPerCta - 1) /
         tiling.rowsPerCta;
}
/// The parameter count of mla_decode_partial of `shape` and `tiling` on
/// `chip`.
inline int decodeKernelNumParams(Chip chip, const DecodeShape &shape,
                                 const DecodeTiling &tiling) {
  if (tiling.seesaw)
    return kDecodeSeesawNumParams +
           (shape.kvFormat == CacheFormat::FP8E4M3 ? 1 : 0) +
           (decodeSeesawScaleTiles(shape, tiling) > 0 ? 1 : 0) +
           (tiling.persistent ? kDecodePersistentExtraParams : 0);
  return decodePartialNumParams(shape) + (tiling.pipelined ? 2 : 0) +
         (decodeMergesAsLastPiece(chip, shape, tiling) ? kDecodeCombineNumParams
                                                       : 0);
}
/// The producer warpgroup of the pipelined build.
inline constexpr int64_t kDecodeProducerThreads = 128;

/// Kernel `mla_combine`, grid (ceil(Sq*N / combineRowsPerCta), B), block
/// combineThreadsPerCta, no dynamic shared memory. Parameters:
///   partial_out [S, B, Sq, N, L] f32, partial_lse [S, B, N, Sq] f32,
///   out [B, Sq, N, L] elem, lse [B, N, Sq] f32, B i32, S i32
inline constexpr const char *kCombineKernel = "mla_combine";
/// A varlen image's combine is this kernel with Sq = 1 launched over T
/// tokens as if they were T requests: partial_out [S, T, N, L],
/// partial_lse [S, T, N] -> out [T, N, L], lse [T, N] (FlashMLA's
/// token-packed lse, the uniform [B, N, Sq] at Sq = 1).
inline constexpr int kCombineNumParams = 6;
inline constexpr int64_t kCombineRowsPerCta = 4;
inline constexpr int64_t kCombineThreadsPerCta = 128;

/// Kernel `mla_decode_plan` (in every decode image, next to the two above):
/// the device half of a plan/run decode. It writes the split bounds the host
/// would get from planUniformBounds(seq_lens, S, page) (GpuDecode.h) from
/// device seq_lens, so a decode needs no host copy of them. One warp per
/// request, grid (ceil(B / kDecodePlanRequestsPerCta)), block
/// kDecodePlanThreadsPerCta, no dynamic shared memory. Parameters:
///   seq_lens     [B]            i32
///   block_table  [B, maxPages]  i32
///   split_bounds [B, S+1]       i32 (written)
///   status       [1]            i32 (ORed with kDecodePlanBad* bits)
///   B, maxPages, numPages, S    i32
/// A request whose seq_len breaks the host rule (checkSeqLenValues: in
/// [0, maxPages * page], and 0 or at least Sq when causal) or whose used
/// pages hold a block-table entry outside [0, numPages) is planned as empty
/// (out = 0, lse = -inf; nothing of the cache is read for it) and flagged in
/// `status`, which only the host resets.
/// A varlen image's planner takes `query_start_loc [B+1]` and `T` (i32)
/// after S and checks checkVarlenQueryValues' rules on the device: a
/// request with q_b outside [0, Sq] or tokens outside [0, T), or with
/// query_start_loc[0] != 0 or query_start_loc[B] != T (flagged on requests
/// 0 and B-1), sets kDecodePlanBadQueryStartLoc; q_b > seq_len sets
/// kDecodePlanBadSeqLen. Either plans the request as empty.
inline constexpr const char *kDecodePlanKernel = "mla_decode_plan";
inline constexpr int kDecodePlanNumParams = 8;
inline constexpr int kDecodePlanVarlenNumParams = 10;
inline constexpr int64_t kDecodePlanRequestsPerCta = 4;
inline constexpr int64_t kDecodePlanThreadsPerCta =
    32 * kDecodePlanRequestsPerCta;
inline constexpr int32_t kDecodePlanBadSeqLen = 1;
inline constexpr int32_t kDecodePlanBadPage = 2;
inline constexpr int32_t kDecodePlanBadQueryStartLoc = 4;

/// Workspace floats for S pieces of a batch of B requests (partial_out then
/// partial_lse): S*B*Sq*N*(L+1). A varlen batch's T <= B*Sq tokens fit the
/// same sections.
inline int64_t decodeWorkspaceFloats(const DecodeShape &shape, int64_t batch,
                                     int64_t numSplits) {
  return numSplits * batch * shape.queryRows * shape.numHeads *
         (shape.latentDim + 1);
}

} // namespace mla::gpu

#endif // MLA_CONTRACT_KERNELABI_H
