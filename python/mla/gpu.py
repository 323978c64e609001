"""MLA decode on an NVIDIA GPU (sm_90a, sm_100a) for PyTorch CUDA tensors.

`mla.decode` comes here when `q` is a CUDA tensor. The kernels are compiled ahead of time by `mla-aot` on a
machine with MLIR and looked up in the kernel cache ($MLA_KERNEL_CACHE_DIR, else $XDG_CACHE_HOME/mla, else
~/.cache/mla); this module needs neither MLIR nor numpy, only torch and libMLAGpuCAPI.so (the C API in
include/mla-c/Gpu.h), loaded with ctypes from $MLA_GPU_LIB or the package's _lib directory. torch is
imported on first use, so `import mla` never needs it.

The kernels run on the tensors' device, on torch's current stream there; out, lse and the split-KV
workspace are allocated with torch (its caching allocator orders their reuse on that stream). seq_lens is
copied to the host (a synchronisation when it lives on the GPU) to validate it and to plan the splits.

Invalid arguments raise ValueError before anything is enqueued; a kernel missing from the cache raises
KernelNotFoundError, naming the `mla-aot` command that builds it; driver failures raise RuntimeError.
"""

import ctypes
import math
import operator
import os

__all__ = ["KernelNotFoundError", "decode", "decode_spec", "clear_decoders", "SPLIT_POLICIES"]

SUCCESS = 0
ERROR_INVALID_ARGUMENT = 1
ERROR_KERNEL_NOT_FOUND = 2

_DTYPE_BF16 = 0
_DTYPE_F16 = 1

#: Split policies for num_splits=None (SplitPlanner.h): vLLM Triton MLA's one count per batch, FlashMLA's
#: balanced schedule, or one piece per request so results never depend on the rest of the batch.
SPLIT_POLICIES = {"heuristic": 0, "balanced": 1, "batch-invariant": 2}

_ERROR_BYTES = 1 << 14
_INT32_MAX = 2**31 - 1


class KernelNotFoundError(RuntimeError):
    """The kernel cache has no image for the call's spec; the message names the mla-aot command."""


_lib = None
_specs = {}


def _library():
    global _lib
    if _lib is not None:
        return _lib
    path = os.environ.get("MLA_GPU_LIB") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "_lib", "libMLAGpuCAPI.so")
    if not os.path.exists(path):
        raise RuntimeError(f"mla: the GPU runtime library {path} is missing; build libMLAGpuCAPI.so "
                           "(scripts/build-gpu-carry.sh) or point MLA_GPU_LIB at it")
    lib = ctypes.CDLL(path)
    i32, i64, u64, p, size = ctypes.c_int32, ctypes.c_int64, ctypes.c_uint64, ctypes.c_char_p, ctypes.c_size_t
    lib.mlaGpuDecodeSpec.argtypes = [p, i32, i64, i64, i64, i64, i64, i32, i32, ctypes.c_double, p,
                                     p, size, p, size]
    lib.mlaGpuDecodeSpec.restype = ctypes.c_int
    lib.mlaGpuDecode.argtypes = [p, i32, u64, u64, u64, u64, ctypes.POINTER(i32), i64, i64, i64, i64, i32,
                                 u64, u64, u64, ctypes.POINTER(size), ctypes.c_void_p, p, size]
    lib.mlaGpuDecode.restype = ctypes.c_int
    lib.mlaGpuClearDecoders.argtypes = []
    lib.mlaGpuClearDecoders.restype = None
    _lib = lib
    return lib


def _check(code, err):
    if code == SUCCESS:
        return
    message = err.value.decode(errors="replace")
    if code == ERROR_INVALID_ARGUMENT:
        raise ValueError(message)
    if code == ERROR_KERNEL_NOT_FOUND:
        raise KernelNotFoundError(message)
    raise RuntimeError(message)


def _torch():
    try:
        import torch
    except ImportError:
        raise ValueError("mla's GPU path takes torch CUDA tensors, but torch is not installed") from None
    return torch


def _int(name, value):
    try:
        return operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None


def _tensor(torch, name, value, rank, what):
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"{name} must be a torch tensor, got {type(value).__name__}")
    if value.dim() != rank:
        raise ValueError(f"{name} must have rank {rank} {what}, got shape {tuple(value.shape)}")
    if not value.is_contiguous():
        raise ValueError(f"{name} must be contiguous (row-major)")
    return value


def decode_spec(num_heads, query_rows, latent_dim, rope_dim, page_size, dtype, causal, softmax_scale, chip,
                tile=None):
    """The kernel-cache spec text of a decode kernel: what `mla-aot --spec` takes. `dtype` is "bf16" or
    "f16"; `chip` "sm_90a" or "sm_100a"; `tile` "RxWxKxS" overrides the default tiling."""
    key = (num_heads, query_rows, latent_dim, rope_dim, page_size, dtype, bool(causal), float(softmax_scale),
           chip, tile)
    if key in _specs:
        return _specs[key]
    codes = {"bf16": _DTYPE_BF16, "f16": _DTYPE_F16}
    if dtype not in codes:
        raise ValueError(f"dtype must be 'bf16' or 'f16', got {dtype!r}")
    lib = _library()
    spec = ctypes.create_string_buffer(512)
    err = ctypes.create_string_buffer(_ERROR_BYTES)
    _check(lib.mlaGpuDecodeSpec(chip.encode(), 0, num_heads, query_rows, latent_dim, rope_dim, page_size,
                                codes[dtype], 1 if causal else 0, float(softmax_scale),
                                tile.encode() if tile is not None else None, spec, len(spec), err, len(err)),
           err)
    _specs[key] = spec.value.decode()
    return _specs[key]


def _chip(torch, device):
    major, minor = torch.cuda.get_device_capability(device)
    chips = {9: "sm_90a", 10: "sm_100a"}
    if major not in chips:
        raise ValueError(f"{device} is sm_{major}{minor}; mla's GPU kernels target sm_90a and sm_100a")
    return chips[major]


def _validate(torch, q, kv_cache, block_table, seq_lens, head_dim_v, softmax_scale, num_splits, kv_format,
              kv_scale, split_policy):
    """Checks everything but the values of seq_lens (the C API checks those on the host copy) and returns
    (L, R, num_splits or 0, policy code). Device checks come last, so shapes and dtypes can be checked
    with CPU tensors."""
    _tensor(torch, "q", q, 4, "[b, s_q, h_q, d]")
    _tensor(torch, "kv_cache", kv_cache, 3, "[pages, page_size, d]")
    _tensor(torch, "block_table", block_table, 2, "[b, max_pages]")
    if not isinstance(seq_lens, torch.Tensor) or seq_lens.dim() != 1:
        raise ValueError(f"seq_lens must be a rank-1 torch tensor [b], got "
                         f"{tuple(seq_lens.shape) if isinstance(seq_lens, torch.Tensor) else type(seq_lens).__name__}")
    if q.dtype not in (torch.bfloat16, torch.float16):
        raise ValueError(f"q has dtype {q.dtype}; the GPU path takes bfloat16 or float16")
    if kv_cache.dtype != q.dtype:
        raise ValueError(f"kv_cache has dtype {kv_cache.dtype}; it must match q's {q.dtype}")
    for name, t in (("block_table", block_table), ("seq_lens", seq_lens)):
        if t.dtype != torch.int32:
            raise ValueError(f"{name} has dtype {t.dtype}; the GPU path takes int32")
    if kv_format != "auto" or kv_scale is not None:
        raise ValueError(f"the GPU path supports kv_format='auto' (a {q.dtype} cache) only, got "
                         f"kv_format={kv_format!r}, kv_scale={kv_scale!r}")
    b, sq, h, d = q.shape
    if kv_cache.shape[2] != d:
        raise ValueError(f"kv_cache rows are {kv_cache.shape[2]} wide; q's last dim is {d} (both L + R)")
    if kv_cache.shape[0] < 1 or kv_cache.shape[1] < 1:
        raise ValueError(f"kv_cache must hold at least one page of at least one row, got shape "
                         f"{tuple(kv_cache.shape)}")
    if block_table.shape[0] != b or seq_lens.shape[0] != b:
        raise ValueError(f"block_table {tuple(block_table.shape)} and seq_lens {tuple(seq_lens.shape)} must "
                         f"have q's batch size {b} as their first dim")
    if block_table.shape[1] < 1:
        raise ValueError(f"block_table must have at least one column, got shape {tuple(block_table.shape)}")
    latent = _int("head_dim_v", head_dim_v)
    if not 1 <= latent < d:
        raise ValueError(f"head_dim_v = {latent} must be in [1, {d - 1}]: it is the latent width L, and q's "
                         f"last dim {d} is L + R with a positive RoPE width R")
    try:
        scale = float(softmax_scale)
    except (TypeError, ValueError):
        raise ValueError(f"softmax_scale must be a number, got {softmax_scale!r}") from None
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"softmax_scale must be positive and finite, got {scale}")
    splits = 0
    if num_splits is not None:
        splits = _int("num_splits", num_splits)
        if not 1 <= splits <= 65535:
            raise ValueError(f"num_splits = {splits} must be in [1, 65535]")
    if split_policy not in SPLIT_POLICIES:
        raise ValueError(f"split_policy must be one of {sorted(SPLIT_POLICIES)}, got {split_policy!r}")
    for name, t in (("q", q), ("kv_cache", kv_cache), ("block_table", block_table)):
        if not t.is_cuda:
            raise ValueError(f"{name} is on {t.device}; the GPU path takes CUDA tensors")
        if t.device != q.device:
            raise ValueError(f"{name} is on {t.device} but q is on {q.device}")
    if seq_lens.is_cuda and seq_lens.device != q.device:
        raise ValueError(f"seq_lens is on {seq_lens.device} but q is on {q.device}")
    return latent, d - latent, scale, splits, SPLIT_POLICIES[split_policy]


def decode(q, kv_cache, block_table, seq_lens, *, head_dim_v, softmax_scale, causal=False, num_splits=None,
           kv_format="auto", kv_scale=None, split_policy="heuristic", tile=None):
    """Absorbed MLA decode over a paged latent cache on the GPU (FlashMLA's flash_mla_with_kvcache).

    Shapes and semantics are those of `mla.decode`: q [b, s_q, h_q, L+R] bfloat16 or float16, kv_cache
    [pages, page_size, L+R] of q's dtype, block_table int32 [b, max_pages] (CUDA), seq_lens int32 [b]
    (CUDA or CPU); returns out [b, s_q, h_q, L] in q's dtype and lse float32 [b, h_q, s_q]. Block-table
    entries are trusted: the pages a request reads must exist in kv_cache.

    `num_splits` cuts every request into that many split-KV pieces; without it `split_policy`
    ("heuristic", "balanced" or "batch-invariant") decides. `tile` ("RxWxKxS") overrides the kernel's
    default tiling (it is part of the kernel's cache key).
    """
    torch = _torch()
    latent, rope, scale, splits, policy = _validate(torch, q, kv_cache, block_table, seq_lens, head_dim_v,
                                                    softmax_scale, num_splits, kv_format, kv_scale,
                                                    split_policy)
    b, sq, h, _ = q.shape
    out = torch.empty((b, sq, h, latent), dtype=q.dtype, device=q.device)
    lse = torch.empty((b, h, sq), dtype=torch.float32, device=q.device)
    if b == 0:
        return out, lse
    dtype = "bf16" if q.dtype == torch.bfloat16 else "f16"
    spec = decode_spec(h, sq, latent, rope, kv_cache.shape[1], dtype, causal, scale, _chip(torch, q.device),
                       tile).encode()
    lens_host = seq_lens.to("cpu").contiguous()
    lens_ptr = ctypes.cast(lens_host.data_ptr(), ctypes.POINTER(ctypes.c_int32))
    lens_dev = seq_lens if seq_lens.is_cuda else seq_lens.to(q.device)

    lib = _library()
    err = ctypes.create_string_buffer(_ERROR_BYTES)
    device = q.device.index if q.device.index is not None else torch.cuda.current_device()
    with torch.cuda.device(device):
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        size = ctypes.c_size_t(0)

        def call(workspace):
            _check(lib.mlaGpuDecode(spec, device, q.data_ptr(), kv_cache.data_ptr(), block_table.data_ptr(),
                                    lens_dev.data_ptr(), lens_ptr, b, block_table.shape[1], kv_cache.shape[0],
                                    splits, policy, out.data_ptr(), lse.data_ptr(), workspace,
                                    ctypes.byref(size), stream, err, len(err)), err)

        call(0)  # validates and sizes the workspace; enqueues nothing
        workspace = torch.empty(size.value, dtype=torch.uint8, device=q.device)
        call(workspace.data_ptr())
    return out, lse


def clear_decoders():
    """Unload every kernel the GPU runtime holds."""
    _library().mlaGpuClearDecoders()
