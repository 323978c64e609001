/*===-- mla-c/Gpu.h - C API of the mla GPU runtime ---------------*- C -*-===*\
|*                                                                            *|
|* MLA decode, the cache write before it, the absorbed projections around it  *|
|* and the chunked prefill on an NVIDIA GPU from kernels compiled ahead of    *|
|* time: this library (libMLAGpuCAPI.so) links neither MLIR nor the CUDA      *|
|* runtime, only libcuda at run time (dlopen), so a serving process or the    *|
|* Python package can use it on a machine where only the driver is            *|
|* installed.                                                                 *|
|*                                                                            *|
|* Kernel images are looked up in the kernel cache directory                  *|
|* ($MLA_KERNEL_CACHE_DIR, else $XDG_CACHE_HOME/mla, else ~/.cache/mla) under *|
|* the key of their spec text; `mla-aot --spec "<spec>"` fills it on a        *|
|* machine with MLIR. A missing entry is MLA_GPU_ERROR_KERNEL_NOT_FOUND and   *|
|* the message names the mla-aot command that builds it.                      *|
|*                                                                            *|
|* Device pointers are CUdeviceptr values; streams are CUstream handles (a    *|
|* torch stream's `cuda_stream`). Tensors are dense and row-major.            *|
|*                                                                            *|
|* Every function returns MLA_GPU_SUCCESS or an error code, and on error      *|
|* writes a NUL-terminated message into `err` (at most `errLen` bytes).       *|
|* On MLA_GPU_ERROR_INVALID_ARGUMENT nothing was enqueued. The functions are  *|
|* thread-safe.                                                               *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef MLA_C_GPU_H
#define MLA_C_GPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes. */
#define MLA_GPU_SUCCESS 0
#define MLA_GPU_ERROR_INVALID_ARGUMENT 1
#define MLA_GPU_ERROR_KERNEL_NOT_FOUND 2
#define MLA_GPU_ERROR_CUDA 3

/* Element types: of a decode spec (bf16, f16) and of mlaGpuTensor. */
#define MLA_GPU_DTYPE_BF16 0
#define MLA_GPU_DTYPE_F16 1
#define MLA_GPU_DTYPE_F32 2
#define MLA_GPU_DTYPE_INT32 3
#define MLA_GPU_DTYPE_UINT8 4

#define MLA_GPU_MAX_RANK 8

/* A dense row-major tensor: a device pointer (CUdeviceptr; 0 where the call
 * only checks arguments) with its element type and shape, so that the
 * argument rules (mla/Contract/ArgRules.h, the CPU path's rules with the
 * GPU kernels' limits) can run in C before anything is enqueued. */
typedef struct mlaGpuTensor {
  uint64_t data;
  int32_t dtype;
  int32_t rank;
  int64_t shape[MLA_GPU_MAX_RANK];
} mlaGpuTensor;

/* How cache rows are stored, as in mla-c/Runtime.h: `kvFormat` is "auto"
 * (also meant by NULL), "fp8_e4m3", "fp8_e4m3_token" or "fp8_ds_mla".
 * fp8_e4m3 needs its per-tensor scale in exactly one of two ways:
 *  - `kvScaleTensor` (NULL: none): a float32 device tensor of one element on
 *    the call's device (vLLM's k_scale). The kernels read it when they run:
 *    nothing is copied, so a launch can be captured in a CUDA graph and uses
 *    the value the tensor holds at each replay;
 *  - `kvScale` when `hasKvScale`: a host value. The library keeps it in a
 *    small device buffer of its own per value and device (freed by
 *    mlaGpuClearDecoders); the first call with a value uploads it and waits
 *    for the copy, so capture a graph only after such a call has run once.
 * The kernels of one spec serve every scale either way. */
typedef struct mlaGpuCacheFormat {
  const char *kvFormat;
  int32_t hasKvScale;
  double kvScale;
  const mlaGpuTensor *kvScaleTensor;
} mlaGpuCacheFormat;

/* The options of a decode: `headDimV` is the latent width L. With
 * `hasNumSplits`, every request is cut into `numSplits` pieces (1 to 65535);
 * without, `splitPolicy` (MLA_GPU_SPLIT_*) decides. The decode kernels read
 * caches of q's dtype (kv_format "auto") and the fp8 formats (fp8_e4m3_token
 * on sm_90a only);
 * fp8_e4m3's per-tensor scale is a device float32 passed at launch (the
 * `kvScale` pointer of mlaGpuDecode and mlaGpuDecodeRun), so
 * `cache.hasKvScale` stays 0. */
typedef struct mlaGpuDecodeOptions {
  int64_t headDimV;
  double softmaxScale;
  int32_t causal;
  int32_t hasNumSplits;
  int64_t numSplits;
  int32_t splitPolicy;
  mlaGpuCacheFormat cache;
} mlaGpuDecodeOptions;

/* How mlaGpuDecode splits requests without a forced count (SplitPlanner.h). */
#define MLA_GPU_SPLIT_HEURISTIC 0       /* vLLM Triton MLA's count */
#define MLA_GPU_SPLIT_BALANCED 1        /* FlashMLA's balanced schedule */
#define MLA_GPU_SPLIT_BATCH_INVARIANT 2 /* one piece per request */
#define MLA_GPU_SPLIT_GRID 3 /* one count fitted to the SMs (default) */

/* Writes the canonical spec text of a decode kernel into `spec` (`specLen`
 * bytes, NUL included). `chip` is "sm_90a" or "sm_100a", or NULL for the
 * chip of device `device` (which then needs a driver); the tiling is
 * chooseDecodeTiling's unless `tile` ("RxWxKxS") is given. `kvFormat` is
 * the cache's kv_format ("auto" or NULL: a cache of `dtype`; "fp8_e4m3",
 * "fp8_e4m3_token", "fp8_ds_mla"). The softmax scale (and fp8_e4m3's
 * kv_scale) are not part of a spec: the kernel takes them at launch. */
int mlaGpuDecodeSpec(const char *chip, int32_t device, int64_t numHeads,
                     int64_t queryRows, int64_t latentDim, int64_t ropeDim,
                     int64_t pageSize, int32_t dtype, int32_t causal,
                     const char *kvFormat, const char *tile, char *spec,
                     size_t specLen, char *err, size_t errLen);

/* Checks a decode's tensors and options by the argument rules, without a
 * spec or a GPU: q [B, Sq, N, L+R] bf16 or f16, cache [numPages, page, L+R]
 * of q's dtype (or uint8 rows of an fp8 kv_format), blockTable int32 [B,
 * maxPages], seqLens int32 [B]; with `seqLensHost` (the same lengths on the
 * host) also every length against the block table's capacity and, for causal
 * decode, against Sq. */
int mlaGpuCheckDecode(const mlaGpuTensor *q, const mlaGpuTensor *cache,
                      const mlaGpuTensor *blockTable,
                      const mlaGpuTensor *seqLens, const int32_t *seqLensHost,
                      const int32_t *blockTableHost,
                      const mlaGpuDecodeOptions *options, char *err,
                      size_t errLen);

/* FlashMLA's flash_mla_with_kvcache on the GPU, for the kernel `spec`:
 *   q, cache, blockTable, seqLens as mlaGpuCheckDecode says (device
 *   pointers), -> out [B, Sq, N, L] (q's dtype), lse float32 [B, N, Sq].
 *   kvScale: for kv_format fp8_e4m3 a device pointer to its float32 scale,
 *   read by the kernel; 0 otherwise.
 * The call first runs mlaGpuCheckDecode's rules and checks that the spec
 * was made for these shapes and options. `seqLensHost` holds the lengths on
 * the host; they are validated and the splits planned from them. With NULL,
 * lengths are not checked and requests are split as if full (maxPages x
 * page tokens), heuristic policy only. `blockTableHost` is a host copy of
 * the block table [B, maxPages]: every page a request reads (by
 * `seqLensHost`) is checked against the cache's page count before anything
 * runs. With NULL the entries are trusted: a page past the cache is read
 * out of bounds.
 *
 * With `workspace` 0 nothing runs: the call validates the arguments and
 * stores the workspace size the call needs in `*workspaceBytes` (a device
 * buffer of at least that many bytes, 16-byte aligned). Otherwise
 * `*workspaceBytes` is the size of `workspace`; the call makes the primary
 * context of `device` current when the current one is on another device,
 * loads the kernel (once per spec and context), copies the split bounds into
 * the workspace and enqueues the kernels on `stream`. The host-to-device copy
 * makes this call unsuitable for CUDA graph capture (GpuDecode.h is the
 * capturable C++ interface). */
int mlaGpuDecode(const char *spec, int32_t device, const mlaGpuTensor *q,
                 const mlaGpuTensor *cache, const mlaGpuTensor *blockTable,
                 const mlaGpuTensor *seqLens, const int32_t *seqLensHost,
                 const int32_t *blockTableHost,
                 const mlaGpuDecodeOptions *options, uint64_t out, uint64_t lse,
                 uint64_t kvScale, uint64_t workspace, size_t *workspaceBytes,
                 void *stream, char *err, size_t errLen);

/* Plan/run decode (FlashInfer's plan/run, FlashMLA's scheduler metadata):
 * the split bounds are computed on the device from device seq_lens by the
 * decode image's planning kernel, so neither step reads device memory on
 * the host, allocates or copies from the host, and both can be captured in
 * a CUDA graph. A plan is made once, for a maximum batch; each batch step
 * is planned (mlaGpuDecodePlanUpdate) and then run any number of times
 * (mlaGpuDecodeRun, e.g. once per layer). A plan is used by one thread at a
 * time. */
typedef struct mlaGpuDecodePlan mlaGpuDecodePlan;

/* Makes a plan for decodes of kernel `spec` on device `device`. q, cache,
 * blockTable and seqLens are descriptions (their data is not read) checked
 * by mlaGpuCheckDecode's rules; options->softmaxScale is not used
 * (mlaGpuDecodeRun takes the scale). Every request is cut into S pieces of
 * whole pages, S fixed here: options->numSplits when given, 1 for
 * MLA_GPU_SPLIT_BATCH_INVARIANT, and for MLA_GPU_SPLIT_GRID
 * chooseGridSplits(maxBatch, maxSeqLen, the device's SMs), maxSeqLen 0
 * standing for the block table's capacity. The heuristic and balanced
 * policies plan from host lengths and are refused. `maxBatch` (0: seqLens'
 * B) sizes the plan's buffers.
 *
 * With `workspace` 0 the call only stores the workspace bytes the plan needs
 * in `*workspaceBytes`. Otherwise `workspace` (16-byte aligned,
 * `*workspaceBytes` long) and `status` (one int32, zeroed by the caller)
 * are device buffers the plan uses until mlaGpuDecodePlanDestroy, and the
 * new plan is stored in `*plan`. */
int mlaGpuDecodePlanCreate(const char *spec, int32_t device,
                           const mlaGpuTensor *q, const mlaGpuTensor *cache,
                           const mlaGpuTensor *blockTable,
                           const mlaGpuTensor *seqLens,
                           const mlaGpuDecodeOptions *options, int64_t maxBatch,
                           int64_t maxSeqLen, uint64_t workspace,
                           size_t *workspaceBytes, uint64_t status,
                           mlaGpuDecodePlan **plan, char *err, size_t errLen);

/* S, the pieces per request of `plan` (0 for NULL). */
int64_t mlaGpuDecodePlanNumSplits(const mlaGpuDecodePlan *plan);

/* Releases `plan` (NULL is allowed); its buffers stay the caller's. */
void mlaGpuDecodePlanDestroy(mlaGpuDecodePlan *plan);

/* Plans one batch step: checks the descriptions (the plan's shapes, at most
 * its maximum batch; device pointers for blockTable and seqLens) on the host
 * and enqueues the planning kernel on `stream`. On the device, a request
 * whose seq_len breaks mlaGpuCheckDecode's value rules, or whose used pages
 * name a page outside the cache, is planned as empty (out 0, lse -inf; no
 * cache row is read for it) and flagged in the status word, which
 * mlaGpuDecodePlanCheck reports. Capturable in a CUDA graph. */
int mlaGpuDecodePlanUpdate(mlaGpuDecodePlan *plan, const mlaGpuTensor *q,
                           const mlaGpuTensor *cache,
                           const mlaGpuTensor *blockTable,
                           const mlaGpuTensor *seqLens, void *stream, char *err,
                           size_t errLen);

/* Enqueues the decode of the step planned last on `stream`: q, cache,
 * blockTable, seqLens, out and lse device pointers of that step's shapes
 * (mlaGpuDecode's), the tables holding the values that were planned
 * (planned bounds clamp each piece to seq_lens; what was not planned is not
 * checked). `softmaxScale` is a launch argument: one kernel serves every
 * scale; so is `kvScale` (mlaGpuDecode's: fp8_e4m3's device scale, else 0).
 * Checks pointers and the scale only; no allocation, no copy, no
 * synchronisation: capturable in a CUDA graph. */
int mlaGpuDecodeRun(const mlaGpuDecodePlan *plan, uint64_t q, uint64_t cache,
                    uint64_t blockTable, uint64_t seqLens, uint64_t out,
                    uint64_t lse, double softmaxScale, uint64_t kvScale,
                    void *stream, char *err, size_t errLen);

/* mlaGpuDecodeRun's arguments in one struct, for bindings whose calls pay
 * per argument (Python's ctypes converts each of twelve; one
 * struct.pack_into fills this): the same pointers and scales, and the
 * stream as an integer. The layout is nine 8-byte fields in this order. */
typedef struct mlaGpuDecodeRunArgs {
  uint64_t q, cache, blockTable, seqLens, out, lse;
  uint64_t kvScale; /* fp8_e4m3's device scale, else 0 */
  uint64_t stream;  /* a CUstream */
  double softmaxScale;
} mlaGpuDecodeRunArgs;

/* mlaGpuDecodeRun with its arguments in `args` (not NULL). */
int mlaGpuDecodeRunPacked(const mlaGpuDecodePlan *plan,
                          const mlaGpuDecodeRunArgs *args, char *err,
                          size_t errLen);

/* Varlen decode (speculative decoding with mixed draft lengths), sm_90a
 * only, over a cache of q's dtype or of an fp8 `kvFormat` (as
 * mlaGpuDecodeSpec's; its `kvScale` as mlaGpuDecode's): q [T, N, L+R]
 * packs the requests' query tokens, request b owning
 * tokens [queryStartLoc[b], queryStartLoc[b+1]) of queryStartLoc int32
 * [B+1] (from 0, non-decreasing, ending at T; each q_b in [0, 8] and at
 * most seq_lens[b]); out [T, N, L] (q's dtype), lse float32 [T, N]
 * (token-major). Causal token i of request b sees positions
 * [0, seq_lens[b] - q_b + i]. The kernel's Sq (`maxQueryRows`, at most 8) is
 * the largest q_b it takes; requests with fewer tokens leave its extra CTAs
 * idle. The spec text carries "varlen=1". */
int mlaGpuDecodeVarlenSpec(const char *chip, int32_t device, int64_t numHeads,
                           int64_t maxQueryRows, int64_t latentDim,
                           int64_t ropeDim, int64_t pageSize, int32_t dtype,
                           int32_t causal, const char *kvFormat,
                           const char *tile, char *spec, size_t specLen,
                           char *err, size_t errLen);

/* mlaGpuDecode for a varlen spec: the same rules plus query_start_loc's;
 * `queryStartLocHost` (required) is its host copy, checked before anything
 * runs. */
int mlaGpuDecodeVarlen(
    const char *spec, int32_t device, const mlaGpuTensor *q,
    const mlaGpuTensor *cache, const mlaGpuTensor *blockTable,
    const mlaGpuTensor *seqLens, const mlaGpuTensor *queryStartLoc,
    const int32_t *seqLensHost, const int32_t *blockTableHost,
    const int32_t *queryStartLocHost, const mlaGpuDecodeOptions *options,
    uint64_t out, uint64_t lse, uint64_t kvScale, uint64_t workspace,
    size_t *workspaceBytes, void *stream, char *err, size_t errLen);

/* The plan/run calls of a varlen spec: as mlaGpuDecodePlanCreate,
 * mlaGpuDecodePlanUpdate and mlaGpuDecodeRun with query_start_loc (a device
 * description or pointer). The planning kernel also checks query_start_loc
 * on the device: a malformed entry or q_b > seq_len plans the request as
 * empty and is reported by mlaGpuDecodePlanCheck. A plan's workspace holds
 * maxBatch x Sq tokens. */
int mlaGpuDecodeVarlenPlanCreate(
    const char *spec, int32_t device, const mlaGpuTensor *q,
    const mlaGpuTensor *cache, const mlaGpuTensor *blockTable,
    const mlaGpuTensor *seqLens, const mlaGpuTensor *queryStartLoc,
    const mlaGpuDecodeOptions *options, int64_t maxBatch, int64_t maxSeqLen,
    uint64_t workspace, size_t *workspaceBytes, uint64_t status,
    mlaGpuDecodePlan **plan, char *err, size_t errLen);
int mlaGpuDecodeVarlenPlanUpdate(mlaGpuDecodePlan *plan, const mlaGpuTensor *q,
                                 const mlaGpuTensor *cache,
                                 const mlaGpuTensor *blockTable,
                                 const mlaGpuTensor *seqLens,
                                 const mlaGpuTensor *queryStartLoc,
                                 void *stream, char *err, size_t errLen);
int mlaGpuDecodeVarlenRun(const mlaGpuDecodePlan *plan, uint64_t q,
                          uint64_t cache, uint64_t blockTable, uint64_t seqLens,
                          uint64_t queryStartLoc, uint64_t out, uint64_t lse,
                          double softmaxScale, uint64_t kvScale, void *stream,
                          char *err, size_t errLen);

/* Synchronises `stream`, reads the plan's status word and clears it:
 * MLA_GPU_ERROR_INVALID_ARGUMENT, with the rule that was broken, when a step
 * planned since the last check had invalid tables. Not capturable. */
int mlaGpuDecodePlanCheck(mlaGpuDecodePlan *plan, void *stream, char *err,
                          size_t errLen);

/* Writes the canonical text of a kernel spec of any family ("decode ...",
 * "cache_write ...", "absorb_q ...", "up_proj_out ...": the text mla-aot
 * --spec takes, keys in any order, scales as decimals or f32 bit patterns)
 * into `spec` (`specLen` bytes, NUL included). Fails on malformed text or a
 * shape no kernel of the family can run. */
int mlaGpuCanonicalSpec(const char *text, char *spec, size_t specLen, char *err,
                        size_t errLen);

/* Checks a cache write's tensors and format by the argument rules, without
 * a spec or a GPU: kvC [T, L] and kPe [T, R] or [T, 1, R] (bf16, f16 or f32,
 * one dtype), slotMapping int32 [T], cache [pages, page, row] of a float
 * type for kv_format "auto" (rows are converted to it) or uint8 rows of the
 * fp8 format's width (L+R, L+R+8 or L + 4*L/128 + 2*R bytes). With
 * `slotMappingHost` (the same slots on the host) also every slot: negative
 * (padding) or below pages * page. */
int mlaGpuCheckCacheWrite(const mlaGpuTensor *kvC, const mlaGpuTensor *kPe,
                          const mlaGpuTensor *slotMapping,
                          const int32_t *slotMappingHost,
                          const mlaGpuTensor *cache,
                          const mlaGpuCacheFormat *format, char *err,
                          size_t errLen);

/* vLLM's concat_and_cache_mla on the GPU, for the "cache_write" kernel
 * `spec` (which fixes L, R, the input dtype, the page size and the cache row
 * format): the tensors as mlaGpuCheckCacheWrite says (device pointers), and
 * `format` naming the spec's row format with fp8_e4m3's scale (NULL: the
 * spec's format, without a scale); the call checks them by the same rules
 * and against the spec. Token t is written to row slotMapping[t] of the cache
 * in place; negative slots are padding and write nothing. `slotMappingHost`
 * holds the same slots on the host: when given, a slot past the cache is
 * MLA_GPU_ERROR_INVALID_ARGUMENT and nothing is enqueued; with NULL the
 * kernel skips such slots. Pointers must be 16-byte aligned. Enqueues one
 * kernel on `stream`, without copies (but for the first use of a host
 * kvScale, see mlaGpuCacheFormat), so it may be captured in a CUDA graph. */
int mlaGpuCacheWrite(const char *spec, int32_t device, const mlaGpuTensor *kvC,
                     const mlaGpuTensor *kPe, const mlaGpuTensor *slotMapping,
                     const int32_t *slotMappingHost, const mlaGpuTensor *cache,
                     const mlaGpuCacheFormat *format, void *stream, char *err,
                     size_t errLen);

/* Check absorb_q's and up_proj_out's tensors by the argument rules, without
 * a spec or a GPU: q [T, N, P+R] with wUkT [N, P, L], o [T, N, L] with
 * wUv [N, L, V]; bf16, f16 or f32, one dtype. */
int mlaGpuCheckAbsorbQ(const mlaGpuTensor *q, const mlaGpuTensor *wUkT,
                       char *err, size_t errLen);
int mlaGpuCheckUpProjOut(const mlaGpuTensor *o, const mlaGpuTensor *wUv,
                         char *err, size_t errLen);

/* q -> out [T, N, L+R] (q's dtype) for the "absorb_q" kernel `spec`, made
 * for these shapes: out[t, n, :L] = q[t, n, :P] @ wUkT[n], and
 * out[t, n, L:] = q[t, n, P:]. Enqueues one kernel on `stream`. */
int mlaGpuAbsorbQ(const char *spec, int32_t device, const mlaGpuTensor *q,
                  const mlaGpuTensor *wUkT, uint64_t out, void *stream,
                  char *err, size_t errLen);

/* o -> out [T, N*V] (o's dtype) for the "up_proj_out" kernel `spec`, made
 * for these shapes: out[t, n*V:(n+1)*V] = o[t, n] @ wUv[n]. Enqueues one
 * kernel on `stream`. */
int mlaGpuUpProjOut(const char *spec, int32_t device, const mlaGpuTensor *o,
                    const mlaGpuTensor *wUv, uint64_t out, void *stream,
                    char *err, size_t errLen);

/* Checks a gather's tensors by the argument rules, without a spec or a GPU:
 * kvCache [pages, page, row] as for mlaGpuCheckCacheWrite, blockTable int32
 * [B, maxPages], starts int32 [B], cuRows int32 [B+1], workspace [W, L+R]
 * (bf16, f16 or f32) with L = `latentDim`. With the host copies of the
 * three tables (all, or none) also their values: cuRows non-decreasing from
 * >= 0, starts >= 0 and every gathered position in a block-table page that
 * is a page of the cache. */
int mlaGpuCheckGatherCache(
    const mlaGpuTensor *kvCache, const mlaGpuTensor *blockTable,
    const mlaGpuTensor *starts, const mlaGpuTensor *cuRows,
    const int32_t *blockTableHost, const int32_t *startsHost,
    const int32_t *cuRowsHost, const mlaGpuTensor *workspace, int64_t latentDim,
    const mlaGpuCacheFormat *format, char *err, size_t errLen);

/* vLLM's gather_and_maybe_dequant_cache for the "gather_cache" kernel `spec`
 * (which fixes L, R, the page size, the cache row format and the workspace
 * dtype): workspace row r in [cuRows[b], cuRows[b+1]) receives cache
 * position starts[b] + r - cuRows[b] of request b, found through
 * blockTable, dequantised to the workspace dtype; other rows keep their
 * values. The tensors as mlaGpuCheckGatherCache says (device pointers), and
 * `format` as for mlaGpuCacheWrite (NULL: the spec's format, without a
 * scale). With the host copies every gathered position is checked first
 * (MLA_GPU_ERROR_INVALID_ARGUMENT, nothing enqueued); without them the
 * kernel skips rows that would read out of bounds. One kernel on `stream`,
 * no copies but for a host kvScale's first use (graph-capturable). */
int mlaGpuGatherCache(const char *spec, int32_t device,
                      const mlaGpuTensor *kvCache,
                      const mlaGpuTensor *blockTable,
                      const mlaGpuTensor *starts, const mlaGpuTensor *cuRows,
                      const int32_t *blockTableHost, const int32_t *startsHost,
                      const int32_t *cuRowsHost, const mlaGpuTensor *workspace,
                      const mlaGpuCacheFormat *format, void *stream, char *err,
                      size_t errLen);

/* Checks merge_states' tensors by the argument rules, without a spec or a
 * GPU: outA/outB [T, N, H] (bf16, f16 or f32, one dtype), lseA/lseB float32
 * [N, T]. */
int mlaGpuCheckMergeStates(const mlaGpuTensor *outA, const mlaGpuTensor *lseA,
                           const mlaGpuTensor *outB, const mlaGpuTensor *lseB,
                           char *err, size_t errLen);

/* vLLM's merge_attn_states for the "merge_states" kernel `spec`, made for
 * these shapes: out [T, N, H] (outA's dtype) and lse float32 [N, T]. A side
 * with a non-finite LSE does not contribute; with neither, out = 0 and
 * lse = -inf. out/lse may alias outA/lseA. One kernel on `stream`. */
int mlaGpuMergeStates(const char *spec, int32_t device,
                      const mlaGpuTensor *outA, const mlaGpuTensor *lseA,
                      const mlaGpuTensor *outB, const mlaGpuTensor *lseB,
                      uint64_t out, uint64_t lse, void *stream, char *err,
                      size_t errLen);

/* Checks up_proj_kv's tensors by the argument rules, without a spec or a
 * GPU: latent [S, L] and kvBProj [N*(P+V), L] of one dtype (bf16, f16 or
 * f32). */
int mlaGpuCheckUpProjKv(const mlaGpuTensor *latent, const mlaGpuTensor *kvBProj,
                        int64_t numHeads, int64_t qkNopeHeadDim,
                        int64_t vHeadDim, char *err, size_t errLen);

/* latent [S, L] x kvBProj [N*(P+V), L]^T -> kNope [S, N, P] and
 * v [S, N, V] (latent's dtype) for the "up_proj_kv" kernel `spec`, which
 * fixes N, P and V. latent and kvBProj must be 16-byte aligned. One kernel
 * on `stream`. */
int mlaGpuUpProjKv(const char *spec, int32_t device, const mlaGpuTensor *latent,
                   const mlaGpuTensor *kvBProj, uint64_t kNope, uint64_t v,
                   void *stream, char *err, size_t errLen);

/* Checks mha's tensors by the argument rules, without a spec or a GPU:
 * q [T, N, D], k [S, N, D], v [S, N, V] of one dtype (bf16, f16 or f32),
 * cuSeqlensQ/K int32 [B+1], a positive finite scale. With the host copies
 * also their values: from 0, non-decreasing, within T and S. */
int mlaGpuCheckMha(const mlaGpuTensor *q, const mlaGpuTensor *k,
                   const mlaGpuTensor *v, const mlaGpuTensor *cuSeqlensQ,
                   const mlaGpuTensor *cuSeqlensK,
                   const int32_t *cuSeqlensQHost, const int32_t *cuSeqlensKHost,
                   double softmaxScale, int32_t causal, char *err,
                   size_t errLen);

/* Varlen attention with LSE for the "mha" kernel `spec` (the first,
 * CUDA-core version; the spec fixes N, D, V, the dtype, the scale and
 * causality): the tensors as mlaGpuCheckMha says (device pointers), and the
 * host copies of cuSeqlensQ/K, which are required (the kernel trusts the
 * offsets). out [T, N, V], lse float32 [N, T]. Causal specs align the mask
 * bottom-right; rows that see no key get out 0, lse -inf. One kernel on
 * `stream`. */
int mlaGpuMha(const char *spec, int32_t device, const mlaGpuTensor *q,
              const mlaGpuTensor *k, const mlaGpuTensor *v,
              const mlaGpuTensor *cuSeqlensQ, const mlaGpuTensor *cuSeqlensK,
              const int32_t *cuSeqlensQHost, const int32_t *cuSeqlensKHost,
              uint64_t out, uint64_t lse, void *stream, char *err,
              size_t errLen);

/* The options of a prefill, as mlaPrefillOptions (mla-c/Runtime.h): with
 * `hasWorkspaceRows`, at most `workspaceRows` context rows are
 * up-projected at once; else the CPU path's default budget (32768 rows;
 * 65536 on sm_100a), in both cases clamped to the block table's capacity.
 * The cache's format is `cache`; fp8_e4m3's scale is a host kvScale or a
 * device kvScaleTensor (mlaGpuCacheFormat), read by the gather kernel at
 * run time, so one set of kernels serves every scale. */
typedef struct mlaGpuPrefillOptions {
  double softmaxScale;
  int64_t vHeadDim;
  int32_t hasWorkspaceRows;
  int64_t workspaceRows;
  mlaGpuCacheFormat cache;
} mlaGpuPrefillOptions;

/* Checks a prefill's tensors and options by the argument rules (the CPU
 * mlaPrefill's, with the GPU's types), without a GPU: q [T, N, P+R],
 * kvC [T, L], kPe [T, R] or [T, 1, R] and kvBProj [N*(P+V), L] of one dtype
 * (bf16 or f16), kvCache [pages, page, row] (any float type for "auto", or
 * uint8 rows of an fp8 format), blockTable int32 [B, maxPages],
 * queryStartLoc int32 [B+1], seqLens int32 [B] (context + new tokens). The
 * three host copies are required: their values are checked (query_start_loc
 * from 0 to T, seq_lens within the table and at least each request's new
 * tokens, every context page a page of the cache). */
int mlaGpuCheckPrefill(
    const mlaGpuTensor *q, const mlaGpuTensor *kvC, const mlaGpuTensor *kPe,
    const mlaGpuTensor *kvBProj, const mlaGpuTensor *kvCache,
    const mlaGpuTensor *blockTable, const mlaGpuTensor *queryStartLoc,
    const mlaGpuTensor *seqLens, const int32_t *blockTableHost,
    const int32_t *queryStartLocHost, const int32_t *seqLensHost,
    const mlaGpuPrefillOptions *options, char *err, size_t errLen);

/* The whole chunked-context MLA prefill on the GPU, the CPU mlaPrefill's
 * semantics: the new tokens attend causally to each other and to their
 * request's cached context (which prefill only reads), whose latent rows
 * are gathered, up-projected and attended to at most `workspaceRows` at a
 * time, chunked exactly as the CPU path chunks them
 * (mla/Contract/ChunkedPrefill.h). out [T, N, V] is of q's dtype. The
 * tensors as mlaGpuCheckPrefill says (device pointers, 16-byte aligned);
 * the host copies of the tables are required, because the chunks are
 * planned on the host: a caller holding them only on the device must copy
 * them first, which synchronises. `chip` is "sm_90a" or "sm_100a", or NULL
 * for the chip of device `device`; the kernels are the specs
 * getChunkedPrefillSpecs names for it (mla-aot --shapes deepseek builds
 * them for DeepSeek-V3 on sm_90a).
 *
 * With `workspace` 0 nothing runs: the call validates the arguments and
 * stores the device workspace the call needs in `*workspaceBytes` (it
 * depends on the tables' values: the largest chunk). Otherwise
 * `*workspaceBytes` is the size of `workspace`; the call makes the primary
 * context of `device` current when the current one is on another device,
 * loads the kernels (once per spec set and context) and enqueues everything
 * on `stream`: kernels, strided device copies, and one small host-to-device
 * copy of each chunk's gather tables (from pageable memory, so the call is
 * not graph-capturable). */
int mlaGpuPrefill(const char *chip, int32_t device, const mlaGpuTensor *q,
                  const mlaGpuTensor *kvC, const mlaGpuTensor *kPe,
                  const mlaGpuTensor *kvBProj, const mlaGpuTensor *kvCache,
                  const mlaGpuTensor *blockTable,
                  const mlaGpuTensor *queryStartLoc,
                  const mlaGpuTensor *seqLens, const int32_t *blockTableHost,
                  const int32_t *queryStartLocHost, const int32_t *seqLensHost,
                  const mlaGpuPrefillOptions *options, uint64_t out,
                  uint64_t workspace, size_t *workspaceBytes, void *stream,
                  char *err, size_t errLen);

/* The options of a mixed batch, as mlaAttentionOptions (mla-c/Runtime.h):
 * the prefill's options, and the decode threshold (1: the leading requests
 * with one new token take the absorbed decode path; 0 or below: every
 * request is a prefill; larger values are invalid for a batch split at run
 * time). */
typedef struct mlaGpuAttentionOptions {
  mlaGpuPrefillOptions prefill;
  int64_t decodeThreshold;
} mlaGpuAttentionOptions;

/* Checks a mixed batch's tensors and options by the argument rules (the CPU
 * mlaAttention's, with the GPU's types), without a GPU: mlaGpuCheckPrefill's
 * tensors and host tables, plus wUkT [N, P, L] and wUv [N, L, V] of q's
 * dtype (kv_b_proj split as mlaSplitKvBProj splits it); every page under
 * seq_lens must be a page of the cache (decode requests read their new
 * token's row). */
int mlaGpuCheckAttention(
    const mlaGpuTensor *q, const mlaGpuTensor *kvC, const mlaGpuTensor *kPe,
    const mlaGpuTensor *kvBProj, const mlaGpuTensor *wUkT,
    const mlaGpuTensor *wUv, const mlaGpuTensor *kvCache,
    const mlaGpuTensor *blockTable, const mlaGpuTensor *queryStartLoc,
    const mlaGpuTensor *seqLens, const int32_t *blockTableHost,
    const int32_t *queryStartLocHost, const int32_t *seqLensHost,
    const mlaGpuAttentionOptions *options, char *err, size_t errLen);

/* MLA attention of a mixed decode/prefill batch on the GPU, the CPU
 * mlaAttention's semantics and split (mla-select-algorithm's rule for a
 * batch known at run time, mla/Contract/MixedBatch.h): the leading
 * requests with one new token each (decode requests first, as vLLM orders
 * them) run absorb_q (wUkT), a split-KV decode over the latent cache and
 * up_proj_out (wUv); the other requests run mlaGpuPrefill's chunked
 * prefill (kvBProj). The cache must already hold every new token. The
 * batch is split and both paths planned on the host from the host copies
 * of the tables, which are required (a caller holding them only on the
 * device must copy them, which synchronises). The decode path reads caches
 * of q's dtype only: a batch with decode requests and an fp8 cache is
 * MLA_GPU_ERROR_INVALID_ARGUMENT (run it with decodeThreshold 0). Kernels:
 * mlaGpuPrefill's, and for decode requests the absorb_q, up_proj_out and
 * decode (Sq=1, causal=0) specs of the shape (mla-aot --shapes deepseek
 * builds them for DeepSeek-V3 on sm_90a).
 *
 * With `workspace` 0 nothing runs: the call validates the arguments and
 * stores the device workspace it needs in `*workspaceBytes` (it depends on
 * the tables' values). Otherwise `*workspaceBytes` is the size of
 * `workspace` (16-byte aligned); the call makes the primary context of
 * `device` current when the current one is on another device, loads the
 * kernels and enqueues everything on `stream`, including host-to-device
 * copies of the decode's split bounds, the prefill's rebased
 * query_start_loc and its chunk tables (not graph-capturable). */
int mlaGpuAttention(const char *chip, int32_t device, const mlaGpuTensor *q,
                    const mlaGpuTensor *kvC, const mlaGpuTensor *kPe,
                    const mlaGpuTensor *kvBProj, const mlaGpuTensor *wUkT,
                    const mlaGpuTensor *wUv, const mlaGpuTensor *kvCache,
                    const mlaGpuTensor *blockTable,
                    const mlaGpuTensor *queryStartLoc,
                    const mlaGpuTensor *seqLens, const int32_t *blockTableHost,
                    const int32_t *queryStartLocHost,
                    const int32_t *seqLensHost,
                    const mlaGpuAttentionOptions *options, uint64_t out,
                    uint64_t workspace, size_t *workspaceBytes, void *stream,
                    char *err, size_t errLen);

/* Drops every loaded kernel (decode, cache write, projections, the
 * prefill pieces and whole prefills) and resets the statistics. */
void mlaGpuClearDecoders(void);

/* The process's kernel loads, like mlaGetRuntimeStats for the CPU: calls
 * served by a kernel already loaded (hits), calls that had to load one from
 * the kernel cache directory (misses; `notFound` of them found no entry),
 * the wall time of those loads, and the kernels held. This library compiles
 * nothing (mla-aot or the JIT fill the cache directory), so a miss costs a
 * file read and a module load, not a compile. */
typedef struct mlaGpuRuntimeStats {
  uint64_t hits;
  uint64_t misses;
  uint64_t notFound;
  double loadSeconds;
  uint64_t loadedKernels;
} mlaGpuRuntimeStats;

void mlaGpuGetRuntimeStats(mlaGpuRuntimeStats *stats);

/* mla's release, e.g. "0.1.0" (a static string); the same as mlaGetVersion
 * of the CPU library of one build. */
const char *mlaGpuGetVersion(void);

#ifdef __cplusplus
}
#endif

#endif /* MLA_C_GPU_H */
