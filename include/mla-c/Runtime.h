/*===-- mla-c/Runtime.h - C API of the mla CPU runtime -----------*- C -*-===*\
|*                                                                            *|
|* A plain C ABI over the runtime, for bindings that cannot use C++ (the      *|
|* Python package loads it with ctypes, so it works with any CPython). Each   *|
|* operation validates its arguments, builds mla IR for the call's shapes,    *|
|* JIT-compiles it (cached in memory by IR and options) and runs it.          *|
|*                                                                            *|
|* Arrays are dense and row-major. Outputs are allocated by the caller: call  *|
|* an operation once with every output's `data` set to NULL to have it        *|
|* validate the arguments and fill in each output's dtype, rank and shape     *|
|* without running anything, then allocate and call again.                    *|
|*                                                                            *|
|* Every function returns MLA_SUCCESS or an error code, and on error writes a *|
|* NUL-terminated message into `err` (at most `errLen` bytes, truncated).     *|
|* On MLA_ERROR_INVALID_ARGUMENT nothing was compiled, run or written.        *|
|* The functions are thread-safe.                                             *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef MLA_C_RUNTIME_H
#define MLA_C_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes. */
#define MLA_SUCCESS 0
#define MLA_ERROR_INVALID_ARGUMENT 1
#define MLA_ERROR_COMPILE 2
#define MLA_ERROR_RUNTIME 3

/* Element types. MLA_DTYPE_UINT8 holds fp8 cache bytes. */
#define MLA_DTYPE_FLOAT32 0
#define MLA_DTYPE_FLOAT16 1
#define MLA_DTYPE_INT32 2
#define MLA_DTYPE_UINT8 3

#define MLA_MAX_RANK 8

/* A dense row-major array; `data` is not owned. */
typedef struct mlaTensor {
  void *data;
  int32_t dtype;
  int32_t rank;
  int64_t shape[MLA_MAX_RANK];
} mlaTensor;

/* How cache rows are stored. `kvFormat` is "auto" (a float cache of the
 * activations' dtype; also meant by NULL), "fp8_e4m3" (e4m3 bytes,
 * per-tensor `kvScale`), "fp8_e4m3_token" (D + 8 bytes per row) or
 * "fp8_ds_mla" (L + 4*L/128 + 2*R bytes per row). `kvScale` is read only if
 * `hasKvScale`, and only fp8_e4m3 takes one; it may instead be given as
 * `kvScaleTensor` (NULL: none), a float32 array of one element whose value
 * is read (the GPU API's device-tensor form, here on the host). */
typedef struct mlaCacheFormat {
  const char *kvFormat;
  int32_t hasKvScale;
  double kvScale;
  const mlaTensor *kvScaleTensor;
} mlaCacheFormat;

typedef struct mlaDecodeOptions {
  int64_t headDimV;
  double softmaxScale;
  int32_t causal;
  /* Split-KV pieces per request, if hasNumSplits; else the compiler
   * chooses. */
  int32_t hasNumSplits;
  int64_t numSplits;
  mlaCacheFormat cache;
} mlaDecodeOptions;

typedef struct mlaPrefillOptions {
  double softmaxScale;
  int64_t vHeadDim;
  /* Context rows up-projected at once, if hasWorkspaceRows; else the
   * compiler chooses. */
  int32_t hasWorkspaceRows;
  int64_t workspaceRows;
  mlaCacheFormat cache;
} mlaPrefillOptions;

/* FlashMLA's flash_mla_with_kvcache: q [b, s_q, h_q, d], kv_cache
 * [pages, page_size, row], block_table int32 [b, max_pages], seq_lens int32
 * [b] -> out [b, s_q, h_q, head_dim_v] (q's dtype), lse float32
 * [b, h_q, s_q]. */
int mlaDecode(const mlaTensor *q, const mlaTensor *kvCache,
              const mlaTensor *blockTable, const mlaTensor *seqLens,
              const mlaDecodeOptions *options, mlaTensor *out, mlaTensor *lse,
              char *err, size_t errLen);

/* Varlen decode (speculative decoding with mixed draft lengths): q
 * [T, h_q, d] packs the requests' query tokens, request b owning tokens
 * [queryStartLoc[b], queryStartLoc[b+1]) of queryStartLoc int32 [b+1]
 * (from 0, non-decreasing, ending at T; each q_b in [0, 8] and at most
 * seq_lens[b], which counts the query tokens). Causal token i of request b
 * sees positions [0, seq_lens[b] - q_b + i]. -> out [T, h_q, head_dim_v]
 * (q's dtype), lse float32 [T, h_q] (token-major, FlashMLA's packed
 * layout). */
int mlaDecodeVarlen(const mlaTensor *q, const mlaTensor *kvCache,
                    const mlaTensor *blockTable, const mlaTensor *seqLens,
                    const mlaTensor *queryStartLoc,
                    const mlaDecodeOptions *options, mlaTensor *out,
                    mlaTensor *lse, char *err, size_t errLen);

/* Stores concat(kv_c[t], k_pe[t]) at slot_mapping[t] of kv_cache, in place;
 * negative slots are padding. kv_c [T, L], k_pe [T, R] or [T, 1, R],
 * slot_mapping int32 [T]. */
int mlaCacheWrite(const mlaTensor *kvC, const mlaTensor *kPe,
                  mlaTensor *kvCache, const mlaTensor *slotMapping,
                  const mlaCacheFormat *format, char *err, size_t errLen);

/* kv_b_proj [N*(P+V), L] -> w_uk_t [N, P, L], w_uv [N, L, V]. */
int mlaSplitKvBProj(const mlaTensor *kvBProj, int64_t numHeads,
                    int64_t qkNopeHeadDim, int64_t vHeadDim, mlaTensor *wUkT,
                    mlaTensor *wUv, char *err, size_t errLen);

/* q [T, N, P+R], w_uk_t [N, P, L] -> [T, N, L+R]. */
int mlaAbsorbQ(const mlaTensor *q, const mlaTensor *wUkT, mlaTensor *out,
               char *err, size_t errLen);

/* o [T, N, L], w_uv [N, L, V] -> [T, N*V]. */
int mlaUpProjOut(const mlaTensor *o, const mlaTensor *wUv, mlaTensor *out,
                 char *err, size_t errLen);

/* vLLM's merge_attn_states: out_* [T, N, H], lse_* float32 [N, T]. */
int mlaMergeStates(const mlaTensor *outA, const mlaTensor *lseA,
                   const mlaTensor *outB, const mlaTensor *lseB, mlaTensor *out,
                   mlaTensor *lse, char *err, size_t errLen);

/* The chunked prefill's gather: workspace row r in [cu_rows[b], cu_rows[b+1])
 * receives cache position starts[b] + r - cu_rows[b] of request b (through
 * block_table int32 [B, max_pages]), dequantised to the workspace's dtype, in
 * place. starts int32 [B], cu_rows int32 [B+1] (non-decreasing), workspace
 * [W, L+R]; `latentDim` is L. Every gathered page is checked first. */
int mlaGatherCache(const mlaTensor *kvCache, const mlaTensor *blockTable,
                   const mlaTensor *starts, const mlaTensor *cuRows,
                   mlaTensor *workspace, int64_t latentDim,
                   const mlaCacheFormat *format, char *err, size_t errLen);

/* latent [S, L], kv_b_proj [N*(P+V), L] -> k_nope [S, N, P], v [S, N, V]. */
int mlaUpProjKv(const mlaTensor *latent, const mlaTensor *kvBProj,
                int64_t numHeads, int64_t qkNopeHeadDim, int64_t vHeadDim,
                mlaTensor *kNope, mlaTensor *v, char *err, size_t errLen);

/* Varlen multi-head attention with LSE: q [T, N, D], k [S, N, D],
 * v [S, N, V], cu_seqlens_q/k int32 [B+1] (from 0, non-decreasing)
 * -> out [T, N, V], lse float32 [N, T]. `causal` masks bottom-right
 * aligned; rows that see no key get out 0, lse -inf. */
int mlaMha(const mlaTensor *q, const mlaTensor *k, const mlaTensor *v,
           const mlaTensor *cuSeqlensQ, const mlaTensor *cuSeqlensK,
           double softmaxScale, int32_t causal, mlaTensor *out, mlaTensor *lse,
           char *err, size_t errLen);

/* Chunked-context MLA prefill: q [T, N, P+R], kv_c [T, L], k_pe [T, R] or
 * [T, 1, R], kv_b_proj [N*(P+V), L], kv_cache, block_table int32
 * [B, max_pages], query_start_loc int32 [B+1], seq_lens int32 [B]
 * -> out [T, N, V]. */
int mlaPrefill(const mlaTensor *q, const mlaTensor *kvC, const mlaTensor *kPe,
               const mlaTensor *kvBProj, const mlaTensor *kvCache,
               const mlaTensor *blockTable, const mlaTensor *queryStartLoc,
               const mlaTensor *seqLens, const mlaPrefillOptions *options,
               mlaTensor *out, char *err, size_t errLen);

typedef struct mlaAttentionOptions {
  mlaPrefillOptions prefill;
  /* mla-select-algorithm's threshold: the leading requests with
   * q_len = 1 take the absorbed decode path when it is 1; 0 (or below)
   * sends every request through the prefill path. The batch is split at run
   * time, so larger values are invalid (mla/Contract/MixedBatch.h). */
  int64_t decodeThreshold;
} mlaAttentionOptions;

/* MLA attention of a mixed decode/prefill batch (mla.attention): the
 * operands and semantics of mlaPrefill (request i's new tokens attend
 * causally to each other and to its context), but the cache must already
 * hold every request's new tokens (cache_write ran first): decode requests
 * (see mlaAttentionOptions) read them from it, so every page under
 * seq_lens is checked. -> out [T, N, V]. */
int mlaAttention(const mlaTensor *q, const mlaTensor *kvC, const mlaTensor *kPe,
                 const mlaTensor *kvBProj, const mlaTensor *kvCache,
                 const mlaTensor *blockTable, const mlaTensor *queryStartLoc,
                 const mlaTensor *seqLens, const mlaAttentionOptions *options,
                 mlaTensor *out, char *err, size_t errLen);

/* The JIT cache: calls answered from it, compilations and their total wall
 * time, kernels held. */
typedef struct mlaRuntimeStats {
  uint64_t cacheHits;
  uint64_t compiles;
  double compileSeconds;
  uint64_t cachedKernels;
} mlaRuntimeStats;

void mlaGetRuntimeStats(mlaRuntimeStats *stats);

/* Drops every compiled kernel and resets the statistics. */
void mlaClearKernelCache(void);

/* mla's release, e.g. "0.1.0" (a static string). */
const char *mlaGetVersion(void);

#ifdef __cplusplus
}
#endif

#endif /* MLA_C_RUNTIME_H */
