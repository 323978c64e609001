//===- ChunkedPrefill.h - Host plan of a chunked prefill --------*- C++ -*-===//
//
// What a runtime needs to run mla.prefill as `mla-chunk-prefill` decomposes
// it (primer section 7), without MLIR: the default workspace budget, the
// chunk policy over the cached context (the pass computes the same plan in
// IR; its file comment states the policy), the kernel specs a GPU prefill
// runs and the layout of its device workspace.
//
// Contract layer: the C++ standard library and LLVM Support only.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_CONTRACT_CHUNKEDPREFILL_H
#define MLA_CONTRACT_CHUNKEDPREFILL_H

#include "mla/Contract/KernelSpec.h"
#include "llvm/ADT/ArrayRef.h"
#include <cstdint>
#include <vector>

namespace mla {

/// The primer's default workspace budget W (section 7, vLLM's): room for 8
/// full-length requests or 4 pages per request, capped at 64K rows, never
/// below one page per request.
int64_t defaultPrefillWorkspaceRows(int64_t maxModelLen, int64_t maxNumSeqs,
                                    int64_t pageSize);

/// The budget a prefill runs with when its caller names none: the
/// planning pipelines' defaults (max-model-len 4096, max-num-seqs 128) at
/// the target's page size (64 on the CPU and sm_90a, 128 on sm_100a).
int64_t defaultPrefillWorkspaceRows(int64_t pageSize);

/// One context chunk: positions [start, start + C) of the context of
/// requests [firstRequest, endRequest).
struct PrefillChunk {
  int64_t firstRequest = 0, endRequest = 0, start = 0;
};

/// The chunk plan of one prefill call, exactly the one mla-chunk-prefill
/// builds: request b has ctx_b = max(seq_lens[b] - q_len_b, 0) context rows;
/// with n requests that have context and s = W / max(n, 1), every request
/// advances C = s rounded down to a page multiple per chunk when
/// s >= page_size, else requests take turns with C = W rounded down to a
/// page multiple (C = W when W is below a page). A chunk never holds more
/// than W rows.
class PrefillChunkPlan {
public:
  /// `workspaceRows` is clamped to `tableCapacity` (block-table columns x
  /// page size x batch, as the pass clamps a static table) and to >= 1.
  /// `queryStartLoc` has B+1 entries, `seqLens` B; both already checked by
  /// the prefill argument rules.
  PrefillChunkPlan(llvm::ArrayRef<int32_t> queryStartLoc,
                   llvm::ArrayRef<int32_t> seqLens, int64_t workspaceRows,
                   int64_t pageSize, int64_t tableCapacity);

  int64_t getWorkspaceRows() const { return workspaceRows; }
  /// C, the positions a chunk takes from each request in it.
  int64_t getChunkSize() const { return chunkSize; }
  llvm::ArrayRef<PrefillChunk> getChunks() const { return chunks; }
  /// The most rows any chunk gathers (0 without context).
  int64_t getMaxChunkRows() const { return maxChunkRows; }
  /// ctx_b of every request.
  llvm::ArrayRef<int64_t> getContextLens() const { return contextLens; }

  /// Chunk `c`'s gather tables: starts [B] (the chunk start for every
  /// request) and cu_rows [B+1] (request b's rows are
  /// [cu_rows[b], cu_rows[b+1]), none outside the chunk's requests).
  /// Returns the chunk's row count, cu_rows[B].
  int64_t fillTables(const PrefillChunk &c,
                     llvm::MutableArrayRef<int32_t> starts,
                     llvm::MutableArrayRef<int32_t> cuRows) const;

private:
  std::vector<int64_t> contextLens;
  std::vector<PrefillChunk> chunks;
  int64_t workspaceRows = 0, chunkSize = 0, maxChunkRows = 0;
};

namespace gpu {

/// The static facts of a GPU prefill, from its checked arguments.
struct ChunkedPrefillShape {
  int64_t numHeads = 128;                 // N
  int64_t nopeDim = 128;                  // P
  int64_t ropeDim = 64;                   // R
  int64_t latentDim = 512;                // L
  int64_t valueDim = 128;                 // V
  ActType elem = ActType::BF16;           // q, kv_c, k_pe, kv_b_proj and out
  float scale = 0.0721687824f;            // the softmax scale
  CacheFormat format = CacheFormat::BF16; // the cache's rows (fp8_e4m3's
                                          // scale is a launch argument)
  int64_t pageSize = 64;
};

/// The kernels of a chunked prefill: the gather of context rows into the
/// activation type, the up-projection (new tokens and chunks alike), the
/// causal attention of the new tokens, the non-causal attention of the new
/// tokens to a chunk, and the LSE merge of V-wide outputs.
struct ChunkedPrefillSpecs {
  GatherCacheKernelSpec gather;
  UpProjKvKernelSpec upProjKv;
  MhaKernelSpec causalMha;
  MhaKernelSpec contextMha;
  MergeStatesKernelSpec merge;
};

ChunkedPrefillSpecs getChunkedPrefillSpecs(Chip chip,
                                           const ChunkedPrefillShape &shape);

/// Empty when every kernel of `specs` can be built, else why not.
const char *checkChunkedPrefillSpecs(const ChunkedPrefillSpecs &specs);

/// Byte offsets into a prefill's device workspace (each 256-byte aligned)
/// and its size, for T tokens, B requests and chunks of at most
/// `maxChunkRows` rows. The up-projected K/V of the new tokens and of a
/// chunk share one region (the new tokens are attended to first); the
/// final output is written into the caller's `out`, so only the LSEs and
/// the context's running state live here.
struct ChunkedPrefillWorkspace {
  uint64_t kNope = 0;              // [max(T, chunk), N, P]
  uint64_t v = 0;                  // [max(T, chunk), N, V]
  uint64_t k = 0;                  // [max(T, chunk), N, P+R]
  uint64_t gathered = 0;           // [chunk, L+R]
  uint64_t latent = 0;             // [chunk, L], the gathered latent made dense
  uint64_t lseNew = 0;             // [N, T] f32
  uint64_t outCtx = 0, lseCtx = 0; // [T, N, V], [N, T] f32
  uint64_t outChunk = 0, lseChunk = 0; // [T, N, V], [N, T] f32
  uint64_t tables = 0;                 // starts [B] then cu_rows [B+1], i32
  uint64_t totalBytes = 0;
};

ChunkedPrefillWorkspace
getChunkedPrefillWorkspace(const ChunkedPrefillShape &shape, int64_t tokens,
                           int64_t batch, int64_t maxChunkRows);

} // namespace gpu
} // namespace mla

#endif // MLA_CONTRACT_CHUNKEDPREFILL_H
