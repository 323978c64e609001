//===- DecodeSM90Kernel.h - the shared sm_90a decode half -------*- C++ -*-===//
//
// mla_decode_partial for sm_90a. One CTA = `rows_per_cta` query rows of one
// request and one split-KV piece:
//
//   * The Q tile [rows x (L+R)] and KV blocks [kv_block x (L+R)] are staged
//     in shared memory with 16-byte cp.async copies, `stages` blocks deep
//     (a StageRing). Positions past the piece are zero-filled (src-size 0):
//     a NaN in an unused slot never enters shared memory.
//   * S = Q K^T per block, then the base-2 online softmax: scores are scaled
//     by scale*log2(e) and masked (piece bounds, causal limit per row) to
//     -inf; the block's row maxima of the warps sharing a row meet in shared
//     memory; p = ex2(s - m) goes to shared memory as bf16/f16; each thread
//     keeps a partial row sum.
//   * O += P V, V being a view of the same KV tile.
//   * The end merges the row sums across warps and writes the normalised
//     f32 partial output and the natural-log LSE (-inf for an empty piece).
//
// An fp8 cache (DecodeShape::kvFormat) changes the staging only: the ring
// holds the raw rows of `stages` blocks (one contiguous byte range per
// block), and each block is dequantised (Fp8Dequant) into a single
// bf16/f16 KV tile of the usual layout before the MMAs read it, tokens past
// the piece as zeros; the MMAs and the softmax are those of a bf16 cache.
// The warps that score token slice j (warps_n slices of kv_block/warps_n
// tokens) dequantise exactly those tokens, all L+R columns, and meet at a
// named barrier of their own before their Q K^T: no CTA barrier sits
// between a block's dequantisation and its scores, so warps of one slice
// compute while another's still convert. P V reads every token, after the
// CTA barrier that publishes P. fp8_e4m3's per-tensor scale is folded into
// the scores' scale and the output (begin), so its tile holds the codes'
// exact values (Fp8Dequant's convertE4M3x8, no multiply per element).
// The mma.sync kernel of fp8_e4m3 over bf16 activations has no KV tile at
// all (abi::decodeReadsRawFp8, rawFp8): its MMAs read the raw ring, which
// one bulk copy per block fills (BulkStageRing, an mbarrier per stage).
//
// The two MMA schedules are separate compositions over this class, chosen
// once by `DecodeTiling::wgmma`: DecodeSM90MmaSync.cpp (warp grid, ldmatrix
// + mma.sync on ChunkXor tiles) and DecodeSM90Wgmma.cpp (two warpgroups,
// wgmma on Box128B tiles). This class holds what they share: the kernel
// signature, the piece bounds and row limits, the staging, the softmax of a
// block and the epilogue.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_LIB_CONVERSION_MLATOGPU_DECODESM90KERNEL_H
#define MLA_LIB_CONVERSION_MLATOGPU_DECODESM90KERNEL_H

#include "mla/Contract/KernelABI.h"
#include "mla/GPUCodegen/AsyncCopy.h"
#include "mla/GPUCodegen/DeviceBuilder.h"
#include "mla/GPUCodegen/MmaSync.h"
#include "mla/GPUCodegen/SmemTile.h"

namespace mla::gpu_codegen::sm90 {

/// Where the tiles of the kernel live in dynamic shared memory.
struct DecodeSM90Layout {
  SmemTile q, kv, p;
  /// The KV tile's ring (one kv tile per stage), or with an fp8 cache the
  /// ring of raw blocks at `rawOff` (one kv tile in all).
  StageRing ring;
  /// Offset of the f32 [rows_per_cta x warps_n] row-reduction scratch.
  int64_t redOff;
  /// Offset of the raw fp8 ring (0 for a bf16/f16 cache).
  int64_t rawOff = 0;
  /// Offset of the f16 V tile of the seesaw build over fp8_e4m3
  /// (abi::decodeSeesawReadsE4M3; 0 otherwise).
  int64_t vOff = 0;
  /// Offset of the seesaw build's per-token tile factors over fp8_ds_mla
  /// (16 bytes per token of each ring slot, after the scratch; 0
  /// otherwise).
  int64_t tileFactorOff = 0;
  /// The seesaw build over an fp8 cache, or a raw ring the mma.sync MMAs
  /// read (abi::decodeReadsRawFp8): where its mbarriers start.
  int64_t barrierOff = 0;
  /// Offset of a raw fp8_ds_mla decode's f32 running maxima of the scale
  /// tiles' per-token scales (one per tile); in the seesaw build over
  /// fp8_ds_mla, 128 bytes holding each slot's block maxima per tile and
  /// their "maxima ready" mbarriers (WarpSpecialisedDecode::maximaReady).
  int64_t scaleMaxOff = 0;

  /// ChunkXor Q/KV tiles and a padded Linear P tile (mma.sync), or Box128B
  /// tiles in 1024-byte-aligned sections (wgmma).
  static DecodeSM90Layout get(const gpu::DecodeShape &shape,
                              const gpu::DecodeTiling &tiling);
};

/// The per-token scales of a raw fp8_ds_mla block (the MMA composition reads
/// them for its scores, the softmax scales P with them): scale tile j of
/// the thread's score column x (0, 1) of n tile q at tok[(2q + x) * tiles +
/// j], and the block's slot offset in the raw ring.
struct RawBlockScales {
  llvm::SmallVector<mlir::Value> tok;
  mlir::Value stage;
};

/// How warps map onto (row block i, column/token slice j).
enum class WarpGrid {
  /// warp = i * warps_n + j.
  RowMajor,
  /// warpgroup j, warp i = warp % 4 inside it.
  Warpgroups,
};

/// Where a kernel stages its final rows before storing them (writeOutput):
/// `rowsPerCta` rows of L activation-type values from byte `base` of the
/// dynamic shared memory, 16-byte chunks XOR-swizzled by row % 8 (so a
/// quad's pairs of eight rows and a warp's reads of one row meet no bank
/// conflict). The `threads` threads sharing warp slice wj (`thread` the
/// index among them) store its columns; `sync` must make their shared
/// stores visible to each other.
struct RowStaging {
  int64_t base;
  mlir::Value thread;
  int64_t threads;
  llvm::function_ref<void()> sync;
};

class DecodeSM90Kernel {
public:
  DecodeSM90Kernel(mlir::ImplicitLocOpBuilder &b, const gpu::DecodeShape &shape,
                   const gpu::DecodeTiling &tiling);

  /// Creates the kernel and computes the piece, the warp coordinates and the
  /// per-thread row limits.
  void begin(llvm::StringRef name, WarpGrid grid);
  /// Stages Q and the first stages - 1 KV blocks; returns the physical page
  /// of block stages - 1, the first refill's (the loop carries it).
  mlir::Value stageQAndPrefill();
  /// What beginBlock returns: the byte offset of block k's KV tile from
  /// lay.kv.base, and the physical page of block k + stages, whose block-
  /// table load is in flight while block k is computed.
  struct BlockHead {
    mlir::Value tile, nextPage;
  };
  /// The head of every block step: waits for block `k`, issues block
  /// k + stages - 1 from physical page `page` (the previous step's
  /// nextPage) and returns its BlockHead. A bf16/f16 tile may then be read by
  /// every thread. With an fp8 cache and `dequantise`, this thread's slice of
  /// block `k` is dequantised (dequantSlice over the whole row, then
  /// sliceBarrier): the slice's tokens may be read by its warps, the others
  /// after the next CTA barrier; without `dequantise` the caller calls
  /// dequantSlice itself. `asyncProxy`: the MMAs read shared memory through the
  /// async proxy (wgmma), so this thread's writes are fenced before the
  /// barrier.
  BlockHead beginBlock(mlir::Value k, mlir::Value page, bool asyncProxy,
                       bool dequantise = true);
  /// Dequantises the tokens of this thread's slice wj of fp8 block `k`,
  /// 16-byte chunks [c0, c1) of each row, into the KV tile (the threads of
  /// the slice share the work); tokens past the piece get zeros.
  void dequantSlice(mlir::Value k, int64_t c0, int64_t c1);
  /// Makes the slice's dequantised chunks visible to the slice's warps (to
  /// the async proxy too if `asyncProxy`): named barrier 1 + wj.
  void sliceBarrier(bool asyncProxy);
  /// The threads that share a token slice: warps (i, wj) for every i.
  int64_t sliceThreads() const { return 32 * (M / 16); }
  /// The block loop of the mma.sync and wgmma builds, after
  /// stageQAndPrefill (`firstPage`, what it returned): for k in [0,
  /// numBlocks) runs beginBlock(k, ..., asyncProxy, dequantise) and
  /// `step(k, tile, state)` over the carried state (initialState, the next
  /// refill's page carried beside it); returns the final state.
  llvm::SmallVector<mlir::Value>
  runBlocks(mlir::Value firstPage, bool asyncProxy, bool dequantise,
            llvm::function_ref<llvm::SmallVector<mlir::Value>(
                mlir::Value k, mlir::Value tile, mlir::ValueRange state)>
                step);
  /// Issues KV block `k` (skipped past the piece) from physical page `phys`
  /// into its ring slot.
  void issueBlock(mlir::Value k, mlir::Value phys);
  /// The physical page holding block `k` (0 past the piece's last block,
  /// read from the block table only inside it); with `use`, use(page)
  /// instead, computed inside the block-table branch (0 past the piece).
  mlir::Value pageOf(mlir::Value k,
                     llvm::function_ref<mlir::Value(mlir::Value)> use = {});
  /// The first KV position of block `k`.
  mlir::Value blockStart(mlir::Value k);
  /// Shared-memory pointer `base + byteOffset`.
  mlir::Value sm(int64_t base, mlir::Value byteOffset);

  /// Loop-carried state: O (ntO * 4), row max (2), partial row sum (2),
  /// and with scale tiles the running maximum of the thread's output tile's
  /// scales, O's unit (see softmaxBlock).
  llvm::SmallVector<mlir::Value> initialState();
  /// The online softmax of one block of scores `s` (this thread's ntS
  /// accumulator tiles) starting at KV position `start`: masks and scales
  /// `s`, rescales `o`, stores P to the P tile and returns the next state
  /// (o, m, l). Ends before the barrier that publishes P.
  ///
  /// With scale tiles (`scales`, the block's per-token scales): O of output
  /// tile j is kept in units of sigma_j, the running maximum of the tile's
  /// scales over the blocks so far (never decreasing, so O's rescale
  /// sigma_old / sigma_new stays at most 1), and P is stored once per tile
  /// as p * s_tj / sigma_j: at most p, so f16 holds it. The written rows
  /// are multiplied by the final sigma (finish).
  llvm::SmallVector<mlir::Value>
  softmaxBlock(llvm::MutableArrayRef<MmaAccum> s, mlir::Value start,
               mlir::ValueRange carried,
               const RawBlockScales *scales = nullptr);
  /// Waits for the copies, merges the row sums, writes out and lse.
  void finish(mlir::ValueRange state);

  mlir::ImplicitLocOpBuilder &b;
  DeviceBuilder d;
  const gpu::DecodeShape &shape;
  const gpu::DecodeTiling &tiling;
  const DecodeSM90Layout lay;
  // N, Sq, L, L+R, page; rows_per_cta, warps_n, kv_block, stages, threads,
  // N*Sq rows, 16-byte chunks per row, output columns / token columns per
  // warp slice and their 8-wide tiles.
  const int64_t N, Sq, L, D, page, M, wn, Bk, St, T, rows, Dc, Lw, ntO, Tw, ntS;
  /// `halfType` is the MMA operand type (bf16 true: bf16, else f16), that of
  /// Q, P and the KV tile in shared memory; `outType` is that of q and out
  /// in global memory. They differ for an fp8_e4m3 cache over bf16
  /// activations: its codes convert to f16 with one instruction per pair
  /// (bf16 needs three more), so the kernel computes in f16 and stages Q
  /// scaled by a power of two that keeps the CTA's Q rows in f16's range
  /// (stageQ; the factor goes into scaleLog2).
  const bool bf16;
  /// abi::decodeReadsRawFp8: the MMAs read the raw fp8 ring (no KV tile);
  /// Q's columns, P's tokens and O's columns are then stored in the orders
  /// that the raw fragments imply (storeQChunkForRawK, pColumn, outColumn).
  const bool rawFp8;
  /// abi::decodeRawScaleTiles: the per-token scale tiles (0: none), each
  /// with its own P tile; warp slice j's output columns are tile j.
  const int64_t scaleTiles;
  mlir::Type halfType, outType;

  mlir::gpu::GPUFuncOp fn;
  mlir::Value qPtr, cache, blockTable, seqLens, bounds, pout, plse, batch,
      maxPages, numSplits;
  /// fp8_e4m3's per-tensor scale (f32, from the kv_scale parameter), which
  /// multiplies the written output; null for other caches.
  mlir::Value outScale;
  /// The in-kernel combine's counters, out and lse (the seesaw build and
  /// abi::decodeMergesAsLastPiece; null for other kernels).
  mlir::Value counters, finalOut, finalLse;
  /// The request's query tokens [tokenBase, tokenBase + qRows) of the
  /// tokensPerSplit a split's partial rows hold (uniform: B*Sq tokens,
  /// request b's from b*Sq, qRows = Sq; varlen: from query_start_loc, T per
  /// split, qRows 0 for a malformed request), and its qRows*N tile rows.
  mlir::Value tokenBase, qRows, reqRows, tokensPerSplit;
  /// The softmax_scale parameter times log2(e) (scores go to base 2), and
  /// times kv_scale for fp8_e4m3.
  mlir::Value scaleLog2;
  mlir::Value smem, tid, warp, lane, wi, wj, gq, tq, r0, split, bb;
  /// The piece [lo, hi), the last position any row may see, and the blocks.
  mlir::Value seq, lo, hi, kvEnd, blk0, numBlocks;
  /// Rows g and g+8 of the thread's 16-row block: in the tile, in the
  /// request, and their causal limits.
  mlir::Value rowLocal[2], rowGlobal[2], rowLimit[2];

  // The pieces DecodeSM90Pipelined.cpp composes with its own kernel
  // signature, loads and barriers.
  /// tokenBase, qRows, reqRows and tokensPerSplit (before computePiece).
  void computeQueryRows();
  void computePiece();
  /// computePiece's bounds, kvEnd and blocks of the piece [pieceLo,
  /// pieceHi) (clamped into [0, seq]; `seq` must be set).
  void computePieceIn(mlir::Value pieceLo, mlir::Value pieceHi);
  void computeRowLimits();
  /// Whether the thread's two score columns of an n tile are tokens 4
  /// apart (8q + tq and 8q + tq + 4) rather than a pair (8q + 2tq, + 1):
  /// the raw fp8_ds_mla decode, whose K fragment of column g is token
  /// g/2 + 4(g%2) of the n tile, so that lanes 4g + c of a 16-byte load
  /// phase meet no bank conflict over 656-byte rows (41 16-byte units, 1
  /// modulo 8: tokens 4 apart shift the banks by half a row of banks).
  bool scoreColumnsApart() const;
  /// The block token (from the block's first) of the thread's score column
  /// x (0, 1) of n tile q.
  mlir::Value scoreToken(int64_t q, int x);
  /// The P tile column of the even token column `col` (of a pair): itself,
  /// or with rawFp8 the k order of the raw V fragments (within 16 tokens,
  /// tokens 4c, 4c+1 at columns 2c, 2c+1 and 4c+2, 4c+3 at 2c+8, 2c+9).
  /// The raw fp8_ds_mla decode's V fragments are in token order: lane c
  /// loads tokens 2c, 2c+1, 2c+8, 2c+9, whose 656-byte rows meet no bank
  /// conflict.
  mlir::Value pColumn(mlir::Value col);
  /// The output column of element `x` of the thread's n tile `j`: wj*Lw +
  /// 8j + 2tq + x, or with rawFp8 wj*Lw + (Lw/8)(2tq + x) + j (raw V
  /// fragments hold Lw/8 consecutive columns per n slot).
  mlir::Value outColumn(int64_t j, int64_t x);
  /// The f32 slot (rowLocal[h], j) of the row-reduction scratch.
  mlir::Value redSlot(int h, mlir::Value j);
  /// The block's max of row rowLocal[h] over the warps sharing it.
  mlir::Value blockRowMax(int h);
  /// Stores the normalised rows of `state` and their LSE: to partial_out
  /// and partial_lse, or, with one piece per request, as the final rows
  /// (the persistent build: to finalOut and finalLse).
  void writeOutput(mlir::ValueRange state, mlir::Value lRow[2],
                   const RowStaging *staging = nullptr);
  /// The in-kernel combine's pieces, shared by mergeAsLastPiece and the
  /// seesaw build: whether this launch merges (counters given and S > 1,
  /// uniform over the grid), the row block's counter, and the merge of
  /// block rows first, first + step, ... (each warp kMergeRowsInFlight
  /// rows at a time, `lane` its index; CombineRow::emitRows).
  mlir::Value mergesPieces();
  /// The threads that wrote a CTA's partial rows, for mergeAsLastPiece:
  /// `threads` whole warps, `thread` the index among them (0 counts the CTA
  /// in), `sync` a barrier over them, `flagOffset` the dynamic shared
  /// memory byte of an i32 word none of them reads meanwhile.
  struct MergeFrame {
    mlir::Value thread;
    int64_t threads;
    llvm::function_ref<void()> sync;
    int64_t flagOffset;
  };
  /// When `when` (uniform over the CTA): counts the CTA into its row
  /// block's counter, and the last of the block's numSplits pieces to
  /// arrive merges the block's rows into out and lse (mergeBlockRows). No
  /// CTA waits for another.
  void mergeAsLastPiece(mlir::Value when, const MergeFrame &frame);
  mlir::Value rowBlockCounter();
  /// The rows a warp merges together (CombineRow::emitRows): each holds 17
  /// accumulator registers per lane and as many loads in flight.
  static constexpr int64_t kMergeRowsInFlight = 4;
  /// The warp merges rows first, first + step, ... of the block.
  void mergeBlockRows(mlir::Value first, int64_t step, mlir::Value lane);
  /// writeOutput's stores, in f32 or (`final`) in the activation type.
  void writeRows(mlir::ValueRange state, mlir::Value lRow[2], bool final);
  /// writeOutput's final rows through `staging`: the thread's pairs to
  /// shared memory, then 16-byte stores of whole row segments.
  void writeRowsStaged(mlir::ValueRange state, mlir::Value lRow[2],
                       const RowStaging &staging);
  /// The thread's normalised pairs of its two rows into the staging rows
  /// (its slice's chunks from `firstChunk`); `nonEmpty` gets the rows'
  /// normaliser flags.
  void stageRows(mlir::ValueRange state, mlir::Value lRow[2],
                 const RowStaging &staging, mlir::Value firstChunk,
                 mlir::Value nonEmpty[2]);
  /// The slice's staged chunks of the CTA's rows to out, a warp per row,
  /// then the rows' LSEs.
  void storeStagedRows(mlir::ValueRange state, mlir::Value lRow[2],
                       const RowStaging &staging, mlir::Value firstChunk,
                       mlir::Value nonEmpty[2]);
  /// Byte offset of 16-byte chunk `chunk` of local row `row` in the staging
  /// rows (RowStaging's swizzle).
  mlir::Value stagedChunk(mlir::Value row, mlir::Value chunk);
  /// The natural-log LSE of row half `h`, from one thread per row (slice 0,
  /// quad lane 0), at the partial (or final) LSE index (`sb` = split * B +
  /// request).
  void writeLse(mlir::ValueRange state, mlir::Value lRow[2], int h,
                mlir::Value partialRow, mlir::Value nonEmpty, mlir::Value sb);

  /// The seesaw build over fp8_e4m3 (abi::decodeSeesawReadsE4M3): stages
  /// the CTA's Q rows as two E4M3 parts (splitBF16x8ToE4M3Pair) scaled by a
  /// power of two that puts the CTA's largest value in [2^7, 2^8), which
  /// goes into scaleLog2. The `threads` threads from `thread` share the
  /// rows; `sync` must make their shared stores visible to each other (the
  /// exponents meet in the row-reduction scratch). Ends with the async-proxy
  /// fence; the caller syncs before the wgmmas read Q.
  void stageQAsE4M3Pair(mlir::Value thread, int64_t threads,
                        llvm::function_ref<void()> sync);
  /// Where column `col` of Q's E4M3 part `part` (0 hi, 1 lo) lives in the
  /// Q tile, as (128-byte box, byte in the 128-byte row): the hi latent
  /// columns in boxes 0..L/128-1, the lo ones from L/128+1, and the RoPE
  /// columns of both parts side by side in box L/128 (R = 64), so every
  /// 32-column E4M3 k-step reads 32 bytes of one box.
  std::pair<int64_t, int64_t> e4m3QPlace(int64_t col, int part) const;

private:
  /// Varlen: a CTA whose first row is past the request's q_b*N rows
  /// returns at once; the rest of the kernel is emitted after the branch.
  void exitPastRequestRows();
  void stageQ();
  /// The CTA's Q chunks (16 bytes each, zeros past the request's rows) as
  /// `threads` threads from `thread` read them, one per round (whether the
  /// round is in range, the chunk's tile row and index, its byte offset in
  /// the Q tile or -1), and the CTA's largest bf16 exponent (0..255, from
  /// maxExponentBF16x8), which meets in the row-reduction scratch through
  /// `sync`.
  struct QInRegisters {
    llvm::SmallVector<mlir::Value> chunks, inRange, row, chunk, offset;
    mlir::Value maxExponent;
  };
  QInRegisters loadQChunks(mlir::Value thread, int64_t threads,
                           llvm::function_ref<void()> sync);
  /// stageQAsE4M3Pair's stores of the two parts of chunk `ch` of tile row
  /// `rr` (e4m3QPlace).
  void storeQChunkAsE4M3Pair(mlir::Value hi, mlir::Value lo, mlir::Value rr,
                             mlir::Value ch);
  /// stageQ when halfType != outType: Q is read once into registers, the
  /// CTA's largest exponent fixes a scale 2^-e putting its largest value in
  /// [2^14, 2^15), and Q * 2^-e is stored as f16 (exact for every value
  /// down to 2^-29 times the largest); scaleLog2 is multiplied by 2^e.
  void stageQInF16();
  /// Stores the f16 chunk `f16` (vector<4xi32>) of Q column chunk `ch` of
  /// tile row `rr` in the k order of the raw K fragments: within each group
  /// of 64 columns, k-step j's column 2c + e (+8) holds column
  /// 16c + 4j + e (+2), the codes that lane c of a quad holds.
  void storeQChunkForRawK(mlir::Value f16, mlir::Value rr, mlir::Value ch);
  /// Stores the bf16 chunk `bf16` of RoPE column chunk `ch` (from L/8) of
  /// tile row `rr` in the k order of the raw RoPE fragments: within each 32
  /// columns, k-step 2(s/4) + p/2's column 2c + e (+8 for odd p) holds
  /// column 8s + 2p + e of rope chunk s, c = s % 4: lane c's 16 bytes from
  /// 16c hold the B fragments of two k-steps.
  void storeQChunkForRawRope(mlir::Value bf16, mlir::Value rr, mlir::Value ch);
  /// The largest scale of tile wj over the block in ring slot `stage`, and
  /// the new running maximum from `sigmaOld`, stored to the tile's slot.
  mlir::Value publishScaleMax(mlir::Value stage, mlir::Value sigmaOld);
  /// Element offset of the request's first Q row in q.
  mlir::Value qRequestBase();
  /// Address in q of 16-byte chunk `chunk` of request row `r`, clamped into
  /// the request's rows (rows past them are zero-filled by the callers).
  mlir::Value qChunkSource(mlir::Value qReqBase, mlir::Value r,
                           mlir::Value chunk);
  /// The bytes (i32) of the raw rows of the block from `start` that lie
  /// before the piece's end: what a refill copies, the rest it zeroes.
  mlir::Value rawBlockValidBytes(mlir::Value start);
  /// Issues the raw bytes of fp8 block `k` (from `start`, first cache row
  /// `firstRow`) into ring slot `stage`.
  void issueRawBlock(mlir::Value start, mlir::Value firstRow,
                     mlir::Value stage);
  /// issueRawBlock for a raw ring the MMAs read (rawFp8): one bulk copy by
  /// thread 0 on step `k`'s barrier (rawRing), the bytes past the piece
  /// zeroed by every thread.
  void issueRawBlockBulk(mlir::Value k, mlir::Value start, mlir::Value firstRow,
                         mlir::Value stage);
  /// The raw ring with its barriers at lay.barrierOff (rawFp8 only).
  BulkStageRing rawRing() const;
  /// Stores chunks [c0, c1) of every token of slice wj of the KV tile, the
  /// slice's threads sharing them: `chunk(row, c)` computes chunk `c` (i32)
  /// of the raw row at shared byte offset `row` (i32). Tokens at or past
  /// the piece's end get zeros.
  void storeKvChunks(
      mlir::Value k, int64_t c0, int64_t c1,
      llvm::function_ref<mlir::Value(mlir::Value, mlir::Value)> chunk);
  /// Masks and scales the block, and publishes the per-thread row maxima
  /// (reduced over the quad) to the scratch; ends with a barrier.
  void maskAndPublishRowMax(llvm::MutableArrayRef<MmaAccum> s,
                            mlir::Value start);
  /// p = 2^(s - m) to the P tile; adds p to the row sums `l`.
  void storeProbabilities(llvm::ArrayRef<MmaAccum> s, mlir::Value mUse[2],
                          mlir::Value l[2],
                          const RawBlockScales *scales = nullptr);
};

/// The mma.sync and wgmma compositions (tiling.wgmma picks one).
mlir::FailureOr<mlir::gpu::GPUFuncOp>
emitDecodeSM90MmaSync(mlir::OpBuilder &builder, mlir::Location loc,
                      llvm::StringRef name, const gpu::DecodeShape &shape,
                      const gpu::DecodeTiling &tiling);
mlir::FailureOr<mlir::gpu::GPUFuncOp>
emitDecodeSM90Wgmma(mlir::OpBuilder &builder, mlir::Location loc,
                    llvm::StringRef name, const gpu::DecodeShape &shape,
                    const gpu::DecodeTiling &tiling);
/// The warp-specialised, TMA-fed build (tiling.pipelined): an llvm.func
/// kernel taking two more, by-value CUtensorMap parameters.
void emitDecodeSM90Pipelined(mlir::OpBuilder &builder, mlir::Location loc,
                             llvm::StringRef name,
                             const gpu::DecodeShape &shape,
                             const gpu::DecodeTiling &tiling);

} // namespace mla::gpu_codegen::sm90

#endif // MLA_LIB_CONVERSION_MLATOGPU_DECODESM90KERNEL_H
