"""MLA on an NVIDIA GPU (sm_90a, sm_100a) for PyTorch CUDA tensors.

`mla.decode`, `mla.cache_write`, `mla.absorb_q` and `mla.up_proj_out` come here when their first tensor
(or, for cache_write, kv_cache) is a CUDA tensor. The kernels are compiled ahead of time by `mla-aot` on a
machine with MLIR and looked up in the kernel cache ($MLA_KERNEL_CACHE_DIR, else $XDG_CACHE_HOME/mla, else
~/.cache/mla); this module needs neither MLIR nor numpy, only torch and libMLAGpuCAPI.so (the C API in
include/mla-c/Gpu.h), loaded with ctypes from $MLA_GPU_LIB or the package's _lib directory. torch is
imported on first use, so `import mla` never needs it.

The kernels run on the tensors' device, on torch's current stream there; outputs and the split-KV
workspace are allocated with torch (its caching allocator orders their reuse on that stream). seq_lens and
slot_mapping are copied to the host (a synchronisation when they live on the GPU) to validate them (and
to plan decode's splits).

Invalid arguments raise ValueError before anything is enqueued; a kernel missing from the cache raises
KernelNotFoundError, naming the `mla-aot` command that builds it; driver failures raise RuntimeError.
"""

import ctypes
import math
import operator
import os
import struct

__all__ = ["KernelNotFoundError", "SPLIT_POLICIES", "absorb_q", "cache_write", "cache_write_spec",
           "clear_decoders", "decode", "decode_spec", "kernel_spec", "projection_spec", "runtime_stats",
           "up_proj_out"]

SUCCESS = 0
ERROR_INVALID_ARGUMENT = 1
ERROR_KERNEL_NOT_FOUND = 2

_DTYPE_BF16 = 0
_DTYPE_F16 = 1

#: Split policies for num_splits=None (SplitPlanner.h): vLLM Triton MLA's one count per batch, FlashMLA's
#: balanced schedule, or one piece per request so results never depend on the rest of the batch.
SPLIT_POLICIES = {"heuristic": 0, "balanced": 1, "batch-invariant": 2, "grid": 3}

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
    lib.mlaGpuCanonicalSpec.argtypes = [p, p, size, p, size]
    lib.mlaGpuCanonicalSpec.restype = ctypes.c_int
    lib.mlaGpuCacheWrite.argtypes = [p, i32, u64, u64, u64, ctypes.POINTER(i32), u64, i64, i64,
                                     ctypes.c_void_p, p, size]
    lib.mlaGpuCacheWrite.restype = ctypes.c_int
    for fn in (lib.mlaGpuAbsorbQ, lib.mlaGpuUpProjOut):
        fn.argtypes = [p, i32, u64, u64, u64, i64, ctypes.c_void_p, p, size]
        fn.restype = ctypes.c_int
    lib.mlaGpuClearDecoders.argtypes = []
    lib.mlaGpuClearDecoders.restype = None
    lib.mlaGpuGetRuntimeStats.argtypes = [ctypes.POINTER(_RuntimeStats)]
    lib.mlaGpuGetRuntimeStats.restype = None
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
           kv_format="auto", kv_scale=None, split_policy="grid", tile=None):
    """Absorbed MLA decode over a paged latent cache on the GPU (FlashMLA's flash_mla_with_kvcache).

    Shapes and semantics are those of `mla.decode`: q [b, s_q, h_q, L+R] bfloat16 or float16, kv_cache
    [pages, page_size, L+R] of q's dtype, block_table int32 [b, max_pages] (CUDA), seq_lens int32 [b]
    (CUDA or CPU); returns out [b, s_q, h_q, L] in q's dtype and lse float32 [b, h_q, s_q]. Block-table
    entries are trusted: the pages a request reads must exist in kv_cache.

    `num_splits` cuts every request into that many split-KV pieces; without it `split_policy`
    decides: "grid" (default: one count per batch fitted to the GPU's SMs, see
    `chooseGridSplits`), "heuristic" (vLLM Triton MLA's), "balanced" (FlashMLA's plan) or
    "batch-invariant". `tile` ("RxWxKxS", with a trailing "w" for the wgmma kernel) overrides the
    kernel's default tiling (it is part of the kernel's cache key).
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
    """Unload every kernel the GPU runtime holds (decode, cache write and projections) and reset
    runtime_stats()."""
    _library().mlaGpuClearDecoders()


class _RuntimeStats(ctypes.Structure):
    _fields_ = [
        ("hits", ctypes.c_uint64),
        ("misses", ctypes.c_uint64),
        ("notFound", ctypes.c_uint64),
        ("loadSeconds", ctypes.c_double),
        ("loadedKernels", ctypes.c_uint64),
    ]


def runtime_stats():
    """The GPU runtime's kernel loads, like mla.runtime_stats() for the CPU: calls served by a loaded
    kernel, calls that loaded one from the kernel cache directory (and how many found no entry), the
    seconds those loads took, and the kernels held. The GPU library compiles nothing itself (mla-aot or
    the JIT fill the cache), so a miss costs a file read and a module load."""
    s = _RuntimeStats()
    _library().mlaGpuGetRuntimeStats(ctypes.byref(s))
    return {"cache_hits": s.hits, "cache_misses": s.misses, "not_found": s.notFound,
            "load_seconds": s.loadSeconds, "loaded_kernels": s.loadedKernels}


# ---------------------------------------------------------------------------------------------------
# cache_write, absorb_q, up_proj_out
# ---------------------------------------------------------------------------------------------------

#: kv_format -> cache row bytes for L, R (float formats: the element count times the cache's itemsize).
_FP8_ROW_BYTES = {
    "fp8_e4m3": lambda L, R: L + R,
    "fp8_e4m3_token": lambda L, R: L + R + 8,
    "fp8_ds_mla": lambda L, R: L + 4 * (L // 128) + 2 * R,
}


def kernel_spec(text):
    """The canonical form of a kernel spec text of any family (what `mla-aot --spec` takes and the kernel
    cache is keyed by); ValueError when it is malformed or names a shape no kernel can run."""
    if text in _specs:
        return _specs[text]
    lib = _library()
    spec = ctypes.create_string_buffer(512)
    err = ctypes.create_string_buffer(_ERROR_BYTES)
    _check(lib.mlaGpuCanonicalSpec(text.encode(), spec, len(spec), err, len(err)), err)
    _specs[text] = spec.value.decode()
    return _specs[text]


def _f32_bits(name, value):
    """`value` rounded to float32 (as the CPU path rounds kv_scale), as the spec's 0x bit pattern."""
    try:
        packed = struct.pack("<f", float(value))
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be a positive finite float32, got {value!r}") from None
    (rounded,) = struct.unpack("<f", packed)
    if not (math.isfinite(rounded) and rounded > 0):
        raise ValueError(f"{name} must be positive and finite, got {value!r}")
    return f"0x{struct.unpack('<I', packed)[0]:08x}"


def cache_write_spec(latent_dim, rope_dim, page_size, dtype, cache_format, chip, kv_scale=None):
    """The spec of a cache_write kernel: `dtype` of kv_c/k_pe ("bf16", "f16", "f32"), `cache_format` a row
    format ("bf16", "f16", "f32", "fp8_e4m3" with `kv_scale`, "fp8_e4m3_token", "fp8_ds_mla"). Each
    fp8_e4m3 scale is its own kernel."""
    text = (f"cache_write chip={chip} L={latent_dim} R={rope_dim} page={page_size} dtype={dtype} "
            f"format={cache_format}")
    if kv_scale is not None:
        text += f" scale={_f32_bits('kv_scale', kv_scale)}"
    return kernel_spec(text)


def projection_spec(kind, num_heads, in_dim, out_dim, rope_dim, dtype, chip):
    """The spec of an "absorb_q" (in_dim P, out_dim L, rope_dim R) or "up_proj_out" (in_dim L, out_dim V,
    rope_dim 0) kernel."""
    if kind == "absorb_q":
        text = f"absorb_q chip={chip} N={num_heads} P={in_dim} L={out_dim} R={rope_dim} dtype={dtype}"
    elif kind == "up_proj_out":
        text = f"up_proj_out chip={chip} N={num_heads} L={in_dim} V={out_dim} dtype={dtype}"
    else:
        raise ValueError(f"kind must be 'absorb_q' or 'up_proj_out', got {kind!r}")
    return kernel_spec(text)


def _float_dtypes(torch):
    return {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "f32"}


def _same_device(tensors, lead):
    """Every tensor of `tensors` (name -> tensor) is a CUDA tensor on `lead`'s device."""
    first = tensors[lead]
    for name, t in tensors.items():
        if not t.is_cuda:
            raise ValueError(f"{name} is on {t.device}; the GPU path takes CUDA tensors")
        if t.device != first.device:
            raise ValueError(f"{name} is on {t.device} but {lead} is on {first.device}")


def _launch(torch, device, fn, *args):
    """Calls C API function `fn(spec..., stream, err, errLen)` on `device`'s current stream."""
    lib = _library()
    err = ctypes.create_string_buffer(_ERROR_BYTES)
    index = device.index if device.index is not None else torch.cuda.current_device()
    with torch.cuda.device(index):
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        _check(getattr(lib, fn)(args[0], index, *args[1:], stream, err, len(err)), err)


def cache_write(kv_c, k_pe, kv_cache, slot_mapping, *, kv_format="auto", kv_scale=None):
    """`mla.cache_write` on the GPU: row concat(kv_c[t], k_pe[t]) goes to slot slot_mapping[t] =
    page * page_size + offset of kv_cache, in place; negative slots are padding and write nothing.
    Returns None, like the CPU path.

    kv_c [T, L] and k_pe [T, R] or [T, 1, R] bfloat16, float16 or float32; slot_mapping [T] integers (CUDA
    or CPU); kv_cache [pages, page_size, row], contiguous, on kv_c's device. kv_format "auto" stores rows
    in kv_cache's float dtype (bfloat16, float16 or float32; the CPU path needs kv_c's); the fp8 formats
    take a torch.uint8 (or int8) cache with the CPU path's row bytes: L+R for "fp8_e4m3" (with kv_scale,
    baked into the kernel: each scale is its own kernel), L+R+8 for "fp8_e4m3_token" and
    L + 4*L/128 + 2*R for "fp8_ds_mla". Bytes are those of the CPU path. Invalid arguments raise
    ValueError and leave kv_cache untouched.
    """
    torch = _torch()
    _tensor(torch, "kv_c", kv_c, 2, "[T, L]")
    if not isinstance(k_pe, torch.Tensor) or k_pe.dim() not in (2, 3) or (k_pe.dim() == 3 and k_pe.shape[1] != 1):
        raise ValueError(f"k_pe must be a torch tensor [T, R] or [T, 1, R], got "
                         f"{tuple(k_pe.shape) if isinstance(k_pe, torch.Tensor) else type(k_pe).__name__}")
    _tensor(torch, "k_pe", k_pe, k_pe.dim(), "[T, R] or [T, 1, R]")
    _tensor(torch, "kv_cache", kv_cache, 3, "[pages, page_size, row]")
    if not isinstance(slot_mapping, torch.Tensor) or slot_mapping.dim() != 1:
        raise ValueError(f"slot_mapping must be a rank-1 torch tensor [T], got "
                         f"{tuple(slot_mapping.shape) if isinstance(slot_mapping, torch.Tensor) else type(slot_mapping).__name__}")
    floats = _float_dtypes(torch)
    if kv_c.dtype not in floats:
        raise ValueError(f"kv_c has dtype {kv_c.dtype}; the GPU path takes bfloat16, float16 or float32")
    if k_pe.dtype != kv_c.dtype:
        raise ValueError(f"k_pe has dtype {k_pe.dtype}; it must match kv_c's {kv_c.dtype}")
    if slot_mapping.dtype.is_floating_point or slot_mapping.dtype.is_complex or slot_mapping.dtype == torch.bool:
        raise ValueError(f"slot_mapping must hold integers, got dtype {slot_mapping.dtype}")
    tokens, latent = kv_c.shape
    rope = k_pe.shape[-1]
    if k_pe.shape[0] != tokens or slot_mapping.shape[0] != tokens:
        raise ValueError(f"kv_c {tuple(kv_c.shape)}, k_pe {tuple(k_pe.shape)} and slot_mapping "
                         f"{tuple(slot_mapping.shape)} must agree on the token count T")
    if latent < 1 or rope < 1:
        raise ValueError(f"L = {latent} and R = {rope} must be positive")
    if not isinstance(kv_format, str):
        raise ValueError(f"kv_format must be a string, got {kv_format!r}")
    if kv_format == "auto":
        if kv_cache.dtype not in floats:
            raise ValueError(f"kv_cache has dtype {kv_cache.dtype} but kv_format 'auto' stores floats "
                             "(bfloat16, float16 or float32); pass the fp8 kv_format a uint8 cache is "
                             "written with")
        cache_format = floats[kv_cache.dtype]
        expected = latent + rope
        what = f"elements but L + R = {latent} + {rope} = {expected}"
    elif kv_format in _FP8_ROW_BYTES:
        if kv_cache.dtype not in (torch.uint8, torch.int8):
            raise ValueError(f"kv_format '{kv_format}' needs a uint8 kv_cache, got {kv_cache.dtype}")
        if kv_format == "fp8_ds_mla" and latent % 128 != 0:
            raise ValueError(f"kv_format 'fp8_ds_mla' needs a latent width L that is a multiple of 128, "
                             f"got L = {latent}")
        cache_format = kv_format
        expected = _FP8_ROW_BYTES[kv_format](latent, rope)
        what = f"bytes but kv_format '{kv_format}' with L = {latent}, R = {rope} needs {expected}"
    else:
        raise ValueError(f"kv_format '{kv_format}' is unknown (expected auto, fp8_e4m3, fp8_e4m3_token, "
                         "fp8_ds_mla)")
    if kv_format == "fp8_e4m3" and kv_scale is None:
        raise ValueError("kv_format 'fp8_e4m3' needs kv_scale, the per-tensor scale its values are divided by")
    if kv_format != "fp8_e4m3" and kv_scale is not None:
        raise ValueError(f"kv_scale is only used by kv_format 'fp8_e4m3', not '{kv_format}'")
    if kv_cache.shape[2] != expected:
        raise ValueError(f"kv_cache rows have {kv_cache.shape[2]} {what}")
    pages, page_size = kv_cache.shape[0], kv_cache.shape[1]
    if pages < 1 or page_size < 1:
        raise ValueError(f"kv_cache must hold at least one page of at least one row, got shape "
                         f"{tuple(kv_cache.shape)}")
    num_slots = pages * page_size
    if num_slots > _INT32_MAX:
        raise ValueError(f"kv_cache has {num_slots} slots; at most {_INT32_MAX} are addressable")
    tensors = {"kv_c": kv_c, "k_pe": k_pe, "kv_cache": kv_cache}
    if slot_mapping.is_cuda:
        tensors["slot_mapping"] = slot_mapping
    _same_device(tensors, "kv_c")
    slots_host = slot_mapping.to("cpu")
    if tokens and (int(slots_host.min()) < -2**31 or int(slots_host.max()) > _INT32_MAX):
        raise ValueError("slot_mapping holds values that do not fit in int32")
    slots_host = slots_host.to(torch.int32).contiguous()
    spec = cache_write_spec(latent, rope, page_size, floats[kv_c.dtype], cache_format,
                            _chip(torch, kv_c.device), kv_scale).encode()
    if tokens == 0:
        return None
    same = slot_mapping.dtype == torch.int32 and slot_mapping.is_cuda and slot_mapping.is_contiguous()
    slots_dev = slot_mapping if same else slots_host.to(kv_c.device)
    slots_ptr = ctypes.cast(slots_host.data_ptr(), ctypes.POINTER(ctypes.c_int32))
    _launch(torch, kv_c.device, "mlaGpuCacheWrite", spec, kv_c.data_ptr(), k_pe.data_ptr(),
            slots_dev.data_ptr(), slots_ptr, kv_cache.data_ptr(), tokens, num_slots)
    return None


def _projection(kind, x, w, x_name, w_name, x_what, w_what, rope_of):
    torch = _torch()
    _tensor(torch, x_name, x, 3, x_what)
    _tensor(torch, w_name, w, 3, w_what)
    floats = _float_dtypes(torch)
    if x.dtype not in floats:
        raise ValueError(f"{x_name} has dtype {x.dtype}; the GPU path takes bfloat16, float16 or float32")
    if w.dtype != x.dtype:
        raise ValueError(f"{w_name} has dtype {w.dtype}; it must match {x_name}'s {x.dtype}")
    tokens, heads, width = x.shape
    n, k, out_dim = w.shape
    if n != heads:
        raise ValueError(f"{w_name} {tuple(w.shape)} has {n} heads; {x_name} {tuple(x.shape)} has {heads}")
    rope = rope_of(width, k)
    _same_device({x_name: x, w_name: w}, x_name)
    spec = projection_spec(kind, heads, k, out_dim, rope, floats[x.dtype], _chip(torch, x.device)).encode()
    return torch, spec, tokens, heads, out_dim, rope


def absorb_q(q, w_uk_t):
    """`mla.absorb_q` on the GPU: q [T, N, P+R] -> [T, N, L+R] in q's dtype (bfloat16, float16 or
    float32), the nope part multiplied by w_uk_t [N, P, L] per head (float32 accumulation), the RoPE part
    copied. Tensors are contiguous CUDA tensors on one device."""

    def rope_of(width, p):
        if width <= p:
            raise ValueError(f"q's last dim {width} must be P + R with a positive RoPE width R; w_uk_t has "
                             f"P = {p}")
        return width - p

    torch, spec, tokens, heads, latent, rope = _projection(
        "absorb_q", q, w_uk_t, "q", "w_uk_t", "[T, N, P+R]", "[N, P, L]", rope_of)
    out = torch.empty((tokens, heads, latent + rope), dtype=q.dtype, device=q.device)
    if tokens:
        _launch(torch, q.device, "mlaGpuAbsorbQ", spec, q.data_ptr(), w_uk_t.data_ptr(), out.data_ptr(),
                tokens)
    return out


def up_proj_out(o, w_uv):
    """`mla.up_proj_out` on the GPU: o [T, N, L] -> [T, N*V] in o's dtype through w_uv [N, L, V] per head
    (float32 accumulation). Tensors are contiguous CUDA tensors on one device."""

    def rope_of(width, latent):
        if width != latent:
            raise ValueError(f"o's last dim {width} must be w_uv's L = {latent}")
        return 0

    torch, spec, tokens, heads, v, _ = _projection(
        "up_proj_out", o, w_uv, "o", "w_uv", "[T, N, L]", "[N, L, V]", rope_of)
    out = torch.empty((tokens, heads * v), dtype=o.dtype, device=o.device)
    if tokens:
        _launch(torch, o.device, "mlaGpuUpProjOut", spec, o.data_ptr(), w_uv.data_ptr(), out.data_ptr(),
                tokens)
    return out
