//===- DecodeSM90Seesaw.cpp - the seesaw sm_90a decode --------------------===//
//
// mla_decode_partial for sm_90a with `tiling.seesaw` (tile suffix s): the
// warp-specialised TMA frame of DecodeSM90WarpSpecialised.h (a producer
// warpgroup, two slots of 64 tokens) with FlashMLA's seesaw schedule.
//
// Why: the pipelined build splits each block's tokens between the two
// consumer warpgroups, so its QK^T is m64n32k16: per k-step 3 KB of shared
// memory (Q 2 KB + K 1 KB) for 64K FLOPs, and both warpgroups read all of
// Q every block. That made it shared-memory-bandwidth bound (~296 KB per
// 64-token block). Here a warpgroup scores a WHOLE block (m64n64k16: 4 KB
// per 128K FLOPs): ~224 KB per 64 tokens, and one warpgroup's softmax runs
// while the other's wgmmas do.
//
// Warpgroup 0 scores the even blocks (slot 0) and owns O_L = O[:, 0:L/2];
// warpgroup 1 the odd blocks (slot 1) and O_R = O[:, L/2:L]. Both keep the
// running row max m (the same in both) and each its own partial row sum,
// relative to m. Iteration i, b0 = 2i, b1 = 2i + 1 (the block count is
// padded to even: a padding block is loaded by nobody and fully masked, so
// no wgmma sits behind a branch):
//
//   WG0                                  WG1
//   S0 = Q K(b0)^T, wait; arrive ------> wait "S0 done";
//   "S0 done"                            S1 = Q K(b1)^T (in flight)
//   m0 = max(m, rowmax S0), P0,          .
//   l0, O_L rescaled to m0;              .
//   P0 over slot 0's RoPE box, m0 to     .
//   the scratch; arrive "P0 ready" ----> wait "P0 ready"; read m0;
//   O_L += P0 V0_L (in flight)           O_R rescaled to m0; O_R += P0 V0_R
//   wait P V, free slot 0 (its half)     (in flight); wait for S1 only;
//   .                                    m1 = max(m0, rowmax S1), P1, l1
//   .                                    rescaled to m1; P1 over slot 1's
//   .                                    RoPE box, m1 to the scratch;
//   wait "P1 ready"; read m1 <---------- arrive "P1 ready";
//   .                                    wait P V, free slot 0 (its half);
//   O_L, l0 rescaled to m1;              O_R rescaled to m1;
//   O_L += P1 V1_L, wait, free slot 1    O_R += P1 V1_R, wait, free slot 1
//
// A slot is released in three groups, each with its own empty barrier:
// the V_L boxes (latent columns 0..L/2) once warpgroup 0's P V of the
// block is done (128 arrivals), the V_R boxes once warpgroup 1's is (128),
// and the RoPE box, which holds P, once both are (256). The producer
// refills them in that order, box by box, so the next S = Q K^T of a slot
// starts on its V_L boxes while warpgroup 1 still multiplies by the V_R
// boxes of the block before. Warpgroup 0 frees slot 0's V_L boxes as soon
// as its P0 V0_L is done, not after "P1 ready": that P V always finished
// long before (ncu's source counters, docs/benchmarks.md), and the earlier
// refill made the N = 128 decodes 2-3% faster. Both wait for their P1 V1 before
// the next iteration: ptxas serialises wgmmas whose accumulators cross the
// loop's back edge.
//
// P needs no tile of its own (there is no room for two next to Q and two
// slots): P of a block is stored over the first box past the latent
// columns of its slot once that block's QK^T, the only reader of those
// columns, has finished; P V reads only the latent columns. Each
// warpgroup zeroes its own V columns of the tokens outside [lo, kvEnd) of
// a block before its P V reads them, after the block's QK^T has finished,
// so p = 0 never meets a NaN of an unused slot or page. Both the zeroing and
// the score mask run only on a block at an edge of [lo, the CTA's first
// row's limit) (a CTA-uniform branch): the other blocks' scores are used
// as they are. The scale (positive) is applied to the row max and, in the
// fma before each exponential, to the scores.
//
// The running max moves only when a block's max exceeds it by more than
// softmax::kLazySlack (conditional rescaling, as in FlashAttention-4): after
// the first blocks of a row the max rarely moves, and the four rescalings
// of an O half per iteration (128 multiplies each) are skipped at run time.
//
// The end adds the two partial row sums through shared memory (the Q tile,
// with a last pair of hand-offs, warpgroup 1 waiting before it arrives) and
// writes the partial output and LSE as
// DecodeSM90Kernel::writeOutput does, the final rows (S = 1) staged in the
// Q tile and stored 16 bytes per lane (RowStaging). Given combine counters
// and S > 1, each CTA then counts itself into its row block's counter and
// the last to arrive merges the block's rows into out and lse
// (DecodeSM90Kernel::mergeAsLastPiece, CombineRow.h), so no mla_combine
// launch follows and no CTA waits for another.
//
//===----------------------------------------------------------------------===//

#include "DecodeSM90WarpSpecialised.h"

#include "mla/GPUCodegen/OnlineSoftmax.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mla::gpu_codegen;
using namespace mla::gpu_codegen::sm90;
namespace abi = mla::gpu;
namespace sm = mla::gpu_codegen::softmax;

namespace {

/// Named barriers past the consumers' (kConsumerBarrier): "P0 ready"
/// (warpgroup 0 arrives, 1 waits), "P1 ready" (the reverse), one per
/// warpgroup over its own 128 threads, then "S0 done" (warpgroup 0 arrives
/// once its scores have landed, 1 waits before issuing its own).
constexpr int64_t kP0Ready = 2, kP1Ready = 3, kOwnBarrier = 4, kS0Done = 6;
constexpr int64_t kWarpgroupThreads = 128;
/// The end's row-sum exchange uses the Q tile's first bytes (rowSumSlot:
/// 64 rows x 2 warpgroups x 4 bytes), rounded up to a 1 KiB boundary.
constexpr int64_t kRowSumBytes = 1024;

/// The release groups of a slot: warpgroup `wg`'s V boxes are group `wg`,
/// the RoPE box (P) is group kPGroup.
constexpr int64_t kPGroup = 2;

SmallVector<ReleaseGroup> releaseGroups(const DecodeSM90Kernel &k) {
  // Boxes of 64 bf16 columns, or of 128 raw fp8_e4m3 codes.
  int64_t cols = abi::decodeSeesawReadsE4M3(k.shape, k.tiling) ? 128 : 64;
  int64_t vBoxes = k.Lw / cols, latentBoxes = k.L / cols;
  return {
      {0, vBoxes, kWarpgroupThreads},
      {vBoxes, vBoxes, kWarpgroupThreads},
      {latentBoxes, (k.D + cols - 1) / cols - latentBoxes, kConsumerThreads}};
}

/// A consumer thread's running state: its O half (ntO * 4), the row maxima
/// and the partial row sums of its two rows, and over fp8_ds_mla the
/// running maxima of its warpgroup's scale tiles' scales (O's columns of
/// tile j are in units of 1 / sigma[j]).
struct Running {
  SmallVector<Value> o;
  Value m[2], l[2];
  SmallVector<Value> sigma;

  SmallVector<Value> flatten(bool withSigma = true) const {
    SmallVector<Value> v(o);
    v.append({m[0], m[1], l[0], l[1]});
    if (withSigma)
      v.append(sigma.begin(), sigma.end());
    return v;
  }
  static Running unflatten(ValueRange v, size_t sigmas) {
    Running r;
    size_t n = v.size() - 4 - sigmas;
    r.o.assign(v.begin(), v.begin() + n);
    r.m[0] = v[n], r.m[1] = v[n + 1], r.l[0] = v[n + 2], r.l[1] = v[n + 3];
    r.sigma.assign(v.begin() + n + 4, v.end());
    return r;
  }
};

class SeesawDecode {
public:
  SeesawDecode(DecodeSM90Kernel &k)
      : k(k), d(k.d), ws(k, releaseGroups(k)),
        sMma(d, k.Bk,
             ws.e4m3 ? ptx::WgmmaInput::E4M3
                     : (k.bf16 ? ptx::WgmmaInput::BF16 : ptx::WgmmaInput::F16)),
        oMma(d, k.Lw, k.bf16), ropeMma(d, k.Bk, ptx::WgmmaInput::BF16) {}

  void emit(StringRef name) {
    ws.emit(name, /*blockMultiple=*/2, [&](Value blocks) { consume(blocks); });
  }

private:
  void consume(Value blocks);
  /// Warpgroup 0's and 1's halves of iteration `i` (blocks 2i and 2i + 1 in
  /// slots 0 and 1).
  Running iterationWG0(Value i, Running run);
  Running iterationWG1(Value i, Running run);
  /// Issues S = Q K^T of all 64 tokens of block `n` in slot `slot` (no
  /// commit), by warpgroup `slot`; over fp8_ds_mla tile by tile, with
  /// waits (its last tile and the bf16 RoPE part left uncommitted).
  WgmmaAccum issueScores(Value n, int slot);
  /// Masks `s` (block `n`, unscaled) in place; returns the rows' maxima
  /// over the quad, scaled to base 2, in `rowMax`. The scale is positive
  /// (the host checks it), so the max of the scaled scores is the scaled
  /// max: the scaling waits for the exponentials' fma.
  void maskScores(WgmmaAccum &s, Value n, Value rowMax[2]);
  /// p = 2^(s * scaleLog2 - mUse) packed in pairs; adds the p to `l`.
  SmallVector<Value> probabilities(const WgmmaAccum &s, Value mUse[2],
                                   Value l[2]);
  /// Stores P over slot `slot`'s RoPE box and the rows' maxima `m` to
  /// scratch array `slot`, fenced for the async proxy.
  void storePAndMax(int slot, ArrayRef<Value> packed, Value m[2]);
  /// The maxima warpgroup `parity` stored.
  void loadMax(int parity, Value m[2]);
  /// Zeroes warpgroup `wg`'s V columns of the tokens of block `n` outside
  /// the piece; `publish`: also fence and sync the warpgroup (else a later
  /// storePAndMax and sync do).
  void zeroOwnV(int wg, Value n, bool publish);
  /// Over fp8_e4m3: converts warpgroup `wg`'s V columns of block `n` into
  /// its half of the f16 V tile (ws.convertV; `waitBoxes` as there);
  /// `publish` as for zeroOwnV.
  void convertOwnV(int wg, Value n, int slot, bool waitBoxes, bool publish,
                   Running &r);
  /// Over fp8_ds_mla, before warpgroup `wg` converts its V columns of block
  /// `n` (in slot `slot`): its tiles' running maxima take in the block's
  /// largest scales of tokens inside the piece (the producer warpgroup's
  /// reduction, once it is ready), O's columns of a tile whose maximum
  /// moved are rescaled (in a branch), and 1 / sigma per tile is returned.
  SmallVector<Value> updateTileMaxima(int wg, Value n, int slot, Running &r);
  /// Over fp8_ds_mla, once the scores of slot `slot`'s block are done: s *=
  /// the last tile factor of its column (ws.convertDsMlaRope).
  void foldLastTileFactor(WgmmaAccum &s, int slot);
  /// Over fp8_ds_mla, after tile j's wgmmas of slot `slot`'s block: s *=
  /// factor j of its column.
  void scaleByTileFactor(WgmmaAccum &s, int slot, int64_t j);
  /// Over fp8_ds_mla warpgroup 0 arrives on "S0 done" once S0 is issued,
  /// not once it finished: the scores wait for each scale tile's wgmmas
  /// (the Horner chain) and S1's may queue into those gaps. Warpgroup 1 then
  /// frees V0_R's raw boxes (which S0 reads) after "P0 ready" instead, which
  /// warpgroup 0 arrives on after its S0 wait.
  bool s0DoneWhenIssued() const { return ws.scaleTiles > 0; }
  /// Over fp8_e4m3: warpgroup `wg` has converted its V columns of slot
  /// `slot`'s block and that block's scores are done: frees its raw V
  /// boxes.
  void releaseRawV(int wg, int slot);
  /// Issues warpgroup `wg`'s O half += P V of block `n` in slot `n % 2` (no
  /// commit), after waiting for its V boxes when the block is the other
  /// warpgroup's. `pRegs`: the warpgroup's own P of the block, packed (A
  /// from registers, as FlashMLA's own-block P V); else P from the slot.
  WgmmaAccum issuePV(int wg, ArrayRef<Value> o, Value n, int slot,
                     bool waitBoxes, ArrayRef<Value> pRegs = {});
  /// Warpgroup `wg`'s P V of slot `slot` is done: frees its V boxes and its
  /// share of the P box.
  void release(int wg, int slot);
  /// The byte offset of slot `slot`'s P: its first box past L.
  Value pOffset(int slot);
  /// Runs `body` with copies of the thread's coordinates and of the slot
  /// offsets that the compiler may not hoist out of the loop: hoisted, the
  /// addresses derived from them (the K and V descriptors of a warpgroup's
  /// fixed slot, the P stores) would stay live next to O and S and spill.
  Running withLocalCoordinates(function_ref<Running()> body);
  /// o *= factor[row half], skipped at run time unless one of the thread's
  /// two rows' max moved from `mOld` to `mNew` (conditional rescaling: the
  /// running max moves only by more than softmax::kLazySlack).
  void scale(SmallVector<Value> &o, Value factor[2], Value mOld[2],
             Value mNew[2]);
  /// Where warpgroup `wg` leaves the partial row sum of row half `h` at the
  /// end (in the Q tile, which no wgmma reads by then).
  Value rowSumSlot(int h, Value wg);
  void finish(const Running &run);
  /// With combine counters and S > 1 (KernelABI.h): meets the CTAs of the
  /// other pieces of this row block, then merges its share of the block's
  /// rows into out and lse (CombineRow); the persistent build merges as the
  /// last piece instead (DecodeSM90Kernel::mergeAsLastPiece).
  void mergePieces();

  DecodeSM90Kernel &k;
  DeviceBuilder &d;
  WarpSpecialisedDecode ws;
  WarpgroupMma sMma, oMma;
  /// fp8_ds_mla's RoPE part: bf16 m64n64k16.
  WarpgroupMma ropeMma;
  /// The thread's index in its warpgroup.
  Value wtid;
  /// Byte offsets of the two slots from lay.kv.base.
  Value slotOff[2];
  /// Every row of the CTA sees every position in [lo, unmaskedEnd): the
  /// first row's limit (the smallest under the causal mask).
  Value unmaskedEnd;
};

} // namespace

Value SeesawDecode::pOffset(int slot) {
  int64_t ropeBox = k.L / ws.boxColumns;
  return d.add(slotOff[slot],
               d.c32(k.lay.kv.base + ropeBox * k.Bk * k.lay.kv.rowBytes));
}

Running SeesawDecode::withLocalCoordinates(function_ref<Running()> body) {
  Value tq = k.tq, rows[2] = {k.rowLocal[0], k.rowLocal[1]}, thread = wtid;
  k.tq = opaqueI32(k.b, tq);
  for (int h = 0; h < 2; ++h)
    k.rowLocal[h] = opaqueI32(k.b, rows[h]);
  wtid = opaqueI32(k.b, thread);
  for (int slot = 0; slot < 2; ++slot)
    slotOff[slot] = opaqueI32(k.b, d.c32(slot * ws.stageBytes));
  // The persistent build: the shared-memory base too (inside the piece
  // loop ptxas otherwise keeps it in a vector register and moves the
  // descriptor words with R2UR).
  Value smem = k.smem;
  if (ws.persistent)
    k.smem = opaqueSharedPointer(k.b, smem);
  Running r = body();
  k.tq = tq, k.rowLocal[0] = rows[0], k.rowLocal[1] = rows[1], wtid = thread;
  k.smem = smem;
  return r;
}

WgmmaAccum SeesawDecode::issueScores(Value n, int slot) {
  // Q's 36 descriptors are loop-invariant too (72 registers).
  Value qBase = opaqueI32(k.b, d.c32(k.lay.q.base));
  if (!ws.e4m3)
    return ws.issueScores(sMma, k.Bk, qBase, n, slotOff[slot]);
  if (ws.scaleTiles) {
    // One accumulator over the scale tiles: tile j's wgmmas, a wait, the
    // per-column factor, the next tile's; the RoPE box is converted (and
    // the factors stored) while tile 0's run, and its bf16 wgmmas go with
    // the last tile's.
    const int64_t steps = ws.boxColumns / 32;
    WgmmaAccum s =
        ws.issueE4M3Steps(sMma, WgmmaAccum::splat(k.Bk, d.poison(d.f32)), qBase,
                          n, slotOff[slot], 0, steps);
    sMma.commit();
    ws.convertDsMlaRope(n, slotOff[slot], slot, wtid, kWarpgroupThreads, [&] {
      ws.namedSync(kOwnBarrier + slot, kWarpgroupThreads);
    });
    for (int64_t j = 1; j < ws.scaleTiles; ++j) {
      sMma.wait(0);
      scaleByTileFactor(s, slot, j - 1);
      sMma.fence();
      s = ws.issueE4M3Steps(sMma, s, qBase, n, slotOff[slot], j * steps,
                            (j + 1) * steps);
      if (j + 1 < ws.scaleTiles)
        sMma.commit();
    }
    return ws.issueRopeBF16(ropeMma, s, qBase, slotOff[slot]);
  }
  return ws.issueScoresE4M3(sMma, qBase, n, slotOff[slot]);
}

void SeesawDecode::scaleByTileFactor(WgmmaAccum &s, int slot, int64_t j) {
  for (int64_t c = 0; c < k.Bk / 4; ++c) {
    // Column 8 (c / 2) + 2 tq + c % 2 of the thread's registers.
    Value col = d.add(d.c32(8 * (c / 2) + c % 2), d.mul(k.tq, d.c32(2)));
    Value f = d.load(d.f32, ws.tileFactorAt(slot, col, j), 4);
    for (int64_t h = 0; h < 2; ++h) {
      size_t i = 4 * (c / 2) + 2 * h + c % 2;
      s.regs[i] = d.fmul(s.regs[i], f);
    }
  }
}

void SeesawDecode::foldLastTileFactor(WgmmaAccum &s, int slot) {
  scaleByTileFactor(s, slot, ws.scaleTiles - 1);
}

SmallVector<Value> SeesawDecode::updateTileMaxima(int wg, Value n, int slot,
                                                  Running &r) {
  // The block's largest scale per tile, reduced by warp 1 of the producer
  // warpgroup (WarpSpecialisedDecode::produceScaleMaxima).
  ws.maximaReady(d.c32(slot)).waitParity(ws.phase(n));
  const int64_t tiles = r.sigma.size();
  SmallVector<Value> inv;
  for (int64_t j = 0; j < tiles; ++j) {
    Value block =
        d.load(d.f32, ws.blockTileMaxAt(d.c32(slot), wg * tiles + j), 4);
    Value m = d.fmax(r.sigma[j], block);
    // m >= sigma >= 1e-30 (Running's floor), so the reciprocals are of
    // normal numbers; a factor within an ulp or two of the exact quotient
    // is well inside the tolerance.
    Value rcp = d.rcpApprox(m);
    // O's columns of tile j (registers 64j.. of an m64n256 half with two
    // tiles) go to the new unit when the maximum moved.
    Value factor[2] = {d.fmul(r.sigma[j], rcp), d.fmul(r.sigma[j], rcp)};
    int64_t per = r.o.size() / tiles;
    sm::rescaleIf(d, MutableArrayRef<Value>(r.o).slice(j * per, per), factor,
                  d.fcmp(arith::CmpFPredicate::UNE, m, r.sigma[j]));
    r.sigma[j] = m;
    inv.push_back(rcp);
  }
  return inv;
}

void SeesawDecode::maskScores(WgmmaAccum &s, Value n, Value rowMax[2]) {
  // Only a block reaching outside [lo, unmaskedEnd) needs the per-token
  // mask; the condition is uniform over the CTA (no wgmma in either branch).
  Value start = k.blockStart(n);
  Value edge =
      d.ori(d.slt(start, k.lo), d.slt(unmaskedEnd, d.add(start, d.c32(k.Bk))));
  SmallVector<Type> types(s.regs.size(), d.f32);
  auto ifOp = scf::IfOp::create(k.b, types, edge, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(k.b);
    k.b.setInsertionPointToStart(ifOp.thenBlock());
    Value tokBase = d.add(start, d.mul(k.tq, d.c32(2)));
    SmallVector<Value> masked;
    for (size_t i = 0; i < s.regs.size(); ++i) {
      Value pos = d.add(tokBase, d.c32(8 * (i / 4) + i % 2));
      Value valid =
          d.andi(d.sge(pos, k.lo), d.slt(pos, k.rowLimit[(i % 4) / 2]));
      masked.push_back(d.select(valid, s.regs[i], d.negInf()));
    }
    scf::YieldOp::create(k.b, masked);
    k.b.setInsertionPointToStart(ifOp.elseBlock());
    scf::YieldOp::create(k.b, s.regs);
  }
  rowMax[0] = rowMax[1] = d.negInf();
  for (auto [i, v] : llvm::enumerate(ifOp.getResults())) {
    s.regs[i] = v;
    rowMax[(i % 4) / 2] = sm::max(d, rowMax[(i % 4) / 2], v);
  }
  // A warpgroup owns whole rows of its block: the quad has them all.
  for (int h = 0; h < 2; ++h)
    rowMax[h] = d.fmul(sm::quadMax(d, rowMax[h]), k.scaleLog2);
}

SmallVector<Value> SeesawDecode::probabilities(const WgmmaAccum &s,
                                               Value mUse[2], Value l[2]) {
  SmallVector<Value> packed;
  for (size_t i = 0; i < s.regs.size(); i += 2) {
    int h = (i % 4) / 2;
    Value p0 = sm::scaledProbability(d, s.regs[i], k.scaleLog2, mUse[h]);
    Value p1 = sm::scaledProbability(d, s.regs[i + 1], k.scaleLog2, mUse[h]);
    l[h] = d.fadd(l[h], d.fadd(p0, p1));
    packed.push_back(d.pack2(p0, p1, k.halfType));
  }
  return packed;
}

void SeesawDecode::storePAndMax(int slot, ArrayRef<Value> packed, Value m[2]) {
  const SmemTile p = SmemTile::box128B(0, k.M);
  Value base = pOffset(slot);
  // stmatrix x4 (as FlashMLA stores P): packed[4s + q] is the thread's pair
  // of 8 x 8 matrix q of store s, rows 16 wi + 8 (q % 2).. of the warp's
  // rows and columns 8 (2s + q / 2)..; lane l gives the address of row l % 8
  // of matrix l / 8, whose 16 bytes are one swizzled chunk.
  Value mat = d.divu(k.lane, d.c32(8));
  Value row = d.add(
      d.mul(k.wi, d.c32(16)),
      d.add(d.mul(d.remu(mat, d.c32(2)), d.c32(8)), d.remu(k.lane, d.c32(8))));
  Value tile = d.divu(mat, d.c32(2));
  assert(packed.size() % 4 == 0 && "whole x4 stores");
  for (size_t st = 0; st < packed.size() / 4; ++st) {
    Value col = d.mul(d.add(tile, d.c32(2 * st)), d.c32(8));
    Value off = p.elementOffset(d, row, col, 2);
    d.stmatrixX4(k.sm(0, d.add(base, off)), packed.slice(4 * st, 4));
  }
  for (int h = 0; h < 2; ++h)
    d.store(m[h], k.redSlot(h, d.c32(slot)), 4);
  // P (and any zeroed V) is read by wgmma, through the async proxy.
  fenceProxyAsyncShared(d);
}

void SeesawDecode::loadMax(int parity, Value m[2]) {
  for (int h = 0; h < 2; ++h)
    m[h] = d.load(d.f32, k.redSlot(h, d.c32(parity)), 4);
}

void SeesawDecode::zeroOwnV(int wg, Value n, bool publish) {
  int64_t chunks = k.Lw / 8;
  ws.zeroInvalidV(n, wg * chunks, chunks, wtid, kWarpgroupThreads, [&] {
    if (!publish)
      return;
    fenceProxyAsyncShared(d);
    ws.namedSync(kOwnBarrier + wg, kWarpgroupThreads);
  });
}

void SeesawDecode::convertOwnV(int wg, Value n, int slot, bool waitBoxes,
                               bool publish, Running &r) {
  int64_t boxes = k.Lw / ws.boxColumns;
  SmallVector<Value> invSigma;
  if (ws.scaleTiles) {
    // The scales come with the RoPE box (the caller's scores waited for it
    // when the block is this warpgroup's).
    if (waitBoxes)
      ws.full(ws.slot(n), k.L / ws.boxColumns).waitParity(ws.phase(n));
    invSigma = updateTileMaxima(wg, n, slot, r);
  }
  ws.convertV(n, wg * boxes, boxes, wtid, kWarpgroupThreads, waitBoxes,
              invSigma);
  if (!publish)
    return;
  fenceProxyAsyncShared(d);
  ws.namedSync(kOwnBarrier + wg, kWarpgroupThreads);
}

void SeesawDecode::releaseRawV(int wg, int slot) {
  ws.empty(d.c32(slot), wg).arrive();
}

WgmmaAccum SeesawDecode::issuePV(int wg, ArrayRef<Value> o, Value n, int slot,
                                 bool waitBoxes, ArrayRef<Value> pRegs) {
  int64_t boxes = k.Lw / 64;
  // The other warpgroup saw the block land; this one acquires the TMA
  // writes itself (the phase cannot move on before this warpgroup frees
  // these boxes). Over fp8_e4m3, V is the warpgroup's half of the f16 V
  // tile, which it converted itself after such waits (convertOwnV).
  if (waitBoxes && !ws.e4m3)
    for (int64_t c = wg * boxes; c < (wg + 1) * boxes; ++c)
      ws.full(d.c32(slot), c).waitParity(ws.phase(n));
  // The waits and the descriptor arithmetic wrote registers.
  oMma.fence();
  Value v = ws.e4m3 ? d.c32(k.lay.vOff - k.lay.kv.base) : slotOff[slot];
  return ws.issuePV(oMma, o, pOffset(slot), v, d.c32(wg * boxes), pRegs);
}

void SeesawDecode::release(int wg, int slot) {
  // Over fp8_e4m3 the raw V boxes went back after their conversion.
  if (!ws.e4m3) {
    ws.empty(d.c32(slot), wg).arrive();
    ws.releasePeer(d.c32(slot), wg);
  }
  ws.empty(d.c32(slot), kPGroup).arrive();
  ws.releasePeer(d.c32(slot), kPGroup);
}

void SeesawDecode::scale(SmallVector<Value> &o, Value factor[2], Value mOld[2],
                         Value mNew[2]) {
  sm::rescaleIf(d, o, factor, sm::maxMoved(d, mOld, mNew));
}

Running SeesawDecode::iterationWG0(Value i, Running r) {
  Value n0 = d.mul(i, d.c32(2)), n1 = d.add(n0, d.c32(1));
  WgmmaAccum s = issueScores(n0, 0);
  if (s0DoneWhenIssued())
    ws.namedArrive(kS0Done, kConsumerThreads);
  if (ws.e4m3) {
    // V0_L converts while S0's wgmmas run (published with P0 below).
    sMma.commit();
    convertOwnV(0, n0, 0, /*waitBoxes=*/false, /*publish=*/false, r);
    sMma.wait(0);
    releaseRawV(0, 0);
  } else {
    sMma.commitAndWait();
  }
  if (!s0DoneWhenIssued())
    ws.namedArrive(kS0Done, kConsumerThreads);

  if (ws.scaleTiles)
    foldLastTileFactor(s, 0);
  Value rowMax[2], m0[2], alpha[2], mUse[2];
  maskScores(s, n0, rowMax);
  for (int h = 0; h < 2; ++h) {
    sm::Rescale re = sm::rescaleTo(
        d, r.m[h], r.l[h], sm::lazyMax(d, r.m[h], rowMax[h], sm::kLazySlack));
    m0[h] = re.mNew, mUse[h] = re.mUse, alpha[h] = re.alpha, r.l[h] = re.l;
  }
  SmallVector<Value> packed = probabilities(s, mUse, r.l);
  scale(r.o, alpha, r.m, m0);
  if (!ws.e4m3)
    zeroOwnV(0, n0, /*publish=*/false);
  storePAndMax(0, packed, m0);
  ws.namedSync(kOwnBarrier, kWarpgroupThreads);
  ws.namedArrive(kP0Ready, kConsumerThreads);
  // P0 V0_L takes P0 from registers (FlashMLA's own-block P V); warpgroup
  // 1 reads it from the slot.
  r.o = issuePV(0, r.o, n0, 0, /*waitBoxes=*/false, packed).regs;
  oMma.commit();
  // P0 V0_L finishes long before warpgroup 1's P1 is ready (its own S1 and
  // softmax come first): free slot 0's V_L boxes now, so that the producer
  // refills them while warpgroup 0 waits.
  oMma.wait(0);
  release(0, 0);
  // Over fp8: P0 V0_L is done, so V1_L may go over V0_L in the f16 tile
  // while warpgroup 1 finishes S1 and P1; its raw boxes, which S1 reads,
  // go back after "P1 ready".
  if (ws.e4m3)
    convertOwnV(0, n1, 1, /*waitBoxes=*/true, /*publish=*/true, r);

  ws.namedSync(kP1Ready, kConsumerThreads);
  Value m1[2], beta[2];
  loadMax(1, m1);
  for (int h = 0; h < 2; ++h) {
    beta[h] = sm::rescaleFactor(d, m0[h], m1[h]);
    r.l[h] = d.fmul(r.l[h], beta[h]);
    r.m[h] = m1[h];
  }
  scale(r.o, beta, m0, m1);
  // S1 is done (before "P1 ready"): V1_L's raw boxes are free (fp8), or
  // its columns outside the piece may be zeroed.
  if (ws.e4m3)
    releaseRawV(0, 1);
  else
    zeroOwnV(0, n1, /*publish=*/true);
  r.o = issuePV(0, r.o, n1, 1, /*waitBoxes=*/true).regs;
  oMma.commitAndWait();
  release(0, 1);
  return r;
}

Running SeesawDecode::iterationWG1(Value i, Running r) {
  Value n0 = d.mul(i, d.c32(2)), n1 = d.add(n0, d.c32(1));
  // Over fp8: V0_R converts while S0 runs (the f16 tile's V_R half is free
  // since the last P1 V1_R); its raw boxes, which S0 reads, go back once
  // S0 is done.
  if (ws.e4m3)
    convertOwnV(1, n0, 0, /*waitBoxes=*/true, /*publish=*/true, r);
  // S1 queues behind S0 on the tensor cores: issued together, the two would
  // share them and finish together, leaving them idle during S0's softmax.
  ws.namedSync(kS0Done, kConsumerThreads);
  if (ws.e4m3 && !s0DoneWhenIssued())
    releaseRawV(1, 0);
  WgmmaAccum s = issueScores(n1, 1);
  sMma.commit();
  // The previous P1 V1_R was waited before the loop's back edge, which ptxas
  // does not see through: without this wait_group it stalls for S1 before O
  // is rescaled (C7517). No group but S1 is pending here.
  oMma.wait(1);

  ws.namedSync(kP0Ready, kConsumerThreads);
  if (s0DoneWhenIssued())
    releaseRawV(1, 0);
  Value m0[2], alpha[2];
  loadMax(0, m0);
  for (int h = 0; h < 2; ++h)
    alpha[h] = sm::rescaleFactor(d, r.m[h], m0[h]);
  scale(r.o, alpha, r.m, m0);
  // While S1's wgmmas run; S0 is done (before "P0 ready"). Over fp8 V0_R
  // was converted above.
  if (!ws.e4m3)
    zeroOwnV(1, n0, /*publish=*/true);
  r.o = issuePV(1, r.o, n0, 0, /*waitBoxes=*/true).regs;
  oMma.commit();

  // S1 is done; P0 V0_R runs on.
  sMma.wait(1);
  if (ws.scaleTiles)
    foldLastTileFactor(s, 1);
  Value rowMax[2], m1[2], mUse[2];
  maskScores(s, n1, rowMax);
  for (int h = 0; h < 2; ++h) {
    // m1 follows m0 as warpgroup 0 will see it; l goes from m to m1 at once.
    sm::Rescale re = sm::rescaleTo(
        d, r.m[h], r.l[h], sm::lazyMax(d, m0[h], rowMax[h], sm::kLazySlack));
    m1[h] = re.mNew, mUse[h] = re.mUse, r.l[h] = re.l;
  }
  SmallVector<Value> packed = probabilities(s, mUse, r.l);
  if (!ws.e4m3)
    zeroOwnV(1, n1, /*publish=*/false);
  storePAndMax(1, packed, m1);
  ws.namedSync(kOwnBarrier + 1, kWarpgroupThreads);
  ws.namedArrive(kP1Ready, kConsumerThreads);

  oMma.wait(0);
  release(1, 0);
  Value beta[2];
  for (int h = 0; h < 2; ++h)
    beta[h] = sm::rescaleFactor(d, m0[h], m1[h]);
  scale(r.o, beta, m0, m1);
  for (int h = 0; h < 2; ++h)
    r.m[h] = m1[h];
  if (ws.e4m3) {
    // P0 V0_R is done: V1_R goes over V0_R.
    convertOwnV(1, n1, 1, /*waitBoxes=*/false, /*publish=*/true, r);
    releaseRawV(1, 1);
  }
  // As warpgroup 0's P0: P1 V1_R reads P1 from registers.
  r.o = issuePV(1, r.o, n1, 1, /*waitBoxes=*/false, packed).regs;
  oMma.commitAndWait();
  release(1, 1);
  return r;
}

Value SeesawDecode::rowSumSlot(int h, Value wg) {
  Value slot = d.add(d.mul(k.rowLocal[h], d.c32(2)), wg);
  return k.sm(k.lay.q.base, d.mul(slot, d.c32(4)));
}

void SeesawDecode::finish(const Running &run) {
  // Each warpgroup's partial row sums go over the first 512 bytes of the Q
  // tile: a warpgroup is past its last hand-off only after the other's last
  // Q K^T finished (its scores came before that hand-off), and its own
  // finished before. The exchange is a pair of hand-offs after the
  // warpgroup's own barrier: warpgroup 0 arrives on "P0 ready" and waits on
  // "P1 ready", warpgroup 1 waits on "P0 ready" first and arrives on "P1
  // ready" after. Warpgroup 1 must not arrive first: nothing orders its
  // loop's last arrival on "P1 ready" after warpgroup 0's wait on it (that
  // wait comes after V1_L's conversion, which waits for the TMA), and two
  // arrivals of warpgroup 1 complete the 256-thread barrier by themselves.
  // Warpgroup 0's wait then never completes, nor warpgroup 1's on "P0
  // ready" (docs/gpu-runs.md, session 15: the fp8 seesaw's hang).
  for (int h = 0; h < 2; ++h)
    d.store(sm::quadSum(d, run.l[h]), rowSumSlot(h, k.wj), 4);
  auto handOff = [&](int wg) {
    ws.namedSync(kOwnBarrier + wg, kWarpgroupThreads);
    if (wg == 0) {
      ws.namedArrive(kP0Ready, kConsumerThreads);
      ws.namedSync(kP1Ready, kConsumerThreads);
    } else {
      ws.namedSync(kP0Ready, kConsumerThreads);
      ws.namedArrive(kP1Ready, kConsumerThreads);
    }
  };
  d.ifThenElse(d.eq(k.wj, d.c32(0)), [&] { handOff(0); }, [&] { handOff(1); });
  Value lRow[2];
  for (int h = 0; h < 2; ++h)
    lRow[h] = d.fadd(d.load(d.f32, rowSumSlot(h, d.c32(0)), 4),
                     d.load(d.f32, rowSumSlot(h, d.c32(1)), 4));
  // Final rows (one piece) go through the Q tile past the row sums: no
  // wgmma reads it any more (see above), and 16-byte stores of whole row
  // segments keep the global store queue from filling (4-byte stores of
  // the accumulator pairs did, at a third of a one-block CTA's samples).
  int64_t stageBase = k.lay.q.base + kRowSumBytes;
  assert(kRowSumBytes + k.M * k.L * 2 <= k.M * k.D * 2 &&
         "the staged rows fit in the Q tile");
  auto sync = [&] { ws.namedSync(kConsumerBarrier, kConsumerThreads); };
  RowStaging staging{stageBase, wtid, kWarpgroupThreads, sync};
  // fp8_ds_mla: O's columns of scale tile j back from units of 1 / sigma_j.
  Running out = run;
  for (size_t j = 0; j < run.sigma.size(); ++j) {
    size_t per = out.o.size() / run.sigma.size();
    for (size_t i = j * per; i < (j + 1) * per; ++i)
      out.o[i] = d.fmul(out.o[i], run.sigma[j]);
  }
  k.writeOutput(out.flatten(/*withSigma=*/false), lRow, &staging);
  // The persistent build: the Q tile is free for the next piece's Q.
  if (ws.persistent)
    ws.releaseQ();
  mergePieces();
}

void SeesawDecode::mergePieces() {
  // The CTA that completes its row block's count merges all the block's
  // rows; no CTA waits for another (a piece of the persistent build runs in
  // turn on another CTA's part, and a part's earlier pieces may themselves
  // wait), so any grid works.
  Value when = ws.persistent ? d.slt(d.c32(1), k.numSplits) : k.mergesPieces();
  k.mergeAsLastPiece(when,
                     {ws.ctid, kConsumerThreads,
                      [&] { ws.namedSync(kConsumerBarrier, kConsumerThreads); },
                      ws.flagOffset()});
}

void SeesawDecode::consume(Value blocks) {
  ws.beginConsumer();
  wtid = d.remu(ws.ctid, d.c32(kWarpgroupThreads));
  if (ws.e4m3) {
    auto sync = [&] { ws.namedSync(kConsumerBarrier, kConsumerThreads); };
    k.stageQAsE4M3Pair(ws.ctid, kConsumerThreads, sync);
    sync();
  }
  unmaskedEnd = k.kvEnd;
  if (k.shape.causal) {
    Value iq = d.divu(k.r0, d.c32(k.N));
    unmaskedEnd =
        d.minsi(k.kvEnd, d.add(d.sub(k.seq, k.qRows), d.add(iq, d.c32(1))));
  }
  SmallVector<Value> init = k.initialState();
  // fp8_ds_mla: each warpgroup's scale tiles' running maxima, floored so
  // that an all-zero tile keeps its factors 0 (not NaN).
  const size_t sigmas = ws.scaleTiles / 2;
  for (size_t j = 0; j < sigmas; ++j)
    init.push_back(d.f(1e-30f));
  Value iterations = d.divu(blocks, d.c32(2));
  SmallVector<Type> types(init.size(), d.f32);
  auto ifOp = scf::IfOp::create(k.b, types, d.eq(k.wj, d.c32(0)),
                                /*withElseRegion=*/true);
  auto role = [&](Block *block, bool first) {
    OpBuilder::InsertionGuard guard(k.b);
    k.b.setInsertionPointToStart(block);
    SmallVector<Value> carried = d.forLoop(
        d.c32(0), iterations, d.c32(1), init, [&](Value i, ValueRange c) {
          Running r = Running::unflatten(c, sigmas);
          return withLocalCoordinates([&] {
                   return first ? iterationWG0(i, r) : iterationWG1(i, r);
                 })
              .flatten();
        });
    scf::YieldOp::create(k.b, carried);
  };
  role(ifOp.thenBlock(), true);
  role(ifOp.elseBlock(), false);
  finish(Running::unflatten(ifOp.getResults(), sigmas));
}

void mla::gpu_codegen::sm90::emitDecodeSM90Seesaw(
    OpBuilder &builder, Location loc, StringRef name,
    const abi::DecodeShape &shape, const abi::DecodeTiling &tiling) {
  ImplicitLocOpBuilder b(loc, builder);
  DecodeSM90Kernel k(b, shape, tiling);
  SeesawDecode(k).emit(name);
}
