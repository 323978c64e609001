//===- ChunkPrefill.cpp - the mla-chunk-prefill pass ----------------------===//
//
// Decomposes mla.prefill into the ops of primer section 7 so that the
// up-projected context K/V never exceed a workspace of W rows:
//
//   new tokens:  up_proj_kv(kv_c), K = [k_nope | k_pe broadcast over heads],
//                causal mha over the new tokens  -> (out_new, lse_new)
//   context:     for each chunk: gather_cache into the [W, L+R] workspace,
//                up_proj_kv of the gathered rows, non-causal mha of every new
//                token against the chunk, merge_states into (out_ctx,
//                lse_ctx), which start at (0, -inf)
//   result:      merge_states(ctx, new), converted to the result type.
//
// Everything between the widened inputs and the result is f32, so a bf16 or
// f16 prefill rounds once, at the end, however many chunks it merges.
//
// Chunk policy (mla/Contract/ChunkedPrefill.h plans the same chunks on the
// host for the GPU runtime). Request i has ctx_i = seq_lens[i] - q_len_i
// context rows. With n requests that have context and s = W / n:
//   - s >= page_size: every request advances by the same C = s rounded down
//     to a page multiple per chunk (vLLM's policy); chunk k covers positions
//     [k*C, (k+1)*C) of every request, so chunk starts are page-aligned and a
//     chunk holds at most n*C <= W rows;
//   - otherwise (W cannot hold a page per request): requests take turns, one
//     request per chunk, with C = W rounded down to a page multiple, or C = W
//     when even one page does not fit (then chunk starts are multiples of W).
// Either way a chunk never exceeds W rows and always makes progress. Only
// the gathered rows [0, rows in chunk) of the workspace are up-projected and
// attended to, so stale workspace rows never reach a result; requests with
// no rows in a chunk get lse = -inf from mha and merge as no contribution.
//
//===----------------------------------------------------------------------===//

#include "mla/Contract/ChunkedPrefill.h"
#include "mla/Dialect/MLA/Transforms/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"
#include <algorithm>
#include <limits>

namespace mla {
#define GEN_PASS_DEF_MLACHUNKPREFILL
#include "mla/Dialect/MLA/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;
using namespace mla;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// Index and tensor shorthands over one builder and location.
struct Emitter {
  OpBuilder &b;
  Location loc;

  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubIOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulIOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return arith::DivUIOp::create(b, loc, x, y); }
  Value ceilDiv(Value x, Value y) {
    return arith::CeilDivUIOp::create(b, loc, x, y);
  }
  Value min(Value x, Value y) { return arith::MinSIOp::create(b, loc, x, y); }
  Value max(Value x, Value y) { return arith::MaxSIOp::create(b, loc, x, y); }
  Value cmp(arith::CmpIPredicate p, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, p, x, y);
  }
  Value select(Value c, Value x, Value y) {
    return arith::SelectOp::create(b, loc, c, x, y);
  }
  /// `x` rounded down to a multiple of `m`.
  Value floorTo(Value x, Value m) {
    return sub(x, arith::RemUIOp::create(b, loc, x, m));
  }
  /// Element `i` of an i32 tensor, as index.
  Value load(Value t, Value i) {
    Value v = tensor::ExtractOp::create(b, loc, t, ValueRange{i});
    return arith::IndexCastOp::create(b, loc, b.getIndexType(), v);
  }
  /// `t` with element `i` set to the index `v` (stored as i32).
  Value store(Value v, Value t, Value i) {
    Value x = arith::IndexCastOp::create(b, loc, b.getI32Type(), v);
    return tensor::InsertOp::create(b, loc, x, t, ValueRange{i});
  }
  Value dim(Value t, int64_t d) {
    return getValueOrCreateConstantIndexOp(b, loc,
                                           tensor::getMixedSize(b, loc, t, d));
  }

  /// A tensor of `sizes` filled with the scalar `value`.
  Value filled(ArrayRef<OpFoldResult> sizes, Value value) {
    Value empty = tensor::EmptyOp::create(b, loc, sizes, value.getType());
    return linalg::FillOp::create(b, loc, value, empty).getResult(0);
  }
  Value f32(double v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  }

  /// `src` converted elementwise to `elementType` (extf or truncf); `src`
  /// itself when it already has that element type.
  Value convert(Value src, Type elementType) {
    auto ty = cast<RankedTensorType>(src.getType());
    if (ty.getElementType() == elementType)
      return src;
    bool widen = elementType.getIntOrFloatBitWidth() >
                 ty.getElementType().getIntOrFloatBitWidth();
    Value init = tensor::EmptyOp::create(
        b, loc, tensor::getMixedSizes(b, loc, src), elementType);
    AffineMap id = b.getMultiDimIdentityMap(ty.getRank());
    SmallVector<utils::IteratorType> par(ty.getRank(),
                                         utils::IteratorType::parallel);
    return linalg::GenericOp::create(
               b, loc, init.getType(), ValueRange{src}, ValueRange{init},
               ArrayRef<AffineMap>{id, id}, par,
               [&](OpBuilder &nb, Location nloc, ValueRange args) {
                 Value x = widen ? arith::ExtFOp::create(nb, nloc, elementType,
                                                         args[0])
                                       .getResult()
                                 : arith::TruncFOp::create(nb, nloc,
                                                           elementType, args[0])
                                       .getResult();
                 linalg::YieldOp::create(nb, nloc, x);
               })
        .getResult(0);
  }
  Value widen(Value src) { return convert(src, b.getF32Type()); }

  /// K [S, N, P+R] = k_nope [S, N, P] with the RoPE rows `rope` [S, R]
  /// broadcast over the N heads appended.
  Value concatRope(Value kNope, Value rope, int64_t heads, int64_t nope,
                   int64_t ropeWidth) {
    OpFoldResult rows = tensor::getMixedSize(b, loc, kNope, 0);
    OpFoldResult zero = b.getIndexAttr(0), one = b.getIndexAttr(1);
    Value k = tensor::EmptyOp::create(
        b, loc,
        ArrayRef<OpFoldResult>{rows, b.getIndexAttr(heads),
                               b.getIndexAttr(nope + ropeWidth)},
        b.getF32Type());
    k = tensor::InsertSliceOp::create(
        b, loc, kNope, k, {zero, zero, zero},
        {rows, b.getIndexAttr(heads), b.getIndexAttr(nope)}, {one, one, one});
    SmallVector<OpFoldResult> ropeOffsets = {zero, zero, b.getIndexAttr(nope)};
    SmallVector<OpFoldResult> ropeSizes = {rows, b.getIndexAttr(heads),
                                           b.getIndexAttr(ropeWidth)};
    Value slot = tensor::ExtractSliceOp::create(b, loc, k, ropeOffsets,
                                                ropeSizes, {one, one, one});
    Value bcast =
        linalg::BroadcastOp::create(b, loc, rope, slot, ArrayRef<int64_t>{1})
            .getResult()[0];
    return tensor::InsertSliceOp::create(b, loc, bcast, k, ropeOffsets,
                                         ropeSizes, {one, one, one});
  }
};

/// The static widths of one prefill: heads N, nope P, RoPE R, latent L,
/// value V.
struct Widths {
  int64_t heads, nope, rope, latent, value;
};

/// Builds the decomposition of one mla.prefill (see the file comment). Holds
/// the values every stage needs: the widened operands, the batch size and,
/// once planned, the chunk policy.
class PrefillDecomposition {
public:
  PrefillDecomposition(OpBuilder &b, PrefillOp op, const Widths &w,
                       int64_t workspaceRows)
      : e{b, op.getLoc()}, op(op), w(w), workspaceRows(workspaceRows) {}

  /// Emits the decomposition and returns the value replacing the op.
  Value build() {
    zero = e.idx(0);
    one = e.idx(1);
    batchSize = tensor::getMixedSize(e.b, e.loc, op.getBlockTable(), 0);
    offsetsSize = tensor::getMixedSize(e.b, e.loc, op.getQueryStartLoc(), 0);
    batch = getValueOrCreateConstantIndexOp(e.b, e.loc, batchSize);
    q = e.widen(op.getQ());
    Value kvC = e.widen(op.getKvC());
    Value kPe = op.getKPe();
    if (cast<RankedTensorType>(kPe.getType()).getRank() == 3)
      kPe = tensor::CollapseShapeOp::create(
          e.b, e.loc, kPe, ArrayRef<ReassociationIndices>{{0}, {1, 2}});
    kPe = e.widen(kPe);
    kvBProj = e.widen(op.getKvBProj());

    auto [outNew, lseNew] =
        attend(kvC, kPe, op.getQueryStartLoc(), /*causal=*/true);
    auto [outCtx, lseCtx] = attendToContext();
    auto merged =
        MergeStatesOp::create(e.b, e.loc, outCtx.getType(), lseCtx.getType(),
                              outCtx, lseCtx, outNew, lseNew);
    Type resultTy = op.getOut().getType();
    Value out = e.convert(merged.getOut(), getElementTypeOrSelf(resultTy));
    if (out.getType() != resultTy)
      out = tensor::CastOp::create(e.b, e.loc, resultTy, out);
    return out;
  }

private:
  /// Up-projects `latent` [S, L] with `rope` [S, R] to K/V and attends every
  /// new token to them; request b's keys are rows cuK[b] .. cuK[b+1]-1.
  std::pair<Value, Value> attend(Value latent, Value rope, Value cuK,
                                 bool causal) {
    Type f32 = e.b.getF32Type();
    int64_t rows = cast<RankedTensorType>(latent.getType()).getDimSize(0);
    auto kNopeTy = RankedTensorType::get({rows, w.heads, w.nope}, f32);
    auto vTy = RankedTensorType::get({rows, w.heads, w.value}, f32);
    auto up = UpProjKvOp::create(e.b, e.loc, kNopeTy, vTy, latent, kvBProj);
    Value k = e.concatRope(up.getKNope(), rope, w.heads, w.nope, w.rope);

    int64_t tokens = cast<RankedTensorType>(q.getType()).getDimSize(0);
    auto outTy = RankedTensorType::get({tokens, w.heads, w.value}, f32);
    auto lseTy = RankedTensorType::get({w.heads, tokens}, f32);
    auto mha = MhaOp::create(
        e.b, e.loc, outTy, lseTy, q, k, up.getV(), op.getQueryStartLoc(), cuK,
        op.getSoftmaxScaleAttr(), causal ? e.b.getUnitAttr() : UnitAttr());
    return {mha.getOut(), mha.getLse()};
  }

  /// Plans the chunks, then loops over request groups and their chunks.
  /// Returns (out_ctx, lse_ctx); requests without context keep (0, -inf).
  std::pair<Value, Value> attendToContext() {
    plan();
    Type f32 = e.b.getF32Type();
    OpFoldResult tokens = tensor::getMixedSize(e.b, e.loc, q, 0);
    OpFoldResult heads = e.b.getIndexAttr(w.heads);
    Value out =
        e.filled({tokens, heads, e.b.getIndexAttr(w.value)}, e.f32(0.0));
    Value lse = e.filled({heads, tokens}, e.f32(-kInf));
    Value workspace = tensor::EmptyOp::create(
        e.b, e.loc, ArrayRef<int64_t>{workspaceRows, w.latent + w.rope}, f32);

    Value numGroups = e.ceilDiv(batch, groupSize);
    auto groups = scf::ForOp::create(
        e.b, e.loc, zero, numGroups, one, ValueRange{workspace, out, lse},
        [&](OpBuilder &gb, Location gloc, Value group, ValueRange groupState) {
          Emitter g{gb, gloc};
          Value lo = g.mul(group, groupSize);
          Value hi = g.min(g.add(lo, groupSize), batch);
          auto longest = scf::ForOp::create(
              gb, gloc, lo, hi, one, ValueRange{zero},
              [&](OpBuilder &nb, Location nloc, Value req, ValueRange it) {
                Emitter n{nb, nloc};
                scf::YieldOp::create(
                    nb, nloc, ValueRange{n.max(it[0], n.load(ctxLens, req))});
              });
          Value numChunks = g.ceilDiv(longest.getResult(0), chunk);
          auto chunks = scf::ForOp::create(
              gb, gloc, zero, numChunks, one, groupState,
              [&](OpBuilder &cb, Location cloc, Value index, ValueRange state) {
                Emitter c{cb, cloc};
                scf::YieldOp::create(
                    cb, cloc,
                    attendToChunk(c, lo, hi, c.mul(index, chunk), state));
              });
          scf::YieldOp::create(gb, gloc, chunks.getResults());
        });
    return {groups.getResult(1), groups.getResult(2)};
  }

  /// The chunk policy of the file comment, computed at run time from
  /// ctx_i = seq_lens[i] - q_len_i (clamped at 0): sets ctxLens, chunk (C)
  /// and groupSize (requests per chunk).
  void plan() {
    Value qsl = op.getQueryStartLoc(), seqLens = op.getSeqLens();
    Value ctxInit =
        tensor::EmptyOp::create(e.b, e.loc,
                                ArrayRef<OpFoldResult>{tensor::getMixedSize(
                                    e.b, e.loc, op.getBlockTable(), 0)},
                                e.b.getI32Type());
    auto lens = scf::ForOp::create(
        e.b, e.loc, zero, batch, one, ValueRange{ctxInit, zero},
        [&](OpBuilder &nb, Location nloc, Value req, ValueRange it) {
          Emitter n{nb, nloc};
          Value qLen = n.sub(n.load(qsl, n.add(req, one)), n.load(qsl, req));
          Value ctx = n.max(n.sub(n.load(seqLens, req), qLen), zero);
          Value has = n.cmp(arith::CmpIPredicate::sgt, ctx, zero);
          Value count = n.add(it[1], n.select(has, one, zero));
          scf::YieldOp::create(nb, nloc,
                               ValueRange{n.store(ctx, it[0], req), count});
        });
    ctxLens = lens.getResult(0);
    Value pageSize = e.dim(op.getCache(), 1);
    Value budget = e.idx(workspaceRows);
    Value share = e.div(budget, e.max(lens.getResult(1), one));
    Value together = e.cmp(arith::CmpIPredicate::sge, share, pageSize);
    Value alone = e.select(e.cmp(arith::CmpIPredicate::sge, budget, pageSize),
                           e.floorTo(budget, pageSize), budget);
    chunk = e.select(together, e.floorTo(share, pageSize), alone);
    groupSize = e.select(together, e.max(batch, one), one);
  }

  /// One chunk: positions [start, start + C) of the context of requests
  /// [lo, hi). `state` is (workspace, out_ctx, lse_ctx); returns it updated.
  SmallVector<Value> attendToChunk(Emitter &c, Value lo, Value hi, Value start,
                                   ValueRange state) {
    // cu_rows[b + 1] = cu_rows[b] + (b in [lo, hi) ? min(C, ctx_b - start)
    // : 0), clamped at 0.
    Value zeroI32 =
        arith::ConstantOp::create(c.b, c.loc, c.b.getI32IntegerAttr(0));
    Value cuInit = c.filled({offsetsSize}, zeroI32);
    auto cu = scf::ForOp::create(
        c.b, c.loc, zero, batch, one, ValueRange{cuInit, zero},
        [&](OpBuilder &nb, Location nloc, Value req, ValueRange it) {
          Emitter n{nb, nloc};
          Value inGroup = arith::AndIOp::create(
              nb, nloc, n.cmp(arith::CmpIPredicate::sge, req, lo),
              n.cmp(arith::CmpIPredicate::slt, req, hi));
          Value left = n.max(n.sub(n.load(ctxLens, req), start), zero);
          Value rows = n.select(inGroup, n.min(left, chunk), zero);
          Value total = n.add(it[1], rows);
          scf::YieldOp::create(
              nb, nloc,
              ValueRange{n.store(total, it[0], n.add(req, one)), total});
        });
    Value cuRows = cu.getResult(0), total = cu.getResult(1);
    Value starts = c.filled(
        {batchSize},
        arith::IndexCastOp::create(c.b, c.loc, c.b.getI32Type(), start));

    Value workspace = GatherCacheOp::create(
        c.b, c.loc, state[0].getType(), op.getCache(), op.getBlockTable(),
        starts, cuRows, state[0], op.getLayout(),
        c.b.getI64IntegerAttr(op.getKvC().getType().getDimSize(1)));
    // Only the rows gathered for this chunk: the rest of the workspace is
    // stale.
    OpFoldResult z = c.b.getIndexAttr(0), o = c.b.getIndexAttr(1);
    Value latent = tensor::ExtractSliceOp::create(
        c.b, c.loc, workspace, {z, z}, {total, c.b.getIndexAttr(w.latent)},
        {o, o});
    Value rope = tensor::ExtractSliceOp::create(
        c.b, c.loc, workspace, {z, c.b.getIndexAttr(w.latent)},
        {total, c.b.getIndexAttr(w.rope)}, {o, o});
    auto [outChunk, lseChunk] = attend(latent, rope, cuRows, /*causal=*/false);
    auto merged = MergeStatesOp::create(c.b, c.loc, state[1].getType(),
                                        state[2].getType(), state[1], state[2],
                                        outChunk, lseChunk);
    return {workspace, merged.getOut(), merged.getLse()};
  }

  Emitter e;
  PrefillOp op;
  Widths w;
  int64_t workspaceRows;
  Value zero, one, batch;              // index constants, the batch size B
  OpFoldResult batchSize, offsetsSize; // B and B + 1, static when known
  Value q, kvBProj;                    // widened to f32
  Value ctxLens, chunk, groupSize;     // the chunk plan
};

struct ChunkPrefillPattern : OpRewritePattern<PrefillOp> {
  ChunkPrefillPattern(MLIRContext *ctx, int64_t defaultWorkspaceRows)
      : OpRewritePattern(ctx), defaultWorkspaceRows(defaultWorkspaceRows) {}

  LogicalResult matchAndRewrite(PrefillOp op,
                                PatternRewriter &rewriter) const override {
    auto qTy = cast<RankedTensorType>(op.getQ().getType());
    int64_t qkWidth = qTy.getDimSize(2);
    Widths w{qTy.getDimSize(1), ShapedType::kDynamic,
             cast<RankedTensorType>(op.getKPe().getType()).getShape().back(),
             cast<RankedTensorType>(op.getKvC().getType()).getDimSize(1),
             cast<RankedTensorType>(op.getOut().getType()).getDimSize(2)};
    if (llvm::any_of(
            ArrayRef<int64_t>{w.heads, w.rope, w.latent, w.value, qkWidth},
            ShapedType::isDynamic))
      return rewriter.notifyMatchFailure(op, "needs static N, P, R, L and V");
    w.nope = qkWidth - w.rope;

    PrefillDecomposition decomposition(rewriter, op, w, workspaceRows(op));
    rewriter.replaceOp(op, decomposition.build());
    return success();
  }

private:
  /// W: the op's workspace_rows, else the pattern's default, clamped to the
  /// block table's capacity (a larger workspace could never be filled).
  int64_t workspaceRows(PrefillOp op) const {
    int64_t rows = defaultWorkspaceRows;
    if (IntegerAttr attr = op.getWorkspaceRowsAttr())
      rows = attr.getInt();
    auto tableTy = cast<RankedTensorType>(op.getBlockTable().getType());
    int64_t pageSize =
        cast<RankedTensorType>(op.getCache().getType()).getDimSize(1);
    if (tableTy.hasStaticShape() && !ShapedType::isDynamic(pageSize))
      rows = std::min(
          rows, std::max<int64_t>(tableTy.getNumElements() * pageSize, 1));
    return rows;
  }

  int64_t defaultWorkspaceRows;
};

struct MLAChunkPrefillPass
    : public mla::impl::MLAChunkPrefillBase<MLAChunkPrefillPass> {
  using MLAChunkPrefillBase::MLAChunkPrefillBase;

  void runOnOperation() override {
    int64_t rows =
        workspaceRows > 0
            ? int64_t(workspaceRows)
            : defaultPrefillWorkspaceRows(maxModelLen, maxNumSeqs, pageSize);
    RewritePatternSet patterns(&getContext());
    populateChunkPrefillPatterns(patterns, rows);
    // One walk suffices (the rewrite creates no prefill) and leaves the rest
    // of the function exactly as it was.
    walkAndApplyPatterns(getOperation(), std::move(patterns));
    getOperation().walk([&](PrefillOp op) {
      op.emitOpError("cannot be chunked: N, P, R, L and V must be static");
      signalPassFailure();
    });
  }
};

} // namespace

void mla::populateChunkPrefillPatterns(RewritePatternSet &patterns,
                                       int64_t defaultWorkspaceRows) {
  patterns.add<ChunkPrefillPattern>(patterns.getContext(),
                                    defaultWorkspaceRows);
}
