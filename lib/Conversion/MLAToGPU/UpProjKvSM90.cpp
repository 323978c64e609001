//===- UpProjKvSM90.cpp - mla.up_proj_kv as a wgmma GEMM for sm_90a -------===//
//
// The tensor-core build of `mla_up_proj_kv` (contract in
// mla/Contract/PrefillABI.h): the [S, L] x [L, N*(P+V)] product of prefill's
// up-projection as a warp-specialised Hopper GEMM. A CTA owns a 128 x 256
// output tile. The producer warpgroup (24 registers) streams 64-deep K
// slices of latent rows and kv_b_proj rows (both K-contiguous, so B is
// K-major like A) by TMA into a kUpKvWgStages-deep ring with full/empty
// mbarriers; the two consumer warpgroups (240 registers) each accumulate
// 64 x 256 in f32 with m64n256k16 wgmmas, keeping one slice's group in
// flight while the next is issued, and store their rows through shared
// memory as whole 512-byte rows of 16-byte vectors: column c = n*(P+V) + j
// goes to k_nope[s, n, j] for j < P and to v[s, n, j - P] otherwise. CTAs
// take their tiles in grouped raster order (TileOrder.h).
//
//===----------------------------------------------------------------------===//

#include "UpProjKvSM90.h"

#include "mla/GPUCodegen/DeviceBuilder.h"
#include "mla/GPUCodegen/MBarrier.h"
#include "mla/GPUCodegen/RegisterBudget.h"
#include "mla/GPUCodegen/SmemTile.h"
#include "mla/GPUCodegen/TileOrder.h"
#include "mla/GPUCodegen/Tma.h"
#include "mla/GPUCodegen/Wgmma.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mla::gpu_codegen;
namespace abi = mla::gpu;

namespace {

constexpr int64_t kM = abi::kUpKvWgTileM, kN = abi::kUpKvWgTileN,
                  kK = abi::kUpKvTileK, kStages = abi::kUpKvWgStages;
constexpr int64_t kBoxBytes = 128;
constexpr int64_t kConsumerThreads = 256;
/// Row tiles per raster group (TileOrder.h): a wave of 132 CTAs reads 8
/// latent tiles and ~17 kv_b_proj tiles instead of one latent tile and all
/// of kv_b_proj, which the k_nope/v stream would evict from L2.
constexpr int64_t kGroupRows = 8;

class UpProjKvSM90Kernel {
public:
  UpProjKvSM90Kernel(ImplicitLocOpBuilder &b, const abi::UpProjKvShape &shape,
                     Type elem)
      : b(b), d(b), s(shape), elem(elem), lay(abi::upProjKvWgSmemLayout()) {}

  void emit(StringRef name);

private:
  MBarrier full(Value stage) { return barrier(stage); }
  MBarrier empty(Value stage) { return barrier(d.add(stage, d.c32(kStages))); }
  MBarrier barrier(Value index) {
    return MBarrier(d, d.gepBytes(smem, d.add(d.c32(lay.barriers),
                                              d.mul(index, d.c32(8)))));
  }
  Value slot(Value k) { return d.remu(k, d.c32(kStages)); }
  Value phase(Value k) { return d.bitAnd(d.divu(k, d.c32(kStages)), d.c32(1)); }
  int64_t numSlices() const { return s.latentDim / kK; }

  void initBarriers();
  void produce();
  void consume();
  /// Issues the four k16 steps of K slice `k` (in ring slot `stage`).
  WgmmaAccum issueSlice(WarpgroupMma &mma, const WgmmaAccum &acc, Value stage,
                        bool first);
  /// Stages the consumer's rows in shared memory, then storeRows.
  void store(const WgmmaAccum &acc);
  /// Copies the staged rows at `area` to k_nope / v, 16 bytes per lane.
  void storeRows(Value area, Value wtid);

  ImplicitLocOpBuilder &b;
  DeviceBuilder d;
  const abi::UpProjKvShape &s;
  Type elem;
  abi::UpProjKvWgSmemLayout lay;

  Value latentMap, weightMap, kNope, vOut, rows;
  Value smem, tid, colTile, rowTile, wg;
};

} // namespace

void UpProjKvSM90Kernel::initBarriers() {
  d.ifThen(d.eq(tid, d.c32(0)), [&] {
    for (int64_t st = 0; st < kStages; ++st) {
      full(d.c32(st)).init(1);
      empty(d.c32(st)).init(kConsumerThreads);
    }
  });
  d.barrier();
}

void UpProjKvSM90Kernel::produce() {
  d.ifThen(d.eq(tid, d.c32(0)), [&] {
    TmaDescriptor a(d, latentMap), w(d, weightMap);
    Value row0 = d.mul(rowTile, d.c32(kM)), col0 = d.mul(colTile, d.c32(kN));
    d.forLoop(numSlices(), {}, [&](Value k, ValueRange) {
      Value stage = slot(k);
      // A fresh barrier's previous phase (parity 1) counts as complete.
      empty(stage).waitParity(d.bitXor(phase(k), d.c32(1)));
      MBarrier bar = full(stage);
      bar.arriveExpectTx(d.c32(lay.aStageBytes + lay.bStageBytes));
      Value col = d.mul(k, d.c32(kK));
      a.loadTile(d.gepBytes(smem, d.add(d.c32(lay.a),
                                        d.mul(stage, d.c32(lay.aStageBytes)))),
                 bar, {col, d.c32(0), row0});
      w.loadTile(d.gepBytes(smem, d.add(d.c32(lay.b),
                                        d.mul(stage, d.c32(lay.bStageBytes)))),
                 bar, {col, d.c32(0), col0});
      return SmallVector<Value>{};
    });
  });
}

WgmmaAccum UpProjKvSM90Kernel::issueSlice(WarpgroupMma &mma,
                                          const WgmmaAccum &acc, Value stage,
                                          bool first) {
  WgmmaDescriptors descs(d, smem);
  SmemTile aTile = SmemTile::box128B(lay.a, kM);
  SmemTile bTile = SmemTile::box128B(lay.b, kN);
  Value aSlot = d.add(d.mul(stage, d.c32(lay.aStageBytes)),
                      d.mul(wg, d.c32(64 * kBoxBytes)));
  Value bSlot = d.mul(stage, d.c32(lay.bStageBytes));
  WgmmaAccum next = acc;
  for (int64_t kk = 0; kk < kK / 16; ++kk) {
    Value a = descs.kMajor(aSlot, aTile.base + aTile.kSliceOffset(kk));
    Value w = descs.kMajor(bSlot, bTile.base + bTile.kSliceOffset(kk));
    next = mma.step(next, a, w,
                    /*accumulate=*/!(first && kk == 0), /*transB=*/false);
  }
  return next;
}

void UpProjKvSM90Kernel::consume() {
  wg = d.divu(d.sub(tid, d.c32(128)), d.c32(128));
  WarpgroupMma mma(d, kN, elem.isBF16());
  // Slice 0 starts the accumulators (scale-d 0: no zeroing to order).
  Value zero = d.c32(0);
  full(zero).waitParity(zero);
  mma.fence();
  WgmmaAccum acc =
      issueSlice(mma, WgmmaAccum::splat(kN, d.f(0.0f)), zero, true);
  mma.commit();
  // Slice k is issued while slice k-1's group may still run; once k-1 has
  // completed its slot goes back to the producer.
  SmallVector<Value> regs =
      d.forLoop(d.c32(1), d.c32(numSlices()), d.c32(1), acc.regs,
                [&](Value k, ValueRange carried) {
                  full(slot(k)).waitParity(phase(k));
                  mma.fence();
                  WgmmaAccum next = issueSlice(
                      mma, {SmallVector<Value>(carried)}, slot(k), false);
                  mma.commit();
                  mma.wait(1);
                  empty(slot(d.sub(k, d.c32(1)))).arrive();
                  return next.regs;
                });
  mma.wait(0);
  store({regs});
}

void UpProjKvSM90Kernel::store(const WgmmaAccum &acc) {
  // Both consumers first finish with the ring (the other's last wgmmas may
  // still read it), then each stages its 64 x 256 rows in shared memory:
  // rows padded by 16 bytes so the accumulator pairs land conflict-free.
  constexpr int64_t rowBytes = kN * 2 + 16;
  NVVM::BarrierOp::create(b, TypeRange{}, d.c32(1), d.c32(kConsumerThreads),
                          NVVM::BarrierReductionAttr(), Value());
  Value ctid = d.sub(tid, d.c32(128));
  Value wtid = d.bitAnd(ctid, d.c32(127));
  Value lane = d.bitAnd(tid, d.c32(31));
  Value warp = d.divu(wtid, d.c32(32));
  Value area = d.mul(wg, d.c32(64 * rowBytes));
  Value r = d.add(d.mul(warp, d.c32(16)), d.divu(lane, d.c32(4)));
  Value pairByte = d.mul(d.bitAnd(lane, d.c32(3)), d.c32(4));
  for (int64_t j = 0; j < kN / 8; ++j)
    for (int64_t h = 0; h < 2; ++h) {
      Value off =
          d.add(area, d.add(d.mul(d.add(r, d.c32(8 * h)), d.c32(rowBytes)),
                            d.add(d.c32(16 * j), pairByte)));
      d.store(
          d.pack2(acc.regs[4 * j + 2 * h], acc.regs[4 * j + 2 * h + 1], elem),
          d.gepBytes(smem, off), 4);
    }
  NVVM::BarrierOp::create(b, TypeRange{}, d.add(d.c32(2), wg), d.c32(128),
                          NVVM::BarrierReductionAttr(), Value());
  storeRows(area, wtid);
}

void UpProjKvSM90Kernel::storeRows(Value area, Value wtid) {
  // A warp stores one whole 512-byte row per instruction, 16 bytes a lane;
  // 8 columns never straddle the k_nope/v split (P and V are multiples of 8).
  constexpr int64_t rowBytes = kN * 2 + 16, chunks = kN / 8;
  int64_t width = s.nopeDim + s.valueDim;
  auto v4 = VectorType::get({4}, d.i32);
  for (int64_t it = 0; it < 64 * chunks / 128; ++it) {
    Value i = d.add(d.c32(it * 128), wtid);
    Value row = d.divu(i, d.c32(chunks)), chunk = d.remu(i, d.c32(chunks));
    Value data =
        d.load(v4,
               d.gepBytes(smem, d.add(area, d.add(d.mul(row, d.c32(rowBytes)),
                                                  d.mul(chunk, d.c32(16))))),
               16);
    Value grow =
        d.add(d.mul(rowTile, d.c32(kM)), d.add(d.mul(wg, d.c32(64)), row));
    Value gcol = d.add(d.mul(colTile, d.c32(kN)), d.mul(chunk, d.c32(8)));
    d.ifThen(d.andi(d.slt(grow, rows), d.slt(gcol, d.c32(s.columns()))), [&] {
      Value head = d.divu(gcol, d.c32(width)),
            within = d.remu(gcol, d.c32(width));
      Value token =
          d.add(d.mul(d.zext64(grow), d.c64(s.numHeads)), d.zext64(head));
      Value kIdx = d.add(d.mul(token, d.c64(s.nopeDim)), d.zext64(within));
      Value vIdx = d.add(d.mul(token, d.c64(s.valueDim)),
                         d.zext64(d.sub(within, d.c32(s.nopeDim))));
      Value at = d.select(d.slt(within, d.c32(s.nopeDim)),
                          d.gep(kNope, elem, kIdx), d.gep(vOut, elem, vIdx));
      d.store(data, at, 16);
    });
  }
}

void UpProjKvSM90Kernel::emit(StringRef name) {
  Type g = d.ptrGlobal;
  Type p = LLVM::LLVMPointerType::get(b.getContext());
  createGridConstantKernel(b, name, {p, p, g, g, d.i32},
                           {true, true, false, false, false},
                           abi::kUpKvWgThreads);
  Block *entry = b.getInsertionBlock();
  latentMap = entry->getArgument(0), weightMap = entry->getArgument(1),
  kNope = entry->getArgument(2), vOut = entry->getArgument(3),
  rows = entry->getArgument(4);
  smem = dynamicSharedBase(b);
  tid = d.threadIdX();
  std::tie(rowTile, colTile) = groupedTile(d, kGroupRows);
  initBarriers();
  splitWarpgroupRoles(d, tid, [&] { produce(); }, [&] { consume(); });
  LLVM::ReturnOp::create(b, ValueRange{});
}

void mla::gpu_codegen::sm90::emitUpProjKvSM90(ImplicitLocOpBuilder &b,
                                              StringRef name,
                                              const abi::UpProjKvShape &shape,
                                              Type elem) {
  assert((elem.isBF16() || elem.isF16()) && "wgmma takes bf16 or f16");
  UpProjKvSM90Kernel(b, shape, elem).emit(name);
}
