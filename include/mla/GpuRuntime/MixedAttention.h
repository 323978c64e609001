//===- MixedAttention.h - A mixed batch on a stream ------------*- C++ -*-===//
//
// Runs mla.attention on the GPU as mla-select-algorithm splits a batch
// known only at run time (mla/Contract/MixedBatch.h): the leading requests
// with one new token each take the absorbed decode path,
//
//   absorb_q(q, w_uk_t) -> decode over the latent cache -> up_proj_out(w_uv)
//
// writing their rows of `out`, and the other requests (tokens after them)
// the chunked prefill of ChunkedPrefill.h, which writes the rest. The split
// and both paths' plans (the decode's split-KV bounds, the prefill's chunks)
// are made on the host from host copies of query_start_loc and seq_lens, so
// a run uploads them and is not capturable in a CUDA graph. No MLIR
// dependency.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_GPURUNTIME_MIXEDATTENTION_H
#define MLA_GPURUNTIME_MIXEDATTENTION_H

#include "mla/Contract/ChunkedPrefill.h"
#include "mla/GpuRuntime/ChunkedPrefill.h"
#include "mla/GpuRuntime/GpuDecode.h"
#include "llvm/Support/Error.h"
#include <optional>
#include <string>
#include <vector>

namespace mla::gpu {

/// The kernels of a mixed batch: the decode path's projections and decode
/// (one query row per request, so not causal) and the chunked prefill's.
struct MixedAttentionSpecs {
  ProjectionKernelSpec absorbQ, upProjOut;
  DecodeKernelSpec decode;
  ChunkedPrefillSpecs prefill;
};

MixedAttentionSpecs getMixedAttentionSpecs(Chip chip,
                                           const ChunkedPrefillShape &shape);

/// Empty when the decode path's kernels can run `shape`, else why not: the
/// decode kernels read caches of the activations' float type only.
std::string checkMixedDecodePath(const MixedAttentionSpecs &specs,
                                 const ChunkedPrefillShape &shape);

/// Byte offsets into a mixed batch's device workspace (each 256-byte
/// aligned) for D decode requests and the prefill of the rest.
struct MixedAttentionWorkspace {
  uint64_t absorbed = 0;  // [D, N, L+R]: absorb_q's output, decode's q
  uint64_t latentOut = 0; // [D, N, L]: decode's output
  uint64_t lse = 0;       // [D, N] f32: decode's LSE (unused afterwards)
  uint64_t decode = 0, decodeBytes = 0;   // the decode's own workspace
  uint64_t queryStartLoc = 0;             // [B-D+1] i32, rebased to 0
  uint64_t prefill = 0, prefillBytes = 0; // the chunked prefill's
  uint64_t totalBytes = 0;
};

/// The host plan of one call.
struct MixedAttentionPlan {
  /// Requests (and tokens: one each) on the decode path.
  int64_t numDecodes = 0;
  SplitBounds decodeBounds;
  /// The prefill requests' query_start_loc, rebased to start at 0.
  std::vector<int32_t> prefillQueryStartLoc;
  /// Their context chunks; empty when no request takes the prefill path.
  std::optional<PrefillChunkPlan> prefillChunks;
  MixedAttentionWorkspace workspace;
};

/// The sizes and host tables a plan is made from (already checked by the
/// attention argument rules).
struct MixedAttentionBatch {
  llvm::ArrayRef<int32_t> queryStartLoc; // [B+1]
  llvm::ArrayRef<int32_t> seqLens;       // [B]
  int64_t maxPages = 0, numPages = 0;
  int64_t decodeThreshold = 1;
  int64_t workspaceRows = 0; // the prefill's budget
  int64_t numSms = 1;        // sizes the decode's split count
};

/// Splits the batch by countLeadingDecodes, plans the decode's split-KV
/// pieces (chooseGridSplits' count) and the prefill's chunks, and lays out
/// the workspace. Fails when decode requests need a decode path the shape
/// has no kernels for.
llvm::Expected<MixedAttentionPlan>
planMixedAttention(const MixedAttentionSpecs &specs,
                   const ChunkedPrefillShape &shape,
                   const MixedAttentionBatch &batch);

/// The device tensors of one call (dense, row-major, 16-byte aligned).
struct MixedAttentionArgs {
  CUdeviceptr q = 0;          // [T, N, P+R]
  CUdeviceptr kvC = 0;        // [T, L]
  CUdeviceptr kPe = 0;        // [T, R]
  CUdeviceptr kvBProj = 0;    // [N*(P+V), L]
  CUdeviceptr wUkT = 0;       // [N, P, L], kv_b_proj's K rows (absorb_q)
  CUdeviceptr wUv = 0;        // [N, L, V], its V rows transposed
  CUdeviceptr cache = 0;      // [numPages, pageSize, row bytes]
  CUdeviceptr blockTable = 0; // [B, maxPages] i32
  CUdeviceptr seqLens = 0;    // [B] i32
  CUdeviceptr out = 0;        // [T, N, V]
  CUdeviceptr workspace = 0;
  uint64_t workspaceBytes = 0;
  int64_t tokens = 0, batch = 0, maxPages = 0, numPages = 0;
  CUdeviceptr kvScale = 0; // fp8_e4m3's f32 scale (KvScale.h), else 0
};

/// The loaded kernels a run uses: the decode path's when the plan has
/// decode requests, the prefill's when it has other tokens (null
/// otherwise).
struct MixedAttentionKernels {
  const CudaKernel *absorbQ = nullptr, *upProjOut = nullptr;
  const GpuDecoder *decoder = nullptr;
  const ChunkedPrefill *prefill = nullptr;
};

/// Everything runMixedAttention checks before its first enqueue, without a
/// GPU: the workspace's size against the plan and every launch's arguments
/// (pointers, alignment, counts) as the launchers check them.
llvm::Error checkMixedAttention(const MixedAttentionSpecs &specs,
                                const ChunkedPrefillShape &shape,
                                const MixedAttentionArgs &args,
                                const MixedAttentionPlan &plan);

/// checkMixedAttention, then enqueues the decode path and the prefill on
/// `stream`: an invalid call enqueues nothing.
llvm::Error runMixedAttention(CUstream stream,
                              const MixedAttentionKernels &kernels,
                              const MixedAttentionSpecs &specs,
                              const ChunkedPrefillShape &shape,
                              const MixedAttentionArgs &args,
                              const MixedAttentionPlan &plan);

} // namespace mla::gpu

#endif // MLA_GPURUNTIME_MIXEDATTENTION_H
