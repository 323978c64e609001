//===- KernelABI.cpp - GPU kernel contract shared by lowering and runtime -===//

#include "mla/Contract/KernelABI.h"

#include <algorithm>

namespace mla::gpu {

const char *chipName(Chip chip) {
  return chip == Chip::SM90a ? "sm_90a" : "sm_100a";
}

bool parseChip(const std::string &text, Chip &chip) {
  if (text == "sm_90a" || text == "sm90" || text == "sm_90") {
    chip = Chip::SM90a;
    return true;
  }
  if (text == "sm_100a" || text == "sm100" || text == "sm_100") {
    chip = Chip::SM100a;
    return true;
  }
  return false;
}

namespace {
int64_t alignTo(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

/// Largest dynamic shared memory a CTA may use (sm_90 and sm_100: 227 KiB).
constexpr int64_t kMaxSharedBytes = 227 * 1024;
constexpr int64_t kMaxDecodeRowDim = 4096;
} // namespace

DecodeTiling chooseDecodeTilingSM100(const DecodeShape &shape);
int64_t decodeSharedBytesSM100(const DecodeShape &shape,
                               const DecodeTiling &tiling);
std::string checkDecodeTilingSM100(const DecodeShape &shape,
                                   const DecodeTiling &tiling);

DecodeTiling chooseDecodeTiling(Chip chip, const DecodeShape &shape) {
  if (chip == Chip::SM100a)
    return chooseDecodeTilingSM100(shape);
  // The seesaw build wherever it runs (bf16/f16 caches, uniform s_q): on the
  // H200, same call, 1.15-1.26x the wgmma kernel at N=128 and 1.10x at N=16
  // (docs/benchmarks.md).
  DecodeTiling seesawTiling{64,
                            2,
                            64,
                            2,
                            /*wgmma=*/true,
                            /*pipelined=*/true,
                            /*seesaw=*/true};
  if (!shape.fp8() && checkDecodeTiling(chip, shape, seesawTiling).empty())
    return seesawTiling;
  // fp8 at 16 query rows: the 16-row mma.sync kernel, which spends no
  // padded MMA rows. fp8_e4m3 and fp8_ds_mla over 64-token blocks, their
  // fragments read from the raw ring (decodeReadsRawFp8: 95 and 109 KB of
  // shared memory, two CTAs per SM); fp8_e4m3_token scales in f32 over
  // 32-token blocks (four warps of 8 tokens), whose 94 KB also let two CTAs
  // share an SM. On the H200 at (128, 16, 8192), same call: 0.185 ms
  // (fp8_e4m3), 0.208 ms (fp8_ds_mla; 16x8x64x3 0.376), bf16 seesaw 0.300;
  // and in another call 0.371 ms (fp8_e4m3_token; 16x8x64x3 0.396)
  // (docs/benchmarks.md, 2026-12-04).
  if (shape.fp8() && shape.numHeads * shape.queryRows <= 16) {
    DecodeTiling raw{16, 4, 64, 2};
    DecodeTiling narrowFp8 =
        decodeReadsRawFp8(shape, raw) ? raw : DecodeTiling{16, 4, 32, 2};
    if (checkDecodeTiling(chip, shape, narrowFp8).empty())
      return narrowFp8;
  }
  // fp8 at 64 query rows or more: the seesaw build where it reads the
  // format (fp8_e4m3 and fp8_ds_mla under bf16 q). On the H200 at N = 128,
  // same call: 1.37x the wgmma kernel over fp8_e4m3 and 1.51x the 64x2x32x3
  // mma.sync kernel over fp8_ds_mla (docs/benchmarks.md, 2026-12-05).
  if (shape.fp8() && shape.numHeads * shape.queryRows >= 64 &&
      checkDecodeTiling(chip, shape, seesawTiling).empty())
    return seesawTiling;
  // Warpgroup MMAs on 128B-swizzled tiles when the shape allows them: on
  // the H200 2.1-2.3x the mma.sync kernel at N=128 and +5% at N=16, where
  // the 64-row tile idles MMA rows but the kernel is bound by HBM anyway
  // (docs/benchmarks.md). fp8_ds_mla's 656-byte rows make two raw stages
  // overflow shared memory next to the wgmma tiles: it takes mma.sync.
  DecodeTiling wgmmaTiling{64, 2, 64, 2, /*wgmma=*/true};
  if (checkDecodeTiling(chip, shape, wgmmaTiling).empty())
    return wgmmaTiling;
  DecodeTiling tiling;
  int64_t rows = shape.numHeads * shape.queryRows;
  if (rows >= 64) {
    // Compute-bound (FLOP/byte ~ 2*N*Sq): 64 rows share each KV block; two
    // warps per 16-row block split the 512-wide output (128 f32 per thread).
    // Three stages: +8.5% over two at (132,128,8192) on the H200
    // (docs/benchmarks.md), still one CTA per SM.
    tiling = {64, 2, 32, 3};
  } else if (rows > 16) {
    tiling = {32, 2, 32, 2};
  } else {
    // Memory-bound: one 16-row block, four warps on the output columns,
    // wide KV blocks so each warp scores 16 tokens per block.
    tiling = {16, 4, 64, 2};
  }
  // Narrow latents (L = 256, ...) leave too few output columns per warp.
  while (tiling.warpsN > 1 && (shape.latentDim / tiling.warpsN) % 16 != 0)
    tiling.warpsN /= 2;
  // A KV block never straddles a page: small pages get smaller blocks (and
  // fewer warps sharing a block's tokens).
  while (shape.pageSize > 0 && shape.pageSize % tiling.kvBlock != 0) {
    if (tiling.kvBlock / 2 >= 16 * tiling.warpsN && tiling.kvBlock > 16)
      tiling.kvBlock /= 2;
    else if (tiling.warpsN > 1)
      tiling.warpsN /= 2;
    else
      break;
  }
  return tiling;
}

int64_t decodeThreadsPerCta(const DecodeTiling &tiling) {
  int64_t producer = tiling.pipelined ? kDecodeProducerThreads : 0;
  return producer + 32 * (tiling.rowsPerCta / 16) * tiling.warpsN;
}

int64_t decodeClusterCtas(const DecodeTiling &tiling) {
  return tiling.multicast ? 2 : 1;
}

std::string decodeTileText(const DecodeTiling &t) {
  return std::to_string(t.rowsPerCta) + "x" + std::to_string(t.warpsN) + "x" +
         std::to_string(t.kvBlock) + "x" + std::to_string(t.stages) +
         (t.persistent  ? "b"
          : t.multicast ? "m"
          : t.seesaw    ? "s"
          : t.pipelined ? "p"
          : t.wgmma     ? "w"
                        : "");
}

bool decodeReadsRawFp8(const DecodeShape &shape, const DecodeTiling &tiling) {
  bool common = shape.elem == ElemType::BF16 && !tiling.wgmma &&
                tiling.warpsN > 0 && shape.latentDim % tiling.warpsN == 0 &&
                (shape.latentDim / tiling.warpsN) % 128 == 0 &&
                tiling.kvBlock % 16 == 0;
  if (!common)
    return false;
  if (shape.kvFormat == CacheFormat::FP8E4M3)
    return shape.rowDim() % 64 == 0;
  if (shape.kvFormat == CacheFormat::FP8DsMla) {
    int64_t ropeOff = dsMlaRopeOffset(shape.latentDim);
    return shape.latentDim / tiling.warpsN == kDsMlaTile &&
           shape.ropeDim % 32 == 0 && ropeOff % 16 == 0 &&
           shape.cacheRowBytes() % 16 == 0;
  }
  return false;
}

bool decodeSeesawReadsE4M3(const DecodeShape &shape,
                           const DecodeTiling &tiling) {
  return tiling.seesaw && (shape.kvFormat == CacheFormat::FP8E4M3 ||
                           shape.kvFormat == CacheFormat::FP8DsMla);
}

/// fp8_ds_mla's scale tiles where a build reads them (`reads`), else 0.
static int64_t dsMlaScaleTilesIf(bool reads, const DecodeShape &shape) {
  return reads && shape.kvFormat == CacheFormat::FP8DsMla
             ? shape.latentDim / kDsMlaTile
             : 0;
}

int64_t decodeSeesawScaleTiles(const DecodeShape &shape,
                               const DecodeTiling &tiling) {
  return dsMlaScaleTilesIf(decodeSeesawReadsE4M3(shape, tiling), shape);
}

int64_t decodeRawScaleTiles(const DecodeShape &shape,
                            const DecodeTiling &tiling) {
  return dsMlaScaleTilesIf(decodeReadsRawFp8(shape, tiling), shape);
}

int64_t decodeSharedBytes(Chip chip, const DecodeShape &shape,
                          const DecodeTiling &tiling) {
  if (chip == Chip::SM100a)
    return decodeSharedBytesSM100(shape, tiling);
  if (decodeSeesawReadsE4M3(shape, tiling)) {
    // Q's two E4M3 parts (as many bytes as bf16 Q), the ring of raw boxes
    // (128 bytes x kvBlock tokens, ceil((L+R)/128) per slot), the f16 V
    // tile, the scratch, and the mbarriers: Q full, per slot a full barrier
    // per box and three release groups. Over fp8_ds_mla a slot also holds
    // the rows' scales (16 bytes each), each slot a 16-byte array of
    // per-token factors, and the warpgroups' scale maxima meet in a
    // 128-byte scratch.
    int64_t boxes = (shape.rowDim() + 127) / 128;
    bool dsMla = decodeSeesawScaleTiles(shape, tiling) > 0;
    int64_t slotScales = dsMla ? tiling.kvBlock * 16 : 0;
    int64_t tokenScales =
        dsMla ? alignTo(tiling.stages * tiling.kvBlock * 16, 128) + 128 : 0;
    return alignTo(tiling.rowsPerCta * shape.rowDim() * 2, 1024) +
           tiling.stages * (boxes * tiling.kvBlock * 128 + slotScales) +
           alignTo(tiling.kvBlock * shape.latentDim * 2, 1024) +
           alignTo(tiling.rowsPerCta * tiling.warpsN * 4, 128) + tokenScales +
           alignTo((1 + tiling.stages * (boxes + 3)) * 8, 128);
  }
  // An fp8 cache: one dequantised KV tile, after the other sections a ring
  // of `stages` raw blocks.
  int64_t kvTiles = decodeReadsRawFp8(shape, tiling) ? 0
                    : shape.fp8()                    ? 1
                                                     : tiling.stages;
  int64_t raw =
      shape.fp8()
          ? tiling.stages * alignTo(tiling.kvBlock * shape.cacheRowBytes(), 128)
          : 0;
  if (tiling.wgmma) {
    // 64-column boxes of 128-byte rows; every section 1024-byte aligned (the
    // 128-byte swizzle atom).
    int64_t row = shape.rowDim() * elemBytes(shape.elem);
    // The pipelined build adds its mbarriers: Q full, then per stage one
    // full barrier per 64-column box and an empty barrier per release group
    // (the seesaw build frees V_L, V_R and the P box apart).
    int64_t boxes = shape.rowDim() / 64;
    // The persistent build adds "Q empty" (the consumers are done with the
    // Q tile of a piece).
    int64_t releaseGroups = tiling.seesaw ? 3 : 1;
    int64_t qBarriers = tiling.persistent ? 2 : 1;
    int64_t barriers =
        tiling.pipelined
            ? alignTo((qBarriers + tiling.stages * (boxes + releaseGroups)) * 8,
                      128)
            : 0;
    return alignTo(tiling.rowsPerCta * row, 1024) +
           alignTo(kvTiles * tiling.kvBlock * row, 1024) +
           (tiling.seesaw
                ? 0
                : alignTo(tiling.rowsPerCta * tiling.kvBlock * 2, 1024)) +
           alignTo(tiling.rowsPerCta * tiling.warpsN * 4, 128) + raw + barriers;
  }
  // Shared rows are padded to whole 128-byte swizzle groups.
  int64_t rowBytes = alignTo(shape.rowDim() * elemBytes(shape.elem), 128);
  int64_t q = alignTo(tiling.rowsPerCta * rowBytes, 128);
  int64_t kv = alignTo(kvTiles * tiling.kvBlock * rowBytes, 128);
  // P rows are padded by 16 bytes so ldmatrix reads are conflict-free; a
  // raw fp8_ds_mla decode keeps a P tile per scale tile.
  int64_t scaleTiles = decodeRawScaleTiles(shape, tiling);
  int64_t p = alignTo(std::max<int64_t>(1, scaleTiles) * tiling.rowsPerCta *
                          (tiling.kvBlock * 2 + 16),
                      128);
  // The row-reduction scratch, and with scale tiles their running maxima.
  int64_t red = alignTo(tiling.rowsPerCta * tiling.warpsN * 4, 128) +
                (scaleTiles > 0 ? 128 : 0);
  // A raw ring read by the MMAs is filled by bulk copies, one mbarrier per
  // stage after the ring.
  int64_t barriers =
      decodeReadsRawFp8(shape, tiling) ? alignTo(tiling.stages * 8, 128) : 0;
  return q + kv + p + red + raw + barriers;
}

std::string checkDecodeTiling(Chip chip, const DecodeShape &shape,
                              const DecodeTiling &tiling) {
  // Far beyond any MLA head (DeepSeek-V3: L+R = 576, N = 128), and small
  // enough that the shared-memory sums below cannot overflow and the
  // emitters, which unroll over the row, finish.
  if (shape.rowDim() > kMaxDecodeRowDim || shape.numHeads > kMaxDecodeRowDim ||
      shape.queryRows > kMaxDecodeRowDim)
    return "L+R = " + std::to_string(shape.rowDim()) +
           ", N = " + std::to_string(shape.numHeads) +
           " and Sq = " + std::to_string(shape.queryRows) +
           " must each be at most " + std::to_string(kMaxDecodeRowDim);
  if (chip == Chip::SM100a && shape.kvFormat == CacheFormat::FP8E4M3Token)
    return "the sm_100a (tcgen05) decode does not read fp8_e4m3_token "
           "caches: it stages each row with 16-byte cp.async copies, and a "
           "584-byte row is not whole 16-byte chunks; it reads bf16, f16, "
           "fp8_e4m3 and fp8_ds_mla caches";
  if (shape.fp8() && shape.kvFormat == CacheFormat::FP8DsMla &&
      shape.latentDim % kDsMlaTile != 0)
    return "fp8_ds_mla needs L % " + std::to_string(kDsMlaTile) +
           " == 0, got L = " + std::to_string(shape.latentDim);
  if (tiling.seesaw && shape.kvFormat == CacheFormat::FP8E4M3Token)
    return "the seesaw decode (tile suffix s) does not read fp8_e4m3_token "
           "caches: every odd 584-byte row starts 8 bytes off a 16-byte "
           "boundary, and a TMA box must start on one (an sm_90a load from "
           "such an address is an illegal instruction); use the wgmma or "
           "mma.sync builds";
  if (tiling.seesaw && shape.fp8() &&
      (shape.elem != ElemType::BF16 || shape.ropeDim != 64 ||
       (shape.kvFormat == CacheFormat::FP8DsMla &&
        shape.latentDim % (2 * kDsMlaTile) != 0)))
    return "the seesaw decode (tile suffix s) reads bf16/f16 caches, and "
           "fp8_e4m3 and fp8_ds_mla caches under bf16 activations with R = "
           "64 (the RoPE part of Q is one 128-byte box) and, for fp8_ds_mla, "
           "L a multiple of 256 (each warpgroup's V columns whole scale "
           "tiles); other fp8 decodes use the wgmma or mma.sync builds";
  if (tiling.persistent &&
      (!tiling.seesaw || shape.fp8() || shape.varlen || chip != Chip::SM90a))
    return "the persistent decode (tile suffix b) is the seesaw build over a "
           "balanced split plan on sm_90a, for bf16/f16 caches and uniform "
           "s_q; use tile suffix s for fp8 caches, varlen or sm_100a";
  // The two CTAs of a cluster must read the same blocks: the rows of a
  // pair of row blocks are one query token's (the causal limit, and a
  // varlen request's end, are per token).
  if (tiling.multicast) {
    bool build = tiling.seesaw && !tiling.persistent && !shape.fp8() &&
                 !shape.varlen && chip == Chip::SM90a &&
                 tiling.rowsPerCta == 64;
    bool heads = shape.numHeads % (2 * tiling.rowsPerCta) == 0;
    if (!build || !heads)
      return std::string("the multicast decode (tile suffix m) is the seesaw "
                         "build over bf16/f16 caches on sm_90a, uniform s_q, "
                         "with N a multiple of 128 (each cluster's two 64-row "
                         "blocks are one query token's heads), ") +
             (heads ? "" : "got N = " + std::to_string(shape.numHeads) + "; ") +
             "use tile suffix s";
  }
  if (tiling.pipelined && !tiling.seesaw && shape.fp8())
    return "the pipelined decode (tile suffix p) reads bf16/f16 caches; fp8 "
           "caches use the wgmma or mma.sync builds";
  if (shape.varlen && chip == Chip::SM100a)
    return "varlen decode (query_start_loc) is built for sm_90a only; on "
           "sm_100a pad the batch to a uniform s_q";
  if (shape.varlen &&
      (shape.queryRows < 1 || shape.queryRows > kMaxVarlenQueryRows))
    return "a varlen decode's largest query length Sq = " +
           std::to_string(shape.queryRows) + " must be in [1, " +
           std::to_string(kMaxVarlenQueryRows) + "]";
  // The varlen row mapping is built into the wgmma and mma.sync kernels
  // only: the pipelined producer's TMA boxes are not composed with
  // query_start_loc.
  if (shape.varlen && tiling.seesaw)
    return "varlen decode (query_start_loc) is not built for the seesaw "
           "decode (tile suffix s); use the wgmma or mma.sync builds";
  if (shape.varlen && tiling.pipelined)
    return "varlen decode (query_start_loc) is not built for the pipelined "
           "decode (tile suffix p); use the wgmma or mma.sync builds";
  if (chip == Chip::SM100a && (tiling.wgmma || tiling.pipelined))
    return "wgmma is an sm_90a instruction; sm_100a uses tcgen05";
  if (chip == Chip::SM100a)
    return checkDecodeTilingSM100(shape, tiling);
  auto str = [](int64_t v) { return std::to_string(v); };
  if (shape.rowDim() % 16 != 0)
    return "the row width L+R = " + str(shape.rowDim()) +
           " must be a multiple of 16 (mma k-steps)";
  if (shape.latentDim % 16 != 0)
    return "L = " + str(shape.latentDim) + " must be a multiple of 16";
  if (tiling.rowsPerCta % 16 != 0 || tiling.rowsPerCta <= 0)
    return "rows_per_cta must be a positive multiple of 16";
  if (tiling.warpsN <= 0 || (shape.latentDim / tiling.warpsN) % 16 != 0 ||
      shape.latentDim % tiling.warpsN != 0)
    return "each of warps_n = " + str(tiling.warpsN) +
           " warps must own a multiple of 16 of the L = " +
           str(shape.latentDim) + " output columns";
  // The mma.sync scores take n tiles in pairs (one ldmatrix.x4), or a
  // warp's single tile of 8 tokens two k-steps at a time.
  bool eightTokens = !tiling.wgmma && tiling.kvBlock == 8 * tiling.warpsN;
  if (tiling.kvBlock % (16 * tiling.warpsN) != 0 && !eightTokens)
    return "kv_block = " + str(tiling.kvBlock) + " must give each of the " +
           str(tiling.warpsN) + " warps a multiple of 16 tokens" +
           (tiling.wgmma ? "" : " (or 8)");
  if (shape.pageSize % tiling.kvBlock != 0)
    return "kv_block = " + str(tiling.kvBlock) + " must divide the page size " +
           str(shape.pageSize) + " (a block never straddles pages)";
  if (tiling.wgmma && (tiling.rowsPerCta != 64 || tiling.warpsN != 2 ||
                       tiling.kvBlock != 64 || shape.rowDim() % 64 != 0 ||
                       shape.latentDim % 128 != 0 || shape.latentDim > 512))
    return "wgmma needs rows_per_cta 64, warps_n 2, kv_block 64, L+R a "
           "multiple of 64 and L a multiple of 128 up to 512";
  if (tiling.pipelined && !tiling.wgmma)
    return "the pipelined decode is built on wgmma (tile suffix p, not w)";
  if (tiling.seesaw && !tiling.pipelined)
    return "the seesaw decode is a schedule of the pipelined build (tile "
           "suffix s sets both)";
  // P of a block lives in the block's first box past the latent columns,
  // which P V never reads; the two warpgroups alternate over two slots.
  if (tiling.seesaw && (shape.ropeDim < 64 || tiling.stages != 2))
    return "the seesaw decode needs R >= 64 (P is stored over a 64-column "
           "RoPE box) and stages = 2, got R = " +
           str(shape.ropeDim) + ", stages = " + str(tiling.stages);
  if (tiling.stages < 2)
    return "stages = " + str(tiling.stages) +
           " must be at least 2 (cp.async double buffering)";
  if (decodeThreadsPerCta(tiling) > 1024)
    return "more than 1024 threads per CTA";
  int64_t smem = decodeSharedBytes(chip, shape, tiling);
  if (smem > kMaxSharedBytes)
    return "needs " + str(smem) + " bytes of shared memory, more than the " +
           str(kMaxSharedBytes) + " a CTA may use";
  return {};
}

//===----------------------------------------------------------------------===//
// sm_100a (tcgen05) decode tiling
//===----------------------------------------------------------------------===//
//
// On sm_100a the fields of DecodeTiling mean (see DecodeSM100.cpp):
//   rows_per_cta = 64: the M of every tcgen05.mma (kind::f16, cta_group::1).
//     M = 64 uses half of the tensor-memory lanes (lanes 16w..16w+15 of each
//     32-lane sub-partition, "Layout F"), so the 64 x L f32 output fits in
//     L/2 columns as two 64 x L/2 accumulators at lane offsets 0 and 16.
//     That leaves >= 256 of the 512 columns for the 64 x kv_block scores.
//   warps_n = 1: one warpgroup (128 threads); warp w owns tensor-memory
//     sub-partition w, i.e. query rows 16w..16w+15 of the CTA.
//   kv_block: KV tokens per QK^T / PV step (the N of QK^T, the K of PV),
//     a multiple of 16 up to 128 (one tcgen05.ld of the scores per thread).
//   stages: KV blocks in flight in shared memory (cp.async prefetch depth).

namespace {
/// Tensor-memory columns left for the scores once O (L/2 columns, lanes 0-15
/// and 16-31 of each sub-partition) is placed at column 0.
constexpr int64_t kSM100ScoreColumn = 256;
} // namespace

DecodeTiling chooseDecodeTilingSM100(const DecodeShape &shape) {
  // Wide blocks amortise the per-block barrier/commit round trips; the
  // 64-row Q tile plus two KV stages must stay inside 227 KiB.
  DecodeTiling tiling{64, 1, 64, 2};
  if (decodeSharedBytesSM100(shape, tiling) > kMaxSharedBytes)
    tiling.kvBlock = 32;
  return tiling;
}

int64_t decodeSharedBytesSM100(const DecodeShape &shape,
                               const DecodeTiling &tiling) {
  // Shared rows are padded to whole 128-byte swizzle groups.
  int64_t rowBytes = alignTo(shape.rowDim() * elemBytes(shape.elem), 128);
  int64_t q = tiling.rowsPerCta * rowBytes;
  // An fp8 cache: one dequantised KV tile, and after the other sections a
  // ring of `stages` raw blocks.
  int64_t kvTiles = shape.fp8() ? 1 : tiling.stages;
  int64_t kv = kvTiles * tiling.kvBlock * rowBytes;
  int64_t p = tiling.rowsPerCta * tiling.kvBlock * 2;
  // One mbarrier (8 bytes) and the tcgen05.alloc result slot (4 bytes); the
  // kernel aligns the dynamic shared base up to 128 bytes itself.
  int64_t sync = 16;
  int64_t raw =
      shape.fp8()
          ? tiling.stages * alignTo(tiling.kvBlock * shape.cacheRowBytes(), 128)
          : 0;
  return alignTo(q + kv + p + sync, 128) + raw + 128;
}

std::string checkDecodeTilingSM100(const DecodeShape &shape,
                                   const DecodeTiling &tiling) {
  auto str = [](int64_t v) { return std::to_string(v); };
  if (tiling.rowsPerCta != 64)
    return "rows_per_cta must be 64 on sm_100a (the M of the tcgen05 MMAs)";
  if (tiling.warpsN != 1)
    return "warps_n must be 1 on sm_100a (one warpgroup reads tensor memory)";
  if (shape.rowDim() % 16 != 0)
    return "the row width L+R = " + str(shape.rowDim()) +
           " must be a multiple of 16 (the K of one tcgen05.mma)";
  if (shape.latentDim % 64 != 0 || shape.latentDim > 2 * kSM100ScoreColumn)
    return "L = " + str(shape.latentDim) +
           " must be a multiple of 64 and at most 512 on sm_100a (two "
           "64 x L/2 f32 accumulators in tensor memory)";
  if (tiling.kvBlock % 16 != 0 || tiling.kvBlock < 16 || tiling.kvBlock > 128)
    return "kv_block = " + str(tiling.kvBlock) +
           " must be a multiple of 16 in [16, 128] on sm_100a";
  if (tiling.stages < 1 || tiling.stages > 4)
    return "stages must be in [1, 4]";
  int64_t smem = decodeSharedBytesSM100(shape, tiling);
  if (smem > kMaxSharedBytes)
    return "needs " + str(smem) + " bytes of shared memory, more than the " +
           str(kMaxSharedBytes) + " a CTA may use";
  return {};
}

} // namespace mla::gpu
