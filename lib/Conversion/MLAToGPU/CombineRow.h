//===- CombineRow.h - merging one row's split-KV pieces ---------*- C++ -*-===//
//
// The merge of primer section 6 for query rows (token i, head n) of one
// request, by one warp: the lanes find each row's largest partial LSE, then
// every lane accumulates `exp(lse_s - m) * partial_out[s]` over four
// adjacent columns per 128-column stripe with 16-byte loads, and writes the
// normalised row in the output element type plus `m + log(sum_s w_s)`.
// Several rows merge together (emitRows): each step issues every row's
// loads before it uses one, so a warp waits for memory once per step, not
// once per row and step.
// Pieces with lse = -inf weigh nothing; all empty gives out = 0,
// lse = -inf. The layouts are mla_combine's (KernelABI.h): partial_out
// [S, B, Sq, N, L] f32, partial_lse [S, B, N, Sq] f32, out [B, Sq, N, L]
// elem, lse [B, N, Sq] f32. mla_combine runs it for every row; the seesaw
// decode runs it for its share of rows when it merges its pieces itself.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_LIB_CONVERSION_MLATOGPU_COMBINEROW_H
#define MLA_LIB_CONVERSION_MLATOGPU_COMBINEROW_H

#include "mla/Contract/KernelABI.h"
#include "mla/GPUCodegen/DeviceBuilder.h"
#include "mlir/IR/BuiltinTypes.h"

namespace mla::gpu_codegen {

/// The pointers and counts the merge reads (all in the kernel's arguments).
struct CombineOperands {
  mlir::Value partialOut, partialLse, out, lse;
  /// B and S (i32).
  mlir::Value batch, numSplits;
};

class CombineRow {
public:
  CombineRow(mlir::ImplicitLocOpBuilder &b, DeviceBuilder &d,
             const gpu::DecodeShape &shape, const CombineOperands &operands);

  /// Merges row `r` (i32, in [0, Sq * N): token r / N, head r % N) of
  /// request `bb`; every lane of the warp runs it, `lane` being its index.
  void emit(mlir::Value bb, mlir::Value r, mlir::Value lane);
  /// Merges rows `rs` of request `bb` together; a row whose `valid` (i1) is
  /// false is read as row 0 and not written (`valid` empty: all are valid).
  void emitRows(mlir::Value bb, llvm::ArrayRef<mlir::Value> rs,
                llvm::ArrayRef<mlir::Value> valid, mlir::Value lane);

private:
  /// A row being merged: its index, token and head, and its largest LSE.
  struct Row {
    mlir::Value r, i, n, m, mIsNegInf;
  };
  /// lse_s of `row` lives at ((s*B + b)*N + n)*Sq + i.
  mlir::Value lseIndex(const Row &row, mlir::Value s);
  /// Each row's largest LSE over the pieces (lanes stride by 32, then the
  /// warp), every row's loads first.
  void maxLse(llvm::MutableArrayRef<Row> rows);
  /// Issues one piece's loads of `row`: its LSE and its stripes.
  llvm::SmallVector<mlir::Value> loadPiece(const Row &row, mlir::Value s);
  /// Adds a piece's loads (loadPiece) times its weight to the carried
  /// stripes and sum of `row`.
  llvm::SmallVector<mlir::Value>
  accumulatePiece(const Row &row, llvm::ArrayRef<mlir::Value> loads,
                  mlir::ValueRange carried);
  /// The lane's four columns at `col` of a partial row (0 past L).
  mlir::Value loadStripe(mlir::Value ptr, mlir::Value col);
  void storeRow(const Row &row, llvm::ArrayRef<mlir::Value> acc);

  mlir::ImplicitLocOpBuilder &b;
  DeviceBuilder &d;
  const int64_t N, Sq, L, rows, stripes;
  mlir::VectorType v4;
  mlir::Type halfType;
  CombineOperands ops;
  mlir::Value lane, bb, col0, zero4;
};

} // namespace mla::gpu_codegen

#endif // MLA_LIB_CONVERSION_MLATOGPU_COMBINEROW_H
