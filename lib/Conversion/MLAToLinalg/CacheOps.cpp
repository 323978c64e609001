//===- CacheOps.cpp - cache_write and gather_cache to linalg/scf ----------===//
//
// Lowers the paged-cache ops to loops over tokens (cache_write) or workspace
// rows (gather_cache) that carry the destination tensor as an iteration
// argument and update it with tensor.insert / tensor.insert_slice, so that
// one-shot bufferization writes the caller's buffer in place: a write touches
// only the rows it stores, never a copy of the whole cache. Per-row work is a
// linalg op on a slice of the destination (quantise, convert, dequantise).
//
// Quantisation follows the #mla.cache_layout row formats bit for bit: every
// x / scale is a true f32 division and every scale is computed in f32, as
// the numpy reference does.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"
#include "mla/Contract/CacheProjectionABI.h"
#include "mla/Conversion/MLAToLinalg/MLAToLinalg.h"
#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

using namespace mlir;
using namespace mla;
using namespace mla::lowering;

/// Largest finite float8 E4M3FN magnitude; scales map a row's amax onto it.
static constexpr double kE4M3Max = 448.0;
/// Floor of a quantisation amax, so an all-zero row gets a finite scale.
static constexpr double kAmaxFloor = 1e-4;
using mla::gpu::kDsMlaTile;

/// Converts a float to another float type. f16 <-> bf16 have the same width,
/// so they go through f32 (exact for either source, then one rounding).
static Value convertFloat(OpBuilder &b, Location loc, Value v, Type to) {
  Type from = v.getType();
  if (from == to)
    return v;
  unsigned fromWidth = from.getIntOrFloatBitWidth();
  unsigned toWidth = to.getIntOrFloatBitWidth();
  if (fromWidth == toWidth)
    return fromF32(b, loc, toF32(b, loc, v), to);
  if (fromWidth < toWidth)
    return arith::ExtFOp::create(b, loc, to, v);
  return arith::TruncFOp::create(b, loc, to, v);
}

/// A slice of `len` entries of the last dimension at `offsets`, dropping the
/// leading unit dimensions (a 1-D tensor).
static Value extractRow(OpBuilder &b, Location loc, Value src,
                        ArrayRef<Value> offsets, Value len) {
  auto srcTy = cast<RankedTensorType>(src.getType());
  SmallVector<OpFoldResult> offs = getAsOpFoldResult(ValueRange(offsets));
  SmallVector<OpFoldResult> sizes(srcTy.getRank() - 1, b.getIndexAttr(1));
  sizes.push_back(getAsOpFoldResult(len));
  SmallVector<OpFoldResult> strides(srcTy.getRank(), b.getIndexAttr(1));
  auto rowTy = tensor::ExtractSliceOp::inferCanonicalRankReducedResultType(
      1, srcTy, sizes);
  return tensor::ExtractSliceOp::create(b, loc, rowTy, src, offs, sizes,
                                        strides);
}

/// Inverse of extractRow: writes the 1-D `row` back into `dest`.
static Value insertRow(OpBuilder &b, Location loc, Value row, Value dest,
                       ArrayRef<Value> offsets, Value len) {
  auto destTy = cast<RankedTensorType>(dest.getType());
  SmallVector<OpFoldResult> sizes(destTy.getRank() - 1, b.getIndexAttr(1));
  sizes.push_back(getAsOpFoldResult(len));
  SmallVector<OpFoldResult> strides(destTy.getRank(), b.getIndexAttr(1));
  return tensor::InsertSliceOp::create(b, loc, row, dest,
                                       getAsOpFoldResult(ValueRange(offsets)),
                                       sizes, strides);
}

/// Offsets of token `t`'s row in a [T, W] or [T, 1, W] operand, starting at
/// column `col`.
static SmallVector<Value> tokenOffsets(OpBuilder &b, Location loc, Value src,
                                       Value t, Value col) {
  SmallVector<Value> offs = {t};
  if (cast<RankedTensorType>(src.getType()).getRank() == 3)
    offs.push_back(cIdx(b, loc, 0));
  offs.push_back(col);
  return offs;
}

/// Stores `fn(src[i])` at cache[page, slot, col + i] for every i of the 1-D
/// `src`. The linalg.map writes into a slice of the cache itself, so the
/// store bufferizes to a subview of the caller's buffer.
static Value storeMapped(OpBuilder &b, Location loc, Value src, Value cache,
                         Value page, Value slot, Value col,
                         function_ref<Value(OpBuilder &, Location, Value)> fn) {
  Value len = dimSize(b, loc, src, 0);
  SmallVector<Value> offs = {page, slot, col};
  Value dst = extractRow(b, loc, cache, offs, len);
  auto map = linalg::MapOp::create(
      b, loc, ValueRange{src}, dst,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        linalg::YieldOp::create(nb, nloc, fn(nb, nloc, args[0]));
      });
  return insertRow(b, loc, map.getResult()[0], cache, offs, len);
}

/// Stores the f32 `v` little-endian at bytes [off, off + 4) of the i8 row
/// cache[page, slot].
static Value storeF32LE(OpBuilder &b, Location loc, Value cache, Value page,
                        Value slot, Value off, Value v) {
  Value bits = arith::BitcastOp::create(b, loc, b.getI32Type(), v);
  for (int k = 0; k < 4; ++k) {
    Value byte = arith::TruncIOp::create(
        b, loc, b.getI8Type(),
        arith::ShRUIOp::create(b, loc, bits, cI32(b, loc, 8 * k)));
    Value at = arith::AddIOp::create(b, loc, off, cIdx(b, loc, k));
    cache = tensor::InsertOp::create(b, loc, byte, cache,
                                     ValueRange{page, slot, at});
  }
  return cache;
}

/// max(amax(|src|) over `dims`, kAmaxFloor) in f32, with the other dims kept.
/// Starting the reduction at the floor gives the same result as flooring
/// afterwards, NaN propagation included (arith.maximumf).
static Value reduceFlooredAmax(OpBuilder &b, Location loc, Value src,
                               ArrayRef<int64_t> dims) {
  auto srcTy = cast<RankedTensorType>(src.getType());
  SmallVector<int64_t> shape;
  SmallVector<Value> dynSizes;
  for (int64_t d = 0; d < srcTy.getRank(); ++d) {
    if (llvm::is_contained(dims, d))
      continue;
    shape.push_back(srcTy.getDimSize(d));
    if (srcTy.isDynamicDim(d))
      dynSizes.push_back(tensor::DimOp::create(b, loc, src, d));
  }
  Value init = tensor::EmptyOp::create(b, loc, shape, b.getF32Type(), dynSizes);
  init = linalg::FillOp::create(b, loc, cF32(b, loc, kAmaxFloor), init)
             .getResult(0);
  auto reduce = linalg::ReduceOp::create(
      b, loc, ValueRange{src}, ValueRange{init}, dims,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value a = math::AbsFOp::create(nb, nloc, toF32(nb, nloc, args[0]));
        linalg::YieldOp::create(
            nb, nloc,
            arith::MaximumFOp::create(nb, nloc, a, args[1]).getResult());
      });
  return reduce.getResult(0);
}

/// `e4m3(x / scale)` for a scalar of any float type and an f32 scale.
static Value quantise(OpBuilder &b, Location loc, Value x, Value scale) {
  return encodeE4M3(b, loc,
                    arith::DivFOp::create(b, loc, toF32(b, loc, x), scale));
}

namespace {

/// cache_write -> scf.for over tokens; a token whose slot lies outside
/// [0, pages * page_size) leaves the cache as it is.
struct CacheWriteLowering : public OpRewritePattern<CacheWriteOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(CacheWriteOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value kvC = op.getKvC(), kPe = op.getKPe(), cache = op.getCache();

    Value tokens = dimSize(rewriter, loc, kvC, 0);
    Value pageSize = dimSize(rewriter, loc, cache, 1);
    Value numSlots = arith::MulIOp::create(
        rewriter, loc, dimSize(rewriter, loc, cache, 0), pageSize);

    // The amax reductions of the scaled formats run over all tokens at once,
    // before the loop; the loop then only reads one scale per row or tile.
    Value latentAmax, ropeAmax;
    switch (op.getLayout().getFormat()) {
    case RowFormat::fp8_e4m3_token:
      latentAmax = reduceFlooredAmax(rewriter, loc, kvC, {1});
      // k_pe [T, 1, R] reduces its unit head dimension as well.
      ropeAmax = reduceFlooredAmax(rewriter, loc, kPe,
                                   op.getKPe().getType().getRank() == 3
                                       ? ArrayRef<int64_t>{1, 2}
                                       : ArrayRef<int64_t>{1});
      break;
    case RowFormat::fp8_ds_mla:
      latentAmax =
          reduceFlooredAmax(rewriter, loc, splitTiles(rewriter, loc, kvC), {2});
      break;
    default:
      break;
    }

    auto loop = scf::ForOp::create(
        rewriter, loc, cIdx(rewriter, loc, 0), tokens, cIdx(rewriter, loc, 1),
        ValueRange{cache},
        [&](OpBuilder &b, Location loc, Value t, ValueRange iterArgs) {
          Value current = iterArgs[0];
          Value slot = extractIndex(b, loc, op.getSlotMapping(), t);
          // The slot is sign-extended to index, so one unsigned compare
          // rejects both padding (negative) and out-of-range slots.
          Value inCache = arith::CmpIOp::create(
              b, loc, arith::CmpIPredicate::ult, slot, numSlots);
          auto ifOp = scf::IfOp::create(
              b, loc, inCache,
              [&](OpBuilder &tb, Location tloc) {
                Value page = arith::DivUIOp::create(tb, tloc, slot, pageSize);
                Value off = arith::RemUIOp::create(tb, tloc, slot, pageSize);
                Value updated = writeRow(tb, tloc, op, current, t, page, off,
                                         latentAmax, ropeAmax);
                scf::YieldOp::create(tb, tloc, updated);
              },
              [&](OpBuilder &eb, Location eloc) {
                scf::YieldOp::create(eb, eloc, current);
              });
          scf::YieldOp::create(b, loc, ifOp.getResult(0));
        });
    rewriter.replaceOp(op, loop.getResult(0));
    return success();
  }

private:
  /// kv_c [T, L] viewed as [T, L/128, 128] for the per-tile reduction.
  static Value splitTiles(OpBuilder &b, Location loc, Value kvC) {
    auto ty = cast<RankedTensorType>(kvC.getType());
    int64_t latent = ty.getDimSize(1);
    int64_t tiles = ShapedType::isDynamic(latent) ? ShapedType::kDynamic
                                                  : latent / kDsMlaTile;
    auto tiledTy = RankedTensorType::get({ty.getDimSize(0), tiles, kDsMlaTile},
                                         ty.getElementType());
    // expand_shape wants static sizes as attributes, so only a dynamic tile
    // count becomes a value.
    OpFoldResult numTiles =
        ShapedType::isDynamic(tiles)
            ? OpFoldResult(arith::DivUIOp::create(b, loc,
                                                  dimSize(b, loc, kvC, 1),
                                                  cIdx(b, loc, kDsMlaTile))
                               .getResult())
            : OpFoldResult(b.getIndexAttr(tiles));
    SmallVector<OpFoldResult> shape = {
        getAsOpFoldResult(dimSize(b, loc, kvC, 0)), numTiles,
        b.getIndexAttr(kDsMlaTile)};
    return tensor::ExpandShapeOp::create(
        b, loc, tiledTy, kvC, ArrayRef<ReassociationIndices>{{0}, {1, 2}},
        shape);
  }

  /// Stores token `t`'s row at cache[page, off] in the layout's format.
  static Value writeRow(OpBuilder &b, Location loc, CacheWriteOp op,
                        Value cache, Value t, Value page, Value off,
                        Value latentAmax, Value ropeAmax) {
    CacheLayoutAttr layout = op.getLayout();
    Value kvC = op.getKvC(), kPe = op.getKPe();
    Value latent = dimSize(b, loc, kvC, 1);
    Value rope = dimSize(b, loc, kPe, op.getKPe().getType().getRank() - 1);
    if (layout.getFormat() == RowFormat::fp8_ds_mla)
      return writeDsMlaRow(b, loc, op, cache, t, page, off, latent, rope,
                           latentAmax);

    // The other formats store one element per value: the latent part at
    // column 0 and the RoPE part at column L.
    Value c0 = cIdx(b, loc, 0);
    Value latentRow =
        extractRow(b, loc, kvC, tokenOffsets(b, loc, kvC, t, c0), latent);
    Value ropeRow =
        extractRow(b, loc, kPe, tokenOffsets(b, loc, kPe, t, c0), rope);
    auto storeParts = [&](Value latentScale, Value ropeScale) {
      cache = storeMapped(b, loc, latentRow, cache, page, off, c0,
                          [&](OpBuilder &nb, Location nloc, Value x) {
                            return quantise(nb, nloc, x, latentScale);
                          });
      return storeMapped(b, loc, ropeRow, cache, page, off, latent,
                         [&](OpBuilder &nb, Location nloc, Value x) {
                           return quantise(nb, nloc, x, ropeScale);
                         });
    };

    switch (layout.getFormat()) {
    case RowFormat::fp8_e4m3: {
      Value scale = cF32(b, loc, layout.getScale().getValueAsDouble());
      return storeParts(scale, scale);
    }
    case RowFormat::fp8_e4m3_token: {
      Value max = cF32(b, loc, kE4M3Max);
      Value s0 = arith::DivFOp::create(
          b, loc, tensor::ExtractOp::create(b, loc, latentAmax, t), max);
      Value s1 = arith::DivFOp::create(
          b, loc, tensor::ExtractOp::create(b, loc, ropeAmax, t), max);
      cache = storeParts(s0, s1);
      Value row = arith::AddIOp::create(b, loc, latent, rope);
      cache = storeF32LE(b, loc, cache, page, off, row, s0);
      return storeF32LE(b, loc, cache, page, off,
                        arith::AddIOp::create(b, loc, row, cIdx(b, loc, 4)),
                        s1);
    }
    default: {
      // bf16 / f16 / f32: a plain conversion to the cache element type.
      Type elt = op.getCache().getType().getElementType();
      auto convert = [&](OpBuilder &nb, Location nloc, Value x) {
        return convertFloat(nb, nloc, x, elt);
      };
      cache = storeMapped(b, loc, latentRow, cache, page, off, c0, convert);
      return storeMapped(b, loc, ropeRow, cache, page, off, latent, convert);
    }
    }
  }

  /// fp8_ds_mla: 128-wide e4m3 tiles, their f32 scales, then bf16 RoPE.
  static Value writeDsMlaRow(OpBuilder &b, Location loc, CacheWriteOp op,
                             Value cache, Value t, Value page, Value off,
                             Value latent, Value rope, Value tileAmax) {
    Value kvC = op.getKvC(), kPe = op.getKPe();
    Value c0 = cIdx(b, loc, 0), c1 = cIdx(b, loc, 1);
    Value tileWidth = cIdx(b, loc, kDsMlaTile);
    Value numTiles = arith::DivUIOp::create(b, loc, latent, tileWidth);
    auto tiles = scf::ForOp::create(
        b, loc, c0, numTiles, c1, ValueRange{cache},
        [&](OpBuilder &nb, Location nloc, Value k, ValueRange iterArgs) {
          Value scale = arith::DivFOp::create(
              nb, nloc,
              tensor::ExtractOp::create(nb, nloc, tileAmax, ValueRange{t, k}),
              cF32(nb, nloc, kE4M3Max));
          Value col = arith::MulIOp::create(nb, nloc, k, tileWidth);
          Value tile = extractRow(nb, nloc, kvC, {t, col}, tileWidth);
          Value c = storeMapped(nb, nloc, tile, iterArgs[0], page, off, col,
                                [&](OpBuilder &mb, Location mloc, Value x) {
                                  return quantise(mb, mloc, x, scale);
                                });
          Value scaleOff = arith::AddIOp::create(
              nb, nloc, latent,
              arith::MulIOp::create(nb, nloc, k, cIdx(nb, nloc, 4)));
          c = storeF32LE(nb, nloc, c, page, off, scaleOff, scale);
          scf::YieldOp::create(nb, nloc, c);
        });

    // Each RoPE value becomes two bytes, so this is a loop of scalar inserts
    // rather than an element-wise map onto the i8 row.
    Value ropeBase = arith::AddIOp::create(
        b, loc, latent,
        arith::MulIOp::create(b, loc, numTiles, cIdx(b, loc, 4)));
    auto ropeLoop = scf::ForOp::create(
        b, loc, c0, rope, c1, tiles.getResults(),
        [&](OpBuilder &nb, Location nloc, Value r, ValueRange iterArgs) {
          Value x = tensor::ExtractOp::create(
              nb, nloc, kPe, tokenOffsets(nb, nloc, kPe, t, r));
          Value bits = encodeBF16Bits(nb, nloc, toF32(nb, nloc, x));
          Value lo = arith::AddIOp::create(
              nb, nloc, ropeBase,
              arith::MulIOp::create(nb, nloc, r, cIdx(nb, nloc, 2)));
          Value hi = arith::AddIOp::create(nb, nloc, lo, cIdx(nb, nloc, 1));
          Value loByte =
              arith::TruncIOp::create(nb, nloc, nb.getI8Type(), bits);
          Value hiByte = arith::TruncIOp::create(
              nb, nloc, nb.getI8Type(),
              arith::ShRUIOp::create(nb, nloc, bits, cI32(nb, nloc, 8)));
          Value c = tensor::InsertOp::create(nb, nloc, loByte, iterArgs[0],
                                             ValueRange{page, off, lo});
          c = tensor::InsertOp::create(nb, nloc, hiByte, c,
                                       ValueRange{page, off, hi});
          scf::YieldOp::create(nb, nloc, c);
        });
    return ropeLoop.getResult(0);
  }
};

/// gather_cache -> scf.for over requests and their workspace rows; each row
/// is a linalg.generic over the workspace row slice that dequantises the
/// cache element at its index.
struct GatherCacheLowering : public OpRewritePattern<GatherCacheOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GatherCacheOp op,
                                PatternRewriter &rewriter) const override {
    FailureOr<int64_t> latentDim = getLatentDim(op);
    if (failed(latentDim))
      return failure();

    Location loc = op.getLoc();
    Value cache = op.getCache(), workspace = op.getWorkspace();
    CacheLayoutAttr layout = op.getLayout();
    Type elt = getElementTypeOrSelf(workspace.getType());
    Value c0 = cIdx(rewriter, loc, 0), c1 = cIdx(rewriter, loc, 1);
    Value pageSize = dimSize(rewriter, loc, cache, 1);
    Value wsRows = dimSize(rewriter, loc, workspace, 0);
    Value rowDim = dimSize(rewriter, loc, workspace, 1);
    Value batch = dimSize(rewriter, loc, op.getStarts(), 0);

    auto requests = scf::ForOp::create(
        rewriter, loc, c0, batch, c1, ValueRange{workspace},
        [&](OpBuilder &b, Location loc, Value req, ValueRange reqArgs) {
          Value first = extractIndex(b, loc, op.getCuRows(), req);
          Value next = arith::AddIOp::create(b, loc, req, c1);
          // Never write past the workspace, whatever cu_rows says.
          Value last = arith::MinSIOp::create(
              b, loc, extractIndex(b, loc, op.getCuRows(), next), wsRows);
          Value start = extractIndex(b, loc, op.getStarts(), req);
          auto rows = scf::ForOp::create(
              b, loc, first, last, c1, reqArgs,
              [&](OpBuilder &rb, Location rloc, Value r, ValueRange rowArgs) {
                Value pos = arith::AddIOp::create(
                    rb, rloc, start, arith::SubIOp::create(rb, rloc, r, first));
                Value logicalPage =
                    arith::DivUIOp::create(rb, rloc, pos, pageSize);
                Value page = extractIndex(rb, rloc, op.getBlockTable(),
                                          {req, logicalPage});
                Value slot = arith::RemUIOp::create(rb, rloc, pos, pageSize);
                SmallVector<Value> offs = {r, c0};
                Value dst = extractRow(rb, rloc, rowArgs[0], offs, rowDim);
                auto row = linalg::GenericOp::create(
                    rb, rloc, dst.getType(), ValueRange{}, ValueRange{dst},
                    ArrayRef<AffineMap>{rb.getMultiDimIdentityMap(1)},
                    ArrayRef<utils::IteratorType>{
                        utils::IteratorType::parallel},
                    [&](OpBuilder &gb, Location gloc, ValueRange) {
                      Value d = linalg::IndexOp::create(gb, gloc, 0);
                      Value v = loadCacheElement(gb, gloc, cache, layout,
                                                 *latentDim, page, slot, d);
                      linalg::YieldOp::create(gb, gloc,
                                              fromF32(gb, gloc, v, elt));
                    });
                scf::YieldOp::create(rb, rloc,
                                     insertRow(rb, rloc, row.getResult(0),
                                               rowArgs[0], offs, rowDim));
              });
          scf::YieldOp::create(b, loc, rows.getResults());
        });
    rewriter.replaceOp(op, requests.getResults());
    return success();
  }

private:
  /// The latent width L that loadCacheElement needs to split a row into its
  /// latent and RoPE parts (the op's latent_dim, which the verifier requires
  /// for fp8_e4m3_token); 0 for the formats that do not split rows. No
  /// other pattern can lower the op, so a failure says why instead of
  /// leaving only "failed to legalize".
  static FailureOr<int64_t> getLatentDim(GatherCacheOp op) {
    CacheLayoutAttr layout = op.getLayout();
    int64_t rowDim = op.getWorkspace().getType().getDimSize(1);
    int64_t stored = op.getCache().getType().getDimSize(2);
    if (IntegerAttr latent = op.getLatentDimAttr())
      return latent.getInt();
    switch (layout.getFormat()) {
    case RowFormat::fp8_ds_mla:
      if (ShapedType::isDynamic(rowDim) || ShapedType::isDynamic(stored)) {
        op.emitOpError("the CPU gather_cache lowering needs static workspace "
                       "and cache row widths for fp8_ds_mla (they determine "
                       "L)");
        return failure();
      }
      return inferLatentDim(layout, rowDim, stored);
    default:
      return 0;
    }
  }
};

} // namespace

void mla::populateMLACacheToLinalgPatterns(RewritePatternSet &patterns) {
  patterns.add<CacheWriteLowering, GatherCacheLowering>(patterns.getContext());
}
