/*===-- mla-c/Gpu.h - C API of the mla GPU runtime ---------------*- C -*-===*\
|*                                                                            *|
|* MLA decode, the cache write before it and the absorbed projections around  *|
|* it on an NVIDIA GPU from kernels compiled ahead of time: this              *|
|* library (libMLAGpuCAPI.so) links neither MLIR nor the CUDA runtime, only   *|
|* libcuda at run time (dlopen), so a serving process or the Python package   *|
|* can use it on a machine where only the driver is installed.                *|
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

/* Element types of q, the cache and out. */
#define MLA_GPU_DTYPE_BF16 0
#define MLA_GPU_DTYPE_F16 1

/* How mlaGpuDecode splits requests when numSplits is 0 (SplitPlanner.h). */
#define MLA_GPU_SPLIT_HEURISTIC 0       /* vLLM Triton MLA's count */
#define MLA_GPU_SPLIT_BALANCED 1        /* FlashMLA's balanced schedule */
#define MLA_GPU_SPLIT_BATCH_INVARIANT 2 /* one piece per request */
#define MLA_GPU_SPLIT_GRID 3            /* one count fitted to the SMs (default) */

/* Writes the canonical spec text of a decode kernel into `spec` (`specLen`
 * bytes, NUL included). `chip` is "sm_90a" or "sm_100a", or NULL for the
 * chip of device `device` (which then needs a driver); the tiling is
 * chooseDecodeTiling's unless `tile` ("RxWxKxS") is given. */
int mlaGpuDecodeSpec(const char *chip, int32_t device, int64_t numHeads,
                     int64_t queryRows, int64_t latentDim, int64_t ropeDim,
                     int64_t pageSize, int32_t dtype, int32_t causal,
                     double softmaxScale, const char *tile, char *spec,
                     size_t specLen, char *err, size_t errLen);

/* FlashMLA's flash_mla_with_kvcache on the GPU, for the kernel `spec`:
 *   q [B, Sq, N, L+R], cache [numPages, page, L+R] (spec dtype),
 *   blockTable int32 [B, maxPages], seqLens int32 [B] (device),
 *   -> out [B, Sq, N, L] (spec dtype), lse float32 [B, N, Sq].
 * `seqLensHost` holds the same lengths on the host; they are validated and
 * the splits planned from them. With NULL, lengths are not checked and
 * requests are split as if full (maxPages x page tokens), heuristic policy
 * only. `numSplits` > 0 cuts every request into that many pieces; 0 lets
 * `splitPolicy` decide.
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
int mlaGpuDecode(const char *spec, int32_t device, uint64_t q, uint64_t cache,
                 uint64_t blockTable, uint64_t seqLens,
                 const int32_t *seqLensHost, int64_t batch, int64_t maxPages,
                 int64_t numPages, int64_t numSplits, int32_t splitPolicy,
                 uint64_t out, uint64_t lse, uint64_t workspace,
                 size_t *workspaceBytes, void *stream, char *err,
                 size_t errLen);

/* Writes the canonical text of a kernel spec of any family ("decode ...",
 * "cache_write ...", "absorb_q ...", "up_proj_out ...": the text mla-aot
 * --spec takes, keys in any order, scales as decimals or f32 bit patterns)
 * into `spec` (`specLen` bytes, NUL included). Fails on malformed text or a
 * shape no kernel of the family can run. */
int mlaGpuCanonicalSpec(const char *text, char *spec, size_t specLen,
                        char *err, size_t errLen);

/* vLLM's concat_and_cache_mla on the GPU, for the "cache_write" kernel
 * `spec` (which fixes L, R, the input dtype and the cache row format):
 *   kvC [T, L], kPe [T, R] (spec dtype), slotMapping int32 [T] (device),
 *   cache [numSlots, row] (numSlots = pages * page size; rows of the spec's
 *   format: 2 or 4 bytes per entry for bf16/f16/f32, L+R, L+R+8 or
 *   L + 4*L/128 + 2*R bytes for fp8_e4m3, fp8_e4m3_token, fp8_ds_mla).
 * Token t is written to row slotMapping[t] in place; negative slots are
 * padding and write nothing. `slotMappingHost` holds the same slots on the
 * host: when given, a slot >= numSlots is MLA_GPU_ERROR_INVALID_ARGUMENT and
 * nothing is enqueued; with NULL the kernel skips such slots. Pointers must be
 * 16-byte aligned. Enqueues one kernel on `stream`, without copies, so it may
 * be captured in a CUDA graph. */
int mlaGpuCacheWrite(const char *spec, int32_t device, uint64_t kvC,
                     uint64_t kPe, uint64_t slotMapping,
                     const int32_t *slotMappingHost, uint64_t cache,
                     int64_t tokens, int64_t numSlots, void *stream, char *err,
                     size_t errLen);

/* q [T, N, P+R] -> out [T, N, L+R] (spec dtype) for the "absorb_q" kernel
 * `spec`: out[t, n, :L] = q[t, n, :P] @ wUkT[n] with wUkT [N, P, L], and
 * out[t, n, L:] = q[t, n, P:]. Enqueues one kernel on `stream`. */
int mlaGpuAbsorbQ(const char *spec, int32_t device, uint64_t q, uint64_t wUkT,
                  uint64_t out, int64_t tokens, void *stream, char *err,
                  size_t errLen);

/* o [T, N, L] -> out [T, N*V] (spec dtype) for the "up_proj_out" kernel
 * `spec`: out[t, n*V:(n+1)*V] = o[t, n] @ wUv[n] with wUv [N, L, V].
 * Enqueues one kernel on `stream`. */
int mlaGpuUpProjOut(const char *spec, int32_t device, uint64_t o,
                    uint64_t wUv, uint64_t out, int64_t tokens, void *stream,
                    char *err, size_t errLen);

/* Drops every loaded kernel (decode, cache write and projections) and resets
 * the statistics. */
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
