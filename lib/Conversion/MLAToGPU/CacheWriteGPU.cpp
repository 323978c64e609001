//===- CacheWriteGPU.cpp - GPU kernel of mla.cache_write ------------------===//
//
// Emits `mla_cache_write` (contract in mla/Contract/CacheProjectionABI.h)
// at the LLVM/NVVM dialect level: one warp per token; each lane handles
// groups of consecutive row entries with one vector load and one vector
// store (16 bytes where the row widths allow). Scaled formats reduce the
// amax with warp shuffles (the whole row for fp8_e4m3_token, each 8-lane
// 128-entry tile for fp8_ds_mla) before quantising. fp8_e4m3 divides by
// the f32 its kv_scale parameter points at, loaded once per warp, not by the
// layout's `scale` (the CPU lowering's constant): one image serves every
// scale (CacheProjectionABI.h).
//
// The codecs repeat the CPU lowering's integer algorithms
// (lib/Conversion/MLAToLinalg/LoweringUtils.cpp) operation for operation
// rather than using cvt.e4m3x2, so that the caches are byte-identical
// including NaN sign bits and bf16 NaN payloads.
//
//===----------------------------------------------------------------------===//

#include "mla/Contract/CacheProjectionABI.h"
#include "mla/Conversion/MLAToGPU/MLAToGPU.h"
#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mla/GPUCodegen/DeviceBuilder.h"
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

constexpr double kE4M3Max = 448.0;
constexpr double kAmaxFloor = 1e-4;

/// Largest power of two dividing `v`, capped at `cap` (`cap` for v == 0).
int64_t pow2Divisor(int64_t v, int64_t cap) {
  if (v == 0)
    return cap;
  return std::min<int64_t>(cap, int64_t(1) << llvm::countr_zero(uint64_t(v)));
}

/// Largest power of two <= cap dividing every value of `vs`.
int64_t commonPow2(std::initializer_list<int64_t> vs, int64_t cap) {
  int64_t r = cap;
  for (int64_t v : vs)
    r = std::min(r, pow2Divisor(v, cap));
  return r;
}

/// The kernel body's builder: DeviceBuilder plus the codecs.
struct Emit : gpu_codegen::DeviceBuilder {
  using DeviceBuilder::DeviceBuilder;

  /// |x| by clearing the sign bit (convert-gpu-to-nvvm would turn
  /// llvm.intr.fabs into a libdevice call).
  Value fabs(Value x) {
    Value bits = arith::BitcastOp::create(b, i32, x);
    return arith::BitcastOp::create(b, f32, bitAnd(bits, c32(0x7FFFFFFF)));
  }
  Value toF32(Value v) {
    if (v.getType().isF32())
      return v;
    return arith::ExtFOp::create(b, f32, v);
  }

  /// Butterfly max over lanes that differ in the bits of `width - 1`.
  Value warpMax(Value v, int64_t width) {
    for (int64_t off = width / 2; off >= 1; off /= 2)
      v = fmaximum(v, shflXor(v, off));
    return v;
  }

  /// f32 -> float8 E4M3FN byte: round to nearest even, saturate at +-448,
  /// NaN -> 0x7F with the sign kept (LoweringUtils.cpp's encodeE4M3).
  Value encodeE4M3(Value x) {
    Value bits = arith::BitcastOp::create(b, i32, x);
    Value sign = bitAnd(shru(bits, c32(24)), c32(0x80));
    Value a = fabs(x);
    a = LLVM::MinimumOp::create(b, a, f(kE4M3Max));
    Value scaled = fmul(a, f(512.0));
    // llvm.intr.roundeven is also rewritten into a libdevice call by
    // convert-gpu-to-nvvm; the generic intrinsic call is left alone and
    // becomes cvt.rni.f32.f32.
    Value even = callIntrinsic("llvm.roundeven.f32", scaled);
    Value subCode = arith::FPToUIOp::create(b, i32, even);
    Value abits = arith::BitcastOp::create(b, i32, a);
    Value lsb = bitAnd(shru(abits, c32(20)), c32(1));
    Value rounded = add(abits, add(c32(0x7FFFF), lsb));
    Value normCode = sub(shru(rounded, c32(20)), c32(120 << 3));
    Value isSub = fcmp(arith::CmpFPredicate::OLT, a, f(1.0 / 64.0));
    Value code = select(isSub, subCode, normCode);
    Value isNan = fcmp(arith::CmpFPredicate::UNO, x, x);
    code = select(isNan, c32(0x7F), code);
    code = ori(code, sign);
    return arith::TruncIOp::create(b, i8, code);
  }

  /// f32 -> bf16 bits (i16): nearest even, NaN -> 0x7FC0
  /// (LoweringUtils.cpp's encodeBF16Bits).
  Value encodeBF16(Value x) {
    Value bits = arith::BitcastOp::create(b, i32, x);
    Value lsb = bitAnd(shru(bits, c32(16)), c32(1));
    Value rounded = shru(add(bits, add(c32(0x7FFF), lsb)), c32(16));
    Value isNan = fcmp(arith::CmpFPredicate::UNO, x, x);
    return arith::TruncIOp::create(b, i16, select(isNan, c32(0x7FC0), rounded));
  }
};

/// What the kernel body needs to know about one cache_write op.
struct CacheWritePlan {
  abi::CacheWriteShape shape;
  Type inElem;    // kv_c / k_pe element type
  Type cacheElem; // bf16 / f16 / f32 for the float formats
};

FailureOr<CacheWritePlan> planCacheWrite(CacheWriteOp op) {
  auto kvTy = op.getKvC().getType();
  auto peTy = op.getKPe().getType();
  auto cacheTy = op.getCache().getType();
  int64_t latent = kvTy.getDimSize(1);
  int64_t rope = peTy.getDimSize(peTy.getRank() - 1);
  if (ShapedType::isDynamic(latent) || ShapedType::isDynamic(rope))
    return op.emitOpError() << "GPU cache_write needs static L and R (kv_c "
                            << kvTy << ", k_pe " << peTy << ")";
  CacheWritePlan plan;
  plan.inElem = kvTy.getElementType();
  plan.cacheElem = cacheTy.getElementType();
  if (plan.inElem.isBF16())
    plan.shape.input = abi::ActType::BF16;
  else if (plan.inElem.isF16())
    plan.shape.input = abi::ActType::F16;
  else if (plan.inElem.isF32())
    plan.shape.input = abi::ActType::F32;
  else
    return op.emitOpError() << "GPU cache_write reads bf16, f16 or f32 "
                               "kv_c/k_pe, got "
                            << plan.inElem;
  plan.shape.latentDim = latent;
  plan.shape.ropeDim = rope;
  CacheLayoutAttr layout = op.getLayout();
  switch (layout.getFormat()) {
  case RowFormat::bf16:
    plan.shape.format = abi::CacheFormat::BF16;
    break;
  case RowFormat::f16:
    plan.shape.format = abi::CacheFormat::F16;
    break;
  case RowFormat::f32:
    plan.shape.format = abi::CacheFormat::F32;
    break;
  case RowFormat::fp8_e4m3:
    plan.shape.format = abi::CacheFormat::FP8E4M3;
    break;
  case RowFormat::fp8_e4m3_token:
    plan.shape.format = abi::CacheFormat::FP8E4M3Token;
    break;
  case RowFormat::fp8_ds_mla:
    plan.shape.format = abi::CacheFormat::FP8DsMla;
    if (latent % abi::kDsMlaTile != 0)
      return op.emitOpError() << "GPU cache_write: fp8_ds_mla needs L % "
                              << abi::kDsMlaTile << " == 0, got L = " << latent;
    break;
  }
  int64_t rowBytes = abi::cacheRowBytes(plan.shape);
  int64_t stored = cacheTy.getDimSize(2);
  int64_t storedBytes =
      ShapedType::isDynamic(stored)
          ? ShapedType::kDynamic
          : stored * (plan.cacheElem.getIntOrFloatBitWidth() / 8);
  if (storedBytes != rowBytes)
    return op.emitOpError()
           << "GPU cache_write needs a static cache row of " << rowBytes
           << " bytes for this format, got " << cacheTy;
  return plan;
}

/// The kernel body for one token whose row starts at `row` (i8 pointer);
/// `kvRow` and `peRow` point at the token's kv_c and k_pe rows, `lane` is
/// the lane id (i32), `kvScale` the kv_scale parameter (fp8_e4m3 only).
class RowWriter {
public:
  RowWriter(Emit &e, const CacheWritePlan &plan, Value kvRow, Value peRow,
            Value row, Value lane, Value kvScale)
      : e(e), plan(plan), s(plan.shape), kvRow(kvRow), peRow(peRow), row(row),
        lane(lane), kvScale(kvScale), inBytes(abi::actBytes(s.input)),
        rowBytes(abi::cacheRowBytes(s)) {}

  void emit() {
    switch (s.format) {
    case abi::CacheFormat::BF16:
    case abi::CacheFormat::F16:
    case abi::CacheFormat::F32:
      return emitElementwise(plan.cacheElem.getIntOrFloatBitWidth() / 8,
                             nullptr);
    case abi::CacheFormat::FP8E4M3: {
      Value scale = e.load(e.f32, kvScale, 4);
      return emitElementwise(
          1, [&](Value x) { return e.encodeE4M3(e.fdiv(x, scale)); });
    }
    case abi::CacheFormat::FP8E4M3Token:
      return emitPerToken();
    case abi::CacheFormat::FP8DsMla:
      return emitDsMla();
    }
  }

private:
  Emit &e;
  const CacheWritePlan &plan;
  const abi::CacheWriteShape &s;
  Value kvRow, peRow, row, lane, kvScale;
  int64_t inBytes, rowBytes;

  int64_t rowDim() const { return s.latentDim + s.ropeDim; }

  /// Loads the `vec` inputs from row entry `first` on (a multiple of `vec`,
  /// all latent or all RoPE) as f32 values, or only as the loaded vector
  /// into `raw` when that is given.
  SmallVector<Value> loadGroup(Value first, int64_t vec, Value isLatent,
                               Value *raw = nullptr) {
    Value kvPtr = e.gep(kvRow, plan.inElem, first);
    Value pePtr = e.gep(peRow, plan.inElem, e.sub(first, e.c32(s.latentDim)));
    Value ptr = e.select(isLatent, kvPtr, pePtr);
    auto vecTy = VectorType::get({vec}, plan.inElem);
    Value v = e.load(vecTy, ptr, std::min<int64_t>(16, vec * inBytes));
    SmallVector<Value> xs;
    if (raw) {
      *raw = v;
      return xs;
    }
    for (int64_t i = 0; i < vec; ++i)
      xs.push_back(e.toF32(e.extract(v, i)));
    return xs;
  }

  /// Bytes of byte-vector stores at row offset `off` (a multiple of
  /// `width`) may assume.
  int64_t storeAlign(int64_t width, int64_t firstOffset) const {
    return commonPow2({width, rowBytes, firstOffset}, 16);
  }

  /// One stored element per row entry: `encode(x)` gives the stored byte
  /// (fp8), or, when null, the entry is converted to the cache element type
  /// (`outBytes` wide).
  void emitElementwise(int64_t outBytes, function_ref<Value(Value)> encode) {
    int64_t vec = commonPow2({s.latentDim, s.ropeDim}, 16 / outBytes);
    int64_t groups = rowDim() / vec;
    Type outElem = encode ? e.i8 : plan.cacheElem;
    auto outTy = VectorType::get({vec}, outElem);
    int64_t align = storeAlign(vec * outBytes, 0);
    e.forLoop(llvm::divideCeil(groups, 32), {}, [&](Value i, ValueRange) {
      Value g = e.add(e.mul(i, e.c32(32)), lane);
      e.ifThen(e.cmp(arith::CmpIPredicate::slt, g, e.c32(groups)), [&] {
        Value first = e.mul(g, e.c32(vec));
        Value isLatent =
            e.cmp(arith::CmpIPredicate::slt, first, e.c32(s.latentDim));
        Value out;
        if (!encode && plan.inElem == plan.cacheElem) {
          // A bit-exact copy, as in the CPU lowering.
          loadGroup(first, vec, isLatent, &out);
        } else {
          SmallVector<Value> xs = loadGroup(first, vec, isLatent);
          out = e.poison(outTy);
          for (int64_t k = 0; k < vec; ++k) {
            Value y = xs[k];
            if (encode)
              y = encode(xs[k]);
            else if (!plan.cacheElem.isF32())
              y = arith::TruncFOp::create(e.b, plan.cacheElem, y);
            out = e.insert(out, y, k);
          }
        }
        Value dst = e.gep(row, e.i8, e.zext64(e.mul(first, e.c32(outBytes))));
        e.store(out, dst, align);
      });
      return SmallVector<Value>{};
    });
  }

  /// Max of |x| over `xs`, starting from `init`.
  Value groupAmax(ArrayRef<Value> xs, Value init) {
    Value m = init;
    for (Value x : xs)
      m = e.fmaximum(m, e.fabs(x));
    return m;
  }

  /// fp8_e4m3_token: D e4m3 bytes (latent scaled by s0, RoPE by s1), then
  /// s0 and s1 as f32. Pass 1 reduces both amaxes over the warp, pass 2
  /// quantises (re-reading the row, which is in L1 by then).
  void emitPerToken() {
    int64_t vec = commonPow2({s.latentDim, s.ropeDim}, 16);
    int64_t groups = rowDim() / vec;
    int64_t iters = llvm::divideCeil(groups, 32);
    Value floor = e.f(kAmaxFloor);
    SmallVector<Value> amax =
        e.forLoop(iters, {floor, floor}, [&](Value i, ValueRange acc) {
          Value g = e.add(e.mul(i, e.c32(32)), lane);
          Value active = e.cmp(arith::CmpIPredicate::slt, g, e.c32(groups));
          Value first = e.mul(e.select(active, g, e.c32(0)), e.c32(vec));
          Value isLatent =
              e.cmp(arith::CmpIPredicate::slt, first, e.c32(s.latentDim));
          Value m = groupAmax(loadGroup(first, vec, isLatent), floor);
          Value toLatent = e.andi(active, isLatent);
          Value toRope = e.andi(active, e.bitXor(isLatent, e.cbool(true)));
          return SmallVector<Value>{
              e.select(toLatent, e.fmaximum(acc[0], m), acc[0]),
              e.select(toRope, e.fmaximum(acc[1], m), acc[1])};
        });
    Value max = e.f(kE4M3Max);
    Value s0 = e.fdiv(e.warpMax(amax[0], 32), max);
    Value s1 = e.fdiv(e.warpMax(amax[1], 32), max);

    int64_t align = storeAlign(vec, 0);
    auto outTy = VectorType::get({vec}, e.i8);
    e.forLoop(iters, {}, [&](Value i, ValueRange) {
      Value g = e.add(e.mul(i, e.c32(32)), lane);
      e.ifThen(e.cmp(arith::CmpIPredicate::slt, g, e.c32(groups)), [&] {
        Value first = e.mul(g, e.c32(vec));
        Value isLatent =
            e.cmp(arith::CmpIPredicate::slt, first, e.c32(s.latentDim));
        Value scale = e.select(isLatent, s0, s1);
        SmallVector<Value> xs = loadGroup(first, vec, isLatent);
        Value out = e.poison(outTy);
        for (int64_t k = 0; k < vec; ++k)
          out = e.insert(out, e.encodeE4M3(e.fdiv(xs[k], scale)), k);
        e.store(out, e.gep(row, e.i8, e.zext64(first)), align);
      });
      return SmallVector<Value>{};
    });
    e.ifThen(e.cmp(arith::CmpIPredicate::eq, lane, e.c32(0)), [&] {
      int64_t d = rowDim();
      e.store(s0, e.gep(row, e.i8, e.c64(d)), storeAlign(4, d));
      e.store(s1, e.gep(row, e.i8, e.c64(d + 4)), storeAlign(4, d + 4));
    });
  }

  /// fp8_ds_mla: 16 latent entries per lane, 8 lanes per 128-entry tile
  /// (a warp covers 4 tiles per step), the tile amax by 3 shuffles; then the
  /// RoPE part as bf16.
  void emitDsMla() {
    constexpr int64_t vec = 16;
    constexpr int64_t lanesPerTile = abi::kDsMlaTile / vec;
    int64_t groups = s.latentDim / vec;
    Value floor = e.f(kAmaxFloor);
    Value max = e.f(kE4M3Max);
    auto outTy = VectorType::get({vec}, e.i8);
    int64_t align = storeAlign(vec, 0);
    // Every lane runs every step (inactive ones on entry 0) so that the
    // shuffles see a full warp.
    e.forLoop(llvm::divideCeil(groups, 32), {}, [&](Value i, ValueRange) {
      Value g = e.add(e.mul(i, e.c32(32)), lane);
      Value active = e.cmp(arith::CmpIPredicate::slt, g, e.c32(groups));
      Value first = e.mul(e.select(active, g, e.c32(0)), e.c32(vec));
      Value isLatent = e.cbool(true);
      SmallVector<Value> xs = loadGroup(first, vec, isLatent);
      Value amax = e.warpMax(groupAmax(xs, floor), lanesPerTile);
      Value scale = e.fdiv(amax, max);
      e.ifThen(active, [&] {
        Value out = e.poison(outTy);
        for (int64_t k = 0; k < vec; ++k)
          out = e.insert(out, e.encodeE4M3(e.fdiv(xs[k], scale)), k);
        e.store(out, e.gep(row, e.i8, e.zext64(first)), align);
        Value leader = e.cmp(arith::CmpIPredicate::eq,
                             e.bitAnd(lane, e.c32(lanesPerTile - 1)), e.c32(0));
        e.ifThen(leader, [&] {
          Value tile = e.divu(g, e.c32(lanesPerTile));
          Value off = e.add(e.c32(s.latentDim), e.mul(tile, e.c32(4)));
          e.store(scale, e.gep(row, e.i8, e.zext64(off)),
                  storeAlign(4, s.latentDim));
        });
      });
      return SmallVector<Value>{};
    });

    int64_t ropeBase = abi::dsMlaRopeOffset(s.latentDim);
    int64_t rvec = commonPow2({s.ropeDim}, 8);
    int64_t rgroups = s.ropeDim / rvec;
    auto ropeTy = VectorType::get({rvec}, e.i16);
    int64_t ropeAlign = storeAlign(2 * rvec, ropeBase);
    e.forLoop(llvm::divideCeil(rgroups, 32), {}, [&](Value i, ValueRange) {
      Value g = e.add(e.mul(i, e.c32(32)), lane);
      e.ifThen(e.cmp(arith::CmpIPredicate::slt, g, e.c32(rgroups)), [&] {
        Value r = e.mul(g, e.c32(rvec));
        Value notLatent = e.cbool(false);
        SmallVector<Value> xs =
            loadGroup(e.add(r, e.c32(s.latentDim)), rvec, notLatent);
        Value out = e.poison(ropeTy);
        for (int64_t k = 0; k < rvec; ++k)
          out = e.insert(out, e.encodeBF16(xs[k]), k);
        Value off = e.add(e.c32(ropeBase), e.mul(r, e.c32(2)));
        e.store(out, e.gep(row, e.i8, e.zext64(off)), ropeAlign);
      });
      return SmallVector<Value>{};
    });
  }
};

} // namespace

namespace mla::gpu_codegen {

LogicalResult emitCacheWriteKernels(OpBuilder &builder, Operation *cacheWriteOp,
                                    gpu::Chip) {
  auto op = cast<CacheWriteOp>(cacheWriteOp);
  FailureOr<CacheWritePlan> plan = planCacheWrite(op);
  if (failed(plan))
    return failure();

  Operation *module = builder.getInsertionBlock()->getParentOp();
  ImplicitLocOpBuilder b(op.getLoc(), builder);
  Emit e(b);
  SmallVector<Type> params = {e.ptrGlobal, e.ptrGlobal, e.ptrGlobal,
                              e.ptrGlobal, e.i32,       e.i32};
  if (abi::kernelTakesKvScale(plan->shape.format))
    params.push_back(e.ptrGlobal);
  auto fn = gpu_codegen::createKernel(
      b, gpu_codegen::uniqueSymbolName(module, abi::kCacheWriteKernel), params,
      abi::kCacheWriteThreadsPerCta, /*setMaxNTid=*/false);
  Block &entry = fn.getBody().front();
  Value kvC = entry.getArgument(0), kPe = entry.getArgument(1);
  Value slots = entry.getArgument(2), cache = entry.getArgument(3);
  Value tokens = entry.getArgument(4), numSlots = entry.getArgument(5);
  Value kvScale = params.size() > 6 ? entry.getArgument(6) : Value();
  Type i32 = e.i32;

  Value tid = e.threadIdX();
  Value cta = e.blockIdX();
  Value lane = e.bitAnd(tid, e.c32(31));
  Value warp = e.shru(tid, e.c32(5));
  Value t = e.add(e.mul(cta, e.c32(abi::kCacheWriteTokensPerCta)), warp);
  // Whole warps drop out here, so the shuffles below see full warps.
  e.ifThen(e.cmp(arith::CmpIPredicate::slt, t, tokens), [&] {
    Value t64 = e.zext64(t);
    Value slot = e.load(i32, e.gep(slots, i32, t64), 4);
    // One unsigned compare rejects padding (negative) and too-large slots.
    e.ifThen(e.cmp(arith::CmpIPredicate::ult, slot, numSlots), [&] {
      const abi::CacheWriteShape &s = plan->shape;
      Value row = e.gep(cache, e.i8,
                        e.mul(e.zext64(slot), e.c64(abi::cacheRowBytes(s))));
      Value kvRow = e.gep(kvC, plan->inElem, e.mul(t64, e.c64(s.latentDim)));
      Value peRow = e.gep(kPe, plan->inElem, e.mul(t64, e.c64(s.ropeDim)));
      RowWriter(e, *plan, kvRow, peRow, row, lane, kvScale).emit();
    });
  });
  mlir::gpu::ReturnOp::create(b);
  return success();
}

} // namespace mla::gpu_codegen
