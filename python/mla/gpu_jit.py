"""GPU kernels compiled in-process into the on-disk kernel cache (the package built with MLIR).

`mla.gpu` launches kernels it finds in the kernel cache ($MLA_KERNEL_CACHE_DIR, else
$XDG_CACHE_HOME/mla, else ~/.cache/mla). The MLIR-free package (gpu-carry) only looks them up and raises
KernelNotFoundError on a miss, naming the `mla-aot` command that builds the entry. The package built with
MLIR (build/python_packages) carries libMLACAPI.so, which links the compiler (include/mla-c/GpuJit.h):
there a miss compiles the kernel's spec with `mla-to-nvvm`, stores it in the cache as `mla-aot` would and
loads it, so the first call of a new shape pays one compile (seconds) and every later process a file
read. MLA_GPU_JIT=0 turns this off (the AOT-only behaviour). Compiling needs no GPU.
"""

import ctypes
import os
import time

__all__ = ["available", "compile_kernel", "stats"]

_ERROR_BYTES = 1 << 16
_PATH_BYTES = 4096
_stats = {"compiles": 0, "hits": 0, "compile_seconds": 0.0}


def _compiler():
    """libMLACAPI.so's mlaCompileGpuKernel, or None where this package has no compiler."""
    try:
        from . import _capi
    except ImportError:
        return None
    return _capi


def available():
    """Whether a kernel missing from the cache is compiled in-process: this package was built with MLIR
    (it has libMLACAPI.so) and MLA_GPU_JIT is not "0"."""
    return os.environ.get("MLA_GPU_JIT", "1") != "0" and _compiler() is not None


def compile_kernel(spec, cache_dir=None):
    """Makes sure the kernel cache holds the image of kernel spec `spec` (the text `mla-aot --spec`
    takes, e.g. from `mla.gpu.merge_states_spec`), compiling it on a miss. `cache_dir` defaults to the
    cache `mla.gpu` reads. Returns {"hit": whether the entry was there, "path": the entry's file,
    "seconds": the wall time of the lookup or compile}. ValueError for a malformed spec, RuntimeError
    when compiling fails or this package has no compiler."""
    capi = _compiler()
    if capi is None:
        raise RuntimeError("this mla package has no GPU kernel compiler (it was built without MLIR); "
                           "fill the kernel cache with mla-aot")
    from . import _c_string

    spec_bytes = _c_string("spec", spec)
    dir_bytes = None if cache_dir is None else _c_string("cache_dir", os.fspath(cache_dir))
    hit = ctypes.c_int32(0)
    path = ctypes.create_string_buffer(_PATH_BYTES)
    err = ctypes.create_string_buffer(_ERROR_BYTES)
    start = time.perf_counter()
    code = capi.mlaCompileGpuKernel(spec_bytes, dir_bytes, ctypes.byref(hit), path, len(path), err, len(err))
    seconds = time.perf_counter() - start
    if code != capi.SUCCESS:
        message = err.value.decode(errors="replace")
        raise (ValueError if code == capi.ERROR_INVALID_ARGUMENT else RuntimeError)(message)
    if hit.value:
        _stats["hits"] += 1
    else:
        _stats["compiles"] += 1
        _stats["compile_seconds"] += seconds
    return {"hit": bool(hit.value), "path": path.value.decode(), "seconds": seconds}


def stats():
    """This process's compile_kernel calls: entries compiled, entries already there, compile seconds."""
    return dict(_stats)
