//===- ProjectionGPU.cpp - GPU kernels of mla.absorb_q and up_proj_out ----===//
//
// Both ops are batched GEMMs over heads, out_n = in_n @ w[n], with a
// dynamic token count T (contracts in mla/Contract/CacheProjectionABI.h).
//
// bf16/f16: a CTA of 4 warps (2 x 2) owns a 64 x 64 output tile of one head;
// each warp computes 32 x 32 with nvvm.mma.sync m16n8k16 (i32-packed
// operands, f32 accumulators; nvgpu.mma.sync cannot lower bf16 in MLIR 22).
// Every K step stages a 64 x BK input slice and a BK x 64 weight slice in
// static shared memory with 16-byte global loads; the weight slice is stored
// transposed (N-major) so that each B fragment is one 32-bit shared load.
// Rows are padded by 8 elements, which makes the fragment loads
// bank-conflict free. f32: one thread per output element with FMAs.
//
// absorb_q also copies the RoPE part of q through (CTAs of the first column
// tile do it for their rows).
//
//===----------------------------------------------------------------------===//

#include "mla/Contract/CacheProjectionABI.h"
#include "mla/Conversion/MLAToGPU/MLAToGPU.h"
#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mla/GPUCodegen/DeviceBuilder.h"
#include "mla/GPUCodegen/MmaSync.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mla;
namespace abi = mla::gpu;

namespace {

/// Largest power of two <= cap dividing every value of `vs` (0 divides).
int64_t commonPow2(std::initializer_list<int64_t> vs, int64_t cap) {
  int64_t r = cap;
  for (int64_t v : vs)
    if (v != 0)
      r = std::min<int64_t>(r, int64_t(1) << llvm::countr_zero(uint64_t(v)));
  return r;
}

/// One per-head product out[t, n, j] = sum_k in[t, n, k] * w[n, k, j] over
/// dense row-major tensors, with element strides (the absorb_q RoPE copy
/// reads in[t, n, K + r] and writes out[t, n, outDim + r]).
struct Projection {
  StringRef opName;
  abi::ProjectionShape shape;
  Type elem;
  int64_t inRowStride, inHeadStride;   // in:  t, n
  int64_t outRowStride, outHeadStride; // out: t, n
};

/// Checks `op`'s types and derives its Projection. `in` is [T, N, K(+R)],
/// `w` is [N, K, outDim].
FailureOr<Projection> planProjection(Operation *op, StringRef opName,
                                     RankedTensorType inTy,
                                     RankedTensorType wTy, bool withRope) {
  if (wTy.isDynamicDim(0) || wTy.isDynamicDim(1) || wTy.isDynamicDim(2) ||
      inTy.isDynamicDim(1) || inTy.isDynamicDim(2))
    return op->emitOpError()
           << "GPU " << opName
           << " needs static N and head widths (only T may be dynamic), got "
           << inTy << " and " << wTy;
  Projection p;
  p.opName = opName;
  p.elem = inTy.getElementType();
  abi::ProjectionShape &s = p.shape;
  if (p.elem.isBF16())
    s.elem = abi::ActType::BF16;
  else if (p.elem.isF16())
    s.elem = abi::ActType::F16;
  else if (p.elem.isF32())
    s.elem = abi::ActType::F32;
  else
    return op->emitOpError()
           << "GPU " << opName << " supports bf16, f16 and f32, got " << p.elem;
  s.numHeads = wTy.getDimSize(0);
  s.inDim = wTy.getDimSize(1);
  s.outDim = wTy.getDimSize(2);
  s.ropeDim = withRope ? inTy.getDimSize(2) - s.inDim : 0;
  if (std::string why = abi::checkProjectionShape(s); !why.empty())
    return op->emitOpError()
           << "GPU " << opName << " cannot run N = " << s.numHeads
           << ", K = " << s.inDim << ", width " << s.outDim << ": " << why;
  int64_t inWidth = s.inDim + s.ropeDim, outWidth = s.outDim + s.ropeDim;
  p.inHeadStride = inWidth;
  p.inRowStride = s.numHeads * inWidth;
  p.outHeadStride = outWidth;
  p.outRowStride = s.numHeads * outWidth;
  return p;
}

/// Emits the kernel of `p` named `name` (a free symbol) at the builder's
/// insertion point.
class ProjectionKernel {
public:
  ProjectionKernel(ImplicitLocOpBuilder &b, const Projection &p)
      : b(b), loc(b.getLoc()), e(b), p(p), s(p.shape) {}

  void emit(StringRef name) {
    Operation *module = b.getInsertionBlock()->getParentOp();
    bool mma = s.elem != abi::ActType::F32;
    LLVM::GlobalOp smem;
    if (mma) {
      // Static shared memory: a module-level workgroup global per kernel.
      auto arrayTy = LLVM::LLVMArrayType::get(b.getI8Type(),
                                              abi::projectionSharedBytes(s));
      smem = LLVM::GlobalOp::create(
          b, loc, arrayTy, /*isConstant=*/false, LLVM::Linkage::Internal,
          gpu_codegen::uniqueSymbolName(module, (name + "_smem").str()),
          Attribute(), /*alignment=*/16, /*addrSpace=*/3);
    }
    int64_t threads =
        mma ? abi::kProjMmaThreadsPerCta : abi::kProjFmaThreadsPerCta;
    OpBuilder::InsertionGuard guard(b);
    auto fn = gpu_codegen::createKernel(
        b, name, {e.ptrGlobal, e.ptrGlobal, e.ptrGlobal, e.i32}, threads,
        /*setMaxNTid=*/false);
    Block &entry = fn.getBody().front();
    in = entry.getArgument(0);
    w = entry.getArgument(1);
    out = entry.getArgument(2);
    tokens = entry.getArgument(3);
    tid = e.threadIdX();
    ctaX = e.blockIdX();
    ctaY = e.blockIdY();
    head = e.blockIdZ();
    if (mma)
      emitMmaBody(LLVM::AddressOfOp::create(b, smem));
    else
      emitFmaBody();
    mlir::gpu::ReturnOp::create(b);
  }

private:
  ImplicitLocOpBuilder &b;
  Location loc;
  gpu_codegen::DeviceBuilder e;
  const Projection &p;
  const abi::ProjectionShape &s;
  Value in, w, out, tokens, tid, ctaX, ctaY, head;

  /// Element offset (i64) of in[t, head, col] / out[t, head, col].
  Value inOffset(Value t, Value col) {
    return e.add(e.add(e.mul(e.zext64(t), e.c64(p.inRowStride)),
                       e.mul(e.zext64(head), e.c64(p.inHeadStride))),
                 e.zext64(col));
  }
  Value outOffset(Value t, Value col) {
    return e.add(e.add(e.mul(e.zext64(t), e.c64(p.outRowStride)),
                       e.mul(e.zext64(head), e.c64(p.outHeadStride))),
                 e.zext64(col));
  }

  /// absorb_q: out[t, head, outDim + r] = in[t, head, inDim + r] for the
  /// `rows` tokens from `firstRow`, by all threads of the CTA, `vec`
  /// elements at a time.
  void emitRopeCopy(Value firstRow, int64_t rows, int64_t threads) {
    int64_t bytes = abi::actBytes(s.elem);
    int64_t vec = commonPow2({s.ropeDim}, 16 / bytes);
    int64_t perRow = s.ropeDim / vec;
    int64_t items = rows * perRow;
    int64_t align = commonPow2({vec * bytes, p.inRowStride * bytes,
                                p.inHeadStride * bytes, s.inDim * bytes},
                               16);
    int64_t outAlign = commonPow2({vec * bytes, p.outRowStride * bytes,
                                   p.outHeadStride * bytes, s.outDim * bytes},
                                  16);
    auto vecTy = VectorType::get({vec}, p.elem);
    e.forLoop(llvm::divideCeil(items, threads), {}, [&](Value i, ValueRange) {
      Value idx = e.add(e.mul(i, e.c32(threads)), tid);
      Value r = e.divu(idx, e.c32(perRow));
      Value col = e.mul(e.remu(idx, e.c32(perRow)), e.c32(vec));
      Value t = e.add(firstRow, r);
      Value ok = e.andi(e.slt(idx, e.c32(items)), e.slt(t, tokens));
      e.ifThen(ok, [&] {
        Value v = e.load(
            vecTy, e.gep(in, p.elem, inOffset(t, e.add(col, e.c32(s.inDim)))),
            align);
        e.store(v,
                e.gep(out, p.elem, outOffset(t, e.add(col, e.c32(s.outDim)))),
                outAlign);
      });
      return SmallVector<Value>{};
    });
  }

  /// f32: thread j of CTA (t, y, head) computes out[t, head, y*128 + j].
  void emitFmaBody() {
    Value t = ctaX;
    Value col = e.add(e.mul(ctaY, e.c32(abi::kProjFmaThreadsPerCta)), tid);
    e.ifThen(e.slt(col, e.c32(s.outDim)), [&] {
      Value inRow = e.gep(in, p.elem, inOffset(t, e.c32(0)));
      Value wCol = e.gep(w, p.elem,
                         e.add(e.mul(e.zext64(head), e.c64(s.inDim * s.outDim)),
                               e.zext64(col)));
      Value zero = e.f(0.0f);
      SmallVector<Value> acc =
          e.forLoop(s.inDim, {zero}, [&](Value k, ValueRange a) {
            Value x = e.load(e.f32, e.gep(inRow, p.elem, k), 4);
            Value y = e.load(
                e.f32, e.gep(wCol, p.elem, e.mul(e.zext64(k), e.c64(s.outDim))),
                4);
            return SmallVector<Value>{LLVM::FMAOp::create(b, x, y, a[0])};
          });
      e.store(acc[0], e.gep(out, p.elem, outOffset(t, col)), 4);
    });
    if (s.ropeDim > 0)
      e.ifThen(e.eq(ctaY, e.c32(0)),
               [&] { emitRopeCopy(t, 1, abi::kProjFmaThreadsPerCta); });
  }

  /// bf16/f16: the tensor-core tile loop.
  void emitMmaBody(Value smemBase) {
    setUpMmaTiles(smemBase);
    Value zero = e.f(0.0f);
    SmallVector<Value> init(32, zero);
    SmallVector<Value> acc =
        e.forLoop(s.inDim / tileK, init, [&](Value kt, ValueRange accIn) {
          Value k0 = e.mul(kt, e.c32(tileK));
          stageInputSlice(k0);
          stageWeightSlice(k0);
          mlir::gpu::BarrierOp::create(b);
          SmallVector<Value> accs(accIn.begin(), accIn.end());
          for (int64_t kk = 0; kk < tileK; kk += 16)
            multiplySlice(accs, kk);
          mlir::gpu::BarrierOp::create(b);
          return accs;
        });
    storeTile(acc);
    if (s.ropeDim > 0)
      e.ifThen(e.eq(ctaY, e.c32(0)), [&] {
        emitRopeCopy(m0, abi::kProjTileM, abi::kProjMmaThreadsPerCta);
      });
  }

  // The tensor-core tile loop's geometry (setUpMmaTiles).
  int64_t tileK = 0, ldsm = 0, chunksPerRow = 0, aAlign = 0, bAlign = 0;
  Type fragTy;
  VectorType chunkTy;
  Value zeroChunk, smemA, smemB, group, quad, warpRow, warpCol, m0, n0, wHead;

  void setUpMmaTiles(Value smemBase) {
    constexpr int64_t tileM = abi::kProjTileM, tileN = abi::kProjTileN;
    tileK = abi::projectionTileK(s);
    ldsm = tileK + 8; // padded shared row, in elements
    chunksPerRow = tileK / 8;
    fragTy = s.elem == abi::ActType::BF16
                 ? e.i32
                 : Type(VectorType::get({2}, b.getF16Type()));
    chunkTy = VectorType::get({8}, e.i16);
    zeroChunk = arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(chunkTy, b.getI16IntegerAttr(0)));
    smemA = smemBase;
    smemB = e.gep(smemBase, b.getI8Type(), e.c32(tileM * ldsm * 2));

    Value warp = e.shru(tid, e.c32(5));
    Value lane = e.andi(tid, e.c32(31));
    group = e.shru(lane, e.c32(2));
    quad = e.andi(lane, e.c32(3));
    warpRow = e.mul(e.shru(warp, e.c32(1)), e.c32(32));
    warpCol = e.mul(e.andi(warp, e.c32(1)), e.c32(32));
    m0 = e.mul(ctaX, e.c32(tileM));
    n0 = e.mul(ctaY, e.c32(tileN));
    wHead = e.gep(w, e.i16, e.mul(e.zext64(head), e.c64(s.inDim * s.outDim)));
    aAlign = commonPow2({16, p.inRowStride * 2, p.inHeadStride * 2}, 16);
    bAlign = commonPow2({16, s.outDim * 2}, 16);
  }

  /// Input slice [64 x tileK] -> smemA[row][k], rows past T as zeros.
  void stageInputSlice(Value k0) {
    constexpr int64_t threads = abi::kProjMmaThreadsPerCta;
    e.forLoop(
        abi::kProjTileM * chunksPerRow / threads, {}, [&](Value i, ValueRange) {
          Value idx = e.add(e.mul(i, e.c32(threads)), tid);
          Value r = e.divu(idx, e.c32(chunksPerRow));
          Value ch = e.remu(idx, e.c32(chunksPerRow));
          Value t = e.add(m0, r);
          Value valid = e.slt(t, tokens);
          Value col = e.add(k0, e.mul(ch, e.c32(8)));
          Value src =
              e.gep(in, e.i16, inOffset(e.select(valid, t, e.c32(0)), col));
          Value v = e.select(valid, e.load(chunkTy, src, aAlign), zeroChunk);
          Value dst = e.gep(smemA, e.i16,
                            e.add(e.mul(r, e.c32(ldsm)), e.mul(ch, e.c32(8))));
          e.store(v, dst, 16);
          return SmallVector<Value>{};
        });
  }

  /// Weight slice [tileK x 64] -> smemB[col][k] (transposed), columns past
  /// outDim as zeros.
  void stageWeightSlice(Value k0) {
    constexpr int64_t threads = abi::kProjMmaThreadsPerCta;
    constexpr int64_t tileN = abi::kProjTileN;
    e.forLoop(tileK * (tileN / 8) / threads, {}, [&](Value i, ValueRange) {
      Value idx = e.add(e.mul(i, e.c32(threads)), tid);
      Value kr = e.divu(idx, e.c32(tileN / 8));
      Value cc = e.mul(e.remu(idx, e.c32(tileN / 8)), e.c32(8));
      Value col = e.add(n0, cc);
      Value valid = e.slt(col, e.c32(s.outDim));
      Value src = e.gep(wHead, e.i16,
                        e.add(e.mul(e.zext64(e.add(k0, kr)), e.c64(s.outDim)),
                              e.zext64(e.select(valid, col, e.c32(0)))));
      Value v = e.select(valid, e.load(chunkTy, src, bAlign), zeroChunk);
      for (int64_t j = 0; j < 8; ++j) {
        Value at = e.add(e.mul(e.add(cc, e.c32(j)), e.c32(ldsm)), kr);
        e.store(e.extract(v, j), e.gep(smemB, e.i16, at), 2);
      }
      return SmallVector<Value>{};
    });
  }

  /// Fragment (row, k) of a shared tile as one 32-bit load: i32 for bf16,
  /// vector<2xf16> for f16 (what nvvm.mma.sync accepts).
  Value loadFrag(Value base, Value row, int64_t k) {
    Value at =
        e.add(e.mul(row, e.c32(ldsm)), e.add(e.mul(quad, e.c32(2)), e.c32(k)));
    return e.load(fragTy, e.gep(base, e.i16, at), 4);
  }

  /// accs += the 16-wide k slice `kk` of the staged tiles: 2 x 4 m16n8k16
  /// tiles per warp.
  void multiplySlice(MutableArrayRef<Value> accs, int64_t kk) {
    bool bf16 = s.elem == abi::ActType::BF16;
    SmallVector<gpu_codegen::MmaFragA> aFrags;
    for (int64_t mt = 0; mt < 2; ++mt) {
      Value row = e.add(warpRow, e.add(group, e.c32(16 * mt)));
      Value row8 = e.add(row, e.c32(8));
      aFrags.push_back(
          {{loadFrag(smemA, row, kk), loadFrag(smemA, row8, kk),
            loadFrag(smemA, row, kk + 8), loadFrag(smemA, row8, kk + 8)}});
    }
    for (int64_t nt = 0; nt < 4; ++nt) {
      Value col = e.add(warpCol, e.add(group, e.c32(8 * nt)));
      Value b0 = loadFrag(smemB, col, kk), b1 = loadFrag(smemB, col, kk + 8);
      for (int64_t mt = 0; mt < 2; ++mt) {
        MutableArrayRef<Value> c = accs.slice((mt * 4 + nt) * 4, 4);
        gpu_codegen::MmaAccum d = gpu_codegen::mmaSync(
            e, aFrags[mt], {{b0, b1}}, {{c[0], c[1], c[2], c[3]}}, bf16);
        llvm::copy(d.regs, c.begin());
      }
    }
  }

  /// Each accumulator pair is two adjacent columns of one row.
  void storeTile(ArrayRef<Value> acc) {
    int64_t outAlign =
        commonPow2({4, p.outRowStride * 2, p.outHeadStride * 2}, 4);
    auto pairTy = VectorType::get({2}, p.elem);
    for (int64_t mt = 0; mt < 2; ++mt) {
      for (int64_t nt = 0; nt < 4; ++nt) {
        int64_t base = (mt * 4 + nt) * 4;
        Value col = e.add(
            n0, e.add(warpCol, e.add(e.mul(quad, e.c32(2)), e.c32(8 * nt))));
        for (int64_t half = 0; half < 2; ++half) {
          Value t = e.add(
              m0, e.add(warpRow, e.add(group, e.c32(16 * mt + 8 * half))));
          Value ok = e.andi(e.slt(t, tokens), e.slt(col, e.c32(s.outDim)));
          Value lo = acc[base + 2 * half], hi = acc[base + 2 * half + 1];
          e.ifThen(ok, [&] {
            Value v = e.poison(pairTy);
            v = e.insert(v, arith::TruncFOp::create(b, p.elem, lo), 0);
            v = e.insert(v, arith::TruncFOp::create(b, p.elem, hi), 1);
            e.store(v, e.gep(out, p.elem, outOffset(t, col)), outAlign);
          });
        }
      }
    }
  }
};

LogicalResult emitProjection(OpBuilder &builder, Operation *op,
                             FailureOr<Projection> p, StringRef base) {
  if (failed(p))
    return failure();
  Operation *module = builder.getInsertionBlock()->getParentOp();
  ImplicitLocOpBuilder b(op->getLoc(), builder);
  ProjectionKernel(b, *p).emit(gpu_codegen::uniqueSymbolName(module, base));
  return success();
}

} // namespace

namespace mla::gpu_codegen {

LogicalResult emitAbsorbQKernels(OpBuilder &builder, Operation *absorbQOp,
                                 gpu::Chip) {
  auto op = cast<AbsorbQOp>(absorbQOp);
  return emitProjection(builder, op,
                        planProjection(op, "absorb_q", op.getQ().getType(),
                                       op.getWUkT().getType(),
                                       /*withRope=*/true),
                        abi::kAbsorbQKernel);
}

LogicalResult emitUpProjOutKernels(OpBuilder &builder, Operation *upProjOutOp,
                                   gpu::Chip) {
  auto op = cast<UpProjOutOp>(upProjOutOp);
  return emitProjection(builder, op,
                        planProjection(op, "up_proj_out", op.getO().getType(),
                                       op.getWUv().getType(),
                                       /*withRope=*/false),
                        abi::kUpProjOutKernel);
}

} // namespace mla::gpu_codegen
