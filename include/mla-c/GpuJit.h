/*===-- mla-c/GpuJit.h - C API of the GPU kernel compiler --------*- C -*-===*\
|*                                                                            *|
|* Fills the on-disk GPU kernel cache in-process. libMLACAPI.so links the     *|
|* compiler, so a process that has it compiles a kernel the cache lacks on    *|
|* first use instead of failing; the MLIR-free libMLAGpuCAPI.so only looks    *|
|* entries up (mla-c/Gpu.h) and reports a miss as                             *|
|* MLA_GPU_ERROR_KERNEL_NOT_FOUND. Compiling needs no GPU (the cubin comes    *|
|* from ptxas), only the CUDA toolkit that mla-aot uses.                      *|
|*                                                                            *|
|* Return codes and error messages are those of mla-c/Runtime.h.             *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef MLA_C_GPUJIT_H
#define MLA_C_GPUJIT_H

#include "mla-c/Runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Makes sure the kernel cache in `cacheDir` (NULL: the default directory,
 * $MLA_KERNEL_CACHE_DIR, else $XDG_CACHE_HOME/mla, else ~/.cache/mla) holds
 * the image of kernel spec `spec` (the text `mla-aot --spec` takes, of any
 * family): a readable entry is left as it is, otherwise the spec is compiled
 * with mla-to-nvvm and stored atomically, as `mla-aot` does. `*wasHit` (when
 * not NULL) is 1 if the entry was already there; the entry's file,
 * `<cacheDir>/<key>.cubin`, is written into `path` (`pathLen` bytes, NUL
 * included) when not NULL.
 * A malformed spec is MLA_ERROR_INVALID_ARGUMENT; a failed compile or
 * store is MLA_ERROR_COMPILE, with the compiler's diagnostics. Thread-safe;
 * concurrent processes may fill one directory. */
int mlaCompileGpuKernel(const char *spec, const char *cacheDir, int32_t *wasHit,
                        char *path, size_t pathLen, char *err, size_t errLen);

#ifdef __cplusplus
}
#endif

#endif /* MLA_C_GPUJIT_H */
