//===- MhaGPU.cpp - GPU kernel of mla.mha (first version) -----------------===//
//
// Emits `mla_mha` (contract in mla/Contract/PrefillABI.h): varlen attention
// with LSE, causal bottom-right or not. This is a first, correct version on
// CUDA cores, not a FlashAttention kernel: one warp per (query token, head)
// row finds its request with the Segments block, keeps its q row (scaled by
// softmax_scale * log2 e) in registers, every lane holding entries
// lane, lane + 32, ..., and walks the visible keys one at a time: the score
// is a warp sum, the state an OnlineSoftmax rescale, the output row a
// per-lane accumulator of V columns. It serves what the tensor-core build
// (MhaSM90.cpp) does not: f32, sm_100a and head widths its tiles do not hold.
//
//===----------------------------------------------------------------------===//

#include "MhaSM90.h"

#include "mla/Contract/PrefillABI.h"
#include "mla/Conversion/MLAToGPU/MLAToGPU.h"
#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mla/GPUCodegen/DeviceBuilder.h"
#include "mla/GPUCodegen/OnlineSoftmax.h"
#include "mla/GPUCodegen/Segments.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mla;
using namespace mla::gpu_codegen;
namespace abi = mla::gpu;

namespace {

/// What one row attends to: the first key row and how many it sees.
struct KeyRange {
  Value begin, visible;
};

class MhaKernel {
public:
  MhaKernel(ImplicitLocOpBuilder &b, const abi::MhaShape &shape, Type elem)
      : b(b), d(b), s(shape), elem(elem),
        qkPerLane(llvm::divideCeil(shape.qkDim, 32)),
        vPerLane(llvm::divideCeil(shape.vDim, 32)) {}

  void emit(StringRef name);

private:
  /// Request and key range of query token `t` (visible = 0 outside every
  /// request).
  KeyRange keyRange(Value t);
  /// Element `e` of this lane's share (e * 32 + lane) of the `width`-wide
  /// row at element offset `rowOffset` (i64) of `base`, as f32; 0 past the
  /// row.
  Value loadEntry(Value base, Value rowOffset, int64_t e, int64_t width);
  /// One key: returns the next (m, l, acc...).
  SmallVector<Value> attend(Value key, ArrayRef<Value> q, ValueRange state);
  void storeRow(Value t, ValueRange state);

  ImplicitLocOpBuilder &b;
  DeviceBuilder d;
  const abi::MhaShape &s;
  Type elem;
  int64_t qkPerLane, vPerLane;
  Value qPtr, kPtr, vPtr, cuQ, cuK, out, lse, batch, tokens, lane, head;
};

} // namespace

void MhaKernel::emit(StringRef name) {
  Type g = d.ptrGlobal;
  auto fn = createKernel(b, name, {g, g, g, g, g, g, g, d.i32, d.i32},
                         abi::kMhaThreadsPerCta);
  qPtr = fn.getArgument(0), kPtr = fn.getArgument(1), vPtr = fn.getArgument(2),
  cuQ = fn.getArgument(3), cuK = fn.getArgument(4), out = fn.getArgument(5),
  lse = fn.getArgument(6), batch = fn.getArgument(7),
  tokens = fn.getArgument(8);

  Value tid = d.threadIdX();
  lane = d.bitAnd(tid, d.c32(31));
  Value r = d.add(d.mul(d.blockIdX(), d.c32(abi::kMhaRowsPerCta)),
                  d.shru(tid, d.c32(5)));
  // Whole warps drop out here, so the score shuffles see full warps.
  d.ifThen(d.slt(r, d.mul(tokens, d.c32(s.numHeads))), [&] {
    Value t = d.divu(r, d.c32(s.numHeads));
    head = d.remu(r, d.c32(s.numHeads));
    KeyRange keys = keyRange(t);
    Value qRow = d.mul(d.zext64(r), d.c64(s.qkDim));
    float scaleLog2 = s.scale * softmax::kLog2e;
    SmallVector<Value> q;
    for (int64_t e = 0; e < qkPerLane; ++e)
      q.push_back(d.fmul(loadEntry(qPtr, qRow, e, s.qkDim), d.f(scaleLog2)));
    SmallVector<Value> init = {d.negInf(), d.f(0.0f)};
    init.append(vPerLane, d.f(0.0f));
    SmallVector<Value> state =
        d.forLoop(d.c32(0), keys.visible, d.c32(1), init,
                  [&](Value j, ValueRange carried) {
                    return attend(d.add(keys.begin, j), q, carried);
                  });
    storeRow(t, state);
  });
  mlir::gpu::ReturnOp::create(b);
}

KeyRange MhaKernel::keyRange(Value t) {
  Value count = upperBound(d, cuQ, d.add(batch, d.c32(1)), t);
  Value inBatch = d.andi(d.sge(count, d.c32(1)), d.sle(count, batch));
  // Outside every request the loads below stay inside the offsets (which
  // hold at least one entry) and the range is empty.
  Value req = d.select(inBatch, d.sub(count, d.c32(1)), d.c32(0));
  Value next = d.minsi(d.add(req, d.c32(1)), batch);
  auto at = [&](Value offsets, Value i) {
    return d.load(d.i32, d.gep(offsets, d.i32, i), 4);
  };
  Value qBegin = at(cuQ, req), qLen = d.sub(at(cuQ, next), qBegin);
  Value kBegin = at(cuK, req), kLen = d.sub(at(cuK, next), kBegin);
  Value visible = kLen;
  if (s.causal) {
    // Bottom-right aligned: query i sees keys [0, k_len - q_len + i].
    Value i = d.sub(t, qBegin);
    visible = d.minsi(
        d.maxsi(d.sub(d.add(kLen, d.add(i, d.c32(1))), qLen), d.c32(0)), kLen);
  }
  return {kBegin, d.select(inBatch, d.maxsi(visible, d.c32(0)), d.c32(0))};
}

Value MhaKernel::loadEntry(Value base, Value rowOffset, int64_t e,
                           int64_t width) {
  Value col = d.add(lane, d.c32(32 * e));
  auto loadIt = [&]() -> Value {
    Value x = d.load(elem, d.gep(base, elem, d.add(rowOffset, d.zext64(col))),
                     elem.getIntOrFloatBitWidth() / 8);
    return elem.isF32() ? x : arith::ExtFOp::create(b, d.f32, x).getResult();
  };
  if ((e + 1) * 32 <= width)
    return loadIt();
  // The last share is partial: lanes past the row read nothing.
  Value inRow = d.slt(col, d.c32(width));
  auto ifOp = scf::IfOp::create(b, TypeRange{d.f32}, inRow, true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  scf::YieldOp::create(b, loadIt());
  b.setInsertionPointToStart(ifOp.elseBlock());
  scf::YieldOp::create(b, d.f(0.0f));
  return ifOp.getResult(0);
}

SmallVector<Value> MhaKernel::attend(Value key, ArrayRef<Value> q,
                                     ValueRange state) {
  Value keyRow = d.add(d.mul(d.zext64(key), d.c64(s.numHeads)), d.zext64(head));
  Value partial = d.f(0.0f);
  for (int64_t e = 0; e < qkPerLane; ++e)
    partial = d.fadd(partial,
                     d.fmul(q[e], loadEntry(kPtr, d.mul(keyRow, d.c64(s.qkDim)),
                                            e, s.qkDim)));
  Value score = softmax::xorAllReduce(d, partial, softmax::Combiner::Sum,
                                      {16, 8, 4, 2, 1});
  softmax::Rescale r = softmax::rescale(d, state[0], state[1], score);
  Value p = softmax::probability(d, score, r.mUse);
  SmallVector<Value> next = {r.mNew, d.fadd(r.l, p)};
  for (int64_t e = 0; e < vPerLane; ++e) {
    Value vEntry = loadEntry(vPtr, d.mul(keyRow, d.c64(s.vDim)), e, s.vDim);
    next.push_back(d.fadd(d.fmul(state[2 + e], r.alpha), d.fmul(p, vEntry)));
  }
  return next;
}

void MhaKernel::storeRow(Value t, ValueRange state) {
  softmax::Normaliser norm = softmax::normaliser(d, state[1]);
  Value outRow =
      d.mul(d.add(d.mul(d.zext64(t), d.c64(s.numHeads)), d.zext64(head)),
            d.c64(s.vDim));
  for (int64_t e = 0; e < vPerLane; ++e) {
    Value col = d.add(lane, d.c32(32 * e));
    d.ifThen(d.slt(col, d.c32(s.vDim)), [&] {
      Value o = d.fmul(state[2 + e], norm.inv);
      if (!elem.isF32())
        o = arith::TruncFOp::create(b, elem, o);
      d.store(o, d.gep(out, elem, d.add(outRow, d.zext64(col))),
              elem.getIntOrFloatBitWidth() / 8);
    });
  }
  d.ifThen(d.eq(lane, d.c32(0)), [&] {
    Value idx = d.add(d.mul(d.zext64(head), d.zext64(tokens)), d.zext64(t));
    d.store(softmax::naturalLse(d, state[0], state[1], norm.nonEmpty),
            d.gep(lse, d.f32, idx), 4);
  });
}

namespace mla::gpu_codegen {

LogicalResult emitMhaKernels(OpBuilder &builder, Operation *mhaOp,
                             gpu::Chip chip) {
  auto op = cast<MhaOp>(mhaOp);
  auto qTy = cast<RankedTensorType>(op.getQ().getType());
  auto kTy = cast<RankedTensorType>(op.getK().getType());
  auto vTy = cast<RankedTensorType>(op.getV().getType());
  if (qTy.isDynamicDim(1) || qTy.isDynamicDim(2) || vTy.isDynamicDim(2))
    return op.emitOpError() << "GPU mha needs static N and head widths (only "
                               "the token counts may be dynamic), got "
                            << qTy << " and " << vTy;
  Type elem = qTy.getElementType();
  if ((!elem.isBF16() && !elem.isF16() && !elem.isF32()) ||
      kTy.getElementType() != elem || vTy.getElementType() != elem)
    return op.emitOpError() << "GPU mha needs q, k and v all bf16, f16 or f32";
  abi::MhaShape shape;
  shape.numHeads = qTy.getDimSize(1);
  shape.qkDim = qTy.getDimSize(2);
  shape.vDim = vTy.getDimSize(2);
  shape.elem = elem.isBF16()  ? abi::ActType::BF16
               : elem.isF16() ? abi::ActType::F16
                              : abi::ActType::F32;
  shape.causal = op.getCausal();
  shape.scale = op.getSoftmaxScale().convertToFloat();
  if (const char *why = abi::checkMhaShape(shape); *why)
    return op.emitOpError() << "GPU mha: " << why;
  Operation *module = builder.getInsertionBlock()->getParentOp();
  ImplicitLocOpBuilder b(op.getLoc(), builder);
  std::string name = uniqueSymbolName(module, abi::kMhaKernel);
  if (abi::mhaUsesWgmma(chip, shape))
    sm90::emitMhaSM90(b, name, shape, elem);
  else
    MhaKernel(b, shape, elem).emit(name);
  return success();
}

} // namespace mla::gpu_codegen
