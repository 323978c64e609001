//===- CpuExecutor.h - JIT compilation and execution on the host *- C++ -*-===//
//
// Compiles a module through `mla-to-llvm-cpu` into an MLIR ExecutionEngine
// and calls its functions on host arrays. Compiled functions are cached in
// memory by module (its printed generic form), entry and pipeline options,
// so a caller that builds the same IR twice compiles it once.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_JIT_CPUEXECUTOR_H
#define MLA_JIT_CPUEXECUTOR_H

#include "mla/Contract/HostTensor.h"
#include "mla/Pipelines/Pipelines.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>

namespace mlir {
class ExecutionEngine;
} // namespace mlir

namespace mla {

/// Element type and shape of one argument or result of a compiled function
/// (`ShapedType::kDynamic` marks dimensions known only at call time).
struct TensorSpec {
  DType dtype;
  llvm::SmallVector<int64_t, 4> shape;
};

/// The calling convention of a compiled function: its source signature.
/// Public signatures survive bufferization unchanged (a tensor becomes an
/// identity-layout memref of the same shape), so a function that updates a
/// cache in place takes it as a memref argument rather than returning it.
struct FunctionSignature {
  llvm::SmallVector<TensorSpec> args;
  llvm::SmallVector<TensorSpec> results;
};

/// A result buffer allocated by compiled code with malloc; owns it.
class ResultBuffer {
public:
  ResultBuffer(void *allocated, void *data, DType dtype,
               llvm::SmallVector<int64_t, 4> shape)
      : allocated(allocated, &std::free), data(data), dtype(dtype),
        shape(std::move(shape)) {}

  const void *getData() const { return data; }
  DType getDType() const { return dtype; }
  llvm::ArrayRef<int64_t> getShape() const { return shape; }
  int64_t getSizeInBytes() const {
    return getNumElements(shape) * getDTypeSize(dtype);
  }

private:
  std::unique_ptr<void, decltype(&std::free)> allocated;
  void *data;
  DType dtype;
  llvm::SmallVector<int64_t, 4> shape;
};

/// One JIT-compiled entry function.
class CompiledFunction {
public:
  CompiledFunction(std::unique_ptr<mlir::ExecutionEngine> engine,
                   void (*entry)(void **), FunctionSignature signature,
                   double compileSeconds);
  ~CompiledFunction();

  const FunctionSignature &getSignature() const { return signature; }
  /// Wall time of the pass pipeline and LLVM code generation.
  double getCompileSeconds() const { return compileSeconds; }

  /// Runs the function on `args` (one per argument, checked against the
  /// signature; memref arguments may be written) and returns its results.
  llvm::Expected<llvm::SmallVector<ResultBuffer>>
  call(llvm::ArrayRef<HostTensor> args) const;

private:
  std::unique_ptr<mlir::ExecutionEngine> engine;
  void (*entry)(void **);
  FunctionSignature signature;
  double compileSeconds;
};

/// Owns an MLIRContext with everything `mla-to-llvm-cpu` needs and the cache
/// of compiled functions. Thread-safe; compilation is serialised.
class CpuExecutor {
public:
  CpuExecutor();
  ~CpuExecutor();

  /// The context modules passed to `compile` must live in.
  mlir::MLIRContext &getContext() { return *context; }

  /// Lowers `module` (modified in place) and JIT-compiles its public
  /// function `entry`. Its tensor arguments are marked
  /// `bufferization.writable = false`: the compiled code never writes the
  /// caller's arrays except through memref arguments. Not cached.
  llvm::Expected<std::unique_ptr<CompiledFunction>>
  compile(mlir::ModuleOp module, llvm::StringRef entry,
          const CpuPipelineOptions &options);

  /// Compiles `entry` of `module` (which must live in getContext(); it is
  /// lowered in place on a miss) and caches the result. The key is the
  /// module printed in generic form without locations, the entry and the
  /// options: the generic form spells every attribute and type in full, so
  /// two modules share a key only when they are the same IR, whatever the
  /// ops' custom assembly formats do. The caller shares ownership, so
  /// `clearCache` on another thread cannot free a function while it runs.
  llvm::Expected<std::shared_ptr<const CompiledFunction>>
  getOrCompile(mlir::ModuleOp module, llvm::StringRef entry,
               const CpuPipelineOptions &options);

  struct Stats {
    /// getOrCompile calls answered from the cache.
    uint64_t hits = 0;
    /// getOrCompile calls that compiled (successfully or not).
    uint64_t compiles = 0;
    /// Total wall time spent in those compilations.
    double compileSeconds = 0.0;
    /// Functions held in the cache.
    uint64_t cached = 0;
  };
  Stats getStats() const;

  /// Drops the cache's reference to every function (and the statistics);
  /// a function is freed once no caller holds it.
  void clearCache();

private:
  /// `compile` with the mutex held; `start` is when the caller began.
  llvm::Expected<std::unique_ptr<CompiledFunction>>
  compileLocked(mlir::ModuleOp module, llvm::StringRef entry,
                const CpuPipelineOptions &options,
                std::chrono::steady_clock::time_point start);

  std::unique_ptr<mlir::MLIRContext> context;
  mutable std::mutex mutex;
  llvm::StringMap<std::shared_ptr<const CompiledFunction>> cache;
  Stats stats;
};

} // namespace mla

#endif // MLA_JIT_CPUEXECUTOR_H
