//===- MLAOps.cpp - mla operations ----------------------------------------===//
//
// Verifiers: every relation between operand shapes, element types and
// attributes, reported with the operand names and the expected values so a
// user can fix the IR from the message alone. Dynamic dimensions are only
// checked once they are known.
//
//===----------------------------------------------------------------------===//

#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mla/Contract/DcpShard.h"
#include "mla/Contract/KernelABI.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"
#include <cmath>

using namespace mlir;
using namespace mla;

static constexpr int64_t kDyn = ShapedType::kDynamic;

static bool known(int64_t d) { return !ShapedType::isDynamic(d); }

/// a - b, or dynamic if either is unknown.
static int64_t sub(int64_t a, int64_t b) {
  return known(a) && known(b) ? a - b : kDyn;
}
static int64_t add(int64_t a, int64_t b) {
  return known(a) && known(b) ? a + b : kDyn;
}

namespace {
/// Reports shape relations of one op. Each check emits at most one error and
/// returns failure so verifiers can chain them with `failed(...)`.
struct Checker {
  Operation *op;

  /// `name` must be a ranked tensor of `rank` (`shape` documents the dims).
  LogicalResult rank(StringRef name, Value v, int64_t rank,
                     StringRef shape) const {
    auto ty = cast<RankedTensorType>(v.getType());
    if (ty.getRank() == rank)
      return success();
    return op->emitOpError() << name << " must have rank " << rank << " ("
                             << shape << "), got " << ty;
  }

  /// "<what> <actual> must equal <expected-what> <expected>".
  LogicalResult eq(const Twine &what, int64_t actual, const Twine &expWhat,
                   int64_t expected) const {
    if (!known(actual) || !known(expected) || actual == expected)
      return success();
    return op->emitOpError() << what << " " << actual << " must equal "
                             << expWhat << " " << expected;
  }

  LogicalResult positive(const Twine &what, int64_t v) const {
    if (!known(v) || v > 0)
      return success();
    return op->emitOpError() << what << " " << v << " must be positive";
  }

  /// Dimension `d` of `name` is a head count or a feature width (`sym`):
  /// zero of them leaves nothing to attend over or to produce, and the
  /// lowerings would build zero-length vectors.
  LogicalResult width(StringRef name, Value v, unsigned d,
                      StringRef sym) const {
    int64_t n = cast<RankedTensorType>(v.getType()).getDimSize(d);
    if (!known(n) || n > 0)
      return success();
    return op->emitOpError() << name << " dim " << d << " (" << sym
                             << ") is 0; head counts and feature widths "
                                "must be at least 1";
  }

  LogicalResult sameElementType(StringRef name, Value v, StringRef refName,
                                Value ref) const {
    Type a = getElementTypeOrSelf(v.getType());
    Type b = getElementTypeOrSelf(ref.getType());
    if (a == b)
      return success();
    return op->emitOpError() << name << " element type " << a << " must match "
                             << refName << " element type " << b;
  }

  LogicalResult scale(FloatAttr attr) const {
    double s = attr.getValueAsDouble();
    if (s > 0.0 && std::isfinite(s))
      return success();
    return op->emitOpError()
           << "softmax scale " << s << " must be positive and finite";
  }

  /// Checks the paged cache against its layout. `rowDim` is the logical row
  /// width D = L + R, `rowDesc` names where it comes from; `latentDim` is L
  /// when known from another operand (dynamic otherwise).
  LogicalResult cache(Value cache, CacheLayoutAttr layout, int64_t rowDim,
                      const Twine &rowDesc, int64_t latentDim) const;

  /// seq_lens [B] and block_table [B, maxPages] against the batch size and,
  /// when seq_lens are constants, against the table's capacity. With a DCP
  /// `shard` the table holds the rank's tokens of the global seq_lens.
  LogicalResult pagedTables(Value blockTable, Value seqLens, int64_t batch,
                            StringRef batchDesc, int64_t pageSize,
                            DcpShardAttr shard = {}) const;
};
} // namespace

LogicalResult Checker::cache(Value cache, CacheLayoutAttr layout,
                             int64_t rowDim, const Twine &rowDesc,
                             int64_t latentDim) const {
  if (failed(rank("cache", cache, 3, "[pages, page_size, row]")))
    return failure();
  auto ty = cast<RankedTensorType>(cache.getType());
  Type expectedElt = layout.getCacheElementType(op->getContext());
  if (ty.getElementType() != expectedElt)
    return op->emitOpError() << "cache element type " << ty.getElementType()
                             << " does not match layout format "
                             << stringifyRowFormat(layout.getFormat())
                             << " (expects " << expectedElt << ")";
  int64_t pageDim = ty.getDimSize(1);
  if (known(pageDim) && (pageDim <= 0 || pageDim % 16 != 0))
    return op->emitOpError()
           << "page size " << pageDim << " is not a positive multiple of 16";
  if (layout.getPageSize() &&
      failed(eq("cache page size", pageDim, "the layout page_size",
                *layout.getPageSize())))
    return failure();

  int64_t row = ty.getDimSize(2);
  if (!known(rowDim) || !known(row))
    return success();
  switch (layout.getFormat()) {
  case RowFormat::fp8_e4m3_token:
    return eq(rowDesc + " + 8 bytes of scales =", rowDim + 8,
              "the cache row width", row);
  case RowFormat::fp8_ds_mla: {
    int64_t lat = latentDim;
    if (!known(lat)) {
      // row = 2D - L + L/32  =>  L = 32 (2D - row) / 31.
      int64_t num = 32 * (2 * rowDim - row);
      if (num <= 0 || num % 31 != 0)
        return op->emitOpError()
               << "cache row width " << row << " is not an fp8_ds_mla row for "
               << rowDesc << " " << rowDim;
      lat = num / 31;
    }
    if (lat % 128 != 0 || lat >= rowDim)
      return op->emitOpError() << "format fp8_ds_mla needs a latent width "
                                  "that is a multiple of 128 and below "
                               << rowDim << ", got " << lat;
    return eq("the fp8_ds_mla row width for L = " + Twine(lat) +
                  ", R = " + Twine(rowDim - lat) + " is",
              layout.getRowWidth(lat, rowDim - lat), "the cache row width",
              row);
  }
  default:
    return eq(rowDesc, rowDim, "the cache row width", row);
  }
}

LogicalResult Checker::pagedTables(Value blockTable, Value seqLens,
                                   int64_t batch, StringRef batchDesc,
                                   int64_t pageSize, DcpShardAttr shard) const {
  if (failed(rank("block_table", blockTable, 2, "[B, maxPages]")) ||
      failed(rank("seq_lens", seqLens, 1, "[B]")))
    return failure();
  auto bt = cast<RankedTensorType>(blockTable.getType());
  auto sl = cast<RankedTensorType>(seqLens.getType());
  if (failed(eq("block_table dim 0", bt.getDimSize(0), batchDesc, batch)) ||
      failed(eq("seq_lens dim 0", sl.getDimSize(0), batchDesc, batch)))
    return failure();
  DenseIntElementsAttr lens;
  if (!matchPattern(seqLens, m_Constant(&lens)))
    return success();
  int64_t capacity = known(bt.getDimSize(1)) && known(pageSize)
                         ? bt.getDimSize(1) * pageSize
                         : kDyn;
  for (auto [b, len] : llvm::enumerate(lens.getValues<APInt>())) {
    int64_t n = len.getSExtValue();
    if (n < 0)
      return op->emitOpError()
             << "seq_lens[" << b << "] = " << n << " must not be negative";
    int64_t rows =
        shard ? dcp::ownedTokens(n, shard.getWorldSize(), shard.getRank(),
                                 shard.getInterleave())
              : n;
    if (known(capacity) && rows > capacity) {
      InFlightDiagnostic diag = op->emitOpError()
                                << "seq_lens[" << b << "] = " << n;
      if (shard)
        diag << " puts " << rows << " tokens on DCP rank " << shard.getRank()
             << " of " << shard.getWorldSize() << ", which";
      return diag << " exceeds the block_table capacity " << capacity << " ("
                  << bt.getDimSize(1) << " pages of " << pageSize << ")";
    }
  }
  return success();
}

static int64_t dim(Value v, unsigned i) {
  return cast<RankedTensorType>(v.getType()).getDimSize(i);
}

/// k_pe is [T, R] or [T, 1, R]; returns R, or failure after an error.
static FailureOr<int64_t> ropeWidth(const Checker &c, Value kPe,
                                    int64_t tokens) {
  auto ty = cast<RankedTensorType>(kPe.getType());
  if (ty.getRank() != 2 && ty.getRank() != 3)
    return c.op->emitOpError()
           << "k_pe must have rank 2 ([T, R]) or 3 ([T, 1, R]), got " << ty;
  if (ty.getRank() == 3 && failed(c.eq("k_pe dim 1", ty.getDimSize(1),
                                       "the single KV head count", 1)))
    return failure();
  if (failed(c.eq("k_pe dim 0", ty.getDimSize(0), "the token count", tokens)))
    return failure();
  return ty.getDimSize(ty.getRank() - 1);
}

//===----------------------------------------------------------------------===//
// Cache ops
//===----------------------------------------------------------------------===//

LogicalResult CacheWriteOp::verify() {
  Checker c{*this};
  if (failed(c.rank("kv_c", getKvC(), 2, "[T, L]")) ||
      failed(c.rank("slot_mapping", getSlotMapping(), 1, "[T]")))
    return failure();
  int64_t tokens = dim(getKvC(), 0), latent = dim(getKvC(), 1);
  FailureOr<int64_t> rope = ropeWidth(c, getKPe(), tokens);
  if (failed(rope) || failed(c.width("kv_c", getKvC(), 1, "L")) ||
      failed(
          c.width("k_pe", getKPe(), getKPe().getType().getRank() - 1, "R")) ||
      failed(c.eq("slot_mapping dim 0", dim(getSlotMapping(), 0),
                  "the token count", tokens)) ||
      failed(c.sameElementType("k_pe", getKPe(), "kv_c", getKvC())))
    return failure();
  return c.cache(getCache(), getLayout(), add(latent, *rope),
                 "kv_c width + k_pe width", latent);
}

LogicalResult GatherCacheOp::verify() {
  Checker c{*this};
  if (failed(c.rank("workspace", getWorkspace(), 2, "[W, L+R]")) ||
      failed(c.rank("block_table", getBlockTable(), 2, "[B, maxPages]")) ||
      failed(c.rank("starts", getStarts(), 1, "[B]")) ||
      failed(c.rank("cu_rows", getCuRows(), 1, "[B+1]")))
    return failure();
  int64_t batch = dim(getBlockTable(), 0);
  if (failed(c.width("workspace", getWorkspace(), 1, "L+R")) ||
      failed(c.eq("starts dim 0", dim(getStarts(), 0), "block_table dim 0",
                  batch)) ||
      failed(c.eq("cu_rows dim 0", dim(getCuRows(), 0),
                  "block_table dim 0 + 1 =", add(batch, 1))))
    return failure();
  int64_t rowDim = dim(getWorkspace(), 1), latent = kDyn;
  if (IntegerAttr attr = getLatentDimAttr()) {
    latent = attr.getInt();
    if (latent <= 0 || (known(rowDim) && latent >= rowDim))
      return emitOpError() << "latent_dim " << latent
                           << " must be positive and below the workspace row "
                              "width "
                           << rowDim;
  } else if (getLayout().getFormat() == RowFormat::fp8_e4m3_token) {
    return emitOpError() << "format fp8_e4m3_token needs 'latent_dim' (L): "
                            "an element's scale depends on whether it is "
                            "latent or RoPE";
  }
  return c.cache(getCache(), getLayout(), rowDim, "workspace row width",
                 latent);
}

//===----------------------------------------------------------------------===//
// Projections
//===----------------------------------------------------------------------===//

LogicalResult SplitKvBProjOp::verify() {
  Checker c{*this};
  if (failed(c.rank("kv_b_proj", getKvBProj(), 2, "[N*(P+V), L]")) ||
      failed(c.rank("w_uk_t", getWUkT(), 3, "[N, P, L]")) ||
      failed(c.rank("w_uv", getWUv(), 3, "[N, L, V]")) ||
      failed(
          c.sameElementType("w_uk_t", getWUkT(), "kv_b_proj", getKvBProj())) ||
      failed(c.sameElementType("w_uv", getWUv(), "kv_b_proj", getKvBProj())))
    return failure();
  if (failed(c.width("w_uk_t", getWUkT(), 0, "N")) ||
      failed(c.width("w_uk_t", getWUkT(), 1, "P")) ||
      failed(c.width("kv_b_proj", getKvBProj(), 1, "L")) ||
      failed(c.width("w_uv", getWUv(), 2, "V")))
    return failure();
  int64_t heads = dim(getWUkT(), 0), nope = dim(getWUkT(), 1);
  int64_t latent = dim(getKvBProj(), 1), value = dim(getWUv(), 2);
  int64_t rows = known(heads) && known(nope) && known(value)
                     ? heads * (nope + value)
                     : kDyn;
  if (failed(c.eq("w_uv dim 0", dim(getWUv(), 0), "w_uk_t dim 0 (N)", heads)) ||
      failed(c.eq("w_uk_t dim 2", dim(getWUkT(), 2), "kv_b_proj dim 1 (L)",
                  latent)) ||
      failed(
          c.eq("w_uv dim 1", dim(getWUv(), 1), "kv_b_proj dim 1 (L)", latent)))
    return failure();
  return c.eq("kv_b_proj dim 0", dim(getKvBProj(), 0), "N*(P+V) =", rows);
}

LogicalResult AbsorbQOp::verify() {
  Checker c{*this};
  if (failed(c.rank("q", getQ(), 3, "[T, N, P+R]")) ||
      failed(c.rank("w_uk_t", getWUkT(), 3, "[N, P, L]")) ||
      failed(c.rank("result", getResult(), 3, "[T, N, L+R]")) ||
      failed(c.sameElementType("result", getResult(), "q", getQ())) ||
      failed(c.sameElementType("w_uk_t", getWUkT(), "q", getQ())))
    return failure();
  if (failed(c.width("q", getQ(), 1, "N")) ||
      failed(c.width("w_uk_t", getWUkT(), 1, "P")) ||
      failed(c.width("w_uk_t", getWUkT(), 2, "L")))
    return failure();
  int64_t heads = dim(getQ(), 1), nope = dim(getWUkT(), 1);
  int64_t latent = dim(getWUkT(), 2);
  int64_t rope = sub(dim(getQ(), 2), nope);
  if (failed(c.eq("w_uk_t dim 0", dim(getWUkT(), 0), "q dim 1 (N)", heads)) ||
      failed(c.positive("q last dim - P (the RoPE width R)", rope)) ||
      failed(c.eq("result dim 0", dim(getResult(), 0), "q dim 0 (T)",
                  dim(getQ(), 0))) ||
      failed(c.eq("result dim 1", dim(getResult(), 1), "q dim 1 (N)", heads)))
    return failure();
  return c.eq("result dim 2", dim(getResult(), 2),
              "L + R =", add(latent, rope));
}

LogicalResult UpProjOutOp::verify() {
  Checker c{*this};
  if (failed(c.rank("o", getO(), 3, "[T, N, L]")) ||
      failed(c.rank("w_uv", getWUv(), 3, "[N, L, V]")) ||
      failed(c.rank("result", getResult(), 2, "[T, N*V]")) ||
      failed(c.sameElementType("result", getResult(), "o", getO())) ||
      failed(c.sameElementType("w_uv", getWUv(), "o", getO())))
    return failure();
  if (failed(c.width("o", getO(), 1, "N")) ||
      failed(c.width("o", getO(), 2, "L")) ||
      failed(c.width("w_uv", getWUv(), 2, "V")))
    return failure();
  int64_t heads = dim(getO(), 1), value = dim(getWUv(), 2);
  int64_t cols = known(heads) && known(value) ? heads * value : kDyn;
  if (failed(c.eq("w_uv dim 0", dim(getWUv(), 0), "o dim 1 (N)", heads)) ||
      failed(c.eq("w_uv dim 1", dim(getWUv(), 1), "o dim 2 (L)",
                  dim(getO(), 2))) ||
      failed(c.eq("result dim 0", dim(getResult(), 0), "o dim 0 (T)",
                  dim(getO(), 0))))
    return failure();
  return c.eq("result dim 1", dim(getResult(), 1), "N*V =", cols);
}

/// kv_b_proj [N*(P+V), L] against heads N, widths P and V and latent L.
static LogicalResult checkKvBProj(const Checker &c, Value w, int64_t heads,
                                  int64_t nope, int64_t value, int64_t latent,
                                  StringRef latentDesc) {
  if (failed(c.rank("kv_b_proj", w, 2, "[N*(P+V), L]")))
    return failure();
  int64_t rows = known(heads) && known(nope) && known(value)
                     ? heads * (nope + value)
                     : kDyn;
  if (failed(c.eq("kv_b_proj dim 1", dim(w, 1), latentDesc, latent)))
    return failure();
  return c.eq("kv_b_proj dim 0", dim(w, 0), "N*(P+V) =", rows);
}

LogicalResult UpProjKvOp::verify() {
  Checker c{*this};
  if (failed(c.rank("latent", getLatent(), 2, "[S, L]")) ||
      failed(c.rank("k_nope", getKNope(), 3, "[S, N, P]")) ||
      failed(c.rank("v", getV(), 3, "[S, N, V]")) ||
      failed(c.sameElementType("kv_b_proj", getKvBProj(), "latent",
                               getLatent())) ||
      failed(c.sameElementType("k_nope", getKNope(), "latent", getLatent())) ||
      failed(c.sameElementType("v", getV(), "latent", getLatent())))
    return failure();
  if (failed(c.width("latent", getLatent(), 1, "L")) ||
      failed(c.width("k_nope", getKNope(), 1, "N")) ||
      failed(c.width("k_nope", getKNope(), 2, "P")) ||
      failed(c.width("v", getV(), 2, "V")))
    return failure();
  int64_t rows = dim(getLatent(), 0), heads = dim(getKNope(), 1);
  if (failed(
          c.eq("k_nope dim 0", dim(getKNope(), 0), "latent dim 0 (S)", rows)) ||
      failed(c.eq("v dim 0", dim(getV(), 0), "latent dim 0 (S)", rows)) ||
      failed(c.eq("v dim 1", dim(getV(), 1), "k_nope dim 1 (N)", heads)))
    return failure();
  return checkKvBProj(c, getKvBProj(), heads, dim(getKNope(), 2),
                      dim(getV(), 2), dim(getLatent(), 1), "latent dim 1 (L)");
}

//===----------------------------------------------------------------------===//
// Decode
//===----------------------------------------------------------------------===//

/// Varlen decode: query_start_loc [B+1] beside q [T, N, L+R]; a constant
/// one starts at 0, never decreases and gives every request at most
/// max_query_len tokens and no more than its constant seq_len.
static LogicalResult verifyQueryStartLoc(const Checker &c, Value qsl,
                                         Value blockTable, Value seqLens,
                                         IntegerAttr maxQueryLen) {
  if (!qsl) {
    if (maxQueryLen)
      return c.op->emitOpError("max_query_len needs query_start_loc");
    return success();
  }
  if (failed(c.rank("query_start_loc", qsl, 1, "[B+1]")))
    return failure();
  int64_t batch = dim(blockTable, 0);
  if (known(batch) && failed(c.eq("query_start_loc dim 0", dim(qsl, 0),
                                  "block_table dim 0 (B) + 1 =", batch + 1)))
    return failure();
  int64_t maxRows = gpu::kMaxVarlenQueryRows;
  if (maxQueryLen) {
    if (maxQueryLen.getInt() < 1 || maxQueryLen.getInt() > maxRows)
      return c.op->emitOpError() << "max_query_len " << maxQueryLen.getInt()
                                 << " must be in [1, " << maxRows << "]";
    maxRows = maxQueryLen.getInt();
  }
  DenseIntElementsAttr starts, lens;
  if (!matchPattern(qsl, m_Constant(&starts)))
    return success();
  SmallVector<int64_t> loc;
  for (const APInt &v : starts.getValues<APInt>())
    loc.push_back(v.getSExtValue());
  SmallVector<int64_t> lenValues;
  if (matchPattern(seqLens, m_Constant(&lens)))
    for (const APInt &v : lens.getValues<APInt>())
      lenValues.push_back(v.getSExtValue());
  if (!loc.empty() && loc.front() != 0)
    return c.op->emitOpError()
           << "query_start_loc must start at 0, got " << loc.front();
  for (size_t b = 0; b + 1 < loc.size(); ++b) {
    int64_t rows = loc[b + 1] - loc[b];
    if (rows < 0)
      return c.op->emitOpError()
             << "query_start_loc decreases at request " << b;
    if (rows > maxRows)
      return c.op->emitOpError()
             << "request " << b << " has " << rows
             << " query tokens, more than max_query_len " << maxRows;
    if (b < lenValues.size() && rows > lenValues[b])
      return c.op->emitOpError()
             << "request " << b << " has " << rows
             << " query tokens but seq_lens[" << b << "] = " << lenValues[b]
             << " (seq_lens counts the query tokens)";
  }
  return success();
}

/// Shared by decode and decode_partial: q, cache, tables and attributes.
static LogicalResult verifyDecodeInputs(const Checker &c, Value q, Value cache,
                                        Value blockTable, Value seqLens,
                                        Value qsl, IntegerAttr maxQueryLen,
                                        CacheLayoutAttr layout, FloatAttr scale,
                                        bool causal, int64_t latent,
                                        DcpShardAttr shard = {}) {
  bool varlen = static_cast<bool>(qsl);
  if (failed(varlen ? c.rank("q", q, 3, "[T, N, L+R]")
                    : c.rank("q", q, 4, "[B, Sq, N, L+R]")) ||
      failed(c.scale(scale)) || failed(c.width("q", q, varlen ? 1 : 2, "N")))
    return failure();
  int64_t row = dim(q, varlen ? 2 : 3);
  if (failed(
          c.positive("q last dim - L (the RoPE width R)", sub(row, latent))) ||
      failed(c.cache(cache, layout, row, "q last dim", latent)))
    return failure();
  if (varlen) {
    if (failed(c.rank("block_table", blockTable, 2, "[B, maxPages]")) ||
        failed(c.pagedTables(blockTable, seqLens, dim(blockTable, 0),
                             "block_table dim 0 (B)", dim(cache, 1))))
      return failure();
    return verifyQueryStartLoc(c, qsl, blockTable, seqLens, maxQueryLen);
  }
  if (failed(verifyQueryStartLoc(c, qsl, blockTable, seqLens, maxQueryLen)))
    return failure();
  if (failed(c.pagedTables(blockTable, seqLens, dim(q, 0), "q dim 0 (B)",
                           dim(cache, 1), shard)))
    return failure();
  DenseIntElementsAttr lens;
  int64_t sq = dim(q, 1);
  if (!causal || !known(sq) || !matchPattern(seqLens, m_Constant(&lens)))
    return success();
  for (auto [b, len] : llvm::enumerate(lens.getValues<APInt>()))
    if (len.getSExtValue() > 0 && len.getSExtValue() < sq)
      return c.op->emitOpError()
             << "causal decode needs seq_lens[" << b
             << "] = " << len.getSExtValue() << " >= Sq " << sq
             << " (the query rows are the last Sq cache rows)";
  return success();
}

/// The results of a varlen decode_partial or decode: `out`-like
/// [(S,) T, N, L] and `lse`-like [(S,) T, N], `lead` leading dims first.
static LogicalResult verifyVarlenResults(const Checker &c, Value q, Value out,
                                         Value lse, unsigned lead) {
  for (unsigned i = 0; i < 2; ++i)
    if (failed(c.eq(Twine("out dim ") + Twine(lead + i), dim(out, lead + i),
                    "q dim " + Twine(i), dim(q, i))) ||
        failed(c.eq(Twine("lse dim ") + Twine(lead + i), dim(lse, lead + i),
                    "q dim " + Twine(i), dim(q, i))))
      return failure();
  return success();
}

template <typename OpTy> static DecodeQueryDims queryDimsOf(OpTy op) {
  Value q = op.getQ();
  if (!op.isVarlen())
    return {dim(q, 0), dim(q, 1), dim(q, 2), dim(q, 3)};
  IntegerAttr maxLen = op.getMaxQueryLenAttr();
  return {dim(op.getBlockTable(), 0),
          maxLen ? maxLen.getInt() : gpu::kMaxVarlenQueryRows, dim(q, 1),
          dim(q, 2)};
}

DecodeQueryDims DecodeOp::getQueryDims() { return queryDimsOf(*this); }
DecodeQueryDims DecodePartialOp::getQueryDims() { return queryDimsOf(*this); }

LogicalResult DecodeOp::verify() {
  Checker c{*this};
  bool varlen = isVarlen();
  if (failed(varlen ? c.rank("out", getOut(), 3, "[T, N, L]")
                    : c.rank("out", getOut(), 4, "[B, Sq, N, L]")) ||
      failed(varlen ? c.rank("lse", getLse(), 2, "[T, N]")
                    : c.rank("lse", getLse(), 3, "[B, N, Sq]")) ||
      failed(c.sameElementType("out", getOut(), "q", getQ())))
    return failure();
  // I64Attr getters return uint64_t; read the value signed so -1 is caught.
  if (IntegerAttr splits = getNumSplitsAttr(); splits && splits.getInt() <= 0)
    return emitOpError() << "num_splits " << splits.getInt()
                         << " must be positive";
  unsigned outRank = varlen ? 3 : 4;
  if (failed(c.width("out", getOut(), outRank - 1, "L")))
    return failure();
  int64_t latent = dim(getOut(), outRank - 1);
  if (failed(verifyDecodeInputs(c, getQ(), getCache(), getBlockTable(),
                                getSeqLens(), getQueryStartLoc(),
                                getMaxQueryLenAttr(), getLayout(),
                                getSoftmaxScaleAttr(), getCausal(), latent)) ||
      failed(verifySplitPlan()))
    return failure();
  if (varlen)
    return verifyVarlenResults(c, getQ(), getOut(), getLse(), 0);
  for (unsigned i = 0; i < 3; ++i)
    if (failed(c.eq("out dim " + Twine(i), dim(getOut(), i),
                    "q dim " + Twine(i), dim(getQ(), i))))
      return failure();
  if (failed(
          c.eq("lse dim 0", dim(getLse(), 0), "q dim 0 (B)", dim(getQ(), 0))) ||
      failed(
          c.eq("lse dim 1", dim(getLse(), 1), "q dim 2 (N)", dim(getQ(), 2))))
    return failure();
  return c.eq("lse dim 2", dim(getLse(), 2), "q dim 1 (Sq)", dim(getQ(), 1));
}

/// A static plan's bounds are [B, num_splits + 1] rows that start at 0,
/// never decrease and end at the request's (constant) length.
LogicalResult DecodeOp::verifySplitPlan() {
  SplitPlanAttr plan = getSplitPlanAttr();
  if (!plan || !plan.getBounds())
    return success();
  IntegerAttr splitsAttr = getNumSplitsAttr();
  if (!splitsAttr)
    return emitOpError("a split_plan with bounds needs num_splits");
  int64_t splits = splitsAttr.getInt(), batch = getQueryDims().batch;
  ArrayRef<int32_t> bounds = plan.getBounds().asArrayRef();
  if (!known(batch) || (int64_t)bounds.size() != batch * (splits + 1))
    return emitOpError() << "split_plan bounds hold " << bounds.size()
                         << " values, expected B * (num_splits + 1) = "
                         << (known(batch) ? Twine(batch * (splits + 1))
                                          : Twine("? (dynamic B)"));
  DenseIntElementsAttr lens;
  bool constLens = matchPattern(getSeqLens(), m_Constant(&lens));
  for (int64_t b = 0; b < batch; ++b) {
    ArrayRef<int32_t> row = bounds.slice(b * (splits + 1), splits + 1);
    if (row.front() != 0)
      return emitOpError() << "split_plan bounds of request " << b
                           << " must start at 0, got " << row.front();
    for (int64_t s = 0; s < splits; ++s)
      if (row[s + 1] < row[s])
        return emitOpError() << "split_plan bounds of request " << b
                             << " decrease at piece " << s;
    if (constLens) {
      int64_t len = (*(lens.getValues<APInt>().begin() + b)).getSExtValue();
      if (row.back() != len)
        return emitOpError()
               << "split_plan bounds of request " << b << " end at "
               << row.back() << ", not at seq_lens[" << b << "] = " << len;
    }
  }
  return success();
}

LogicalResult DecodePartialOp::verify() {
  Checker c{*this};
  bool varlen = isVarlen();
  if (failed(varlen ? c.rank("partial_out", getPartialOut(), 4,
                             "[num_splits, T, N, L]")
                    : c.rank("partial_out", getPartialOut(), 5,
                             "[num_splits, B, Sq, N, L]")) ||
      failed(varlen ? c.rank("partial_lse", getPartialLse(), 3,
                             "[num_splits, T, N]")
                    : c.rank("partial_lse", getPartialLse(), 4,
                             "[num_splits, B, N, Sq]")))
    return failure();
  int64_t splits = getNumSplitsAttr().getInt();
  if (splits <= 0)
    return emitOpError() << "num_splits " << splits << " must be positive";
  unsigned outRank = varlen ? 4 : 5;
  if (failed(c.width("partial_out", getPartialOut(), outRank - 1, "L")))
    return failure();
  int64_t latent = dim(getPartialOut(), outRank - 1);
  // Decode context parallelism shards uniform batches only (mla-dcp leaves
  // varlen decodes whole).
  if (varlen && getShardAttr())
    return emitOpError() << "a varlen decode_partial (query_start_loc) takes "
                            "no dcp shard";
  if (failed(verifyDecodeInputs(
          c, getQ(), getCache(), getBlockTable(), getSeqLens(),
          getQueryStartLoc(), getMaxQueryLenAttr(), getLayout(),
          getSoftmaxScaleAttr(), getCausal(), latent, getShardAttr())))
    return failure();
  int64_t batch = getQueryDims().batch;
  if (Value bounds = getSplitBounds()) {
    if (failed(c.rank("split_bounds", bounds, 2, "[B, num_splits + 1]")) ||
        failed(c.eq("split_bounds dim 0", dim(bounds, 0),
                    varlen ? "block_table dim 0 (B)" : "q dim 0 (B)", batch)) ||
        failed(c.eq("split_bounds dim 1", dim(bounds, 1),
                    "num_splits + 1 =", splits + 1)))
      return failure();
  }
  if (failed(c.eq("partial_out dim 0", dim(getPartialOut(), 0), "num_splits",
                  splits)) ||
      failed(c.eq("partial_lse dim 0", dim(getPartialLse(), 0), "num_splits",
                  splits)))
    return failure();
  if (varlen)
    return verifyVarlenResults(c, getQ(), getPartialOut(), getPartialLse(), 1);
  for (unsigned i = 0; i < 3; ++i)
    if (failed(c.eq("partial_out dim " + Twine(i + 1),
                    dim(getPartialOut(), i + 1), "q dim " + Twine(i),
                    dim(getQ(), i))))
      return failure();
  if (failed(c.eq("partial_lse dim 1", dim(getPartialLse(), 1), "q dim 0 (B)",
                  dim(getQ(), 0))) ||
      failed(c.eq("partial_lse dim 2", dim(getPartialLse(), 2), "q dim 2 (N)",
                  dim(getQ(), 2))))
    return failure();
  return c.eq("partial_lse dim 3", dim(getPartialLse(), 3), "q dim 1 (Sq)",
              dim(getQ(), 1));
}

LogicalResult PlanSplitsOp::verify() {
  Checker c{*this};
  if (failed(c.rank("seq_lens", getSeqLens(), 1, "[B]")) ||
      failed(c.rank("bounds", getBounds(), 2, "[B, S+1]")) ||
      failed(c.positive("num_heads", getNumHeadsAttr().getInt())) ||
      failed(c.positive("query_rows", getQueryRowsAttr().getInt())))
    return failure();
  if (failed(c.eq("bounds dim 0", dim(getBounds(), 0), "seq_lens dim 0 (B)",
                  dim(getSeqLens(), 0))))
    return failure();
  int64_t cols = dim(getBounds(), 1);
  if (known(cols) && cols < 2)
    return emitOpError() << "bounds dim 1 " << cols
                         << " must hold at least one piece (S+1 >= 2)";
  return success();
}

/// The token-packed partials of a varlen decode_partial.
static LogicalResult verifyPackedCombine(const Checker &c, Value po, Value pl,
                                         Value out, Value lse) {
  if (failed(c.rank("partial_lse", pl, 3, "[num_splits, T, N]")) ||
      failed(c.rank("out", out, 3, "[T, N, L]")) ||
      failed(c.rank("lse", lse, 2, "[T, N]")) ||
      failed(c.width("partial_out", po, 2, "N")) ||
      failed(c.width("partial_out", po, 3, "L")))
    return failure();
  for (unsigned i = 0; i < 3; ++i)
    if (failed(c.eq("partial_lse dim " + Twine(i), dim(pl, i),
                    "partial_out dim " + Twine(i), dim(po, i))))
      return failure();
  for (unsigned i = 0; i < 3; ++i)
    if (failed(c.eq("out dim " + Twine(i), dim(out, i),
                    "partial_out dim " + Twine(i + 1), dim(po, i + 1))))
      return failure();
  for (unsigned i = 0; i < 2; ++i)
    if (failed(c.eq("lse dim " + Twine(i), dim(lse, i),
                    "partial_lse dim " + Twine(i + 1), dim(pl, i + 1))))
      return failure();
  return success();
}

/// A stack of decode states along dim 0 (split pieces or DCP ranks: `axis`
/// in shapes, `axisSym` in messages) and the one state it merges into.
static LogicalResult verifyStateMerge(const Checker &c, Value po, Value pl,
                                      Value out, Value lse, StringRef poName,
                                      StringRef plName, StringRef axis,
                                      StringRef axisSym) {
  std::string poShape = ("[" + axis + ", B, Sq, N, L]").str();
  std::string plShape = ("[" + axis + ", B, N, Sq]").str();
  if (failed(c.rank(poName, po, 5, poShape)) ||
      failed(c.rank(plName, pl, 4, plShape)) ||
      failed(c.rank("out", out, 4, "[B, Sq, N, L]")) ||
      failed(c.rank("lse", lse, 3, "[B, N, Sq]")))
    return failure();
  auto poDim = [&](unsigned d, StringRef sym) {
    return (poName + " dim " + Twine(d) + " (" + sym + ")").str();
  };
  if (failed(c.width(poName, po, 3, "N")) ||
      failed(c.width(poName, po, 4, "L")) ||
      failed(
          c.eq(plName + " dim 0", dim(pl, 0), poDim(0, axisSym), dim(po, 0))) ||
      failed(c.eq(plName + " dim 1", dim(pl, 1), poDim(1, "B"), dim(po, 1))) ||
      failed(c.eq(plName + " dim 2", dim(pl, 2), poDim(3, "N"), dim(po, 3))) ||
      failed(c.eq(plName + " dim 3", dim(pl, 3), poDim(2, "Sq"), dim(po, 2))))
    return failure();
  for (unsigned i = 0; i < 4; ++i)
    if (failed(c.eq("out dim " + Twine(i), dim(out, i),
                    poName + " dim " + Twine(i + 1), dim(po, i + 1))))
      return failure();
  for (unsigned i = 0; i < 3; ++i)
    if (failed(c.eq("lse dim " + Twine(i), dim(lse, i),
                    plName + " dim " + Twine(i + 1), dim(pl, i + 1))))
      return failure();
  return success();
}

LogicalResult CombineOp::verify() {
  Checker c{*this};
  // Token-packed partials of a varlen decode; any other ranks get the
  // request-major form's diagnostics.
  if (cast<RankedTensorType>(getPartialOut().getType()).getRank() == 4 &&
      cast<RankedTensorType>(getPartialLse().getType()).getRank() == 3)
    return verifyPackedCombine(c, getPartialOut(), getPartialLse(), getOut(),
                               getLse());
  return verifyStateMerge(c, getPartialOut(), getPartialLse(), getOut(),
                          getLse(), "partial_out", "partial_lse", "num_splits",
                          "splits");
}

LogicalResult DcpCombineOp::verify() {
  return verifyStateMerge(Checker{*this}, getGatheredOut(), getGatheredLse(),
                          getOut(), getLse(), "gathered_out", "gathered_lse",
                          "world_size", "ranks");
}

LogicalResult DcpAllGatherOp::verify() {
  Checker c{*this};
  int64_t world = getWorldSizeAttr().getInt();
  if (failed(c.positive("world_size", world)) ||
      failed(verifyStateMerge(c, getGatheredOut(), getGatheredLse(), getOut(),
                              getLse(), "gathered_out", "gathered_lse",
                              "world_size", "ranks")))
    return failure();
  return c.eq("gathered_out dim 0", dim(getGatheredOut(), 0), "world_size",
              world);
}

//===----------------------------------------------------------------------===//
// Prefill
//===----------------------------------------------------------------------===//

/// cu_seqlens-style offsets [B+1]: when constant, non-decreasing from 0 and
/// ending within `rows`.
static LogicalResult checkOffsets(const Checker &c, StringRef name, Value v,
                                  int64_t rows, StringRef rowsDesc) {
  if (failed(c.rank(name, v, 1, "[B+1]")) ||
      failed(c.positive(Twine(name) + " dim 0", dim(v, 0))))
    return failure();
  DenseIntElementsAttr offs;
  if (!matchPattern(v, m_Constant(&offs)))
    return success();
  int64_t prev = 0;
  for (auto [i, o] : llvm::enumerate(offs.getValues<APInt>())) {
    int64_t x = o.getSExtValue();
    if ((i == 0 && x != 0) || x < prev)
      return c.op->emitOpError()
             << name << " must start at 0 and never decrease, but " << name
             << "[" << i << "] = " << x;
    prev = x;
  }
  if (known(rows) && prev > rows)
    return c.op->emitOpError() << name << " ends at " << prev << " beyond "
                               << rowsDesc << " " << rows;
  return success();
}

LogicalResult MhaOp::verify() {
  Checker c{*this};
  if (failed(c.rank("q", getQ(), 3, "[T, N, P+R]")) ||
      failed(c.rank("k", getK(), 3, "[S, N, P+R]")) ||
      failed(c.rank("v", getV(), 3, "[S, N, V]")) ||
      failed(c.rank("out", getOut(), 3, "[T, N, V]")) ||
      failed(c.rank("lse", getLse(), 2, "[N, T]")) ||
      failed(c.scale(getSoftmaxScaleAttr())) ||
      failed(c.sameElementType("out", getOut(), "q", getQ())) ||
      failed(c.sameElementType("k", getK(), "q", getQ())) ||
      failed(c.sameElementType("v", getV(), "q", getQ())))
    return failure();
  if (failed(c.width("q", getQ(), 1, "N")) ||
      failed(c.width("q", getQ(), 2, "P+R")) ||
      failed(c.width("v", getV(), 2, "V")))
    return failure();
  int64_t tokens = dim(getQ(), 0), heads = dim(getQ(), 1);
  if (failed(c.eq("k dim 1", dim(getK(), 1), "q dim 1 (N)", heads)) ||
      failed(c.eq("v dim 1", dim(getV(), 1), "q dim 1 (N)", heads)) ||
      failed(
          c.eq("k dim 2", dim(getK(), 2), "q dim 2 (P+R)", dim(getQ(), 2))) ||
      failed(c.eq("v dim 0", dim(getV(), 0), "k dim 0 (S)", dim(getK(), 0))) ||
      failed(c.eq("out dim 0", dim(getOut(), 0), "q dim 0 (T)", tokens)) ||
      failed(c.eq("out dim 1", dim(getOut(), 1), "q dim 1 (N)", heads)) ||
      failed(
          c.eq("out dim 2", dim(getOut(), 2), "v dim 2 (V)", dim(getV(), 2))) ||
      failed(c.eq("lse dim 0", dim(getLse(), 0), "q dim 1 (N)", heads)) ||
      failed(c.eq("lse dim 1", dim(getLse(), 1), "q dim 0 (T)", tokens)))
    return failure();
  if (failed(checkOffsets(c, "cu_seqlens_q", getCuSeqlensQ(), tokens,
                          "q dim 0 (T)")) ||
      failed(checkOffsets(c, "cu_seqlens_k", getCuSeqlensK(), dim(getK(), 0),
                          "k dim 0 (S)")))
    return failure();
  return c.eq("cu_seqlens_k dim 0", dim(getCuSeqlensK(), 0),
              "cu_seqlens_q dim 0", dim(getCuSeqlensQ(), 0));
}

LogicalResult MergeStatesOp::verify() {
  Checker c{*this};
  if (failed(c.rank("out_a", getOutA(), 3, "[T, N, H]")) ||
      failed(c.rank("lse_a", getLseA(), 2, "[N, T]")))
    return failure();
  if (failed(c.width("out_a", getOutA(), 1, "N")) ||
      failed(c.width("out_a", getOutA(), 2, "H")))
    return failure();
  auto outTy = getOutA().getType(), lseTy = getLseA().getType();
  if (getOutB().getType() != outTy || getOut().getType() != outTy)
    return emitOpError() << "out_b and out must have out_a's type " << outTy;
  if (getLseB().getType() != lseTy || getLse().getType() != lseTy)
    return emitOpError() << "lse_b and lse must have lse_a's type " << lseTy;
  if (failed(c.eq("lse_a dim 0", dim(getLseA(), 0), "out_a dim 1 (N)",
                  dim(getOutA(), 1))))
    return failure();
  return c.eq("lse_a dim 1", dim(getLseA(), 1), "out_a dim 0 (T)",
              dim(getOutA(), 0));
}

/// prefill and attention share operands and meaning.
template <typename OpTy> static LogicalResult verifyPrefillLike(OpTy op) {
  Checker c{op.getOperation()};
  if (failed(c.rank("q", op.getQ(), 3, "[T, N, P+R]")) ||
      failed(c.rank("kv_c", op.getKvC(), 2, "[T, L]")) ||
      failed(c.rank("out", op.getOut(), 3, "[T, N, V]")) ||
      failed(c.scale(op.getSoftmaxScaleAttr())) ||
      failed(c.sameElementType("out", op.getOut(), "q", op.getQ())) ||
      failed(c.sameElementType("kv_c", op.getKvC(), "q", op.getQ())) ||
      failed(c.sameElementType("k_pe", op.getKPe(), "q", op.getQ())) ||
      failed(c.sameElementType("kv_b_proj", op.getKvBProj(), "q", op.getQ())))
    return failure();
  if (IntegerAttr rows = op.getWorkspaceRowsAttr(); rows && rows.getInt() <= 0)
    return op.emitOpError()
           << "workspace_rows " << rows.getInt() << " must be positive";
  if (failed(c.width("q", op.getQ(), 1, "N")) ||
      failed(c.width("kv_c", op.getKvC(), 1, "L")) ||
      failed(c.width("out", op.getOut(), 2, "V")))
    return failure();
  int64_t tokens = dim(op.getQ(), 0), heads = dim(op.getQ(), 1);
  int64_t latent = dim(op.getKvC(), 1), value = dim(op.getOut(), 2);
  FailureOr<int64_t> rope = ropeWidth(c, op.getKPe(), tokens);
  if (failed(rope) ||
      failed(c.width("k_pe", op.getKPe(), op.getKPe().getType().getRank() - 1,
                     "R")) ||
      failed(c.eq("kv_c dim 0", dim(op.getKvC(), 0), "q dim 0 (T)", tokens)) ||
      failed(c.eq("out dim 0", dim(op.getOut(), 0), "q dim 0 (T)", tokens)) ||
      failed(c.eq("out dim 1", dim(op.getOut(), 1), "q dim 1 (N)", heads)))
    return failure();
  int64_t nope = sub(dim(op.getQ(), 2), *rope);
  if (failed(c.positive("q last dim - R (the nope width P)", nope)) ||
      failed(checkKvBProj(c, op.getKvBProj(), heads, nope, value, latent,
                          "kv_c dim 1 (L)")) ||
      failed(c.cache(op.getCache(), op.getLayout(), add(latent, *rope),
                     "kv_c width + k_pe width", latent)))
    return failure();
  if (failed(c.rank("block_table", op.getBlockTable(), 2, "[B, maxPages]")))
    return failure();
  int64_t batch = dim(op.getBlockTable(), 0);
  if (failed(c.pagedTables(op.getBlockTable(), op.getSeqLens(), batch,
                           "block_table dim 0 (B)", dim(op.getCache(), 1))) ||
      failed(checkOffsets(c, "query_start_loc", op.getQueryStartLoc(), tokens,
                          "q dim 0 (T)")))
    return failure();
  return c.eq("query_start_loc dim 0", dim(op.getQueryStartLoc(), 0),
              "B + 1 =", add(batch, 1));
}

LogicalResult PrefillOp::verify() { return verifyPrefillLike(*this); }
LogicalResult AttentionOp::verify() { return verifyPrefillLike(*this); }

#define GET_OP_CLASSES
#include "mla/Dialect/MLA/IR/MLAOps.cpp.inc"
