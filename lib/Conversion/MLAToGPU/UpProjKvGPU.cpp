//===- UpProjKvGPU.cpp - GPU kernel of mla.up_proj_kv ---------------------===//
//
// Emits `mla_up_proj_kv` (contract in mla/Contract/PrefillABI.h): the
// [S, L] x [L, N*(P+V)] product of prefill's up-projection, as a composition
// of the GPUCodegen blocks: a 2-stage cp.async StageRing of 64-deep K slices
// (zero-filled past S and past N*(P+V)) in ChunkXor shared tiles, ldmatrix
// fragments (kv_b_proj rows are K-contiguous, so B is read n-major without a
// transpose) and mma.sync m16n8k16 with f32 accumulators. Each output column
// c = n*(P+V) + j goes to k_nope[s, n, j] for j < P and to v[s, n, j-P]
// otherwise; P and V are even, so an accumulator pair never straddles the
// split and is stored as one 32-bit vector.
//
// This is the mma.sync build (sm_100a and wherever upProjKvUsesWgmma says
// no); sm_90a runs the warp-specialised wgmma GEMM of UpProjKvSM90.cpp.
//
//===----------------------------------------------------------------------===//

#include "UpProjKvSM90.h"

#include "mla/Contract/PrefillABI.h"
#include "mla/Conversion/MLAToGPU/MLAToGPU.h"
#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mla/GPUCodegen/AsyncCopy.h"
#include "mla/GPUCodegen/DeviceBuilder.h"
#include "mla/GPUCodegen/MmaSync.h"
#include "mla/GPUCodegen/SmemTile.h"
#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mla;
using namespace mla::gpu_codegen;
namespace abi = mla::gpu;

namespace {

constexpr int64_t kChunks = abi::kUpKvTileK / 8; // 16-byte chunks per row

class UpProjKvKernel {
public:
  UpProjKvKernel(ImplicitLocOpBuilder &b, const abi::UpProjKvShape &shape,
                 Type elem)
      : b(b), d(b), s(shape), elem(elem), bf16(elem.isBF16()),
        aTile(SmemTile::chunkXor(0, abi::kUpKvTileM, abi::kUpKvTileK * 2)),
        bTile(SmemTile::chunkXor(aTile.rows * aTile.rowBytes, abi::kUpKvTileN,
                                 abi::kUpKvTileK * 2)),
        ring{abi::kUpKvStages, (aTile.rows + bTile.rows) * aTile.rowBytes} {}

  void emit(StringRef name);

private:
  /// Issues the cp.async copies of K slice `k` into its ring slot.
  void issueSlice(Value k);
  /// accs += the slice in ring slot `slot` (i32 byte offset).
  void multiplySlice(MutableArrayRef<Value> accs, Value slot);
  void storeTile(ArrayRef<Value> accs);
  Value sm(const SmemTile &tile, Value slot, Value offset) {
    return d.gepBytes(smem, d.add(d.c32(tile.base), d.add(slot, offset)));
  }

  ImplicitLocOpBuilder &b;
  DeviceBuilder d;
  const abi::UpProjKvShape &s;
  Type elem;
  bool bf16;
  SmemTile aTile, bTile;
  StageRing ring;
  Value latent, weight, kNope, v, rows, smem, tid, lane, m0, n0, warpRow,
      warpCol;
};

} // namespace

void UpProjKvKernel::emit(StringRef name) {
  Type g = d.ptrGlobal;
  auto fn = createKernel(b, name, {g, g, g, g, d.i32}, abi::kUpKvThreadsPerCta);
  latent = fn.getArgument(0), weight = fn.getArgument(1),
  kNope = fn.getArgument(2), v = fn.getArgument(3), rows = fn.getArgument(4);
  smem = dynamicSharedBase(b);
  tid = d.threadIdX();
  lane = d.bitAnd(tid, d.c32(31));
  Value warp = d.shru(tid, d.c32(5));
  warpRow = d.mul(d.shru(warp, d.c32(1)), d.c32(32));
  warpCol = d.mul(d.bitAnd(warp, d.c32(1)), d.c32(32));
  m0 = d.mul(d.blockIdX(), d.c32(abi::kUpKvTileM));
  n0 = d.mul(d.blockIdY(), d.c32(abi::kUpKvTileN));

  const int64_t numK = s.latentDim / abi::kUpKvTileK;
  ring.prefill(d, [&](Value k) { issueSlice(k); });
  SmallVector<Value> init(32, d.f(0.0f));
  SmallVector<Value> accs =
      d.forLoop(numK, init, [&](Value k, ValueRange carried) {
        ring.waitOldest(d);
        d.barrier();
        ring.refill(d, k, [&](Value next) {
          d.ifThen(d.slt(next, d.c32(numK)), [&] { issueSlice(next); });
        });
        SmallVector<Value> next(carried.begin(), carried.end());
        multiplySlice(next, ring.slotOffset(d, k));
        return next;
      });
  ring.drain(d);
  storeTile(accs);
  mlir::gpu::ReturnOp::create(b);
}

void UpProjKvKernel::issueSlice(Value k) {
  Value slot = ring.slotOffset(d, k);
  Value k0 = d.zext64(d.mul(k, d.c32(abi::kUpKvTileK)));
  forEachStrided(
      d, tid, abi::kUpKvThreadsPerCta, abi::kUpKvTileM * kChunks,
      [&](Value idx) {
        Value row = d.divu(idx, d.c32(kChunks)),
              ch = d.remu(idx, d.c32(kChunks));
        Value col = d.add(k0, d.zext64(d.mul(ch, d.c32(8))));
        // Latent row m0 + row (zero past S) and kv_b_proj row n0 + row (zero
        // past N*(P+V)); invalid rows read row 0, 0 bytes of it.
        Value t = d.add(m0, row);
        Value tValid = d.slt(t, rows);
        Value src = d.gep(latent, elem,
                          d.add(d.mul(d.zext64(d.select(tValid, t, d.c32(0))),
                                      d.c64(s.latentDim)),
                                col));
        d.cpAsync16(sm(aTile, slot, aTile.byteOffset(d, row, ch)), src,
                    zeroFillSize(d, tValid));
        Value c = d.add(n0, row);
        Value cValid = d.slt(c, d.c32(s.columns()));
        Value wsrc = d.gep(weight, elem,
                           d.add(d.mul(d.zext64(d.select(cValid, c, d.c32(0))),
                                       d.c64(s.latentDim)),
                                 col));
        d.cpAsync16(sm(bTile, slot, bTile.byteOffset(d, row, ch)), wsrc,
                    zeroFillSize(d, cValid));
      });
}

void UpProjKvKernel::multiplySlice(MutableArrayRef<Value> accs, Value slot) {
  Value l16 = d.remu(lane, d.c32(16)), lHalf = d.divu(lane, d.c32(16));
  Value l8 = d.remu(lane, d.c32(8));
  Value lMat1 = d.remu(d.divu(lane, d.c32(8)), d.c32(2));
  for (int64_t kk = 0; kk < abi::kUpKvTileK / 16; ++kk) {
    SmallVector<MmaFragA> a;
    for (int64_t mt = 0; mt < 2; ++mt) {
      Value row = d.add(warpRow, d.add(l16, d.c32(16 * mt)));
      Value chunk = d.add(lHalf, d.c32(2 * kk));
      a.push_back(
          loadFragA(d, sm(aTile, slot, aTile.byteOffset(d, row, chunk))));
    }
    for (int64_t p = 0; p < 2; ++p) {
      Value nrow = d.add(
          warpCol, d.add(d.add(l8, d.mul(lHalf, d.c32(8))), d.c32(16 * p)));
      Value chunk = d.add(lMat1, d.c32(2 * kk));
      std::array<MmaFragB, 2> bf =
          loadFragBPair(d, sm(bTile, slot, bTile.byteOffset(d, nrow, chunk)),
                        /*trans=*/false);
      for (int64_t mt = 0; mt < 2; ++mt)
        for (int64_t h = 0; h < 2; ++h) {
          MutableArrayRef<Value> c = accs.slice((mt * 4 + 2 * p + h) * 4, 4);
          MmaAccum r =
              mmaSync(d, a[mt], bf[h], {{c[0], c[1], c[2], c[3]}}, bf16);
          llvm::copy(r.regs, c.begin());
        }
    }
  }
}

void UpProjKvKernel::storeTile(ArrayRef<Value> accs) {
  const int64_t P = s.nopeDim, V = s.valueDim, W = P + V;
  Value gq = d.shru(lane, d.c32(2)), tq = d.bitAnd(lane, d.c32(3));
  auto pairTy = VectorType::get({2}, elem);
  for (int64_t mt = 0; mt < 2; ++mt)
    for (int64_t nt = 0; nt < 4; ++nt) {
      Value c =
          d.add(n0, d.add(warpCol, d.add(d.mul(tq, d.c32(2)), d.c32(8 * nt))));
      Value head = d.divu(c, d.c32(W)), j = d.remu(c, d.c32(W));
      Value isNope = d.slt(j, d.c32(P));
      for (int64_t h = 0; h < 2; ++h) {
        Value t = d.add(m0, d.add(warpRow, d.add(gq, d.c32(16 * mt + 8 * h))));
        Value ok = d.andi(d.slt(t, rows), d.slt(c, d.c32(s.columns())));
        int64_t base = (mt * 4 + nt) * 4 + 2 * h;
        d.ifThen(ok, [&] {
          Value pair = d.poison(pairTy);
          for (int64_t k = 0; k < 2; ++k)
            pair = d.insert(
                pair, arith::TruncFOp::create(b, elem, accs[base + k]), k);
          Value th =
              d.add(d.mul(d.zext64(t), d.c64(s.numHeads)), d.zext64(head));
          Value nopeAt = d.add(d.mul(th, d.c64(P)), d.zext64(j));
          Value vAt = d.add(d.mul(th, d.c64(V)), d.zext64(d.sub(j, d.c32(P))));
          Value dst =
              d.select(isNope, d.gep(kNope, elem, nopeAt), d.gep(v, elem, vAt));
          d.store(pair, dst, 4);
        });
      }
    }
}

namespace mla::gpu_codegen {

LogicalResult emitUpProjKvKernels(OpBuilder &builder, Operation *upProjKvOp,
                                  gpu::Chip chip) {
  auto op = cast<UpProjKvOp>(upProjKvOp);
  auto latentTy = cast<RankedTensorType>(op.getLatent().getType());
  auto wTy = cast<RankedTensorType>(op.getKvBProj().getType());
  auto kTy = cast<RankedTensorType>(op.getKNope().getType());
  auto vTy = cast<RankedTensorType>(op.getV().getType());
  if (latentTy.isDynamicDim(1) || wTy.isDynamicDim(0) || kTy.isDynamicDim(1) ||
      kTy.isDynamicDim(2) || vTy.isDynamicDim(2))
    return op.emitOpError() << "GPU up_proj_kv needs static N, L, P and V "
                               "(only the row count may be dynamic), got "
                            << latentTy << " and " << wTy;
  Type elem = latentTy.getElementType();
  abi::UpProjKvShape shape;
  shape.numHeads = kTy.getDimSize(1);
  shape.latentDim = latentTy.getDimSize(1);
  shape.nopeDim = kTy.getDimSize(2);
  shape.valueDim = vTy.getDimSize(2);
  shape.elem = elem.isBF16()  ? abi::ActType::BF16
               : elem.isF16() ? abi::ActType::F16
                              : abi::ActType::F32;
  if ((!elem.isBF16() && !elem.isF16()) || wTy.getElementType() != elem ||
      kTy.getElementType() != elem || vTy.getElementType() != elem)
    return op.emitOpError() << "GPU up_proj_kv needs latent, kv_b_proj, k_nope "
                               "and v all bf16 or all f16";
  if (const char *why = abi::checkUpProjKvShape(shape); *why)
    return op.emitOpError()
           << "GPU up_proj_kv cannot run N = " << shape.numHeads
           << ", L = " << shape.latentDim << ", P = " << shape.nopeDim
           << ", V = " << shape.valueDim << ": " << why;
  Operation *module = builder.getInsertionBlock()->getParentOp();
  ImplicitLocOpBuilder b(op.getLoc(), builder);
  std::string name = uniqueSymbolName(module, abi::kUpProjKvKernel);
  if (abi::upProjKvUsesWgmma(chip, shape))
    sm90::emitUpProjKvSM90(b, name, shape, elem);
  else
    UpProjKvKernel(b, shape, elem).emit(name);
  return success();
}

} // namespace mla::gpu_codegen
