//===- GatherCacheGPU.cpp - GPU kernel of mla.gather_cache ----------------===//
//
// Emits `mla_gather_cache` (contract in mla/Contract/PrefillABI.h): one warp
// per workspace row. The warp finds its request by a binary search of
// cu_rows (the Segments block: the grid depends only on the workspace size,
// so the launch can be captured in a graph), resolves the row's page through
// the block table with bounds checks, and copies the row with one vector load
// and one 16-byte vector store per lane and step, dequantising on the way.
//
// The fp8 and bf16 decoders (the Fp8Dequant block) repeat the CPU lowering's
// integer algorithms (lib/Conversion/MLAToLinalg/LoweringUtils.cpp) so that
// both paths give the same f32 values, NaN codes included, before the one
// rounding to the workspace type. fp8_e4m3 multiplies by the f32 its kv_scale
// parameter points at, loaded once per warp, not by the layout's `scale` (the
// CPU lowering's constant): one image serves every scale (PrefillABI.h).
//
//===----------------------------------------------------------------------===//

#include "mla/Contract/PrefillABI.h"
#include "mla/Conversion/MLAToGPU/MLAToGPU.h"
#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mla/GPUCodegen/DeviceBuilder.h"
#include "mla/GPUCodegen/Fp8Dequant.h"
#include "mla/GPUCodegen/Segments.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
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

/// What the kernel needs to know about one gather_cache op.
struct GatherPlan {
  abi::GatherCacheShape shape;
  Type wsElem;
  Type cacheElem;
  /// Whether rows split into a latent and a RoPE part with different
  /// decoding (fp8_e4m3_token, fp8_ds_mla).
  bool split = false;
  int64_t rowDim = 0; // L+R, the workspace row
};

LogicalResult setFormat(GatherCacheOp op, GatherPlan &plan) {
  abi::CacheWriteShape &s = plan.shape.row;
  CacheLayoutAttr layout = op.getLayout();
  switch (layout.getFormat()) {
  case RowFormat::bf16:
    s.format = abi::CacheFormat::BF16;
    return success();
  case RowFormat::f16:
    s.format = abi::CacheFormat::F16;
    return success();
  case RowFormat::f32:
    s.format = abi::CacheFormat::F32;
    return success();
  case RowFormat::fp8_e4m3:
    s.format = abi::CacheFormat::FP8E4M3;
    return success();
  case RowFormat::fp8_e4m3_token:
    s.format = abi::CacheFormat::FP8E4M3Token;
    plan.split = true;
    return success();
  case RowFormat::fp8_ds_mla:
    s.format = abi::CacheFormat::FP8DsMla;
    plan.split = true;
    return success();
  }
  return failure();
}

/// The latent width L: the op's latent_dim, else (fp8_ds_mla) what the row
/// widths imply, else the whole row (formats that decode every entry alike).
int64_t latentDimOf(GatherCacheOp op, int64_t rowDim, int64_t stored) {
  if (IntegerAttr latent = op.getLatentDimAttr())
    return latent.getInt();
  if (op.getLayout().getFormat() == RowFormat::fp8_ds_mla)
    return 32 * (2 * rowDim - stored) / 31;
  return rowDim;
}

FailureOr<GatherPlan> planGather(GatherCacheOp op) {
  auto wsTy = op.getWorkspace().getType();
  auto cacheTy = op.getCache().getType();
  GatherPlan plan;
  plan.wsElem = wsTy.getElementType();
  plan.cacheElem = cacheTy.getElementType();
  if (plan.wsElem.isBF16())
    plan.shape.row.input = abi::ActType::BF16;
  else if (plan.wsElem.isF16())
    plan.shape.row.input = abi::ActType::F16;
  else if (plan.wsElem.isF32())
    plan.shape.row.input = abi::ActType::F32;
  else
    return op.emitOpError() << "GPU gather_cache writes a bf16, f16 or f32 "
                               "workspace, got "
                            << plan.wsElem;
  int64_t rowDim = wsTy.getDimSize(1);
  int64_t page = cacheTy.getDimSize(1), stored = cacheTy.getDimSize(2);
  if (ShapedType::isDynamic(rowDim) || ShapedType::isDynamic(page) ||
      ShapedType::isDynamic(stored))
    return op.emitOpError() << "GPU gather_cache needs a static page size and "
                               "static row widths, got "
                            << cacheTy << " into " << wsTy;
  if (failed(setFormat(op, plan)))
    return failure();
  plan.rowDim = rowDim;
  plan.shape.pageSize = page;
  abi::CacheWriteShape &s = plan.shape.row;
  s.latentDim = latentDimOf(op, rowDim, stored);
  s.ropeDim = rowDim - s.latentDim;
  if (s.format == abi::CacheFormat::FP8DsMla && s.latentDim % abi::kDsMlaTile)
    return op.emitOpError()
           << "GPU gather_cache: fp8_ds_mla needs L % " << abi::kDsMlaTile
           << " == 0, got L = " << s.latentDim;
  int64_t storedBytes = stored * (plan.cacheElem.getIntOrFloatBitWidth() / 8);
  if (storedBytes != abi::cacheRowBytes(s))
    return op.emitOpError()
           << "GPU gather_cache: a row of L = " << s.latentDim
           << ", R = " << s.ropeDim << " in this format is "
           << abi::cacheRowBytes(s) << " bytes, the cache's " << storedBytes;
  return plan;
}

class GatherKernel {
public:
  GatherKernel(ImplicitLocOpBuilder &b, const GatherPlan &plan)
      : b(b), e(b), plan(plan), s(plan.shape.row),
        rowBytes(abi::cacheRowBytes(s)),
        wsBytes(plan.wsElem.getIntOrFloatBitWidth() / 8) {
    vec = plan.split ? commonPow2({s.latentDim, s.ropeDim}, 16 / wsBytes)
                     : commonPow2({plan.rowDim}, 16 / wsBytes);
  }

  void emit(StringRef name);

private:
  /// Copies cache row `row` (i8 pointer) into workspace row `wsRow`, the
  /// lanes striding over groups of `vec` entries.
  void copyRow(Value row, Value wsRow, Value lane);
  /// The `vec` entries from `first` of a row, as a vector in the workspace
  /// type.
  Value loadGroup(Value row, Value first);
  /// `vec` bytes of e4m3 at byte `off` times `scale`.
  SmallVector<Value> loadFp8(Value row, Value off, int64_t align, Value scale);
  Value toWorkspace(ArrayRef<Value> xs);

  ImplicitLocOpBuilder &b;
  gpu_codegen::DeviceBuilder e;
  const GatherPlan &plan;
  const abi::CacheWriteShape &s;
  int64_t rowBytes, wsBytes, vec;
  Value cache, blockTable, starts, cuRows, workspace, batch, maxPages, numPages,
      wsRows;
  /// fp8_e4m3's scale, loaded from the kv_scale parameter.
  Value kvScale;
};

} // namespace

void GatherKernel::emit(StringRef name) {
  Type g = e.ptrGlobal, i32 = e.i32;
  SmallVector<Type> params = {g, g, g, g, g, i32, i32, i32, i32};
  bool scaled = abi::kernelTakesKvScale(s.format);
  if (scaled)
    params.push_back(g);
  auto fn =
      gpu_codegen::createKernel(b, name, params, abi::kGatherThreadsPerCta);
  cache = fn.getArgument(0), blockTable = fn.getArgument(1),
  starts = fn.getArgument(2), cuRows = fn.getArgument(3),
  workspace = fn.getArgument(4), batch = fn.getArgument(5),
  maxPages = fn.getArgument(6), numPages = fn.getArgument(7),
  wsRows = fn.getArgument(8);

  Value tid = e.threadIdX();
  Value lane = e.bitAnd(tid, e.c32(31));
  Value r = e.add(e.mul(e.blockIdX(), e.c32(abi::kGatherRowsPerCta)),
                  e.shru(tid, e.c32(5)));
  e.ifThen(e.slt(r, wsRows), [&] {
    // The row's request: how many of cu_rows[0..B] are <= r.
    Value count = gpu_codegen::upperBound(e, cuRows, e.add(batch, e.c32(1)), r);
    Value inBatch = e.andi(e.sge(count, e.c32(1)), e.sle(count, batch));
    e.ifThen(inBatch, [&] {
      Value req = e.sub(count, e.c32(1));
      Value first = e.load(i32, e.gep(cuRows, i32, req), 4);
      Value pos =
          e.add(e.load(i32, e.gep(starts, i32, req), 4), e.sub(r, first));
      Value logicalPage = e.divu(pos, e.c32(plan.shape.pageSize));
      // A negative position is a huge unsigned page: one compare each.
      Value pageOk =
          e.andi(e.sge(pos, e.c32(0)),
                 e.cmp(arith::CmpIPredicate::ult, logicalPage, maxPages));
      e.ifThen(pageOk, [&] {
        Value entry = e.add(e.mul(e.zext64(req), e.zext64(maxPages)),
                            e.zext64(logicalPage));
        Value page = e.load(i32, e.gep(blockTable, i32, entry), 4);
        e.ifThen(e.cmp(arith::CmpIPredicate::ult, page, numPages), [&] {
          if (scaled)
            kvScale = e.load(e.f32, fn.getArgument(9), 4);
          Value slot = e.add(e.mul(e.zext64(page), e.c64(plan.shape.pageSize)),
                             e.zext64(e.remu(pos, e.c32(plan.shape.pageSize))));
          Value row = e.gep(cache, e.i8, e.mul(slot, e.c64(rowBytes)));
          Value wsRow = e.gep(workspace, plan.wsElem,
                              e.mul(e.zext64(r), e.c64(plan.rowDim)));
          copyRow(row, wsRow, lane);
        });
      });
    });
  });
  mlir::gpu::ReturnOp::create(b);
}

void GatherKernel::copyRow(Value row, Value wsRow, Value lane) {
  int64_t groups = plan.rowDim / vec;
  int64_t storeAlign = commonPow2({plan.rowDim * wsBytes, vec * wsBytes}, 16);
  e.forLoop(llvm::divideCeil(groups, 32), {}, [&](Value i, ValueRange) {
    Value g = e.add(e.mul(i, e.c32(32)), lane);
    e.ifThen(e.slt(g, e.c32(groups)), [&] {
      Value first = e.mul(g, e.c32(vec));
      e.store(loadGroup(row, first), e.gep(wsRow, plan.wsElem, first),
              storeAlign);
    });
    return SmallVector<Value>{};
  });
}

SmallVector<Value> GatherKernel::loadFp8(Value row, Value off, int64_t align,
                                         Value scale) {
  auto ty = VectorType::get({vec}, e.i8);
  Value bytes = e.load(ty, e.gep(row, e.i8, off), align);
  SmallVector<Value> xs;
  for (int64_t k = 0; k < vec; ++k)
    xs.push_back(
        e.fmul(gpu_codegen::decodeE4M3(e, e.extract(bytes, k)), scale));
  return xs;
}

Value GatherKernel::toWorkspace(ArrayRef<Value> xs) {
  Value out = e.poison(VectorType::get({vec}, plan.wsElem));
  for (auto [k, x] : llvm::enumerate(xs))
    out = e.insert(out,
                   plan.wsElem.isF32()
                       ? x
                       : arith::TruncFOp::create(b, plan.wsElem, x).getResult(),
                   k);
  return out;
}

Value GatherKernel::loadGroup(Value row, Value first) {
  int64_t L = s.latentDim;
  switch (s.format) {
  case abi::CacheFormat::BF16:
  case abi::CacheFormat::F16:
  case abi::CacheFormat::F32: {
    int64_t bytes = plan.cacheElem.getIntOrFloatBitWidth() / 8;
    auto ty = VectorType::get({vec}, plan.cacheElem);
    Value v = e.load(ty, e.gep(row, plan.cacheElem, first),
                     commonPow2({rowBytes, vec * bytes}, 16));
    if (plan.cacheElem == plan.wsElem)
      return v; // a bit-exact copy, as in the CPU lowering
    SmallVector<Value> xs;
    for (int64_t k = 0; k < vec; ++k) {
      Value x = e.extract(v, k);
      xs.push_back(x.getType().isF32()
                       ? x
                       : arith::ExtFOp::create(b, e.f32, x).getResult());
    }
    return toWorkspace(xs);
  }
  case abi::CacheFormat::FP8E4M3:
    return toWorkspace(
        loadFp8(row, first, commonPow2({rowBytes, vec}, 16), kvScale));
  case abi::CacheFormat::FP8E4M3Token: {
    // s0 (latent) and s1 (RoPE) follow the L+R bytes.
    int64_t d = L + s.ropeDim;
    Value s0 = e.load(e.f32, e.gep(row, e.i8, e.c64(d)), 4);
    Value s1 = e.load(e.f32, e.gep(row, e.i8, e.c64(d + 4)), 4);
    Value scale = e.select(e.slt(first, e.c32(L)), s0, s1);
    return toWorkspace(
        loadFp8(row, first, commonPow2({rowBytes, vec}, 16), scale));
  }
  case abi::CacheFormat::FP8DsMla:
    break;
  }
  // fp8_ds_mla: e4m3 latent tiles with an f32 scale each, then bf16 RoPE.
  auto vecTy = VectorType::get({vec}, plan.wsElem);
  auto ifOp = scf::IfOp::create(b, TypeRange{vecTy}, e.slt(first, e.c32(L)),
                                /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  Value scaleOff =
      e.add(e.c32(L), e.mul(e.divu(first, e.c32(abi::kDsMlaTile)), e.c32(4)));
  Value scale = e.load(e.f32, e.gep(row, e.i8, scaleOff), 4);
  scf::YieldOp::create(
      b,
      toWorkspace(loadFp8(row, first, commonPow2({rowBytes, vec}, 16), scale)));
  b.setInsertionPointToStart(ifOp.elseBlock());
  int64_t ropeBase = abi::dsMlaRopeOffset(L);
  Value off = e.add(e.c32(ropeBase), e.mul(e.sub(first, e.c32(L)), e.c32(2)));
  Value bits = e.load(VectorType::get({vec}, e.i16), e.gep(row, e.i8, off),
                      commonPow2({rowBytes, ropeBase, 2 * vec}, 16));
  SmallVector<Value> xs;
  for (int64_t k = 0; k < vec; ++k)
    xs.push_back(gpu_codegen::decodeBF16(e, e.extract(bits, k)));
  scf::YieldOp::create(b, toWorkspace(xs));
  return ifOp.getResult(0);
}

namespace mla::gpu_codegen {

LogicalResult emitGatherCacheKernels(OpBuilder &builder, Operation *gatherOp,
                                     gpu::Chip) {
  auto op = cast<GatherCacheOp>(gatherOp);
  FailureOr<GatherPlan> plan = planGather(op);
  if (failed(plan))
    return failure();
  Operation *module = builder.getInsertionBlock()->getParentOp();
  ImplicitLocOpBuilder b(op.getLoc(), builder);
  GatherKernel(b, *plan).emit(
      uniqueSymbolName(module, abi::kGatherCacheKernel));
  return success();
}

} // namespace mla::gpu_codegen
