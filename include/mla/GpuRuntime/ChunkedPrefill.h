//===- ChunkedPrefill.h - The whole chunked prefill on a stream -*- C++ -*-===//
//
// Runs mla.prefill on the GPU as mla-chunk-prefill decomposes it (primer
// section 7), from the pieces of PrefillLaunch.h:
//
//   new tokens: up_proj_kv(kv_c) -> K = [k_nope | k_pe broadcast over heads]
//               -> causal mha of the new tokens        -> (out, lse_new)
//   context:    per chunk of PrefillChunkPlan: upload the chunk's gather
//               tables -> gather_cache -> the latent made dense ->
//               up_proj_kv -> K -> non-causal mha of every new token
//               against the chunk -> merge_states into (out_ctx, lse_ctx)
//   result:     merge_states(ctx, new) into the caller's out.
//
// K is assembled with strided device copies (cuMemcpy2DAsync): mla_mha
// reads dense [S, N, P+R] keys, and neither up_proj_kv nor gather_cache
// writes that layout. Everything is enqueued on the caller's stream into a
// workspace the caller gives (sized by ChunkedPrefillWorkspace); the
// per-chunk table uploads are host-to-device copies from pageable memory,
// so a run is not capturable in a CUDA graph. No MLIR dependency.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_GPURUNTIME_CHUNKEDPREFILL_H
#define MLA_GPURUNTIME_CHUNKEDPREFILL_H

#include "mla/Contract/ChunkedPrefill.h"
#include "mla/GpuRuntime/CudaDriver.h"
#include "mla/GpuRuntime/KernelCache.h"
#include "llvm/Support/Error.h"

namespace mla::gpu {

/// The device tensors of one prefill (dense, row-major) and its sizes.
struct ChunkedPrefillArgs {
  CUdeviceptr q = 0;             // [T, N, P+R]
  CUdeviceptr kvC = 0;           // [T, L]
  CUdeviceptr kPe = 0;           // [T, R]
  CUdeviceptr kvBProj = 0;       // [N*(P+V), L]
  CUdeviceptr cache = 0;         // [numPages, pageSize, row bytes]
  CUdeviceptr blockTable = 0;    // [B, maxPages] i32
  CUdeviceptr queryStartLoc = 0; // [B+1] i32
  CUdeviceptr out = 0;           // [T, N, V]
  CUdeviceptr kvScale = 0;       // fp8_e4m3's f32 scale (KvScale.h), else 0
  CUdeviceptr workspace = 0;
  uint64_t workspaceBytes = 0;
  int64_t tokens = 0, batch = 0, maxPages = 0, numPages = 0;
};

/// The loaded kernels of one ChunkedPrefillSpecs.
class ChunkedPrefill {
public:
  /// Loads every kernel of `specs` from `cache` into the current context; a
  /// miss names the `mla-aot` command that builds the entry.
  static llvm::Expected<ChunkedPrefill>
  fromCache(const ChunkedPrefillSpecs &specs, const KernelCache &cache);

  const ChunkedPrefillSpecs &getSpecs() const { return specs; }

  /// What run() checks before its first enqueue, without a GPU: the
  /// workspace's size against the plan, and every launch's arguments
  /// (pointers, alignment, counts) as the launchers check them.
  static llvm::Error check(const ChunkedPrefillSpecs &specs,
                           const ChunkedPrefillShape &shape,
                           const ChunkedPrefillArgs &args,
                           const PrefillChunkPlan &plan);

  /// Enqueues the whole prefill of `args`, chunked by `plan` (made from the
  /// same call's host tables), on `stream`, after check(): an invalid call
  /// enqueues nothing.
  llvm::Error run(CUstream stream, const ChunkedPrefillShape &shape,
                  const ChunkedPrefillArgs &args,
                  const PrefillChunkPlan &plan) const;

private:
  ChunkedPrefill(ChunkedPrefillSpecs specs, CudaKernel gather,
                 CudaKernel upProjKv, CudaKernel causalMha,
                 CudaKernel contextMha, CudaKernel merge)
      : specs(std::move(specs)), gather(std::move(gather)),
        upProjKv(std::move(upProjKv)), causalMha(std::move(causalMha)),
        contextMha(std::move(contextMha)), merge(std::move(merge)) {}

  ChunkedPrefillSpecs specs;
  CudaKernel gather, upProjKv, causalMha, contextMha, merge;
};

} // namespace mla::gpu

#endif // MLA_GPURUNTIME_CHUNKEDPREFILL_H
