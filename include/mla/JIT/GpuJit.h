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

#include "mla/GpuRuntime/KernelCache.h"
#include "mla/Contract/KernelSpec.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace mla::gpu {

/// The mla module that compileDecodeKernels compiles for `spec`: one function
/// with an `mla.decode_partial` (dynamic batch, pages and splits; the spec's
/// tiling as `mla.gpu_tiling`) and the `mla.combine` of its partials, in a
/// module whose `mla.target` is the spec's chip. Feeding it to
/// `mla-opt --mla-to-nvvm=...` with pipelineFor(spec)'s options reproduces
/// the image.
std::string getDecodeKernelsSource(const DecodeKernelSpec &spec);

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

/// The mla module of a cache_write spec: one function with one
/// `mla.cache_write` whose token count T and page count are dynamic (the
/// kernel reads both at run time), in a module targeting the spec's chip.
std::string getCacheWriteKernelSource(const CacheWriteKernelSpec &spec);

/// The mla module of a projection spec: one function with one
/// `mla.absorb_q` or `mla.up_proj_out` over a dynamic token count T.
std::string getProjectionKernelSource(const ProjectionKernelSpec &spec);

/// The module compiled for a spec of any family.
std::string getKernelSource(const KernelSpec &spec);

/// Compiles a spec of any family with pipelineFor(spec) into the cubin of
/// its `gpu.binary @mla_kernels` (thread-safe, like compileDecodeKernels).
llvm::Expected<std::vector<char>> compileKernels(const KernelSpec &spec);

/// getOrCompileDecodeKernels for a spec of any family.
llvm::Expected<std::vector<char>>
getOrCompileKernels(const KernelSpec &spec, const KernelCache &cache,
                    bool *wasHit = nullptr);

} // namespace mla::gpu

#endif // MLA_JIT_GPUJIT_H
