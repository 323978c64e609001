//===- DecodePlan.cpp - the mla_decode_plan GPU kernel --------------------===//
//
// The device planner of a plan/run decode (KernelABI.h): it turns device
// seq_lens into the split bounds of planUniformBounds (GpuDecode.h), so the
// decode that follows needs neither a host copy of the lengths nor an upload,
// and a CUDA graph can hold both. One warp per request:
//
//   * the request's seq_len is checked as the host would (checkSeqLenValues)
//     and its used block-table entries against the cache's pages, lanes
//     striding over the pages;
//   * a varlen plan also checks the request's query_start_loc entries and
//     q_b <= seq_len;
//   * a request that fails is planned as empty, so the decode reads nothing
//     of the cache for it, and lane 0 ORs the failure into `status`;
//   * the lanes write the S+1 bounds min(s * chunk, len) with
//     chunk = max(alignTo(ceil(len / S), page), 1), in i64 so that no product
//     wraps.
//
//===----------------------------------------------------------------------===//

#include "mla/Conversion/MLAToGPU/MLAToGPU.h"
#include "mla/GPUCodegen/DeviceBuilder.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

using namespace mlir;
using namespace mla::gpu_codegen;
namespace abi = mla::gpu;

namespace {

class DecodePlanKernel {
public:
  DecodePlanKernel(ImplicitLocOpBuilder &b, const abi::DecodeShape &shape)
      : b(b), d(b), shape(shape) {}

  mlir::gpu::GPUFuncOp emit(StringRef name);

private:
  /// Everything for request `req`; the whole warp runs it.
  void emitRequest();
  /// kDecodePlanBadSeqLen when `len` breaks the host's seq_len rule, else 0.
  Value seqLenStatus(Value len);
  /// Varlen: kDecodePlanBadQueryStartLoc for malformed query_start_loc
  /// entries of the request, kDecodePlanBadSeqLen for q_b > `len`, else 0.
  Value queryStatus(Value len);
  /// kDecodePlanBadPage when a page of the first `usedPages` of the
  /// request's block-table row is outside the cache, else 0 (every lane).
  Value pageStatus(Value usedPages);
  /// Writes the request's S+1 bounds for `len` tokens.
  void writeBounds(Value len);

  ImplicitLocOpBuilder &b;
  DeviceBuilder d;
  const abi::DecodeShape &shape;
  Value seqLens, blockTable, bounds, status, batch, maxPages, numPages,
      numSplits, queryStartLoc, numTokens;
  Value lane, req;
};

} // namespace

mlir::gpu::GPUFuncOp DecodePlanKernel::emit(StringRef name) {
  Type g = d.ptrGlobal, i32 = d.i32;
  SmallVector<Type> params = {g, g, g, g, i32, i32, i32, i32};
  if (shape.varlen)
    params.append({g, i32});
  auto fn = createKernel(b, name, params, abi::kDecodePlanThreadsPerCta);
  seqLens = fn.getArgument(0), blockTable = fn.getArgument(1),
  bounds = fn.getArgument(2), status = fn.getArgument(3),
  batch = fn.getArgument(4), maxPages = fn.getArgument(5),
  numPages = fn.getArgument(6), numSplits = fn.getArgument(7);
  if (shape.varlen)
    queryStartLoc = fn.getArgument(8), numTokens = fn.getArgument(9);

  Value tid = d.threadIdX();
  lane = d.remu(tid, d.c32(32));
  req = d.add(d.mul(d.blockIdX(), d.c32(abi::kDecodePlanRequestsPerCta)),
              d.divu(tid, d.c32(32)));
  d.ifThen(d.slt(req, batch), [&] { emitRequest(); });
  mlir::gpu::ReturnOp::create(b);
  return fn;
}

Value DecodePlanKernel::seqLenStatus(Value len) {
  Value capacity = d.mul(maxPages, d.c32(shape.pageSize));
  Value bad = d.ori(d.slt(len, d.c32(0)), d.slt(capacity, len));
  if (shape.causal && !shape.varlen) {
    // The query rows are the request's last Sq positions.
    Value tooShort =
        d.andi(d.slt(d.c32(0), len), d.slt(len, d.c32(shape.queryRows)));
    bad = d.ori(bad, tooShort);
  }
  return d.select(bad, d.c32(abi::kDecodePlanBadSeqLen), d.c32(0));
}

Value DecodePlanKernel::queryStatus(Value len) {
  Value first = d.load(d.i32, d.gep(queryStartLoc, d.i32, req), 4);
  Value next =
      d.load(d.i32, d.gep(queryStartLoc, d.i32, d.add(req, d.c32(1))), 4);
  Value rows = d.sub(next, first);
  Value bad =
      d.ori(d.ori(d.slt(first, d.c32(0)), d.slt(rows, d.c32(0))),
            d.ori(d.slt(d.c32(shape.queryRows), rows), d.slt(numTokens, next)));
  // The ends of the table: request 0 checks the start, the last the total.
  auto ne = [&](Value x, Value y) {
    return d.cmp(arith::CmpIPredicate::ne, x, y);
  };
  bad = d.ori(bad, d.andi(d.eq(req, d.c32(0)), ne(first, d.c32(0))));
  bad = d.ori(bad,
              d.andi(d.eq(req, d.sub(batch, d.c32(1))), ne(next, numTokens)));
  return d.select(
      bad, d.c32(abi::kDecodePlanBadQueryStartLoc),
      d.select(d.slt(len, rows), d.c32(abi::kDecodePlanBadSeqLen), d.c32(0)));
}

Value DecodePlanKernel::pageStatus(Value usedPages) {
  Value row = d.mul(d.toI64(req), d.toI64(maxPages));
  Value bad = d.forLoop(
      lane, usedPages, d.c32(32), {d.c32(0)},
      [&](Value p, ValueRange acc) -> SmallVector<Value> {
        Value entry =
            d.load(d.i32, d.gep(blockTable, d.i32, d.add(row, d.toI64(p))), 4);
        Value outside = d.ori(d.slt(entry, d.c32(0)), d.sge(entry, numPages));
        return {d.ori(acc[0], d.select(outside, d.c32(1), d.c32(0)))};
      })[0];
  for (int offset : {16, 8, 4, 2, 1})
    bad = d.ori(bad, d.shflXor(bad, offset));
  return d.select(d.eq(bad, d.c32(0)), d.c32(0),
                  d.c32(abi::kDecodePlanBadPage));
}

void DecodePlanKernel::writeBounds(Value len) {
  Value len64 = d.toI64(len), splits64 = d.toI64(numSplits);
  Value page64 = d.c64(shape.pageSize), one64 = d.c64(1);
  Value piece = d.divu(d.sub(d.add(len64, splits64), one64), splits64);
  Value chunk =
      d.mul(d.divu(d.sub(d.add(piece, page64), one64), page64), page64);
  chunk = d.maxsi(chunk, one64);
  Value rowBase = d.mul(d.toI64(req), d.add(splits64, one64));
  d.forLoop(lane, d.add(numSplits, d.c32(1)), d.c32(32), {},
            [&](Value s, ValueRange) -> SmallVector<Value> {
              Value bound = d.minsi(d.mul(d.toI64(s), chunk), len64);
              Value bound32 = arith::TruncIOp::create(b, d.i32, bound);
              d.store(bound32, d.gep(bounds, d.i32, d.add(rowBase, d.toI64(s))),
                      4);
              return {};
            });
}

void DecodePlanKernel::emitRequest() {
  Value len = d.load(d.i32, d.gep(seqLens, d.i32, req), 4);
  Value lenStatus = seqLenStatus(len);
  if (shape.varlen)
    lenStatus = d.ori(lenStatus, queryStatus(len));
  Value usable = d.eq(lenStatus, d.c32(0));
  Value usedPages = d.select(
      usable,
      d.divu(d.add(len, d.c32(shape.pageSize - 1)), d.c32(shape.pageSize)),
      d.c32(0));
  Value code = d.ori(lenStatus, pageStatus(usedPages));
  Value ok = d.eq(code, d.c32(0));
  writeBounds(d.select(ok, len, d.c32(0)));
  d.ifThen(d.andi(d.eq(lane, d.c32(0)),
                  d.cmp(arith::CmpIPredicate::ne, code, d.c32(0))),
           [&] {
             LLVM::AtomicRMWOp::create(b, LLVM::AtomicBinOp::_or, status, code,
                                       LLVM::AtomicOrdering::monotonic);
           });
}

FailureOr<mlir::gpu::GPUFuncOp>
mla::gpu_codegen::emitDecodePlan(OpBuilder &builder, Location loc,
                                 StringRef name,
                                 const abi::DecodeShape &shape) {
  if (shape.pageSize < 1 || shape.queryRows < 1)
    return emitError(loc) << "GPU decode plan needs a positive page size and "
                             "Sq, got "
                          << shape.pageSize << " and " << shape.queryRows;
  ImplicitLocOpBuilder b(loc, builder);
  return DecodePlanKernel(b, shape).emit(name);
}
