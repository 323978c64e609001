//===- DeviceBuilder.h - NVVM-level kernel building helpers -----*- C++ -*-===//
//
// A thin layer over ImplicitLocOpBuilder for writing kernels at the
// LLVM/NVVM level: i32 arithmetic (arith), global/shared pointers
// (llvm.getelementptr, aligned loads and stores), thread indices, barriers,
// warp shuffles, cp.async, ldmatrix, mma.sync m16n8k16 and the fast base-2
// exponential/logarithm. Kernels built with it lower through the device half
// of the `mla-to-nvvm` pipeline. It is the bottom of the GPU kernel-building
// layer: the typed blocks of this folder (shared-memory tiles, pipelines,
// MMAs, softmax) are written with it.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_GPUCODEGEN_DEVICEBUILDER_H
#define MLA_GPUCODEGEN_DEVICEBUILDER_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include <array>
#include <string>

namespace mla::gpu_codegen {

/// Creates `gpu.func @name(types) kernel` at the builder's insertion point,
/// with `known_block_size` (and, if `setMaxNTid`, `nvvm.maxntid`) set to
/// `threads`, and moves the builder into its entry block.
mlir::gpu::GPUFuncOp createKernel(mlir::ImplicitLocOpBuilder &b,
                                  llvm::StringRef name,
                                  llvm::ArrayRef<mlir::Type> argTypes,
                                  int64_t threads, bool setMaxNTid = true);

/// Creates `llvm.func @name(types)` as an NVVM kernel (maxntid = `threads`,
/// minctasm = 1, so setmaxnreg applies) and moves the builder into its
/// entry block; end it with llvm.return. Arguments whose `gridConstant`
/// flag is set are 128-byte by-value `__grid_constant__` parameters
/// (CUtensorMap descriptors for TMA) seen as generic pointers: MLIR 22's
/// gpu.func rejects the nvvm.grid_constant argument attribute, so kernels
/// that take TMA descriptors by value are llvm.func kernels.
mlir::LLVM::LLVMFuncOp
createGridConstantKernel(mlir::ImplicitLocOpBuilder &b, llvm::StringRef name,
                         llvm::ArrayRef<mlir::Type> argTypes,
                         llvm::ArrayRef<bool> gridConstant, int64_t threads);

/// `base`, or `base_<i>` for the first i >= 1 that is free in `module`.
std::string uniqueSymbolName(mlir::Operation *module, llvm::StringRef base);

/// The gpu.module-level `extern __shared__` byte array used as dynamic shared
/// memory (1024-byte aligned), created on first use.
mlir::Value dynamicSharedBase(mlir::ImplicitLocOpBuilder &b);

class DeviceBuilder {
public:
  explicit DeviceBuilder(mlir::ImplicitLocOpBuilder &b);

  mlir::ImplicitLocOpBuilder &b;
  mlir::Type i1, i8, i16, i32, i64, f32, ptrGlobal, ptrShared;

  mlir::Value c16(int64_t v);
  mlir::Value c32(int64_t v);
  mlir::Value c64(int64_t v);
  mlir::Value cbool(bool v);
  mlir::Value f(float v);
  mlir::Value negInf();

  // i32 arithmetic.
  mlir::Value add(mlir::Value x, mlir::Value y);
  mlir::Value sub(mlir::Value x, mlir::Value y);
  mlir::Value mul(mlir::Value x, mlir::Value y);
  mlir::Value divu(mlir::Value x, mlir::Value y);
  mlir::Value remu(mlir::Value x, mlir::Value y);
  mlir::Value bitXor(mlir::Value x, mlir::Value y);
  mlir::Value bitAnd(mlir::Value x, mlir::Value y);
  mlir::Value ori(mlir::Value x, mlir::Value y);
  mlir::Value shl(mlir::Value x, mlir::Value y);
  /// Logical (unsigned) right shift.
  mlir::Value shru(mlir::Value x, mlir::Value y);
  mlir::Value divs(mlir::Value x, mlir::Value y);
  mlir::Value minsi(mlir::Value x, mlir::Value y);
  mlir::Value maxsi(mlir::Value x, mlir::Value y);
  mlir::Value cmp(mlir::arith::CmpIPredicate p, mlir::Value x, mlir::Value y);
  mlir::Value slt(mlir::Value x, mlir::Value y);
  mlir::Value sle(mlir::Value x, mlir::Value y);
  mlir::Value sge(mlir::Value x, mlir::Value y);
  mlir::Value eq(mlir::Value x, mlir::Value y);
  mlir::Value andi(mlir::Value x, mlir::Value y);
  mlir::Value select(mlir::Value c, mlir::Value x, mlir::Value y);
  /// Sign-extends to i64.
  mlir::Value toI64(mlir::Value x);
  /// Zero-extends to i64.
  mlir::Value zext64(mlir::Value x);

  // f32 arithmetic.
  mlir::Value fadd(mlir::Value x, mlir::Value y);
  mlir::Value fsub(mlir::Value x, mlir::Value y);
  mlir::Value fmul(mlir::Value x, mlir::Value y);
  mlir::Value fdiv(mlir::Value x, mlir::Value y);
  /// x * y + z with one rounding (llvm.intr.fma: PTX fma.rn.f32; a separate
  /// multiply and add are emitted as mul.rn/add.rn, which ptxas never fuses).
  mlir::Value fma(mlir::Value x, mlir::Value y, mlir::Value z);
  /// llvm.intr.maxnum (a NaN operand gives the other one).
  mlir::Value fmax(mlir::Value x, mlir::Value y);
  /// llvm.intr.minnum (a NaN operand gives the other one).
  mlir::Value fmin(mlir::Value x, mlir::Value y);
  /// llvm.intr.maximum (NaN-propagating).
  mlir::Value fmaximum(mlir::Value x, mlir::Value y);
  /// arith.maximumf (NaN-propagating).
  mlir::Value maximumf(mlir::Value x, mlir::Value y);
  mlir::Value feq(mlir::Value x, mlir::Value y);
  mlir::Value fcmp(mlir::arith::CmpFPredicate p, mlir::Value x, mlir::Value y);
  /// A call of the LLVM intrinsic `name` on `x`, returning x's type.
  mlir::Value callIntrinsic(llvm::StringRef name, mlir::Value x);
  /// ex2.approx.ftz.f32 (2^x; -inf gives 0).
  mlir::Value exp2(mlir::Value x);
  /// lg2.approx.ftz.f32.
  mlir::Value log2(mlir::Value x);
  /// rcp.approx.ftz.f32: 1 / x to about an ulp for normal f32 x.
  mlir::Value rcpApprox(mlir::Value x);

  // Pointers: element `index` (i32 or i64) of `elemType` past `base`.
  mlir::Value gep(mlir::Value base, mlir::Type elemType, mlir::Value index);
  mlir::Value gepBytes(mlir::Value base, mlir::Value byteOffset);
  mlir::Value load(mlir::Type type, mlir::Value ptr, unsigned align);
  void store(mlir::Value value, mlir::Value ptr, unsigned align);

  // Vectors (llvm.extractelement / insertelement with an i32 index).
  mlir::Value extract(mlir::Value vec, int64_t i);
  mlir::Value insert(mlir::Value vec, mlir::Value v, int64_t i);
  mlir::Value poison(mlir::Type t);

  // Thread geometry.
  mlir::Value threadIdX();
  mlir::Value blockIdX();
  mlir::Value blockIdY();
  mlir::Value blockIdZ();
  void barrier();

  /// shfl.sync.bfly over the full warp.
  mlir::Value shflXor(mlir::Value v, int offset);

  /// cp.async.cg 16 bytes; `srcBytes` (i32, 0 or 16) < 16 zero-fills the rest.
  void cpAsync16(mlir::Value dstShared, mlir::Value srcGlobal,
                 mlir::Value srcBytes);
  void cpAsyncCommit();
  void cpAsyncWait(int64_t pending);

  /// ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16: four packed i32.
  std::array<mlir::Value, 4> ldmatrixX4(mlir::Value sharedPtr, bool trans);
  /// stmatrix.sync.aligned.m8n8.x4.shared.b16: lane l gives the address of
  /// row l % 8 of matrix l / 8; `regs[i]` is the lane's packed pair of matrix
  /// i (row l / 4, columns 2 (l % 4) and + 1: the mma.sync fragment layout).
  void stmatrixX4(mlir::Value sharedPtr, llvm::ArrayRef<mlir::Value> regs);

  /// D = A * B + C with mma.sync m16n8k16 (row.col), bf16 or f16 inputs,
  /// f32 accumulators.
  std::array<mlir::Value, 4> mma16816(llvm::ArrayRef<mlir::Value> a,
                                      llvm::ArrayRef<mlir::Value> b,
                                      llvm::ArrayRef<mlir::Value> c, bool bf16);

  /// Emits `body` under `scf.if cond` (no results).
  void ifThen(mlir::Value cond, llvm::function_ref<void()> body);
  /// Emits `then` and `otherwise` under `scf.if cond` (no results).
  void ifThenElse(mlir::Value cond, llvm::function_ref<void()> then,
                  llvm::function_ref<void()> otherwise);

  /// Emits an scf.for over i32 [lb, ub) carrying `inits`; `body` gets the
  /// induction variable and the carried values and returns the next ones.
  llvm::SmallVector<mlir::Value>
  forLoop(mlir::Value lb, mlir::Value ub, mlir::Value step,
          mlir::ValueRange inits,
          llvm::function_ref<llvm::SmallVector<mlir::Value>(mlir::Value,
                                                            mlir::ValueRange)>
              body);
  /// forLoop over [0, n) with step 1.
  llvm::SmallVector<mlir::Value>
  forLoop(int64_t n, mlir::ValueRange inits,
          llvm::function_ref<llvm::SmallVector<mlir::Value>(mlir::Value,
                                                            mlir::ValueRange)>
              body);

  /// Packs (lo, hi) f32 into one i32 of two bf16/f16 (round to nearest even).
  mlir::Value pack2(mlir::Value lo, mlir::Value hi, mlir::Type halfType);
};

} // namespace mla::gpu_codegen

#endif // MLA_GPUCODEGEN_DEVICEBUILDER_H
