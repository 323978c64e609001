//===- OnlineSoftmax.h - base-2 online softmax steps ------------*- C++ -*-===//
//
// The steps every attention kernel takes per KV block (primer section 4), in
// base 2 so that each exponential is one ex2.approx: scores are scaled by
// scale * log2(e) and masked to -inf; the running row max m (base 2) and sum
// l are rescaled by alpha = 2^(m_old - m_new); p = 2^(s - m); the end divides
// by l and reports the natural-log LSE ln(2) * (m + log2 l). A row that has
// seen nothing keeps m = -inf, l = 0 and ends with out = 0, lse = -inf.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_GPUCODEGEN_ONLINESOFTMAX_H
#define MLA_GPUCODEGEN_ONLINESOFTMAX_H

#include "mla/GPUCodegen/DeviceBuilder.h"

namespace mla::gpu_codegen::softmax {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

/// The score `s` times `scaleLog2` (= softmax scale * log2 e) where `valid`
/// (i1), else -inf.
mlir::Value scaleAndMask(DeviceBuilder &d, mlir::Value s, mlir::Value valid,
                         mlir::Value scaleLog2);

/// The larger of two scores or LSEs, NaN when either is NaN (llvm.maximum,
/// PTX max.NaN): a NaN or +-inf in q or in a row a query reads must make that
/// row NaN, as PyTorch's softmax does, never look like a row that saw no key
/// (max.f32 would drop the NaN and leave the max at -inf).
mlir::Value max(DeviceBuilder &d, mlir::Value x, mlir::Value y);

enum class Combiner { Max, Sum };
/// All-reduce of `v` over the lanes that differ in the bits of `laneMasks`,
/// one shfl.bfly per mask in the given order (Max: softmax::max).
mlir::Value xorAllReduce(DeviceBuilder &d, mlir::Value v, Combiner combiner,
                         llvm::ArrayRef<int> laneMasks);
/// The four lanes of a quad share a row of an mma.sync/wgmma accumulator.
mlir::Value quadMax(DeviceBuilder &d, mlir::Value v);
/// The max or sum of `values` by a balanced tree: log2(n) dependent steps
/// instead of n, so the reductions of a row's scores overlap.
mlir::Value treeReduce(DeviceBuilder &d, llvm::ArrayRef<mlir::Value> values,
                       Combiner combiner);
/// 2^(s * scaleLog2 - mUse) with the scaling folded into one fma.
mlir::Value scaledProbability(DeviceBuilder &d, mlir::Value s,
                              mlir::Value scaleLog2, mlir::Value mUse);
mlir::Value quadSum(DeviceBuilder &d, mlir::Value v);

/// The running state of a row after a block with max `blockMax`.
struct Rescale {
  /// The new running max (base 2; -inf while the row has seen nothing).
  mlir::Value mNew;
  /// The max to exponentiate against: mNew, or 0 while it is -inf, so that
  /// no -inf - -inf NaN appears.
  mlir::Value mUse;
  /// 2^(m_old - mUse): the factor for the old sum and output.
  mlir::Value alpha;
  /// The old sum times alpha (add the block's probabilities to it).
  mlir::Value l;
};
Rescale rescale(DeviceBuilder &d, mlir::Value mOld, mlir::Value lOld,
                mlir::Value blockMax);
/// Rescale::mUse of a running max `m`: m, or 0 while it is -inf.
mlir::Value usableMax(DeviceBuilder &d, mlir::Value m);
/// Rescale::alpha alone: 2^(mOld - usableMax(mNew)).
mlir::Value rescaleFactor(DeviceBuilder &d, mlir::Value mOld, mlir::Value mNew);
/// The same state for a chosen new max `mNew` (at least mOld, or NaN).
Rescale rescaleTo(DeviceBuilder &d, mlir::Value mOld, mlir::Value lOld,
                  mlir::Value mNew);
/// Conditional rescaling (FlashAttention-4): the running max moves only when
/// the block's max exceeds it by more than `slack` (base 2), or either is
/// NaN, and then to max(mOld, blockMax). While it stays, alpha is exactly 1
/// and the output needs no rescaling; p = 2^(s - m) stays below 2^slack, and
/// the end's division by l and the LSE (m + log2 l) are unchanged.
mlir::Value lazyMax(DeviceBuilder &d, mlir::Value mOld, mlir::Value blockMax,
                    float slack);
/// The slack the kernels use: p <= 256, far inside bf16/f16 range.
constexpr float kLazySlack = 8.0f;
/// Whether either of a thread's two rows' running max changed (UNE: a NaN
/// max counts as changed, and its factor then makes the row NaN).
mlir::Value maxMoved(DeviceBuilder &d, mlir::Value mOld[2],
                     mlir::Value mNew[2]);
/// acc[i] *= factor[(i % 4) / 2] (an mma/wgmma C fragment: register i holds
/// row half (i % 4) / 2) inside an scf.if taken only when `moved` (i1); the
/// values pass through otherwise, so a row whose max stayed costs a branch.
void rescaleIf(DeviceBuilder &d, llvm::MutableArrayRef<mlir::Value> acc,
               mlir::Value factor[2], mlir::Value moved);

/// p = 2^(s - mUse).
mlir::Value probability(DeviceBuilder &d, mlir::Value s, mlir::Value mUse);

/// 1/l for a row with l != 0, else 0 (and whether l != 0). A NaN sum counts
/// as non-empty, so it reaches out and lse.
struct Normaliser {
  mlir::Value nonEmpty;
  mlir::Value inv;
};
Normaliser normaliser(DeviceBuilder &d, mlir::Value l);

/// ln(2) * (m + log2 l) from the base-2 max, -inf for an empty row.
mlir::Value naturalLse(DeviceBuilder &d, mlir::Value mBase2, mlir::Value l,
                       mlir::Value nonEmpty);

/// Merging states with natural-log LSEs (split-KV combine): the weight
/// e^(lse - m) of a piece, computed as 2^((lse - m) log2 e).
mlir::Value naturalWeight(DeviceBuilder &d, mlir::Value lse, mlir::Value m);
/// m + ln(sum of the weights), -inf for an empty row (m natural).
mlir::Value mergedLse(DeviceBuilder &d, mlir::Value m, mlir::Value sum,
                      mlir::Value nonEmpty);

} // namespace mla::gpu_codegen::softmax

#endif // MLA_GPUCODEGEN_ONLINESOFTMAX_H
