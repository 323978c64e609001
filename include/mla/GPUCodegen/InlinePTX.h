//===- InlinePTX.h - inline-PTX instructions of the kernels -----*- C++ -*-===//
//
// Every `llvm.inline_asm` the GPU kernels use, in one place: the `.ftz`
// fast exp2/log2 of the softmax, the E4M3 to f16x2 conversion of the fp8
// decode (MLIR 22's nvvm.convert.f8x2.to.f16x2 takes a vector<2xi8>, which
// costs byte shuffles the PTX register form does not need) and the byte
// permute that packs its exact bf16 values (NVPTX emits shifts and masks for
// the same bit operations), the gpu-scope fence, atomics, acquire load and
// sleep with which the CTAs of one launch wait for each other (no branch
// inside an asm: ptxas then keeps the kernel's uniform datapath), and wgmma
// with both
// operands from shared memory, written as the PTX the kernels were measured
// with (MLIR 22's nvvm.wgmma.mma_async is itself lowered to inline PTX by
// convert-nvvm-to-llvm, and wgmma with A in registers has no op at all).
// test/GPUCodegen/blocks.mlir and the kernels' tests (test/Conversion/MLAToGPU)
// check their PTX.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_GPUCODEGEN_INLINEPTX_H
#define MLA_GPUCODEGEN_INLINEPTX_H

#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/ADT/SmallVector.h"

#include <array>

namespace mla::gpu_codegen::ptx {

/// `ex2.approx.ftz.f32`: 2^x, -inf gives 0.
mlir::Value ex2ApproxFtz(mlir::ImplicitLocOpBuilder &b, mlir::Value x);

/// `lg2.approx.ftz.f32`: log2(x).
mlir::Value lg2ApproxFtz(mlir::ImplicitLocOpBuilder &b, mlir::Value x);

/// `cvt.rn.f16x2.e4m3x2` on both halves of `bytes` (i32, four float8
/// E4M3FN codes, code 0 in the low byte): two i32 f16x2 words, codes 0-1
/// then 2-3, the low half of each holding the lower code. Exact (every E4M3
/// value is an f16), NaN codes give NaN. sm_89 and later.
std::pair<mlir::Value, mlir::Value>
cvtE4M3x4ToF16x2(mlir::ImplicitLocOpBuilder &b, mlir::Value bytes);

/// `cvt.rn.satfinite.e4m3x2.f32` of four f32 (`x[0]` the lowest): one i32
/// of four float8 E4M3FN codes, code 0 in the low byte (the layout
/// cvtE4M3x4ToF16x2 reads). Values beyond +-448 saturate; NaN stays NaN.
/// sm_89 and later.
mlir::Value cvtF32x4ToE4M3x4(mlir::ImplicitLocOpBuilder &b,
                             std::array<mlir::Value, 4> x);

/// `prmt.b32 $0, a, b, selector`: byte k of the result is byte nibble k of
/// `selector` of the eight bytes a0..a3 b0..b3 (0-3 from `a`, 4-7 from `b`).
mlir::Value prmt(mlir::ImplicitLocOpBuilder &b, mlir::Value a, mlir::Value bb,
                 uint32_t selector);

/// The same with the selector in a register (i32, low 16 bits used).
mlir::Value prmt(mlir::ImplicitLocOpBuilder &b, mlir::Value a, mlir::Value bb,
                 mlir::Value selector);

/// `prmt.b32 $0, lo, hi, 0x7632`: the high 16 bits of `lo` (i32) in the
/// low half of the result, the high 16 bits of `hi` in the high half. Two
/// f32 whose values are bf16 values give their bf16x2 word in one integer
/// instruction (the bf16 of an f32 is its high half when the low half is 0).
mlir::Value prmtHighHalves(mlir::ImplicitLocOpBuilder &b, mlir::Value lo,
                           mlir::Value hi);

/// The input type of a wgmma: two-byte types take k16 slices, E4M3 k32
/// (the same 32 bytes per row) and reads both operands K-major only.
enum class WgmmaInput { BF16, F16, E4M3 };

/// `wgmma.mma_async.sync.aligned.m64n<n>k<16|32>.f32.<in>.<in>` with both
/// operands from shared-memory descriptors (i64). `acc` holds the thread's
/// n/2 f32 accumulators; `scaleD` (i32) = 0 ignores them (D = A*B), else
/// D = A*B + D. `transB` reads B as MN-major (not for E4M3). Returns the
/// n/2 results.
llvm::SmallVector<mlir::Value>
wgmmaMmaAsyncSS(mlir::ImplicitLocOpBuilder &b, int64_t n, WgmmaInput in,
                llvm::ArrayRef<mlir::Value> acc, mlir::Value descA,
                mlir::Value descB, mlir::Value scaleD, bool transB);

/// The same with A from registers: `a` holds the thread's four i32 (bf16x2 or
/// f16x2) fragments of the 64 x 16 A slice, in the accumulator layout of
/// WgmmaAccum (WgmmaAccum::aFragments). B comes from its descriptor.
llvm::SmallVector<mlir::Value>
wgmmaMmaAsyncRS(mlir::ImplicitLocOpBuilder &b, int64_t n, WgmmaInput in,
                llvm::ArrayRef<mlir::Value> acc, llvm::ArrayRef<mlir::Value> a,
                mlir::Value descB, mlir::Value scaleD, bool transB);

/// `createpolicy.fractional.L2::evict_first.b64 $0, 1.0;`: an L2 cache
/// policy (i64) for a load's cache hint (TmaDescriptor::loadTile). Lines a
/// load brings in under it are the first L2 evicts, before the lines other
/// kernels left there (dirty ones would cost a write-back).
/// Volatile: it is issued where it is built, not hoisted, so that a caller
/// can keep the policy from staying live (two registers) across a loop.
mlir::Value createPolicyEvictFirst(mlir::ImplicitLocOpBuilder &b);

/// `prefetch.tensormap [ptr]`: brings the CUtensorMap at `ptr` (a generic
/// pointer, e.g. a grid-constant parameter) into the TMA descriptor cache.
/// One instruction: NVPTX lowers nvvm.prefetch's intrinsic on a byval
/// parameter into both a param-space and a generic prefetch.
void prefetchTensormap(mlir::ImplicitLocOpBuilder &b, mlir::Value ptr);

/// `fence.acq_rel.gpu`: this thread's earlier memory operations are ordered
/// before its later ones for every thread of the GPU.
void fenceAcqRelGpu(mlir::ImplicitLocOpBuilder &b);

/// `atom.<release|relaxed>.gpu.global.add.u32`: adds `v` (i32) to the word
/// at `ptr` (a global pointer) and returns the word before.
mlir::Value atomAddGpu(mlir::ImplicitLocOpBuilder &b, mlir::Value ptr,
                       mlir::Value v, bool release);

/// `st.relaxed.gpu.global.u32`: stores `v` (i32) to the word at `ptr`.
void storeRelaxedGpu(mlir::ImplicitLocOpBuilder &b, mlir::Value ptr,
                     mlir::Value v);

} // namespace mla::gpu_codegen::ptx

#endif // MLA_GPUCODEGEN_INLINEPTX_H
