//===- InputChecks.cpp - mla-run's checks of integer tables ---------------===//
//
// A table's values come from the function's argument arrays, or from a
// constant; tables computed inside the function are the compiler's own and
// are not checked here. Shapes come from the argument arrays too, since a
// function type may leave them dynamic.
//
//===----------------------------------------------------------------------===//

#include "InputChecks.h"
#include "mla/Contract/DcpShard.h"
#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"
#include <optional>

using namespace mla;
using namespace mlir;
using llvm::Twine;

namespace {

class TableChecker {
public:
  TableChecker(func::FuncOp func, llvm::ArrayRef<HostArray> inputs,
               llvm::ArrayRef<std::string> names)
      : func(func), inputs(inputs), names(names) {}

  llvm::Error visit(Operation *op);

private:
  /// The argument array `v` is, if it is one of the function's arguments.
  const HostArray *argument(Value v) const {
    auto arg = dyn_cast<BlockArgument>(v);
    if (!arg || arg.getOwner()->getParentOp() != func)
      return nullptr;
    return &inputs[arg.getArgNumber()];
  }

  /// The flat values of an integer table, from an argument or a constant.
  std::optional<SmallVector<int64_t>> values(Value v) const {
    SmallVector<int64_t> result;
    if (const HostArray *array = argument(v)) {
      for (int64_t i = 0; i < array->getNumElements(); ++i)
        result.push_back(static_cast<int64_t>(array->get(i)));
      return result;
    }
    DenseIntElementsAttr attr;
    if (!matchPattern(v, m_Constant(&attr)))
      return std::nullopt;
    for (const APInt &x : attr.getValues<APInt>())
      result.push_back(x.getSExtValue());
    return result;
  }

  /// Dimension `d` of `v`: the argument array's, else the type's (which
  /// may be dynamic).
  int64_t dim(Value v, unsigned d) const {
    if (const HostArray *array = argument(v))
      return array->getShape()[d];
    return cast<ShapedType>(v.getType()).getDimSize(d);
  }

  /// "`operand` of mla.<op> (<where the argument came from>)".
  std::string name(Operation *op, Value v, StringRef operand) const {
    std::string text = (operand + " of " + op->getName().getStringRef()).str();
    if (auto arg = dyn_cast<BlockArgument>(v);
        arg && arg.getOwner()->getParentOp() == func)
      text += " (" + names[arg.getArgNumber()] + ")";
    return text;
  }

  llvm::Error fail(Operation *op, Value v, StringRef operand,
                   const Twine &message) const {
    return llvm::createStringError("invalid input: " + name(op, v, operand) +
                                   ": " + message);
  }

  /// seq_lens[b] in [0, capacity] (capacity dynamic: unchecked above).
  llvm::Error checkLens(Operation *op, Value lens, ArrayRef<int64_t> values,
                        Value blockTable, int64_t pageSize) const;
  /// Every block-table entry request `b` reads for positions [begin, end).
  llvm::Error checkPages(Operation *op, Value blockTable,
                         ArrayRef<int64_t> table, Value cache, int64_t b,
                         int64_t begin, int64_t end) const;
  /// Offsets [B+1] that start at 0, never decrease and end within `rows`.
  llvm::Error checkOffsets(Operation *op, Value v, StringRef operand,
                           ArrayRef<int64_t> offsets, int64_t rows,
                           StringRef rowsDesc) const;

  llvm::Error visitDecode(Operation *op, Value q, Value cache, Value blockTable,
                          Value seqLens, bool causal, DcpShardAttr shard = {});
  llvm::Error visitPrefill(Operation *op, Value q, Value cache,
                           Value blockTable, Value seqLens,
                           Value queryStartLoc);
  llvm::Error visitCacheWrite(CacheWriteOp op);
  llvm::Error visitGather(GatherCacheOp op);
  llvm::Error visitMha(MhaOp op);

  func::FuncOp func;
  llvm::ArrayRef<HostArray> inputs;
  llvm::ArrayRef<std::string> names;
};

bool known(int64_t d) { return !ShapedType::isDynamic(d); }

llvm::Error TableChecker::checkLens(Operation *op, Value lens,
                                    ArrayRef<int64_t> values, Value blockTable,
                                    int64_t pageSize) const {
  int64_t cols = dim(blockTable, 1);
  int64_t capacity = known(cols) && known(pageSize) ? cols * pageSize : -1;
  for (auto [b, len] : llvm::enumerate(values)) {
    if (len < 0)
      return fail(op, lens, "seq_lens",
                  "seq_lens[" + Twine(b) + "] = " + Twine(len) +
                      " is negative");
    if (capacity >= 0 && len > capacity)
      return fail(op, lens, "seq_lens",
                  "seq_lens[" + Twine(b) + "] = " + Twine(len) +
                      " exceeds the block table's capacity " + Twine(capacity) +
                      " (" + Twine(cols) + " pages of " + Twine(pageSize) +
                      ")");
  }
  return llvm::Error::success();
}

llvm::Error TableChecker::checkPages(Operation *op, Value blockTable,
                                     ArrayRef<int64_t> table, Value cache,
                                     int64_t b, int64_t begin,
                                     int64_t end) const {
  int64_t pages = dim(cache, 0), pageSize = dim(cache, 1);
  int64_t cols = dim(blockTable, 1);
  if (end <= begin || !known(pageSize) || !known(cols))
    return llvm::Error::success();
  for (int64_t k = begin / pageSize; k < (end + pageSize - 1) / pageSize; ++k) {
    if (k >= cols)
      return fail(op, blockTable, "block_table",
                  "request " + Twine(b) + " reads logical page " + Twine(k) +
                      " but the block table has " + Twine(cols) + " columns");
    int64_t page = table[b * cols + k];
    if (page < 0 || (known(pages) && page >= pages))
      return fail(
          op, blockTable, "block_table",
          "block_table[" + Twine(b) + ", " + Twine(k) + "] = " + Twine(page) +
              " is not a page of the cache (0.." + Twine(pages - 1) + ")");
  }
  return llvm::Error::success();
}

llvm::Error TableChecker::checkOffsets(Operation *op, Value v,
                                       StringRef operand,
                                       ArrayRef<int64_t> offsets, int64_t rows,
                                       StringRef rowsDesc) const {
  for (auto [i, x] : llvm::enumerate(offsets)) {
    int64_t prev = i ? offsets[i - 1] : 0;
    if ((i == 0 && x != 0) || x < prev)
      return fail(op, v, operand,
                  Twine(operand) + " must start at 0 and never decrease, but " +
                      operand + "[" + Twine(i) + "] = " + Twine(x));
  }
  if (!offsets.empty() && known(rows) && offsets.back() > rows)
    return fail(op, v, operand,
                Twine(operand) + " ends at " + Twine(offsets.back()) +
                    " beyond " + rowsDesc + " " + Twine(rows));
  return llvm::Error::success();
}

llvm::Error TableChecker::visitDecode(Operation *op, Value q, Value cache,
                                      Value blockTable, Value seqLens,
                                      bool causal, DcpShardAttr shard) {
  std::optional<SmallVector<int64_t>> lens = values(seqLens);
  if (!lens)
    return llvm::Error::success();
  // A DCP rank's table holds its own tokens of the global seq_lens.
  SmallVector<int64_t> rows(*lens);
  if (shard)
    for (int64_t &n : rows)
      n = dcp::ownedTokens(n, shard.getWorldSize(), shard.getRank(),
                           shard.getInterleave());
  if (llvm::Error err = checkLens(op, seqLens, rows, blockTable, dim(cache, 1)))
    return err;
  int64_t sq = dim(q, 1);
  if (causal && known(sq))
    for (auto [b, len] : llvm::enumerate(*lens))
      if (len > 0 && len < sq)
        return fail(op, seqLens, "seq_lens",
                    "causal decode needs seq_lens[" + Twine(b) +
                        "] = " + Twine(len) + " >= Sq " + Twine(sq) +
                        " (the query rows are the last Sq cache rows)");
  std::optional<SmallVector<int64_t>> table = values(blockTable);
  if (!table)
    return llvm::Error::success();
  for (auto [b, len] : llvm::enumerate(rows))
    if (llvm::Error err = checkPages(op, blockTable, *table, cache, b, 0, len))
      return err;
  return llvm::Error::success();
}

llvm::Error TableChecker::visitPrefill(Operation *op, Value q, Value cache,
                                       Value blockTable, Value seqLens,
                                       Value queryStartLoc) {
  std::optional<SmallVector<int64_t>> qsl = values(queryStartLoc);
  if (qsl)
    if (llvm::Error err = checkOffsets(op, queryStartLoc, "query_start_loc",
                                       *qsl, dim(q, 0), "the token count"))
      return err;
  std::optional<SmallVector<int64_t>> lens = values(seqLens);
  if (!lens)
    return llvm::Error::success();
  if (llvm::Error err =
          checkLens(op, seqLens, *lens, blockTable, dim(cache, 1)))
    return err;
  if (qsl && qsl->size() == lens->size() + 1)
    for (auto [b, len] : llvm::enumerate(*lens))
      if ((*qsl)[b + 1] - (*qsl)[b] > len)
        return fail(op, seqLens, "seq_lens",
                    "seq_lens[" + Twine(b) + "] = " + Twine(len) +
                        " is below the request's " +
                        Twine((*qsl)[b + 1] - (*qsl)[b]) +
                        " new tokens (seq_lens count them)");
  std::optional<SmallVector<int64_t>> table = values(blockTable);
  if (!table)
    return llvm::Error::success();
  for (auto [b, len] : llvm::enumerate(*lens))
    if (llvm::Error err = checkPages(op, blockTable, *table, cache, b, 0, len))
      return err;
  return llvm::Error::success();
}

llvm::Error TableChecker::visitCacheWrite(CacheWriteOp op) {
  std::optional<SmallVector<int64_t>> slots = values(op.getSlotMapping());
  int64_t pages = dim(op.getCache(), 0), pageSize = dim(op.getCache(), 1);
  if (!slots || !known(pages) || !known(pageSize))
    return llvm::Error::success();
  for (auto [t, slot] : llvm::enumerate(*slots))
    if (slot >= pages * pageSize)
      return fail(op, op.getSlotMapping(), "slot_mapping",
                  "slot_mapping[" + Twine(t) + "] = " + Twine(slot) +
                      " is past the cache's " + Twine(pages * pageSize) +
                      " slots (negative slots mark padding)");
  return llvm::Error::success();
}

llvm::Error TableChecker::visitGather(GatherCacheOp op) {
  std::optional<SmallVector<int64_t>> cuRows = values(op.getCuRows());
  std::optional<SmallVector<int64_t>> starts = values(op.getStarts());
  if (!cuRows)
    return llvm::Error::success();
  if (llvm::Error err =
          checkOffsets(op, op.getCuRows(), "cu_rows", *cuRows,
                       dim(op.getWorkspace(), 0), "the workspace rows"))
    return err;
  std::optional<SmallVector<int64_t>> table = values(op.getBlockTable());
  if (!starts || !table)
    return llvm::Error::success();
  for (auto [b, start] : llvm::enumerate(*starts)) {
    if (start < 0)
      return fail(op, op.getStarts(), "starts",
                  "starts[" + Twine(b) + "] = " + Twine(start) +
                      " is negative");
    int64_t rows = (*cuRows)[b + 1] - (*cuRows)[b];
    if (llvm::Error err = checkPages(op, op.getBlockTable(), *table,
                                     op.getCache(), b, start, start + rows))
      return err;
  }
  return llvm::Error::success();
}

llvm::Error TableChecker::visitMha(MhaOp op) {
  if (std::optional<SmallVector<int64_t>> cuQ = values(op.getCuSeqlensQ()))
    if (llvm::Error err = checkOffsets(op, op.getCuSeqlensQ(), "cu_seqlens_q",
                                       *cuQ, dim(op.getQ(), 0), "q dim 0 (T)"))
      return err;
  if (std::optional<SmallVector<int64_t>> cuK = values(op.getCuSeqlensK()))
    return checkOffsets(op, op.getCuSeqlensK(), "cu_seqlens_k", *cuK,
                        dim(op.getK(), 0), "k dim 0 (S)");
  return llvm::Error::success();
}

llvm::Error TableChecker::visit(Operation *op) {
  return llvm::TypeSwitch<Operation *, llvm::Error>(op)
      .Case([&](DecodeOp d) {
        return visitDecode(d, d.getQ(), d.getCache(), d.getBlockTable(),
                           d.getSeqLens(), d.getCausal());
      })
      .Case([&](DecodePartialOp d) {
        return visitDecode(d, d.getQ(), d.getCache(), d.getBlockTable(),
                           d.getSeqLens(), d.getCausal(), d.getShardAttr());
      })
      .Case([&](PrefillOp p) {
        return visitPrefill(p, p.getQ(), p.getCache(), p.getBlockTable(),
                            p.getSeqLens(), p.getQueryStartLoc());
      })
      .Case([&](AttentionOp p) {
        return visitPrefill(p, p.getQ(), p.getCache(), p.getBlockTable(),
                            p.getSeqLens(), p.getQueryStartLoc());
      })
      .Case([&](CacheWriteOp c) { return visitCacheWrite(c); })
      .Case([&](GatherCacheOp g) { return visitGather(g); })
      .Case([&](MhaOp m) { return visitMha(m); })
      .Default([](Operation *) { return llvm::Error::success(); });
}

} // namespace

llvm::Error mla::checkInputTables(func::FuncOp func,
                                  llvm::ArrayRef<HostArray> inputs,
                                  llvm::ArrayRef<std::string> names) {
  TableChecker checker(func, inputs, names);
  SmallVector<Operation *> ops;
  func.walk([&](Operation *op) { ops.push_back(op); });
  for (Operation *op : ops)
    if (llvm::Error err = checker.visit(op))
      return err;
  return llvm::Error::success();
}
