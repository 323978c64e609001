//===- GpuJit.h - compile GPU kernel images from their specs ----*- C++ -*-===//
//
// The compiler side of the kernel cache: turns a kernel spec into its cubin
// (`mla_decode_partial` + `mla_combine` for decode, one kernel for
// cache_write, absorb_q and up_proj_out) by building the spec's mla module
// and running the `mla-to-nvvm` pipeline on it (the same pipeline `mla-opt`
// runs, so any image can be rebuilt from the command line with
// getKernelSource's text). Links MLIR; a serving process that only
// launches cached images needs KernelSpec.h and KernelCache.h alone.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_JIT_GPUJIT_H
#define MLA_JIT_GPUJIT_H

#include "mla/Contract/KernelSpec.h"
#include "mla/GpuRuntime/KernelCache.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace mla::gpu {

/// The mla module compileKernels compiles for `spec`, in a module whose
/// `mla.target` is the spec's chip: for decode one function with an
/// `mla.decode_partial` (dynamic batch, pages and splits; the spec's tiling
/// as `mla.gpu_tiling`) and the `mla.combine` of its partials; for
/// cache_write one `mla.cache_write` whose token and page counts are
/// dynamic; for a projection one `mla.absorb_q` or `mla.up_proj_out` over a
/// dynamic token count. `context` must have the JIT's dialects registered.
mlir::OwningOpRef<mlir::ModuleOp> buildKernelModule(mlir::MLIRContext &context,
                                                    const KernelSpec &spec);

/// buildKernelModule's module as text, after a comment line naming the spec.
/// Feeding it to `mla-opt --mla-to-nvvm=...` with pipelineFor(spec)'s options
/// reproduces the image.
std::string getKernelSource(const KernelSpec &spec);

/// Compiles `spec` with pipelineFor(spec) and returns the cubin of the
/// resulting `gpu.binary @mla_kernels`. Fails with the MLIR diagnostics (or
/// the reason the spec's tiling is unusable). Thread-safe: every call uses
/// its own MLIRContext. This is the compiler a process that links MLIR hands
/// the runtime for cache misses (`GpuDecoder::fromCache(spec, cache,
/// compileDecodeKernels)`).
llvm::Expected<std::vector<char>>
compileDecodeKernels(const DecodeKernelSpec &spec);

/// Returns the image of `spec` from `cache` (key cacheKeyFor(spec)), else
/// compiles it and stores it there. `wasHit`, when given, tells which
/// happened. A failed store is an error: the caller asked for a cached image.
llvm::Expected<std::vector<char>>
getOrCompileDecodeKernels(const DecodeKernelSpec &spec,
                          const KernelCache &cache, bool *wasHit = nullptr);

/// Compiles a spec of any family with pipelineFor(spec) into the cubin of
/// its `gpu.binary @mla_kernels` (thread-safe, like compileDecodeKernels).
llvm::Expected<std::vector<char>> compileKernels(const KernelSpec &spec);

/// getOrCompileDecodeKernels for a spec of any family.
llvm::Expected<std::vector<char>> getOrCompileKernels(const KernelSpec &spec,
                                                      const KernelCache &cache,
                                                      bool *wasHit = nullptr);

} // namespace mla::gpu

#endif // MLA_JIT_GPUJIT_H
