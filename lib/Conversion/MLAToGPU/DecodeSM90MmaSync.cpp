//===- DecodeSM90MmaSync.cpp - sm_90a decode with ldmatrix + mma.sync -----===//
//
// Warps form a (rows_per_cta/16) x warps_n grid. Warp (i, j) scores rows
// 16i..16i+15 against its kv_block/warps_n tokens of each block (Q and K
// fragments by ldmatrix from ChunkXor tiles; 16 tokens or more in pairs of
// 8-token n tiles, or a single n tile two k-steps per ldmatrix), and owns
// output columns [j*L/warps_n, ...) of O += P V in registers, V fragments being
// ldmatrix.trans views of the same KV tile.
//
// An fp8_e4m3 cache (abi::decodeReadsRawFp8) has no KV tile: the fragments
// come from the raw ring. K: lane (g, c) loads 16 codes of token g at
// columns 16c.. of each 64-column group, the B fragments of the group's four
// k-steps (Q is staged in that k order). V: lane (g, c) loads its Lw/8
// columns (from (Lw/8)g of the warp's slice, 16 per load) of tokens
// 4c..4c+3 of a 16-token k-step, transposes the bytes and converts each
// column's four codes: one B fragment per n tile (P is stored in that token
// order; O's columns come out in the order outColumn gives).
//
//===----------------------------------------------------------------------===//

#include "DecodeSM90Kernel.h"

#include "mla/GPUCodegen/Fp8Dequant.h"
#include "mla/GPUCodegen/InlinePTX.h"

using namespace mlir;
using namespace mla::gpu_codegen;
using namespace mla::gpu_codegen::sm90;
namespace abi = mla::gpu;

namespace {

class MmaSyncDecode {
public:
  explicit MmaSyncDecode(DecodeSM90Kernel &k);

  /// One KV block, `kIdx` at ring offset `stage` (after beginBlock): the
  /// loop body over carried (o, m, l).
  SmallVector<Value> step(Value kIdx, Value stage, ValueRange carried);

private:
  /// S = Q K^T over this warp's tokens of the block in ring slot `stage`.
  SmallVector<MmaAccum> scores(Value stage);
  /// scores() of a warp's single n tile (kv_block = 8 * warps_n).
  MmaAccum scoresOfEightTokens(Value stage);
  /// The tiles' sums of partial accumulators `parts` (part-major).
  SmallVector<MmaAccum> sumParts(ArrayRef<MmaAccum> parts, int64_t tiles);
  /// Independent accumulator chains a warp's scores keep at least (n tiles
  /// times parts of the k-steps): mma.sync's latency over D/16 dependent
  /// steps would otherwise set the pace at one or two n tiles per warp.
  static constexpr int64_t kScoreChains = 4;
  /// o += P V over this warp's output columns.
  void accumulateOutput(MutableArrayRef<Value> o, Value stage);
  /// scores() from the raw fp8 block at ring offset `stage`.
  SmallVector<MmaAccum> scoresFromRaw(Value stage);
  /// scoresFromRaw() of an fp8_ds_mla block: each scale tile's MMAs into
  /// accumulators of their own, added times the tokens' scales (read into
  /// `scales`), plus the bf16 RoPE part's MMAs.
  SmallVector<MmaAccum> scoresFromRawScaled(Value stage,
                                            RawBlockScales &scales);
  /// The tiles `parts` (part-major, k-step kk into part kk % parts) plus
  /// Q K^T of 64-column code groups [g0, g1) of the raw block.
  void addCodeGroups(MutableArrayRef<MmaAccum> parts, ArrayRef<Value> rows,
                     int64_t g0, int64_t g1);
  /// accumulateOutput() from the raw fp8 block at ring offset `stage`.
  void accumulateOutputFromRaw(MutableArrayRef<Value> o, Value stage);
  /// Lane (g, c)'s four 16-byte loads of V codes for k-step kk, unit u (16
  /// columns): the rows of tokens 4c..4c+3, for odd c in the order 1, 0,
  /// 3, 2 (vSel puts them back in order).
  std::array<Value, 4> loadVCodes(Value slot, int64_t kk, int64_t u);
  /// Raw fp8: the lane's V rows 4c + (0 or 1, swapped for odd c) at unit 0
  /// of k-step 0, from the raw ring's slot base, and the matching transpose
  /// selectors.
  Value vRow[2];
  ByteTransposeSelectors vSel;
  /// Tokens from a lane's first V row pair to its second.
  int64_t vPairStride;
  /// Raw fp8: lane (g, c)'s K bytes 16c.. of token wj*Tw + g from the ring's
  /// slot base.
  Value kRow;

  DecodeSM90Kernel &k;
  DeviceBuilder &d;
  // Lane-invariant parts of the ldmatrix addresses.
  Value l16, lHalf, l8, lMat1, qRow, kTokBase, vTokLane;
};

} // namespace

MmaSyncDecode::MmaSyncDecode(DecodeSM90Kernel &k) : k(k), d(k.d) {
  l16 = d.remu(k.lane, d.c32(16)), lHalf = d.divu(k.lane, d.c32(16));
  l8 = d.remu(k.lane, d.c32(8)),
  lMat1 = d.remu(d.divu(k.lane, d.c32(8)), d.c32(2));
  qRow = d.add(d.mul(k.wi, d.c32(16)), l16);
  kTokBase = d.add(d.mul(k.wj, d.c32(k.Tw)), d.add(l8, d.mul(lHalf, d.c32(8))));
  vTokLane = d.add(l8, d.mul(lMat1, d.c32(8)));
  if (!k.rawFp8)
    return;
  // fp8_e4m3's rows are 64 bytes apart modulo 128: lane c loads tokens
  // 4c..4c+3, odd quad lanes in the order 1, 0, 3, 2, so lanes c and c + 1
  // read opposite halves of the banks (two-way conflicts, not four).
  // fp8_ds_mla's 656-byte rows are 16 bytes apart modulo 128: lane c loads
  // tokens 2c, 2c+1, 2c+8, 2c+9 (k order = token order, see pColumn), and
  // no two lanes of a load phase share a bank.
  const int64_t rowBytes = k.shape.cacheRowBytes();
  const bool tokenOrder = k.scoreColumnsApart();
  Value odd = tokenOrder ? d.c32(0) : d.remu(k.tq, d.c32(2));
  vPairStride = tokenOrder ? 8 : 2;
  Value col = d.add(d.mul(k.wj, d.c32(k.Lw)), d.mul(k.gq, d.c32(k.Lw / 8)));
  for (int64_t p = 0; p < 2; ++p) {
    Value tok =
        d.add(d.mul(k.tq, d.c32(tokenOrder ? 2 : 4)), d.bitXor(odd, d.c32(p)));
    vRow[p] =
        d.add(d.c32(k.lay.rawOff), d.add(d.mul(tok, d.c32(rowBytes)), col));
  }
  vSel = ByteTransposeSelectors::get(d, d.eq(odd, d.c32(1)));
  // K fragment column g is token g of the n tile, or with fp8_ds_mla token
  // g/2 + 4(g%2) (scoreColumnsApart).
  Value kCol = tokenOrder ? d.add(d.divu(k.gq, d.c32(2)),
                                  d.mul(d.remu(k.gq, d.c32(2)), d.c32(4)))
                          : k.gq;
  Value kTok = d.add(d.mul(k.wj, d.c32(k.Tw)), kCol);
  kRow = d.add(d.c32(k.lay.rawOff),
               d.add(d.mul(kTok, d.c32(rowBytes)), d.mul(k.tq, d.c32(16))));
}

SmallVector<MmaAccum> MmaSyncDecode::scores(Value stage) {
  const SmemTile &q = k.lay.q, &kv = k.lay.kv;
  if (k.ntS == 1)
    return {scoresOfEightTokens(stage)};
  // k-step kk accumulates into part kk % parts of each n tile: with few
  // tiles per warp one chain of D/16 dependent MMAs would set the pace.
  const int64_t parts = std::max<int64_t>(1, kScoreChains / k.ntS);
  SmallVector<MmaAccum> s(parts * k.ntS, MmaAccum::splat(d.f(0.0f)));
  for (int64_t kk = 0; kk < k.D / 16; ++kk) {
    MmaFragA a = loadFragA(
        d, k.sm(q.base, q.byteOffset(d, qRow, d.add(lHalf, d.c32(2 * kk)))));
    MutableArrayRef<MmaAccum> part =
        MutableArrayRef<MmaAccum>(s).slice((kk % parts) * k.ntS, k.ntS);
    for (int64_t p = 0; p < k.ntS / 2; ++p) {
      Value tok = d.add(kTokBase, d.c32(16 * p));
      std::array<MmaFragB, 2> bk = loadFragBPair(
          d,
          k.sm(kv.base, d.add(stage, kv.byteOffset(
                                         d, tok, d.add(lMat1, d.c32(2 * kk))))),
          /*trans=*/false);
      part[2 * p] = mmaSync(d, a, bk[0], part[2 * p], k.bf16);
      part[2 * p + 1] = mmaSync(d, a, bk[1], part[2 * p + 1], k.bf16);
    }
  }
  return sumParts(s, k.ntS);
}

MmaAccum MmaSyncDecode::scoresOfEightTokens(Value stage) {
  const SmemTile &q = k.lay.q, &kv = k.lay.kv;
  SmallVector<MmaAccum> s(kScoreChains, MmaAccum::splat(d.f(0.0f)));
  // Lane l addresses token l % 8, 16-byte chunk 2kk + l / 8: one
  // ldmatrix.x4 holds the B fragments of k-steps kk and kk + 1.
  Value tok = d.add(d.mul(k.wj, d.c32(k.Tw)), l8);
  Value chunkLane = d.divu(k.lane, d.c32(8));
  for (int64_t kk = 0; kk < k.D / 16; kk += 2) {
    std::array<MmaFragB, 2> bk = loadFragBPair(
        d,
        k.sm(kv.base,
             d.add(stage,
                   kv.byteOffset(d, tok, d.add(chunkLane, d.c32(2 * kk))))),
        /*trans=*/false);
    for (int64_t h = 0; h < 2; ++h) {
      MmaFragA a = loadFragA(
          d, k.sm(q.base,
                  q.byteOffset(d, qRow, d.add(lHalf, d.c32(2 * (kk + h))))));
      MmaAccum &part = s[(kk + h) % kScoreChains];
      part = mmaSync(d, a, bk[h], part, k.bf16);
    }
  }
  return sumParts(s, 1).front();
}

SmallVector<MmaAccum> MmaSyncDecode::sumParts(ArrayRef<MmaAccum> parts,
                                              int64_t tiles) {
  SmallVector<MmaAccum> sum(parts.take_front(tiles));
  for (size_t i = tiles; i < parts.size(); ++i)
    for (int e = 0; e < 4; ++e)
      sum[i % tiles].regs[e] = d.fadd(sum[i % tiles].regs[e], parts[i].regs[e]);
  return sum;
}

void MmaSyncDecode::accumulateOutput(MutableArrayRef<Value> o, Value stage) {
  const SmemTile &p = k.lay.p, &kv = k.lay.kv;
  for (int64_t kk = 0; kk < k.Bk / 16; ++kk) {
    MmaFragA a = loadFragA(
        d, k.sm(p.base, p.byteOffset(d, qRow, d.add(lHalf, d.c32(2 * kk)))));
    Value tok = d.add(vTokLane, d.c32(16 * kk));
    for (int64_t pp = 0; pp < k.ntO / 2; ++pp) {
      Value chunk =
          d.add(d.add(d.mul(k.wj, d.c32(k.Lw / 8)), d.c32(2 * pp)), lHalf);
      std::array<MmaFragB, 2> bv = loadFragBPair(
          d, k.sm(kv.base, d.add(stage, kv.byteOffset(d, tok, chunk))),
          /*trans=*/true);
      for (int t = 0; t < 2; ++t) {
        MutableArrayRef<Value> tile = o.slice((2 * pp + t) * 4, 4);
        MmaAccum acc = mmaSync(d, a, bv[t],
                               {{tile[0], tile[1], tile[2], tile[3]}}, k.bf16);
        llvm::copy(acc.regs, tile.begin());
      }
    }
  }
}

SmallVector<MmaAccum> MmaSyncDecode::scoresFromRaw(Value stage) {
  const int64_t rowBytes = k.shape.cacheRowBytes();
  const int64_t parts = std::max<int64_t>(1, kScoreChains / k.ntS);
  SmallVector<MmaAccum> s(parts * k.ntS, MmaAccum::splat(d.f(0.0f)));
  // Lane (g, c) of n tile t: token wj*Tw + 8t + g, bytes 16c.. of a group.
  SmallVector<Value> rows;
  for (int64_t t = 0; t < k.ntS; ++t)
    rows.push_back(d.add(stage, d.add(kRow, d.c32(8 * t * rowBytes))));
  addCodeGroups(s, rows, 0, k.D / 64);
  return sumParts(s, k.ntS);
}

SmallVector<MmaAccum>
MmaSyncDecode::scoresFromRawScaled(Value stage, RawBlockScales &scales) {
  const SmemTile &q = k.lay.q;
  const int64_t rowBytes = k.shape.cacheRowBytes();
  const int64_t tiles = k.scaleTiles, ropeOff = abi::dsMlaRopeOffset(k.L);
  const int64_t parts = std::max<int64_t>(1, kScoreChains / k.ntS);
  auto v4 = VectorType::get({4}, d.i32);
  SmallVector<Value> rows;
  for (int64_t t = 0; t < k.ntS; ++t)
    rows.push_back(d.add(stage, d.add(kRow, d.c32(8 * t * rowBytes))));
  // The RoPE part, bf16 Q times bf16 K: lane (g, c)'s 16 bytes from 16c of
  // each 32 columns are the B fragments of two k-steps (Q's k order:
  // storeQChunkForRawRope).
  SmallVector<MmaAccum> total(k.ntS, MmaAccum::splat(d.f(0.0f)));
  for (int64_t h = 0; h < k.shape.ropeDim / 32; ++h) {
    SmallVector<Value> words;
    for (int64_t t = 0; t < k.ntS; ++t)
      words.push_back(
          d.load(v4, k.sm(0, d.add(rows[t], d.c32(ropeOff + 64 * h))), 16));
    for (int64_t jj = 0; jj < 2; ++jj) {
      int64_t kk = k.L / 16 + 2 * h + jj;
      MmaFragA a = loadFragA(
          d, k.sm(q.base, q.byteOffset(d, qRow, d.add(lHalf, d.c32(2 * kk)))));
      for (int64_t t = 0; t < k.ntS; ++t)
        total[t] = mmaSync(d, a,
                           MmaFragB{{d.extract(words[t], 2 * jj),
                                     d.extract(words[t], 2 * jj + 1)}},
                           total[t], /*bf16=*/true);
    }
  }
  // The scales of the thread's score columns (k.scoreToken).
  scales.stage = stage;
  for (int64_t t = 0; t < k.ntS; ++t)
    for (int x = 0; x < 2; ++x) {
      Value row = d.add(d.add(stage, d.c32(k.lay.rawOff + k.L)),
                        d.mul(k.scoreToken(t, x), d.c32(rowBytes)));
      // A token's scales are contiguous: 16-byte loads of four where the
      // tiles come in fours (at row offset L, a multiple of 512).
      const int64_t width = tiles % 4 == 0 ? 4 : 1;
      auto type = VectorType::get({width}, d.f32);
      for (int64_t j = 0; j < tiles; j += width) {
        Value v = d.load(type, k.sm(0, d.add(row, d.c32(4 * j))), 4 * width);
        for (int64_t i = 0; i < width; ++i)
          scales.tok.push_back(d.extract(v, i));
      }
    }
  // The tiles in rounds of `round`, each tile's k-steps one chain per n
  // tile, the round's chains interleaved (kScoreChains in flight, as
  // scores() keeps), then added times the scales: no partial sums to add.
  const int64_t groups = abi::kDsMlaTile / 64;
  const int64_t round = std::min<int64_t>(tiles, parts);
  for (int64_t j0 = 0; j0 < tiles; j0 += round) {
    const int64_t n = std::min<int64_t>(round, tiles - j0);
    SmallVector<SmallVector<MmaAccum>> acc(
        n, SmallVector<MmaAccum>(k.ntS, MmaAccum::splat(d.f(0.0f))));
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t i = 0; i < n; ++i)
        addCodeGroups(acc[i], rows, groups * (j0 + i) + g,
                      groups * (j0 + i) + g + 1);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t t = 0; t < k.ntS; ++t)
        for (int e = 0; e < 4; ++e)
          total[t].regs[e] = d.fma(acc[i][t].regs[e],
                                   scales.tok[(2 * t + e % 2) * tiles + j0 + i],
                                   total[t].regs[e]);
  }
  return total;
}

void MmaSyncDecode::addCodeGroups(MutableArrayRef<MmaAccum> s,
                                  ArrayRef<Value> rows, int64_t g0,
                                  int64_t g1) {
  const SmemTile &q = k.lay.q;
  const int64_t parts = s.size() / k.ntS;
  auto v4 = VectorType::get({4}, d.i32);
  for (int64_t g = g0; g < g1; ++g) {
    SmallVector<Value> codes;
    for (int64_t t = 0; t < k.ntS; ++t)
      codes.push_back(d.load(v4, k.sm(0, d.add(rows[t], d.c32(64 * g))), 16));
    for (int64_t j = 0; j < 4; ++j) {
      int64_t kk = 4 * g + j;
      MmaFragA a = loadFragA(
          d, k.sm(q.base, q.byteOffset(d, qRow, d.add(lHalf, d.c32(2 * kk)))));
      for (int64_t t = 0; t < k.ntS; ++t) {
        auto [b0, b1] = ptx::cvtE4M3x4ToF16x2(d.b, d.extract(codes[t], j));
        MmaAccum &part = s[(kk % parts) * k.ntS + t];
        part = mmaSync(d, a, MmaFragB{{b0, b1}}, part, k.bf16);
      }
    }
  }
}

std::array<Value, 4> MmaSyncDecode::loadVCodes(Value slot, int64_t kk,
                                               int64_t u) {
  auto v4 = VectorType::get({4}, d.i32);
  const int64_t rowBytes = k.shape.cacheRowBytes();
  std::array<Value, 4> rows;
  for (int64_t step = 0; step < 4; ++step) {
    int64_t off = (16 * kk + vPairStride * (step / 2)) * rowBytes + 16 * u;
    rows[step] =
        d.load(v4, k.sm(0, d.add(slot, d.add(vRow[step % 2], d.c32(off)))), 16);
  }
  return rows;
}

void MmaSyncDecode::accumulateOutputFromRaw(MutableArrayRef<Value> o,
                                            Value stage) {
  const SmemTile &p = k.lay.p;
  Value slot = stage; // vRow holds the ring's offset
  // With scale tiles, P of this warp's tile wj (rows from wj * M).
  Value pRow = k.scaleTiles > 0 ? d.add(qRow, d.mul(k.wj, d.c32(k.M))) : qRow;
  for (int64_t kk = 0; kk < k.Bk / 16; ++kk) {
    MmaFragA a = loadFragA(
        d, k.sm(p.base, p.byteOffset(d, pRow, d.add(lHalf, d.c32(2 * kk)))));
    for (int64_t u = 0; u < k.Lw / 128; ++u) {
      std::array<Value, 4> rows = loadVCodes(slot, kk, u);
      for (int64_t w = 0; w < 4; ++w) {
        std::array<Value, 4> cols =
            transposeBytes4x4(d,
                              {d.extract(rows[0], w), d.extract(rows[1], w),
                               d.extract(rows[2], w), d.extract(rows[3], w)},
                              vSel);
        for (int64_t x = 0; x < 4; ++x) {
          // Column 16u + 4w + x of the lane's Lw/8: n tile 16u + 4w + x.
          auto [b0, b1] = ptx::cvtE4M3x4ToF16x2(d.b, cols[x]);
          MutableArrayRef<Value> tile = o.slice((16 * u + 4 * w + x) * 4, 4);
          MmaAccum acc =
              mmaSync(d, a, MmaFragB{{b0, b1}},
                      {{tile[0], tile[1], tile[2], tile[3]}}, k.bf16);
          llvm::copy(acc.regs, tile.begin());
        }
      }
    }
  }
}

SmallVector<Value> MmaSyncDecode::step(Value kIdx, Value stage,
                                       ValueRange carried) {
  Value start = k.blockStart(kIdx);
  RawBlockScales scales;
  SmallVector<MmaAccum> s = k.scaleTiles > 0
                                ? scoresFromRawScaled(stage, scales)
                            : k.rawFp8 ? scoresFromRaw(stage)
                                       : scores(stage);
  SmallVector<Value> next =
      k.softmaxBlock(s, start, carried, k.scaleTiles > 0 ? &scales : nullptr);
  d.barrier();
  MutableArrayRef<Value> o = MutableArrayRef<Value>(next).take_front(k.ntO * 4);
  if (k.rawFp8)
    accumulateOutputFromRaw(o, stage);
  else
    accumulateOutput(o, stage);
  return next;
}

FailureOr<mlir::gpu::GPUFuncOp> mla::gpu_codegen::sm90::emitDecodeSM90MmaSync(
    OpBuilder &builder, Location loc, StringRef name,
    const abi::DecodeShape &shape, const abi::DecodeTiling &tiling) {
  ImplicitLocOpBuilder b(loc, builder);
  DecodeSM90Kernel k(b, shape, tiling);
  k.begin(name, WarpGrid::RowMajor);
  Value page = k.stageQAndPrefill();
  MmaSyncDecode mma(k);
  SmallVector<Value> state =
      k.runBlocks(page, /*asyncProxy=*/false, /*dequantise=*/true,
                  [&](Value kIdx, Value stage, ValueRange carried) {
                    return mma.step(kIdx, stage, carried);
                  });
  k.finish(state);
  return k.fn;
}
