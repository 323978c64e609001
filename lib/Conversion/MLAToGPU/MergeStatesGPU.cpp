//===- MergeStatesGPU.cpp - GPU kernel of mla.merge_states ----------------===//
//
// Emits `mla_merge_states` (contract in mla/Contract/PrefillABI.h): one
// warp per (token, head) row. Every lane reads both LSEs and derives the
// two normalised weights the CPU lowering computes (AttentionOps.cpp): a
// side with a non-finite LSE weighs 0 and is dropped by a select, so a NaN
// in an output that does not contribute never reaches the result. The lanes
// then stream the row in 16-byte vectors; lane 0 writes the merged LSE after
// a warp barrier, which keeps an in-place merge (out = out_a) correct.
//
//===----------------------------------------------------------------------===//

#include "mla/Contract/PrefillABI.h"
#include "mla/Conversion/MLAToGPU/MLAToGPU.h"
#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mla/GPUCodegen/DeviceBuilder.h"
#include "mla/GPUCodegen/OnlineSoftmax.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mla;
using namespace mla::gpu_codegen;
namespace abi = mla::gpu;

namespace {

/// The two weights and the merged LSE of one row.
struct MergeWeights {
  Value wa, wb, lse;
};

class MergeKernel {
public:
  MergeKernel(ImplicitLocOpBuilder &b, const abi::MergeStatesShape &shape,
              Type elem)
      : b(b), d(b), s(shape), elem(elem),
        elemBytes(elem.getIntOrFloatBitWidth() / 8) {
    vec = std::min<int64_t>(16 / elemBytes, int64_t(1) << llvm::countr_zero(
                                                uint64_t(shape.headDim)));
  }

  void emit(StringRef name);

private:
  /// |lse| < inf: finite (NaN compares false).
  Value isLive(Value lse);
  MergeWeights weights(Value la, Value lb);
  /// w * x where w != 0, else 0 (x is never multiplied by a zero weight).
  Value term(Value w, Value x);
  void mergeRow(Value rowOffset, const MergeWeights &w, Value lane);

  ImplicitLocOpBuilder &b;
  DeviceBuilder d;
  const abi::MergeStatesShape &s;
  Type elem;
  int64_t elemBytes, vec;
  Value outA, lseA, outB, lseB, out, lseOut, tokens;
};

} // namespace

void MergeKernel::emit(StringRef name) {
  Type g = d.ptrGlobal;
  auto fn = createKernel(b, name, {g, g, g, g, g, g, d.i32},
                         abi::kMergeThreadsPerCta);
  outA = fn.getArgument(0), lseA = fn.getArgument(1), outB = fn.getArgument(2),
  lseB = fn.getArgument(3), out = fn.getArgument(4), lseOut = fn.getArgument(5),
  tokens = fn.getArgument(6);

  Value tid = d.threadIdX();
  Value lane = d.bitAnd(tid, d.c32(31));
  Value r = d.add(d.mul(d.blockIdX(), d.c32(abi::kMergeRowsPerCta)),
                  d.shru(tid, d.c32(5)));
  // Whole warps drop out here, so the warp barrier below sees full warps.
  d.ifThen(d.slt(r, d.mul(tokens, d.c32(s.numHeads))), [&] {
    Value t = d.divu(r, d.c32(s.numHeads)), n = d.remu(r, d.c32(s.numHeads));
    Value lseIdx = d.add(d.mul(d.zext64(n), d.zext64(tokens)), d.zext64(t));
    Value la = d.load(d.f32, d.gep(lseA, d.f32, lseIdx), 4);
    Value lb = d.load(d.f32, d.gep(lseB, d.f32, lseIdx), 4);
    MergeWeights w = weights(la, lb);
    mergeRow(d.mul(d.zext64(r), d.c64(s.headDim)), w, lane);
    NVVM::SyncWarpOp::create(b, d.c32(-1));
    d.ifThen(d.eq(lane, d.c32(0)),
             [&] { d.store(w.lse, d.gep(lseOut, d.f32, lseIdx), 4); });
  });
  mlir::gpu::ReturnOp::create(b);
}

Value MergeKernel::isLive(Value lse) {
  Value bits = arith::BitcastOp::create(b, d.i32, lse);
  Value abs =
      arith::BitcastOp::create(b, d.f32, d.bitAnd(bits, d.c32(0x7FFFFFFF)));
  return d.fcmp(arith::CmpFPredicate::OLT, abs,
                d.f(std::numeric_limits<float>::infinity()));
}

MergeWeights MergeKernel::weights(Value la, Value lb) {
  Value liveA = isLive(la), liveB = isLive(lb);
  Value any = arith::OrIOp::create(b, liveA, liveB);
  Value max = d.maximumf(d.select(liveA, la, d.negInf()),
                         d.select(liveB, lb, d.negInf()));
  Value anchor = d.select(any, max, d.f(0.0f));
  Value wa = d.select(liveA, softmax::naturalWeight(d, la, anchor), d.f(0.0f));
  Value wb = d.select(liveB, softmax::naturalWeight(d, lb, anchor), d.f(0.0f));
  Value total = d.fadd(wa, wb);
  softmax::Normaliser norm = softmax::normaliser(d, total);
  return {d.fmul(wa, norm.inv), d.fmul(wb, norm.inv),
          softmax::mergedLse(d, anchor, total, norm.nonEmpty)};
}

Value MergeKernel::term(Value w, Value x) {
  Value used = d.fcmp(arith::CmpFPredicate::ONE, w, d.f(0.0f));
  if (!x.getType().isF32())
    x = arith::ExtFOp::create(b, d.f32, x);
  return d.select(used, d.fmul(w, x), d.f(0.0f));
}

void MergeKernel::mergeRow(Value rowOffset, const MergeWeights &w, Value lane) {
  int64_t groups = s.headDim / vec;
  int64_t align = std::min<int64_t>(
      16, int64_t(1) << llvm::countr_zero(uint64_t(s.headDim * elemBytes)));
  align = std::min(align, vec * elemBytes);
  auto vecTy = VectorType::get({vec}, elem);
  d.forLoop(llvm::divideCeil(groups, 32), {}, [&](Value i, ValueRange) {
    Value g = d.add(d.mul(i, d.c32(32)), lane);
    d.ifThen(d.slt(g, d.c32(groups)), [&] {
      Value off = d.add(rowOffset, d.zext64(d.mul(g, d.c32(vec))));
      Value a = d.load(vecTy, d.gep(outA, elem, off), align);
      Value bv = d.load(vecTy, d.gep(outB, elem, off), align);
      Value res = d.poison(vecTy);
      for (int64_t k = 0; k < vec; ++k) {
        Value sum =
            d.fadd(term(w.wa, d.extract(a, k)), term(w.wb, d.extract(bv, k)));
        if (!elem.isF32())
          sum = arith::TruncFOp::create(b, elem, sum);
        res = d.insert(res, sum, k);
      }
      d.store(res, d.gep(out, elem, off), align);
    });
    return SmallVector<Value>{};
  });
}

namespace mla::gpu_codegen {

LogicalResult emitMergeStatesKernels(OpBuilder &builder, Operation *mergeOp,
                                     gpu::Chip) {
  auto op = cast<MergeStatesOp>(mergeOp);
  auto outTy = cast<RankedTensorType>(op.getOutA().getType());
  auto resTy = cast<RankedTensorType>(op.getOut().getType());
  if (outTy.getRank() != 3 || outTy.isDynamicDim(1) || outTy.isDynamicDim(2))
    return op.emitOpError() << "GPU merge_states needs out [T, N, H] with "
                               "static N and H, got "
                            << outTy;
  Type elem = outTy.getElementType();
  if (!elem.isBF16() && !elem.isF16() && !elem.isF32())
    return op.emitOpError() << "GPU merge_states supports bf16, f16 and f32 "
                               "outputs, got "
                            << elem;
  if (op.getOutB().getType() != outTy || resTy.getElementType() != elem)
    return op.emitOpError() << "GPU merge_states needs out_a, out_b and the "
                               "result of one type";
  abi::MergeStatesShape shape;
  shape.numHeads = outTy.getDimSize(1);
  shape.headDim = outTy.getDimSize(2);
  shape.elem = elem.isBF16()  ? abi::ActType::BF16
               : elem.isF16() ? abi::ActType::F16
                              : abi::ActType::F32;
  Operation *module = builder.getInsertionBlock()->getParentOp();
  ImplicitLocOpBuilder b(op.getLoc(), builder);
  MergeKernel(b, shape, elem)
      .emit(uniqueSymbolName(module, abi::kMergeStatesKernel));
  return success();
}

} // namespace mla::gpu_codegen
