//===- DecodeSM90Wgmma.cpp - sm_90a decode with warpgroup MMAs ------------===//
//
// Two warpgroups; warpgroup j scores the 64 rows against token half j of
// each block (S[64 x kv_block/2] = Q K_j^T) and owns output column half j
// (O[64 x L/2] += P V_j), both operands read by wgmma from Box128B tiles
// through matrix descriptors, V as an MN-major view of the KV tile. Tiles
// written by cp.async or st.shared are fenced to the async proxy before the
// barrier that precedes the wgmma reading them.
//
// With an fp8 cache warpgroup j dequantises its own token half box by box
// (64 columns of L+R, DecodeSM90Kernel::dequantSlice), meets at its named
// barrier and issues that box's four k-steps of Q K_j^T; wgmma runs
// asynchronously, so the tensor cores work on box c while the warpgroup
// converts box c+1. The accumulators are untouched between the first
// wgmma and the wait (ptxas would otherwise serialise the MMAs). P V reads
// the other half's tokens after the CTA barrier that publishes P.
//
//===----------------------------------------------------------------------===//

#include "DecodeSM90Kernel.h"

#include "mla/GPUCodegen/Wgmma.h"

using namespace mlir;
using namespace mla::gpu_codegen;
using namespace mla::gpu_codegen::sm90;
namespace abi = mla::gpu;

namespace {

class WgmmaDecode {
public:
  explicit WgmmaDecode(DecodeSM90Kernel &k)
      : k(k), d(k.d), descs(k.d, k.smem) {}

  /// One KV block, `kIdx` at ring offset `stage` (after beginBlock): the
  /// loop body over carried (o, m, l).
  SmallVector<Value> step(Value kIdx, Value stage, ValueRange carried);

private:
  /// S = Q K_j^T for block `kIdx` in ring slot `stage`, 16 columns of L+R
  /// per k-step; an fp8 block is dequantised box by box in between.
  SmallVector<MmaAccum> scores(Value kIdx, Value stage);
  /// O_j += P V_j over the block's tokens.
  void accumulateOutput(MutableArrayRef<Value> o, Value stage);

  DecodeSM90Kernel &k;
  DeviceBuilder &d;
  WgmmaDescriptors descs;
};

} // namespace

SmallVector<MmaAccum> WgmmaDecode::scores(Value kIdx, Value stage) {
  const SmemTile &q = k.lay.q, &kv = k.lay.kv;
  WarpgroupMma mma(d, k.Tw, k.bf16);
  WgmmaAccum acc = WgmmaAccum::splat(k.Tw, d.f(0.0f));
  mma.fence();
  // Token half j: rows Tw*j.. of every 64-column box of the KV tile.
  Value kHalf = d.add(stage, d.mul(k.wj, d.c32(k.Tw * 128)));
  for (int64_t kk = 0; kk < k.D / 16; ++kk) {
    if (k.shape.fp8() && kk % 4 == 0) {
      int64_t box = kk / 4;
      k.dequantSlice(kIdx, 8 * box, 8 * box + 8);
      k.sliceBarrier(/*asyncProxy=*/true);
    }
    Value aDesc = descs.kMajor(d.c32(0), q.base + q.kSliceOffset(kk));
    Value bDesc = descs.kMajor(kHalf, kv.base + kv.kSliceOffset(kk));
    acc = mma.step(acc, aDesc, bDesc, kk > 0, /*transB=*/false);
  }
  mma.commitAndWait();
  SmallVector<MmaAccum> s;
  for (int64_t t = 0; t < k.ntS; ++t)
    s.push_back({{acc.regs[4 * t], acc.regs[4 * t + 1], acc.regs[4 * t + 2],
                  acc.regs[4 * t + 3]}});
  return s;
}

void WgmmaDecode::accumulateOutput(MutableArrayRef<Value> o, Value stage) {
  const SmemTile &p = k.lay.p, &kv = k.lay.kv;
  WarpgroupMma mma(d, k.Lw, k.bf16);
  mma.fence();
  // Column half j: boxes Lw/64 * j.. of the KV tile; a k-step is 16 tokens.
  Value vBase = d.add(stage, d.mul(k.wj, d.c32((k.Lw / 64) * kv.rows * 128)));
  for (int64_t kk = 0; kk < k.Bk / 16; ++kk) {
    Value aDesc = descs.kMajor(d.c32(0), p.base + p.kSliceOffset(kk));
    Value bDesc = descs.mnMajor(kv, vBase, kv.base + kk * 16 * kv.rowBytes);
    WgmmaAccum acc =
        mma.step({SmallVector<Value>(o.begin(), o.end())}, aDesc, bDesc,
                 /*accumulate=*/true, /*transB=*/true);
    llvm::copy(acc.regs, o.begin());
  }
  mma.commitAndWait();
}

SmallVector<Value> WgmmaDecode::step(Value kIdx, Value stage,
                                     ValueRange carried) {
  Value start = k.blockStart(kIdx);
  SmallVector<MmaAccum> s = scores(kIdx, stage);
  SmallVector<Value> next = k.softmaxBlock(s, start, carried);
  fenceProxyAsyncShared(d); // P was stored through the generic proxy
  d.barrier();
  accumulateOutput(MutableArrayRef<Value>(next).take_front(k.ntO * 4), stage);
  return next;
}

FailureOr<mlir::gpu::GPUFuncOp> mla::gpu_codegen::sm90::emitDecodeSM90Wgmma(
    OpBuilder &builder, Location loc, StringRef name,
    const abi::DecodeShape &shape, const abi::DecodeTiling &tiling) {
  ImplicitLocOpBuilder b(loc, builder);
  DecodeSM90Kernel k(b, shape, tiling);
  k.begin(name, WarpGrid::Warpgroups);
  WgmmaDecode wgmma(k);
  Value page = k.stageQAndPrefill();
  SmallVector<Value> state =
      k.runBlocks(page, /*asyncProxy=*/true, /*dequantise=*/false,
                  [&](Value kIdx, Value stage, ValueRange carried) {
                    return wgmma.step(kIdx, stage, carried);
                  });
  k.finish(state);
  return k.fn;
}
