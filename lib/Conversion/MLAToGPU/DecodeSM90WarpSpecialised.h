//===- DecodeSM90WarpSpecialised.h - the TMA-fed sm_90a decode --*- C++ -*-===//
//
// What the two warp-specialised sm_90a decode schedules share (tile suffix
// p, DecodeSM90Pipelined.cpp, and s, DecodeSM90Seesaw.cpp): an llvm.func
// kernel of 384 threads taking q and the cache as two more by-value TMA
// maps, and
//
//  * warpgroup 0 (the producer), shrunk to 24 registers: one thread loads
//    the Q tile (issued before the piece's bounds are read) and then the
//    request's KV blocks, each as (L+R)/64
//    boxes of 64 tokens x 64 columns through a 2-D tensor map of the cache
//    ([pages * page, L+R]), into a ring of `stages` slots. Each box
//    completes its own "full" mbarrier, so QK^T's k-steps on a box start as
//    soon as it lands. A slot's boxes are freed in release groups, each
//    with its own "empty" mbarrier counting the consumer threads that read
//    them (by default one group, the whole slot, of all 256 threads); the
//    producer refills a group as soon as it is freed, in box order, so the
//    next QK^T starts on the first boxes that land. A short piece's loads
//    carry an L2 evict-first hint (kEvictFirstMaxBlocks). The physical row of a
//    block is block_table[b][start / page] * page + start % page: a block never
//    straddles a page. Blocks past the piece (an empty piece's placeholder,
//    or the padding to a multiple of blocks the schedule needs) load
//    nothing, so the consumers' wgmmas never sit behind a branch (ptxas
//    C7520);
//  * warpgroups 1 and 2 (the consumers), grown to 240 registers, with the
//    wgmma steps of S = Q K^T and O += P V on the Box128B tiles of the ring
//    and the zeroing of V for tokens outside the piece: the rows a TMA box
//    brings in past seq_len may hold anything (NaN in unused slots), and
//    p = 0 must never meet a NaN; their scores are masked by select.
//
// The multicast build (DecodeTiling::multicast) runs the CTAs of a query
// token's two row blocks as a cluster of two: the producer of the CTA of
// rank r loads the boxes c with c % 2 == r of each block, multicast into
// both CTAs' slots, and arms its own "full" barriers with the bytes of all
// the boxes. A slot's "empty" barriers count the consumers of both CTAs (the
// peer's warps arrive once per warp, releasePeer), so neither producer
// refills a slot the other CTA still reads. Both CTAs pass a cluster barrier
// after the barriers' init and before they exit.
//
// The persistent build (DecodeTiling::persistent) wraps both roles in a
// loop over the pieces of the CTA's part of a balanced plan (forEachPiece):
// the ring's block counter runs on across pieces (ringBase), the producer
// issues a piece's first `stages` blocks before it waits for "Q empty" (the
// consumers are done with the last piece's Q tile, which its epilogue
// reuses) and loads the piece's Q, so those blocks are in flight during the
// last piece's epilogue.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_LIB_CONVERSION_MLATOGPU_DECODESM90WARPSPECIALISED_H
#define MLA_LIB_CONVERSION_MLATOGPU_DECODESM90WARPSPECIALISED_H

#include "DecodeSM90Kernel.h"

#include "mla/Contract/SplitPlanner.h"
#include "mla/GPUCodegen/MBarrier.h"
#include "mla/GPUCodegen/Wgmma.h"

namespace mla::gpu_codegen::sm90 {

/// The 256 threads of the two consumer warpgroups.
inline constexpr int64_t kConsumerThreads = 256;
/// Named barrier of the two consumer warpgroups (0 is __syncthreads).
inline constexpr int64_t kConsumerBarrier = 1;
/// A piece of at most this many blocks loads its KV boxes under an L2
/// evict-first policy, a longer one with no cache hint. The lines other
/// kernels left in L2 (a flush memset's, or the previous kernel's outputs:
/// dirty) then stay there instead of being written back while the piece
/// runs, which over a short piece is a large part of its time (session 18 on
/// an H100: b = 64, N = 128 at 1024 tokens 7% faster, at 2048 2%; FlashMLA
/// marks all of its KV loads evict-first). Over long pieces the write-back is
/// a small part and evict-first loads cost 1-2.5% (N = 16 and N = 128 at 8192
/// tokens and more), so they load as before, with no hint. The producer's
/// block loop is emitted once per choice (produceBlocks): a policy kept live
/// through one loop, or a branch per box, cost 2.4-4% at N = 128.
inline constexpr int64_t kEvictFirstMaxBlocks = 64;

/// `v` through an asm `mov` the compiler may not hoist or fold: values
/// derived from it are computed where it is.
mlir::Value opaqueI32(mlir::ImplicitLocOpBuilder &b, mlir::Value v);
/// The shared pointer `p` through an opaque 64-bit `mov`.
mlir::Value opaqueSharedPointer(mlir::ImplicitLocOpBuilder &b, mlir::Value p);

/// Boxes [firstBox, firstBox + boxes) of a ring slot, refilled together
/// once `arrivals` consumer threads have released them.
struct ReleaseGroup {
  int64_t firstBox, boxes, arrivals;
};

class WarpSpecialisedDecode {
public:
  /// Slots released whole by all consumer threads.
  explicit WarpSpecialisedDecode(DecodeSM90Kernel &k);
  /// Slots released in `groups`, which cover the boxes in order.
  WarpSpecialisedDecode(DecodeSM90Kernel &k,
                        llvm::SmallVector<ReleaseGroup> groups);

  /// Emits the kernel: the piece, the barriers, then the producer and
  /// `consume` in the two roles. Both get the block count: numBlocks, at
  /// least one, rounded up to a multiple of `blockMultiple`.
  void emit(llvm::StringRef name, int64_t blockMultiple,
            llvm::function_ref<void(mlir::Value blocks)> consume);

  /// The persistent build: runs `body` once per piece of the CTA's schedule
  /// row, with k's request, piece, bounds and piece count (k.numSplits) and
  /// ringBase set, and the piece's index in the row (i32). `blockMultiple`
  /// as for emit; body gets the block count.
  void forEachPiece(
      int64_t blockMultiple,
      llvm::function_ref<void(mlir::Value index, mlir::Value blocks)> body);
  /// The persistent build's consumers are done with the piece's Q tile
  /// (every consumer thread arrives on "Q empty", after a proxy fence: the
  /// epilogue wrote the tile through the generic proxy).
  void releaseQ();
  /// The byte (in dynamic shared memory) of the persistent build's scratch
  /// word past the barriers (the in-kernel merge's "this CTA merges" flag).
  int64_t flagOffset() const;
  /// The mbarriers: Q full, the ring's, and the persistent build's Q empty.
  int64_t barrierCount() const;

  /// Barrier 0 is "Q full"; then a "full" barrier per ring slot and box,
  /// then an "empty" barrier per release group and slot; the persistent
  /// build's "Q empty" comes last.
  MBarrier barrier(mlir::Value index);
  MBarrier full(mlir::Value slot, int64_t box);
  MBarrier empty(mlir::Value slot, int64_t group);
  MBarrier qEmpty();
  mlir::Value slot(mlir::Value n);
  /// The parity of block `n`'s use of its slot.
  mlir::Value phase(mlir::Value n);
  /// Byte offset of block `n`'s slot from lay.kv.base.
  mlir::Value slotBytes(mlir::Value n);

  /// The consumers' coordinates (ctid, warp grid of two warpgroups, row
  /// limits); waits for the Q tile (phase qParity in the persistent build).
  void beginConsumer();
  /// The multicast build: the calling consumer warp's share of a release
  /// of group `group` of `slot` on the peer CTA's "empty" barrier (lane 0
  /// arrives for its warp, once the warp's reads are done). Nothing
  /// otherwise.
  void releasePeer(mlir::Value slot, int64_t group);
  /// bar.sync / bar.arrive on named barrier `id` of `threads` threads.
  void namedSync(int64_t id, int64_t threads);
  void namedArrive(int64_t id, int64_t threads);

  /// Issues S = Q K^T (no commit) of `tokens` tokens of block `n` from byte
  /// `kBase` (from lay.kv.base: its slot plus the first token row), each
  /// box's k-steps once that box has landed; the Q tile is at byte `qBase`.
  WgmmaAccum issueScores(WarpgroupMma &mma, int64_t tokens, mlir::Value qBase,
                         mlir::Value n, mlir::Value kBase);
  /// Issues O += P V (no commit): P a one-box Box128B tile of 64 rows at
  /// byte `pOff`, V the columns from 64-column box `vBox` of the slot at
  /// `slotOff` (bytes from lay.kv.base). Given `pRegs` (the warpgroup's own
  /// P as packed pairs in accumulator order, four per 16-token k slice:
  /// WgmmaAccum::aFragments), A comes from those registers instead and
  /// `pOff` is not read.
  WgmmaAccum issuePV(WarpgroupMma &mma, llvm::ArrayRef<mlir::Value> o,
                     mlir::Value pOff, mlir::Value slotOff, mlir::Value vBox,
                     llvm::ArrayRef<mlir::Value> pRegs = {});
  /// Over fp8_e4m3: issues S = Q K^T (no commit) of the 64 tokens of block
  /// `n` from its raw boxes at `kBase` (from lay.kv.base), two E4M3 wgmmas
  /// per 32-column k-step (Q's hi and lo parts, DecodeSM90Kernel::e4m3QPlace,
  /// Q at byte `qBase`), each box's k-steps once that box has landed.
  WgmmaAccum issueScoresE4M3(WarpgroupMma &mma, mlir::Value qBase,
                             mlir::Value n, mlir::Value kBase);
  /// E4M3 k-steps [first, end) of that product onto `acc` (no commit; step
  /// 0's first part does not accumulate), each box's steps once it landed.
  WgmmaAccum issueE4M3Steps(WarpgroupMma &mma, WgmmaAccum acc,
                            mlir::Value qBase, mlir::Value n, mlir::Value kBase,
                            int64_t first, int64_t end);
  /// Over fp8_ds_mla, once block `n`'s RoPE box (and with it the rows'
  /// scales) has landed: rewrites each row's bf16 RoPE values divided by
  /// its last tile's scale s(t, T-1) (clamped to [2^-100, 2^100], as all
  /// its scales are here: a row outside the piece may hold any bytes) and
  /// stores tileFactorAt(slotIndex, row, j) = s(t, j) / s(t, j + 1) for j <
  /// T - 1 and s(t, T - 1): so S = Q_0 K_0, then S = S * factor(0) + Q_1
  /// K_1, ..., S = S * factor(T-2) + Q_{T-1} K_{T-1} + Q_R K_R / s(t, T-1),
  /// and S * factor(T-1) is the score. The `threads` threads from `thread`
  /// (two per row) each rewrite their own units, then sync behind the
  /// async-proxy fence.
  void convertDsMlaRope(mlir::Value n, mlir::Value kBase, int slotIndex,
                        mlir::Value thread, int64_t threads,
                        llvm::function_ref<void()> sync);
  /// Where convertDsMlaRope leaves factor `j` of tile row `row` (i32) of
  /// slot `slotIndex`.
  mlir::Value tileFactorAt(int slotIndex, mlir::Value row, int64_t j);
  /// fp8_ds_mla: scale `tile` (i32) of tile row `row` of the slot at
  /// `slotOff` (bytes from lay.kv.base), as loaded (unclamped).
  mlir::Value rowScale(mlir::Value slotOff, mlir::Value row, mlir::Value tile);
  /// fp8_ds_mla: "block maxima ready" of ring slot `slot` (i32): warp 1 of
  /// the producer warpgroup arrives (count 1) once it has stored the
  /// slot's block's largest scale per tile (produceScaleMaxima).
  MBarrier maximaReady(mlir::Value slot);
  /// fp8_ds_mla: where produceScaleMaxima leaves scale tile `tile`'s
  /// maximum over the tokens inside the piece of ring slot `slot`'s block.
  mlir::Value blockTileMaxAt(mlir::Value slot, int64_t tile);
  /// Issues the RoPE part of S (no commit) onto `acc`: R / 16 bf16 k-steps
  /// of Q's bf16 RoPE box (DecodeSM90Kernel::e4m3QPlace, at `qBase`) and
  /// the slot's bf16 RoPE box as convertDsMlaRope left it (at `kBase`).
  WgmmaAccum issueRopeBF16(WarpgroupMma &mma, WgmmaAccum acc, mlir::Value qBase,
                           mlir::Value kBase);
  /// Over fp8_e4m3: converts raw boxes [firstBox, firstBox + boxes) of block
  /// `n` into the f16 V tile (lay.vOff, a Box128B tile of kvBlock rows, its
  /// columns those of the boxes), tokens outside [lo, kvEnd) as zeros;
  /// `threads` threads from `thread` (i32) share the work (a multiple of 32
  /// that divides kvBlock * 8). `waitBoxes`: first wait for the boxes to
  /// land (the caller did not, through its own scores). The caller fences
  /// and syncs before the wgmmas read the tile. Given `invSigma` (fp8_ds_mla:
  /// 1 / the running maximum of each box's scale tile), each row's values
  /// are multiplied by its tile scale times that, clamped to [0, 1].
  void convertV(mlir::Value n, int64_t firstBox, int64_t boxes,
                mlir::Value thread, int64_t threads, bool waitBoxes,
                llvm::ArrayRef<mlir::Value> invSigma = {});
  /// Whether a block starting at KV position `start` reaches outside the
  /// piece [lo, kvEnd) (uniform over the CTA).
  mlir::Value reachesOutsidePiece(mlir::Value start);
  /// Whether KV position `pos` (i32) lies in the piece [lo, kvEnd).
  mlir::Value insidePiece(mlir::Value pos);
  /// Zeroes 16-byte chunks [firstChunk, firstChunk + chunks) of the tokens
  /// of block `n` outside [lo, kvEnd), `threads` threads from `thread` (i32)
  /// sharing the work; emits nothing at run time for a block wholly inside.
  /// `then` runs after the zeroing, in the same (uniform) branch.
  void zeroInvalidV(mlir::Value n, int64_t firstChunk, int64_t chunks,
                    mlir::Value thread, int64_t threads,
                    llvm::function_ref<void()> then = {});

  DecodeSM90Kernel &k;
  DeviceBuilder &d;
  /// abi::decodeSeesawReadsE4M3: the ring holds raw fp8_e4m3 / fp8_ds_mla
  /// rows in boxes of 128 codes (boxColumns: the map's elements per box, 64
  /// bf16 or 128 bytes), the consumers stage Q.
  const bool e4m3;
  /// Over fp8_ds_mla: its scale tiles (abi::decodeSeesawScaleTiles; each a
  /// 128-code box), whose row scales a third map loads behind a slot's
  /// boxes; 0 otherwise.
  const int64_t scaleTiles;
  const int64_t boxColumns, numBoxes, stageBytes, barrierOff;
  /// DecodeTiling::persistent and DecodeTiling::multicast.
  const bool persistent, multicast;
  /// The multicast build: the CTA's rank in its cluster (i32).
  mlir::Value rank;
  mlir::Value qMap, kvMap, scaleMap, ctid;
  /// The persistent build's schedule and cu_splits parameters, the ring
  /// index of the piece's first block (blocks of earlier pieces before it;
  /// a multiple of the ring depth) and the parity of the piece's Q tile.
  mlir::Value schedule, cuSplits, ringBase, qParity;

private:
  void declare(llvm::StringRef name);
  /// Thread 0 initialises every mbarrier (Q full, the ring's, and the
  /// persistent build's Q empty).
  void initBarriers();
  /// emit's persistent build: the barriers, then both roles over the
  /// pieces (forEachPiece).
  void emitPersistent(int64_t blockMultiple,
                      llvm::function_ref<void(mlir::Value blocks)> consume);
  /// Thread 0, first: the tensor maps into the descriptor cache, so the
  /// first TMA loads do not wait for their fetch (FlashMLA does the same).
  void prefetchMaps();
  /// Thread 0 loads the CTA's Q tile (Q full: barrier 0).
  void loadQ();
  /// fp8_ds_mla: the byte offset of a slot's row scales from the slot.
  mlir::Value rowScalesOff();
  void produce(mlir::Value blocks);
  /// fp8_ds_mla, warp 1 of the producer warpgroup: for each of the `blocks`
  /// blocks, once its RoPE box (and with it the rows' scales) has landed,
  /// reduces each scale tile's largest scale over the block's tokens inside
  /// [lo, kvEnd) (0 for a NaN, at most 2^100), stores them
  /// (blockTileMaxAt) and arrives on maximaReady. The slot's previous
  /// maxima were read by then: its RoPE box is reloaded only after both
  /// consumer warpgroups released the block before, after converting it.
  void produceScaleMaxima(mlir::Value blocks);
  /// The cache row of block `n`'s first token (DecodeSM90Kernel::pageOf's
  /// block-table load), 0 for a block past the piece (nothing is read).
  mlir::Value firstRowOf(mlir::Value n);
  /// Thread 0's block loop of produce; the persistent build's Q load of
  /// piece `index` (after "Q empty") goes in front of block `stages` (or
  /// after the last block of a shorter piece; before block 0 of the first
  /// piece).
  void produceBlocks(mlir::Value blocks, mlir::Value index = {});
  /// Which boxes of a block a producer loads: all of them, or (the
  /// multicast build) those of one parity, multicast to both CTAs.
  enum class Boxes { All, Even, Odd };
  /// produceBlocks' loop over blocks [0, blocks), block 0 at cache row
  /// `first`, their loads with an evict-first L2 cache hint if `evictFirst`
  /// (kEvictFirstMaxBlocks); `beforeBlock` runs first in each iteration.
  void loadBlocks(mlir::Value blocks, mlir::Value first, bool evictFirst,
                  Boxes boxes,
                  llvm::function_ref<void(mlir::Value n)> beforeBlock);
  /// The persistent build's producer: every piece's Q and blocks.
  void producePieces(int64_t blockMultiple);
  /// The ring index of block `n` of the piece.
  mlir::Value ringIndex(mlir::Value n);
  /// Waits until the previous use of block `n`'s slot has released the
  /// group starting at `box`, if `box` starts a group past the first (the
  /// first group's wait precedes the branch over loaded blocks).
  void awaitRelease(mlir::Value n, int64_t box);
  /// Loads block `n`, at cache row `row`, into its ring slot, each box
  /// signalling its own full barrier once its group has been released; with
  /// an evict-first L2 cache hint if `evictFirst`. Every box's bytes are
  /// expected; only `boxes` are loaded here.
  void loadBlock(mlir::Value n, mlir::Value row, bool evictFirst, Boxes boxes);

  const llvm::SmallVector<ReleaseGroup> groups;
};

/// The seesaw schedule on this frame (tiling.seesaw, DecodeSM90Seesaw.cpp).
void emitDecodeSM90Seesaw(mlir::OpBuilder &builder, mlir::Location loc,
                          llvm::StringRef name, const gpu::DecodeShape &shape,
                          const gpu::DecodeTiling &tiling);

} // namespace mla::gpu_codegen::sm90

#endif // MLA_LIB_CONVERSION_MLATOGPU_DECODESM90WARPSPECIALISED_H
