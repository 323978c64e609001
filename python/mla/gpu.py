"""MLA on an NVIDIA GPU (sm_90a, sm_100a) for PyTorch CUDA tensors.

`mla.decode`, `mla.cache_write`, `mla.absorb_q`, `mla.up_proj_out`, the chunked-prefill pieces and
`mla.prefill` come here when their first tensor (or, for cache_write, kv_cache) is a CUDA tensor. The kernels are compiled ahead of time by `mla-aot` on a
machine with MLIR and looked up in the kernel cache ($MLA_KERNEL_CACHE_DIR, else $XDG_CACHE_HOME/mla, else
~/.cache/mla); this module needs neither MLIR nor numpy, only torch and libMLAGpuCAPI.so (the C API in
include/mla-c/Gpu.h), loaded with ctypes from $MLA_GPU_LIB or the package's _lib directory. torch is
imported on first use, so `import mla` never needs it.

The kernels run on the tensors' device, on torch's current stream there; outputs and the split-KV
workspace are allocated with torch (its caching allocator orders their reuse on that stream). seq_lens and
slot_mapping are copied to the host (a synchronisation when they live on the GPU) to validate them (and
to plan decode's splits), except on decode's plan/run path (`plan_decode`, `decode(..., plan=)`), where
the splits are planned and the tables checked on the device and nothing synchronises.

Arguments are checked by the C library's argument rules (mla/Contract/ArgRules.h, the same rules as the CPU
path's, with the GPU kernels' limits); this module checks only what C cannot see: that arguments are torch
tensors, contiguous, of a dtype the C API has a code for, and on one CUDA device. Invalid arguments raise
ValueError before anything is enqueued; a kernel missing from the cache raises KernelNotFoundError, naming
the `mla-aot` command that builds it, unless this package was built with MLIR: then the kernel is compiled
into the cache on first use (`mla.gpu_jit`). Driver failures raise RuntimeError.
"""

import ctypes
import math
import os
import struct

from . import _DEVICE_PLAN_TYPES  # mla.decode's fast path to DecodePlan._run
from . import _c_string  # the one NUL-byte rule for string options, shared with the CPU path
from . import _float, _int  # the number rules (an int must fit int64), shared with the CPU path

__all__ = ["DecodePlan", "KernelNotFoundError", "SPLIT_POLICIES", "absorb_q", "cache_write", "cache_write_spec",
           "clear_decoders", "decode", "decode_spec", "gather_cache", "gather_cache_spec", "kernel_spec",
           "merge_states", "merge_states_spec", "mha", "mha_spec", "plan_decode", "prefill", "projection_spec", "runtime_stats",
           "up_proj_kv", "up_proj_kv_spec", "up_proj_out"]

SUCCESS = 0
ERROR_INVALID_ARGUMENT = 1
ERROR_KERNEL_NOT_FOUND = 2

_DTYPE_BF16 = 0
_DTYPE_F16 = 1
_DTYPE_F32 = 2
_DTYPE_INT32 = 3
_DTYPE_UINT8 = 4
_MAX_RANK = 8

#: Split policies for num_splits=None (SplitPlanner.h): vLLM Triton MLA's one count per batch, FlashMLA's
#: balanced schedule, or one piece per request so results never depend on the rest of the batch.
SPLIT_POLICIES = {"heuristic": 0, "balanced": 1, "batch-invariant": 2, "grid": 3}

_ERROR_BYTES = 1 << 14
_INT32_MAX = 2**31 - 1


class KernelNotFoundError(RuntimeError):
    """The kernel cache has no image for the call's spec; the message names the mla-aot command."""


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint64), ("dtype", ctypes.c_int32), ("rank", ctypes.c_int32),
                ("shape", ctypes.c_int64 * _MAX_RANK)]


class _CacheFormat(ctypes.Structure):
    _fields_ = [("kvFormat", ctypes.c_char_p), ("hasKvScale", ctypes.c_int32), ("kvScale", ctypes.c_double),
                ("kvScaleTensor", ctypes.POINTER(_Tensor))]


class _DecodeOptions(ctypes.Structure):
    _fields_ = [("headDimV", ctypes.c_int64), ("softmaxScale", ctypes.c_double), ("causal", ctypes.c_int32),
                ("hasNumSplits", ctypes.c_int32), ("numSplits", ctypes.c_int64),
                ("splitPolicy", ctypes.c_int32), ("cache", _CacheFormat)]


class _PrefillOptions(ctypes.Structure):
    _fields_ = [("softmaxScale", ctypes.c_double), ("vHeadDim", ctypes.c_int64),
                ("hasWorkspaceRows", ctypes.c_int32), ("workspaceRows", ctypes.c_int64), ("cache", _CacheFormat)]


class _DecodeRunArgs(ctypes.Structure):
    """mlaGpuDecodeRunArgs: a planned call's pointers, stream and scale, filled by one pack_into."""
    _fields_ = [(name, ctypes.c_uint64) for name in
                ("q", "cache", "blockTable", "seqLens", "out", "lse", "kvScale", "stream")] + \
        [("softmaxScale", ctypes.c_double)]


# The planned call's one conversion of its arguments into _DecodeRunArgs (field order and sizes).
_RUN_ARGS = struct.Struct("=8Qd")
assert _RUN_ARGS.size == ctypes.sizeof(_DecodeRunArgs)


class _AttentionOptions(ctypes.Structure):
    _fields_ = [("prefill", _PrefillOptions), ("decodeThreshold", ctypes.c_int64)]


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
    t, lens = ctypes.POINTER(_Tensor), ctypes.POINTER(i32)
    err = [p, size]
    signatures = {
        "mlaGpuDecodeSpec": [p, i32, i64, i64, i64, i64, i64, i32, i32, p, p, p, size] + err,
        "mlaGpuCheckDecode": [t, t, t, t, lens, lens, ctypes.POINTER(_DecodeOptions)] + err,
        "mlaGpuDecode": [p, i32, t, t, t, t, lens, lens, ctypes.POINTER(_DecodeOptions), u64, u64, u64, u64,
                         ctypes.POINTER(size), ctypes.c_void_p] + err,
        "mlaGpuDecodePlanCreate": [p, i32, t, t, t, t, ctypes.POINTER(_DecodeOptions), i64, i64, u64,
                                   ctypes.POINTER(size), u64, ctypes.POINTER(ctypes.c_void_p)] + err,
        "mlaGpuDecodePlanUpdate": [ctypes.c_void_p, t, t, t, t, ctypes.c_void_p] + err,
        "mlaGpuDecodeRun": [ctypes.c_void_p, u64, u64, u64, u64, u64, u64, ctypes.c_double, u64,
                            ctypes.c_void_p] + err,
        "mlaGpuDecodeRunPacked": [ctypes.c_void_p, ctypes.POINTER(_DecodeRunArgs)] + err,
        "mlaGpuDecodePlanCheck": [ctypes.c_void_p, ctypes.c_void_p] + err,
        "mlaGpuDecodeVarlenSpec": [p, i32, i64, i64, i64, i64, i64, i32, i32, p, p, p, size] + err,
        "mlaGpuDecodeVarlen": [p, i32, t, t, t, t, t, lens, lens, lens, ctypes.POINTER(_DecodeOptions), u64, u64,
                               u64, u64, ctypes.POINTER(size), ctypes.c_void_p] + err,
        "mlaGpuDecodeVarlenPlanCreate": [p, i32, t, t, t, t, t, ctypes.POINTER(_DecodeOptions), i64, i64, u64,
                                         ctypes.POINTER(size), u64, ctypes.POINTER(ctypes.c_void_p)] + err,
        "mlaGpuDecodeVarlenPlanUpdate": [ctypes.c_void_p, t, t, t, t, t, ctypes.c_void_p] + err,
        "mlaGpuDecodeVarlenRun": [ctypes.c_void_p, u64, u64, u64, u64, u64, u64, u64, ctypes.c_double, u64,
                                  ctypes.c_void_p] + err,
        "mlaGpuCanonicalSpec": [p, p, size] + err,
        "mlaGpuCheckCacheWrite": [t, t, t, lens, t, ctypes.POINTER(_CacheFormat)] + err,
        "mlaGpuCacheWrite": [p, i32, t, t, t, lens, t, ctypes.POINTER(_CacheFormat), ctypes.c_void_p] + err,
        "mlaGpuCheckAbsorbQ": [t, t] + err,
        "mlaGpuCheckUpProjOut": [t, t] + err,
        "mlaGpuAbsorbQ": [p, i32, t, t, u64, ctypes.c_void_p] + err,
        "mlaGpuUpProjOut": [p, i32, t, t, u64, ctypes.c_void_p] + err,
        "mlaGpuCheckGatherCache": [t, t, t, t, lens, lens, lens, t, i64, ctypes.POINTER(_CacheFormat)] + err,
        "mlaGpuGatherCache": [p, i32, t, t, t, t, lens, lens, lens, t, ctypes.POINTER(_CacheFormat),
                              ctypes.c_void_p] + err,
        "mlaGpuCheckMergeStates": [t, t, t, t] + err,
        "mlaGpuMergeStates": [p, i32, t, t, t, t, u64, u64, ctypes.c_void_p] + err,
        "mlaGpuCheckUpProjKv": [t, t, i64, i64, i64] + err,
        "mlaGpuUpProjKv": [p, i32, t, t, u64, u64, ctypes.c_void_p] + err,
        "mlaGpuCheckMha": [t, t, t, t, t, lens, lens, ctypes.c_double, i32] + err,
        "mlaGpuMha": [p, i32, t, t, t, t, t, lens, lens, u64, u64, ctypes.c_void_p] + err,
        "mlaGpuCheckPrefill": [t] * 8 + [lens] * 3 + [ctypes.POINTER(_PrefillOptions)] + err,
        "mlaGpuPrefill": [p, i32] + [t] * 8 + [lens] * 3 + [ctypes.POINTER(_PrefillOptions), u64, u64,
                                                          ctypes.POINTER(size), ctypes.c_void_p] + err,
        "mlaGpuCheckAttention": [t] * 10 + [lens] * 3 + [ctypes.POINTER(_AttentionOptions)] + err,
        "mlaGpuAttention": [p, i32] + [t] * 10 + [lens] * 3 + [ctypes.POINTER(_AttentionOptions), u64, u64,
                                                           ctypes.POINTER(size), ctypes.c_void_p] + err,
    }
    for name, argtypes in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes = argtypes
        fn.restype = ctypes.c_int
    lib.mlaGpuDecodePlanNumSplits.argtypes = [ctypes.c_void_p]
    lib.mlaGpuDecodePlanNumSplits.restype = i64
    lib.mlaGpuDecodePlanDestroy.argtypes = [ctypes.c_void_p]
    lib.mlaGpuDecodePlanDestroy.restype = None
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


def _dtype_codes(torch):
    # int8 caches are fp8 bytes as well.
    return {torch.bfloat16: _DTYPE_BF16, torch.float16: _DTYPE_F16, torch.float32: _DTYPE_F32,
            torch.int32: _DTYPE_INT32, torch.uint8: _DTYPE_UINT8, torch.int8: _DTYPE_UINT8}


def _describe(torch, name, value, data=True):
    """The C API's description of a contiguous torch tensor (its device pointer unless `data` is False):
    what the argument rules check in C."""
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"{name} must be a torch tensor, got {type(value).__name__}")
    codes = _dtype_codes(torch)
    if value.dtype not in codes:
        raise ValueError(f"{name} has dtype {value.dtype}; mla's GPU path takes bfloat16, float16 or float32 "
                         "values, int32 tables and uint8 fp8 caches")
    if value.dim() > _MAX_RANK:
        raise ValueError(f"{name} has rank {value.dim()}; at most {_MAX_RANK} is supported")
    if not value.is_contiguous():
        raise ValueError(f"{name} must be contiguous (row-major)")
    t = _Tensor()
    t.data = value.data_ptr() if data and value.is_cuda else 0
    t.dtype = codes[value.dtype]
    t.rank = value.dim()
    for i, d in enumerate(value.shape):
        t.shape[i] = d
    return t


def _is_tensor(value):
    return type(value).__module__.startswith("torch") and hasattr(value, "data_ptr")


def _cache_format(kv_format, kv_scale, data=True):
    """The C API's cache format. fp8_e4m3's `kv_scale` is a number, or a float32 CUDA tensor of one
    element (vLLM's k_scale) that is passed by its device pointer (unless `data` is False) and never read
    on the host, so the kernels see the value it holds when they run (also on CUDA graph replays)."""
    fmt = _CacheFormat()
    fmt.kvFormat = _c_string("kv_format", kv_format)
    if _is_tensor(kv_scale):
        fmt.kvScaleTensor = ctypes.pointer(_describe(_torch(), "kv_scale", kv_scale, data=data))
    elif kv_scale is not None:
        fmt.hasKvScale = 1
        fmt.kvScale = _float("kv_scale", kv_scale)
    return fmt


def _with_kv_scale(tensors, kv_scale):
    """`tensors` (name -> tensor, for _same_device) with a kv_scale tensor, which must be on their device."""
    if _is_tensor(kv_scale):
        tensors["kv_scale"] = kv_scale
    return tensors


def _host_i32(value):
    """A host int32 copy of an int32 tensor, with a pointer to it (a synchronisation for a CUDA tensor)."""
    host = value.to("cpu").contiguous()
    return host, ctypes.cast(host.data_ptr(), ctypes.POINTER(ctypes.c_int32))


def _call(fn, *args):
    """Calls C API function `fn(*args, err, errLen)` and raises its error. When a launch (whose first
    argument is its kernel's spec) finds no kernel in the cache and this package can compile one
    (`mla.gpu_jit`), the kernel is compiled into the cache and the call made again: a miss is reported
    before anything is enqueued."""
    err = ctypes.create_string_buffer(_ERROR_BYTES)
    function = getattr(_library(), fn)
    code = function(*args, err, len(err))
    if code == ERROR_KERNEL_NOT_FOUND:
        from . import gpu_jit

        if gpu_jit.available():
            gpu_jit.compile_kernel(args[0].decode())
            code = function(*args, err, len(err))
    _check(code, err)


def decode_spec(num_heads, query_rows, latent_dim, rope_dim, page_size, dtype, causal, chip, tile=None,
                kv_format="auto"):
    """The kernel-cache spec text of a decode kernel: what `mla-aot --spec` takes. `dtype` is "bf16" or
    "f16" (q and out); `chip` "sm_90a" or "sm_100a"; `tile` "RxWxKxS" overrides the default tiling;
    `kv_format` is the cache's ("auto": rows of dtype; "fp8_e4m3", "fp8_ds_mla"; "fp8_e4m3_token" on sm_90a
    only). The softmax scale and fp8_e4m3's kv_scale are launch arguments, not part of the spec: one
    kernel serves every scale."""
    key = (num_heads, query_rows, latent_dim, rope_dim, page_size, dtype, bool(causal), chip, tile, kv_format)
    if key in _specs:
        return _specs[key]
    codes = {"bf16": _DTYPE_BF16, "f16": _DTYPE_F16}
    if dtype not in codes:
        raise ValueError(f"dtype must be 'bf16' or 'f16', got {dtype!r}")
    lib = _library()
    spec = ctypes.create_string_buffer(512)
    err = ctypes.create_string_buffer(_ERROR_BYTES)
    _check(lib.mlaGpuDecodeSpec(_c_string("chip", chip), 0, num_heads, query_rows, latent_dim, rope_dim,
                                page_size, codes[dtype], 1 if causal else 0, _c_string("kv_format", kv_format),
                                _c_string("tile", tile) if tile is not None else None, spec, len(spec), err,
                                len(err)),
           err)
    _specs[key] = spec.value.decode()
    return _specs[key]


def decode_varlen_spec(num_heads, max_query_rows, latent_dim, rope_dim, page_size, dtype, causal, chip,
                       tile=None, kv_format="auto"):
    """The kernel-cache spec text of a varlen decode kernel (sm_90a; `max_query_rows` in [1, 8] is the
    largest per-request query length it takes; `kv_format` the cache's, as decode_spec's): what
    `mla-aot --spec` takes."""
    key = ("varlen", num_heads, max_query_rows, latent_dim, rope_dim, page_size, dtype, bool(causal), chip, tile,
           kv_format)
    if key in _specs:
        return _specs[key]
    codes = {"bf16": _DTYPE_BF16, "f16": _DTYPE_F16}
    if dtype not in codes:
        raise ValueError(f"dtype must be 'bf16' or 'f16', got {dtype!r}")
    spec = ctypes.create_string_buffer(512)
    err = ctypes.create_string_buffer(_ERROR_BYTES)
    _check(_library().mlaGpuDecodeVarlenSpec(_c_string("chip", chip), 0, num_heads, max_query_rows, latent_dim,
                                             rope_dim, page_size, codes[dtype], 1 if causal else 0,
                                             _c_string("kv_format", kv_format),
                                             _c_string("tile", tile) if tile is not None else None, spec,
                                             len(spec), err, len(err)),
           err)
    _specs[key] = spec.value.decode()
    return _specs[key]


def _chip(torch, device):
    major, minor = torch.cuda.get_device_capability(device)
    chips = {9: "sm_90a", 10: "sm_100a"}
    if major not in chips:
        raise ValueError(f"{device} is sm_{major}{minor}; mla's GPU kernels target sm_90a and sm_100a")
    return chips[major]


def _overlaps(a, b):
    """Whether the memory of contiguous tensors a and b intersects."""
    if not a.numel() or not b.numel():
        return False
    a_lo, b_lo = a.data_ptr(), b.data_ptr()
    return a_lo < b_lo + b.numel() * b.element_size() and b_lo < a_lo + a.numel() * a.element_size()


def _output(torch, name, given, shape, dtype, device, inputs):
    """The tensor a call writes: a new one, or the caller's preallocated `given`, which must be a
    contiguous CUDA tensor of `shape` and `dtype` on `device` that overlaps none of `inputs` (name ->
    tensor; the kernels assume outputs and inputs are disjoint). Its pointer is passed as it is."""
    if given is None:
        return torch.empty(shape, dtype=dtype, device=device)
    if not isinstance(given, torch.Tensor):
        raise ValueError(f"{name} must be a torch tensor, got {type(given).__name__}")
    if given.device != device:
        raise ValueError(f"{name} is on {given.device}; the call runs on {device}")
    if tuple(given.shape) != tuple(shape):
        raise ValueError(f"{name} has shape {tuple(given.shape)}; this call writes {tuple(shape)}")
    if given.dtype != dtype:
        raise ValueError(f"{name} has dtype {given.dtype}; this call writes {dtype}")
    if not given.is_contiguous():
        raise ValueError(f"{name} must be contiguous (row-major)")
    for other, t in inputs.items():
        if _overlaps(given, t):
            raise ValueError(f"{name} overlaps {other}; outputs need their own memory")
    return given


def _is_view_of(a, b):
    """Whether tensor a covers exactly b's memory with b's shape (e.g. out_a.view(out_a.shape))."""
    return (a is not None and hasattr(a, "data_ptr") and a.data_ptr() == b.data_ptr()
            and tuple(a.shape) == tuple(b.shape) and a.dtype == b.dtype)


def _same_device(tensors, lead):
    """Every tensor of `tensors` (name -> tensor) is a CUDA tensor on `lead`'s device."""
    first = tensors[lead]
    for name, t in tensors.items():
        if not t.is_cuda:
            raise ValueError(f"{name} is on {t.device}; the GPU path takes CUDA tensors")
        if t.device != first.device:
            raise ValueError(f"{name} is on {t.device} but {lead} is on {first.device}")


def _decode_options(head_dim_v, softmax_scale, causal, num_splits, split_policy, kv_format, kv_scale):
    opts = _DecodeOptions()
    opts.headDimV = _int("head_dim_v", head_dim_v)
    opts.softmaxScale = _float("softmax_scale", softmax_scale)
    opts.causal = 1 if causal else 0
    if num_splits is not None:
        opts.hasNumSplits = 1
        opts.numSplits = _int("num_splits", num_splits)
    policy = split_policy if isinstance(split_policy, str) else None
    if policy not in SPLIT_POLICIES:
        raise ValueError(f"split_policy must be one of {sorted(SPLIT_POLICIES)}, got {split_policy!r}")
    opts.splitPolicy = SPLIT_POLICIES[policy]
    opts.cache = opts.keep = _cache_format(kv_format, kv_scale)  # `keep` holds what it points at
    return opts


def _outputs(torch, q, latent, out, lse):
    """out [b, s_q, h_q, latent] in q's dtype and lse float32 [b, h_q, s_q] on q's device: the given
    ones, checked, or new ones."""
    b, sq, h = q.shape[0], q.shape[1], q.shape[2]
    wanted = {"out": ((b, sq, h, latent), q.dtype), "lse": ((b, h, sq), torch.float32)}
    given = {"out": out, "lse": lse}
    result = []
    for name, (shape, dtype) in wanted.items():
        t = given[name]
        if t is None:
            result.append(torch.empty(shape, dtype=dtype, device=q.device))
            continue
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch tensor, got {type(t).__name__}")
        if tuple(t.shape) != shape or t.dtype != dtype or t.device != q.device or not t.is_contiguous():
            raise ValueError(f"{name} must be a contiguous {dtype} tensor of shape {list(shape)} on "
                             f"{q.device}, got {t.dtype} {list(t.shape)} on {t.device}"
                             + ("" if t.is_contiguous() else " (not contiguous)"))
        result.append(t)
    return result


def _decode_spec_for(torch, q, kv_cache, latent, causal, tile, kv_format):
    b, sq, h, d = q.shape
    if tile is None:
        # Forces one kernel variant for every call that names none (the GPU tests run once per variant).
        tile = os.environ.get("MLA_DECODE_TILE") or None
    dtype = "bf16" if q.dtype == torch.bfloat16 else "f16"
    return decode_spec(h, sq, latent, d - latent, kv_cache.shape[1], dtype, causal, _chip(torch, q.device),
                       tile, kv_format).encode()


def _check_kv_scale(kv_format, kv_scale):
    """kv_scale is given exactly for fp8_e4m3."""
    if kv_format != "fp8_e4m3" and kv_scale is not None:
        raise ValueError(f"kv_scale is only used by kv_format 'fp8_e4m3', not {kv_format!r}")
    if kv_format == "fp8_e4m3" and kv_scale is None:
        raise ValueError("kv_format 'fp8_e4m3' needs kv_scale, the per-tensor scale its values were divided by "
                         "(a number or a float32 CUDA tensor of one element)")


def _kv_scale_tensor(torch, kv_format, kv_scale, device):
    """fp8_e4m3's per-tensor scale as the float32 [1] CUDA tensor the decode kernel reads (a given one, or
    a new one holding the number `kv_scale`), or None for the other formats. The kernel reads it at launch,
    so a captured graph sees later writes to it (vLLM's k_scale)."""
    _check_kv_scale(kv_format, kv_scale)
    if kv_format != "fp8_e4m3":
        return None
    if isinstance(kv_scale, torch.Tensor):
        if kv_scale.dtype != torch.float32 or kv_scale.numel() != 1 or kv_scale.device != device:
            raise ValueError(f"kv_scale must be a float32 tensor of one element on {device}, got "
                             f"{kv_scale.dtype} {list(kv_scale.shape)} on {kv_scale.device}")
        return kv_scale
    value = _float("kv_scale", kv_scale)
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"kv_scale must be positive and finite, got {kv_scale!r}")
    return torch.tensor([value], dtype=torch.float32, device=device)


def _varlen_spec_for(torch, q, kv_cache, latent, causal, max_query_rows, tile, kv_format):
    t, h, d = q.shape
    dtype = "bf16" if q.dtype == torch.bfloat16 else "f16"
    return decode_varlen_spec(h, max_query_rows, latent, d - latent, kv_cache.shape[1], dtype, causal,
                              _chip(torch, q.device), tile, kv_format).encode()


def _varlen_outputs(torch, q, latent, out, lse):
    """out [T, h_q, latent] in q's dtype and lse float32 [T, h_q] on q's device (given and checked, or
    new)."""
    t, h = q.shape[0], q.shape[1]
    result = []
    for name, given, shape, dtype in (("out", out, (t, h, latent), q.dtype), ("lse", lse, (t, h), torch.float32)):
        if given is None:
            result.append(torch.empty(shape, dtype=dtype, device=q.device))
            continue
        if not isinstance(given, torch.Tensor) or tuple(given.shape) != shape or given.dtype != dtype \
                or given.device != q.device or not given.is_contiguous():
            raise ValueError(f"{name} must be a contiguous {dtype} tensor of shape {list(shape)} on {q.device}, "
                             f"got {getattr(given, 'dtype', type(given).__name__)} "
                             f"{list(getattr(given, 'shape', ()))}")
        result.append(given)
    return result


def _decode_varlen(q, kv_cache, block_table, seq_lens, query_start_loc, head_dim_v, softmax_scale, causal,
                   num_splits, split_policy, tile, kv_format, kv_scale, out, lse):
    """decode(..., query_start_loc=...) without a plan: the tables are copied to the host and checked,
    the kernel's Sq is the batch's largest query length."""
    torch = _torch()
    names = ("q", "kv_cache", "block_table", "seq_lens", "query_start_loc")
    values = (q, kv_cache, block_table, seq_lens, query_start_loc)
    for n, v in zip(names, values):
        _describe(torch, n, v, data=False)
    opts = _decode_options(head_dim_v, softmax_scale, causal, num_splits, split_policy, kv_format, None)
    _check_kv_scale(kv_format, kv_scale)
    lens_host, lens_ptr = _host_i32(seq_lens)
    table_host, table_ptr = _host_i32(block_table)
    qsl_host, qsl_ptr = _host_i32(query_start_loc)
    tensors = {"q": q, "kv_cache": kv_cache, "block_table": block_table}
    tensors.update({n: v for n, v in (("seq_lens", seq_lens), ("query_start_loc", query_start_loc)) if v.is_cuda})
    _same_device(tensors, "q")
    if q.dim() != 3:
        raise ValueError(f"q must have rank 3 ([T, h_q, d]) with query_start_loc, got shape {list(q.shape)}")
    out, lse = _varlen_outputs(torch, q, _int("head_dim_v", head_dim_v), out, lse)
    scale = _kv_scale_tensor(torch, kv_format, kv_scale, q.device)
    lengths = (qsl_host[1:] - qsl_host[:-1]).tolist() if qsl_host.dim() == 1 else []
    # Out-of-range lengths are the C rules' to report; the spec only needs a valid Sq.
    max_rows = min(max([1] + lengths), 8)
    spec = _varlen_spec_for(torch, q, kv_cache, opts.headDimV, causal, max_rows, tile, kv_format)
    on_device = [v if v.is_cuda else v.to(q.device) for v in values]
    described = [_describe(torch, n, v) for n, v in zip(names, on_device)]
    refs = [ctypes.byref(t) for t in described]
    device = q.device.index if q.device.index is not None else torch.cuda.current_device()
    with torch.cuda.device(device):
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        size = ctypes.c_size_t(0)

        def call(workspace):
            _call("mlaGpuDecodeVarlen", spec, device, *refs, lens_ptr, table_ptr, qsl_ptr, ctypes.byref(opts),
                  out.data_ptr(), lse.data_ptr(), 0 if scale is None else scale.data_ptr(), workspace,
                  ctypes.byref(size), stream)

        call(0)  # validates and sizes the workspace; enqueues nothing
        if q.shape[0] == 0:
            return out, lse
        workspace = torch.empty(size.value, dtype=torch.uint8, device=q.device)
        call(workspace.data_ptr())
    return out, lse


def decode(q, kv_cache, block_table, seq_lens, *, head_dim_v, softmax_scale, causal=False, num_splits=None,
           kv_format="auto", kv_scale=None, split_policy="grid", tile=None, plan=None, out=None, lse=None,
           query_start_loc=None):
    """Absorbed MLA decode over a paged latent cache on the GPU (FlashMLA's flash_mla_with_kvcache).

    Shapes and semantics are those of `mla.decode`: q [b, s_q, h_q, L+R] bfloat16 or float16, kv_cache
    [pages, page_size, L+R] of q's dtype (kv_format "auto") or uint8 rows of an fp8 kv_format as in
    `cache_write` (sm_90a: dequantised to q's dtype in shared memory; fp8_e4m3's kv_scale a number or a
    float32 CUDA tensor of one element, read by the kernel at launch), block_table int32 [b, max_pages] (CUDA), seq_lens int32 [b]
    (CUDA or CPU); returns out [b, s_q, h_q, L] in q's dtype and lse float32 [b, h_q, s_q], written into
    `out` and `lse` when given (contiguous tensors of those shapes on q's device).

    Without `plan`, seq_lens and the block table are copied to the host and checked (every page a request
    reads must exist in kv_cache) before anything is enqueued, and the splits are planned there:
    `num_splits` cuts every request into that many split-KV pieces; without it `split_policy` decides:
    "grid" (default: one count per batch fitted to the GPU's SMs, see `chooseGridSplits`), "heuristic"
    (vLLM Triton MLA's), "balanced" (FlashMLA's plan) or "batch-invariant". `tile` ("RxWxKxS", with a
    trailing "w" for the wgmma kernel, "p" for its warp-specialised TMA build or "s" for that build's seesaw
    schedule, which also reads fp8_e4m3 and fp8_ds_mla caches under bf16 q: opt-in, "64x2x64x2s"; "m" runs
    that schedule in clusters of two CTAs sharing the KV loads, bf16/f16 caches with h_q a multiple of 128)
    overrides the kernel's default tiling (part of the kernel's key); without it, $MLA_DECODE_TILE, when
    set, does.

    With `plan` (from `plan_decode` on this step's tables) the call only checks shapes, dtypes and
    devices against the plan and enqueues the decode on torch's current stream: no host copy, no
    synchronisation, and with `out` and `lse` no allocation, so it can be captured in a CUDA graph.
    seq_lens and block_table must hold the values the plan was made from; the plan checked those on
    the device (`DecodePlan.check` reports what it found), and the very tensors it was made from (same
    objects at the same addresses, neither reshaped nor written since) are not checked again, nor is the
    kv_cache a planned call checked last (same object and address; reshaping it in place is not noticed).
    The plan fixes num_splits, split_policy, tile and kv_format, which must then be left at their
    defaults; kv_scale (fp8_e4m3) is given per call.

    With `query_start_loc` (int32 [b+1]) the decode is varlen (see `mla.decode`): q [T, h_q, L+R], out
    [T, h_q, L], lse [T, h_q], on an sm_90a kernel whose Sq is the batch's largest query length (a plan's:
    its max_query_len), over a cache of q's dtype or of any fp8 kv_format (kv_scale as above).
    """
    if plan is None and query_start_loc is not None:
        return _decode_varlen(q, kv_cache, block_table, seq_lens, query_start_loc, head_dim_v, softmax_scale,
                              causal, num_splits, split_policy, tile, kv_format, kv_scale, out, lse)
    if plan is not None:
        if num_splits is not None or split_policy != "grid" or tile is not None:
            raise ValueError("with a plan, num_splits, split_policy and tile are the plan's: leave them at "
                             "their defaults")
        if not isinstance(plan, (DecodePlan, VarlenDecodePlan)):
            raise ValueError(f"plan must come from mla.gpu.plan_decode, got {type(plan).__name__}")
        if kv_format not in ("auto", plan.kv_format):
            raise ValueError(f"kv_format is the plan's ({plan.kv_format!r}), got {kv_format!r}")
        return plan._run(q, kv_cache, block_table, seq_lens, head_dim_v, softmax_scale, causal, out, lse,
                         kv_scale, query_start_loc)
    torch = _torch()
    names = ("q", "kv_cache", "block_table", "seq_lens")
    values = (q, kv_cache, block_table, seq_lens)
    described = [_describe(torch, n, v, data=False) for n, v in zip(names, values)]
    opts = _decode_options(head_dim_v, softmax_scale, causal, num_splits, split_policy, kv_format, None)
    _check_kv_scale(kv_format, kv_scale)
    lens_host, lens_ptr = _host_i32(seq_lens)
    # The block table is read on the host too, so that a page past the cache
    # is an error rather than an out-of-bounds read on the GPU.
    table_host, table_ptr = _host_i32(block_table)
    refs = [ctypes.byref(t) for t in described]
    _call("mlaGpuCheckDecode", *refs, lens_ptr, table_ptr, ctypes.byref(opts))
    tensors = {"q": q, "kv_cache": kv_cache, "block_table": block_table}
    if seq_lens.is_cuda:
        tensors["seq_lens"] = seq_lens
    _same_device(tensors, "q")

    out, lse = _outputs(torch, q, opts.headDimV, out, lse)
    scale = _kv_scale_tensor(torch, kv_format, kv_scale, q.device)
    if q.shape[0] == 0:
        return out, lse
    spec = _decode_spec_for(torch, q, kv_cache, opts.headDimV, causal, tile, kv_format)
    lens_dev = seq_lens if seq_lens.is_cuda else seq_lens.to(q.device)
    described = [_describe(torch, n, v) for n, v in zip(names, (q, kv_cache, block_table, lens_dev))]
    refs = [ctypes.byref(t) for t in described]
    device = q.device.index if q.device.index is not None else torch.cuda.current_device()
    with torch.cuda.device(device):
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        size = ctypes.c_size_t(0)

        def call(workspace):
            _call("mlaGpuDecode", spec, device, *refs, lens_ptr, table_ptr, ctypes.byref(opts), out.data_ptr(),
                  lse.data_ptr(), 0 if scale is None else scale.data_ptr(), workspace, ctypes.byref(size),
                  stream)

        call(0)  # validates and sizes the workspace; enqueues nothing
        workspace = torch.empty(size.value, dtype=torch.uint8, device=q.device)
        call(workspace.data_ptr())
    return out, lse


def _raw_stream_function(torch):
    """The function of a device index that returns torch's current stream there as a CUstream value.
    torch._C._cuda_getCurrentRawStream costs a fraction of current_stream().cuda_stream, which matters on
    the planned path's host budget."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw
    return lambda device: torch.cuda.current_stream(device).cuda_stream


def _raw_stream(torch, device):
    """torch's current stream on `device` as a CUstream value."""
    return _raw_stream_function(torch)(device)


class DecodePlan:
    """A device plan of GPU decodes (`plan_decode`): the split bounds of one batch step, computed on the
    GPU from device seq_lens by the decode kernel's planning kernel, in buffers this object owns (sized for
    `max_batch` requests). `decode(..., plan=plan)` then launches with no host copy or synchronisation.
    `num_splits` is the number of pieces every request is cut into, fixed when the plan is made."""

    def __init__(self, torch, lib, handle, workspace, status, device, shapes, head_dim_v, causal, max_batch,
                 kv_format="auto"):
        self._torch, self._lib, self._handle = torch, lib, handle
        self._workspace, self._status = workspace, status
        self._device, self._device_index = device, device.index
        self._shapes = shapes
        self._head_dim_v, self._causal = head_dim_v, bool(causal)
        self.max_batch = max_batch
        self.kv_format = kv_format
        self.num_splits = lib.mlaGpuDecodePlanNumSplits(handle)
        self._err = ctypes.create_string_buffer(_ERROR_BYTES)
        # Looked up once: a planned call's host budget has no room for attribute searches. The call packs
        # its arguments into one struct (one C-level conversion, where ctypes would convert twelve).
        self._launch = lib.mlaGpuDecodeRunPacked
        self._args = _DecodeRunArgs()
        self._pack = _RUN_ARGS.pack_into
        self._error_bytes = ctypes.c_size_t(_ERROR_BYTES)
        self._stream = _raw_stream_function(torch)
        self._int32, self._float32 = torch.int32, torch.float32
        self._tables = (None, None, 0, 0)
        self._cache = (None, 0)

    def __del__(self):
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            self._lib.mlaGpuDecodePlanDestroy(handle)

    def _update(self, q, kv_cache, block_table, seq_lens):
        torch = self._torch
        names = ("q", "kv_cache", "block_table", "seq_lens")
        values = (q, kv_cache, block_table, seq_lens)
        _same_device(dict(zip(names, values)), "q")
        if q.device != self._device:
            raise ValueError(f"the plan was made on {self._device}, got q on {q.device}")
        described = [_describe(torch, n, v) for n, v in zip(names, values)]
        stream = ctypes.c_void_p(_raw_stream(torch, self._device_index))
        _call("mlaGpuDecodePlanUpdate", self._handle, *[ctypes.byref(t) for t in described], stream)
        self._set_step(tuple(tuple(v.shape) for v in values), q.dtype, kv_cache.dtype)
        # The tables this step was planned (and checked) from: a run given these very tensors, still at
        # the same addresses, need not check them again (the plan requires them unchanged anyway).
        self._tables = (block_table, seq_lens, block_table.data_ptr(), seq_lens.data_ptr())
        self._cache = (kv_cache, kv_cache.data_ptr())

    def _set_step(self, shapes, dtype, cache_dtype):
        """Records the step planned last: the shapes of (q, kv_cache, block_table, seq_lens), q's and
        kv_cache's dtypes, and the out and lse shapes they give, which a planned call checks its outputs
        against."""
        self._shapes, self._dtype, self._cache_dtype = shapes, dtype, cache_dtype
        b, sq, h = shapes[0][0], shapes[0][1], shapes[0][2]
        self._output_shapes = ((b, sq, h, self._head_dim_v), (b, h, sq))

    def _run(self, q, kv_cache, block_table, seq_lens, head_dim_v, softmax_scale, causal, out, lse,
             kv_scale=None, query_start_loc=None):
        if query_start_loc is not None:
            raise ValueError("the plan was made for a uniform batch; plan a varlen one with "
                             "plan_decode(..., query_start_loc=...)")
        # The host budget of a planned call is a few microseconds of Python: one pass of cheap tests
        # (get_device() is an int, where .device builds an object; dtypes are compared by identity), the
        # precise message only on failure. The tables the step was planned from (checked then, and required
        # unchanged) and the cache checked last (the engine's one cache tensor) pass on their identity and
        # addresses.
        shapes, dev, dtype = self._shapes, self._device_index, self._dtype
        table, lens, table_ptr, lens_ptr = self._tables
        cache, cache_ptr = self._cache
        try:
            ok = q.shape == shapes[0] and q.dtype is dtype and q.get_device() == dev and q.is_contiguous()
            if ok and not (kv_cache is cache and kv_cache.data_ptr() == cache_ptr):
                cache_ptr = kv_cache.data_ptr()
                ok = (kv_cache.shape == shapes[1] and kv_cache.dtype is self._cache_dtype
                      and kv_cache.get_device() == dev and kv_cache.is_contiguous())
                if ok:
                    self._cache = (kv_cache, cache_ptr)
            if ok and not (block_table is table and seq_lens is lens and block_table.data_ptr() == table_ptr
                           and seq_lens.data_ptr() == lens_ptr):
                table_ptr, lens_ptr = block_table.data_ptr(), seq_lens.data_ptr()
                ok = (block_table.shape == shapes[2] and seq_lens.shape == shapes[3]
                      and block_table.dtype is self._int32 and seq_lens.dtype is self._int32
                      and block_table.get_device() == dev and seq_lens.get_device() == dev
                      and block_table.is_contiguous() and seq_lens.is_contiguous())
        except AttributeError:
            ok = False
        if not ok:
            self._explain((q, kv_cache, block_table, seq_lens))
        if head_dim_v != self._head_dim_v or causal is not self._causal and bool(causal) != self._causal:
            raise ValueError(f"head_dim_v and causal must be the plan's ({self._head_dim_v}, {self._causal})")
        if out is None or lse is None:
            out, lse = _outputs(self._torch, q, self._head_dim_v, out, lse)
        else:
            out_shape, lse_shape = self._output_shapes
            try:
                ok = (out.shape == out_shape and lse.shape == lse_shape and out.dtype is dtype
                      and lse.dtype is self._float32 and out.get_device() == dev and lse.get_device() == dev
                      and out.is_contiguous() and lse.is_contiguous())
            except AttributeError:
                ok = False
            if not ok:
                _outputs(self._torch, q, self._head_dim_v, out, lse)  # raises with the precise message
        scale = 0
        if kv_scale is not None or self.kv_format == "fp8_e4m3":
            scale = _kv_scale_tensor(self._torch, self.kv_format, kv_scale, self._device)
            self._kv_scale = scale  # alive until the next call, past the launch's enqueue
            scale = scale.data_ptr()
        self._pack(self._args, 0, q.data_ptr(), cache_ptr, table_ptr, lens_ptr, out.data_ptr(), lse.data_ptr(),
                   scale, self._stream(dev),
                   softmax_scale if type(softmax_scale) is float else _float("softmax_scale", softmax_scale))
        code = self._launch(self._handle, self._args, self._err, self._error_bytes)
        if code != SUCCESS:
            _check(code, self._err)
        return out, lse

    def _explain(self, tensors):
        """Raises the ValueError that says how `tensors` (q, kv_cache, block_table, seq_lens) differ from what
        the plan was made for."""
        torch = self._torch
        names = ("q", "kv_cache", "block_table", "seq_lens")
        for name, t in zip(names, tensors):
            if not isinstance(t, torch.Tensor):
                raise ValueError(f"{name} must be a torch tensor, got {type(t).__name__}")
        got = [list(t.shape) for t in tensors]
        if got != [list(s) for s in self._shapes]:
            raise ValueError(f"q, kv_cache, block_table and seq_lens have shapes {got}; the plan was made for "
                             f"{[list(s) for s in self._shapes]}: plan this step with plan_decode(..., plan=plan)")
        wanted = (self._dtype, self._cache_dtype, torch.int32, torch.int32)
        for name, t, dtype in zip(names, tensors, wanted):
            if t.dtype != dtype:
                raise ValueError(f"{name} has dtype {t.dtype}; the plan was made for {dtype}")
            if t.get_device() != self._device_index or not t.is_contiguous():
                raise ValueError(f"{name} must be a contiguous tensor on the plan's device {self._device}")

    def check(self):
        """Waits for torch's current stream and raises ValueError when a step planned since the last check
        had a seq_len or block-table entry the argument rules forbid (those requests were planned as empty:
        out 0, lse -inf, and nothing was read for them). Not for use inside a CUDA graph capture."""
        stream = ctypes.c_void_p(_raw_stream(self._torch, self._device_index))
        _call("mlaGpuDecodePlanCheck", self._handle, stream)


_DEVICE_PLAN_TYPES.add(DecodePlan)


class VarlenDecodePlan:
    """A device plan of varlen GPU decodes (`plan_decode(..., query_start_loc=...)`): as `DecodePlan`,
    and the planning kernel also checks query_start_loc on the device (`check` reports a malformed one or
    a query longer than its seq_len). Its kernel takes up to `max_query_len` tokens per request."""

    _NAMES = ("q", "kv_cache", "block_table", "seq_lens", "query_start_loc")

    def __init__(self, torch, handle, workspace, status, device, head_dim_v, causal, max_batch, max_query_len,
                 kv_format="auto"):
        self._torch, self._lib, self._handle = torch, _library(), handle
        self.kv_format = kv_format
        self._workspace, self._status = workspace, status
        self._device = device
        self._head_dim_v, self._causal = head_dim_v, bool(causal)
        self.max_batch, self.max_query_len = max_batch, max_query_len
        self.num_splits = self._lib.mlaGpuDecodePlanNumSplits(handle)
        self._shapes = None

    def __del__(self):
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            self._lib.mlaGpuDecodePlanDestroy(handle)

    def _tensors(self, values):
        _same_device(dict(zip(self._NAMES, values)), "q")
        if values[0].device != self._device:
            raise ValueError(f"the plan was made on {self._device}, got q on {values[0].device}")
        return [_describe(self._torch, n, v) for n, v in zip(self._NAMES, values)]

    def _update(self, q, kv_cache, block_table, seq_lens, query_start_loc):
        values = (q, kv_cache, block_table, seq_lens, query_start_loc)
        described = self._tensors(values)
        stream = ctypes.c_void_p(_raw_stream(self._torch, self._device.index))
        _call("mlaGpuDecodeVarlenPlanUpdate", self._handle, *[ctypes.byref(t) for t in described], stream)
        self._shapes = [tuple(v.shape) for v in values]

    def _run(self, q, kv_cache, block_table, seq_lens, head_dim_v, softmax_scale, causal, out, lse,
             kv_scale=None, query_start_loc=None):
        if query_start_loc is None:
            raise ValueError("the plan was made for a varlen batch: pass its query_start_loc")
        values = (q, kv_cache, block_table, seq_lens, query_start_loc)
        self._tensors(values)
        shapes = [tuple(getattr(v, "shape", ())) for v in values]
        if shapes != self._shapes:
            raise ValueError(f"{', '.join(self._NAMES)} have shapes {[list(x) for x in shapes]}; the plan was "
                             f"made for {[list(x) for x in self._shapes]}: plan this step with "
                             "plan_decode(..., plan=plan)")
        if head_dim_v != self._head_dim_v or bool(causal) != self._causal:
            raise ValueError(f"head_dim_v and causal must be the plan's ({self._head_dim_v}, {self._causal})")
        out, lse = _varlen_outputs(self._torch, q, self._head_dim_v, out, lse)
        scale = _kv_scale_tensor(self._torch, self.kv_format, kv_scale, self._device)
        self._kv_scale = scale  # alive until the next call, past the launch's enqueue
        stream = ctypes.c_void_p(_raw_stream(self._torch, self._device.index))
        _call("mlaGpuDecodeVarlenRun", self._handle, *[v.data_ptr() for v in values], out.data_ptr(),
              lse.data_ptr(), _float("softmax_scale", softmax_scale), 0 if scale is None else scale.data_ptr(),
              stream)
        return out, lse

    def check(self):
        """As `DecodePlan.check`, with query_start_loc's rules too."""
        stream = ctypes.c_void_p(_raw_stream(self._torch, self._device.index))
        _call("mlaGpuDecodePlanCheck", self._handle, stream)


def _create_plan(torch, create, spec, q, names, values, opts, max_batch, max_seq_len):
    """Makes a device plan with the C function `create` (mlaGpuDecodePlanCreate or its varlen twin) on q's
    device: one call sizes the workspace, torch allocates it and the status word there, a second call makes
    the plan over them. Returns (device index, plan handle, workspace, status)."""
    refs = [ctypes.byref(_describe(torch, n, v, data=False)) for n, v in zip(names, values)]
    device = q.device.index if q.device.index is not None else torch.cuda.current_device()
    size = ctypes.c_size_t(0)
    handle = ctypes.c_void_p()
    with torch.cuda.device(device):
        _call(create, spec, device, *refs, ctypes.byref(opts), max_batch, max_seq_len, 0, ctypes.byref(size), 0,
              ctypes.byref(handle))
        workspace = torch.empty(size.value, dtype=torch.uint8, device=q.device)
        status = torch.zeros(1, dtype=torch.int32, device=q.device)
        _call(create, spec, device, *refs, ctypes.byref(opts), max_batch, max_seq_len, workspace.data_ptr(),
              ctypes.byref(size), status.data_ptr(), ctypes.byref(handle))
    return device, handle, workspace, status


def _plan_varlen(q, kv_cache, block_table, seq_lens, query_start_loc, head_dim_v, causal, num_splits,
                 split_policy, tile, max_batch, max_seq_len, max_query_len, plan, kv_format):
    torch = _torch()
    values = (q, kv_cache, block_table, seq_lens, query_start_loc)
    for n, v in zip(VarlenDecodePlan._NAMES, values):
        _describe(torch, n, v, data=False)
    _same_device(dict(zip(VarlenDecodePlan._NAMES, values)), "q")
    if plan is not None:
        if not isinstance(plan, VarlenDecodePlan):
            raise ValueError("plan must come from mla.gpu.plan_decode(..., query_start_loc=...), got "
                             f"{type(plan).__name__}")
        if _int("head_dim_v", head_dim_v) != plan._head_dim_v or bool(causal) != plan._causal:
            raise ValueError(f"head_dim_v and causal must be the plan's ({plan._head_dim_v}, {plan._causal})")
        if kv_format not in ("auto", plan.kv_format):
            raise ValueError(f"kv_format is the plan's ({plan.kv_format!r}), got {kv_format!r}")
        plan._update(*values)
        return plan
    if q.dim() != 3:
        raise ValueError(f"q must have rank 3 ([T, h_q, d]) with query_start_loc, got shape {list(q.shape)}")
    opts = _decode_options(head_dim_v, 1.0, causal, num_splits, split_policy, kv_format, None)
    batch = query_start_loc.shape[0] - 1 if query_start_loc.dim() == 1 else 0
    if batch < 1:
        raise ValueError("a plan needs at least one request (query_start_loc [b+1], b >= 1)")
    max_batch = batch if max_batch is None else _int("max_batch", max_batch)
    max_seq_len = 0 if max_seq_len is None else _int("max_seq_len", max_seq_len)
    max_query_len = 8 if max_query_len is None else _int("max_query_len", max_query_len)
    spec = _varlen_spec_for(torch, q, kv_cache, opts.headDimV, causal, max_query_len, tile, kv_format)
    device, handle, workspace, status = _create_plan(torch, "mlaGpuDecodeVarlenPlanCreate", spec, q,
                                                     VarlenDecodePlan._NAMES, values, opts, max_batch, max_seq_len)
    plan = VarlenDecodePlan(torch, handle, workspace, status, torch.device("cuda", device), opts.headDimV, causal,
                            max_batch, max_query_len, kv_format)
    plan._update(*values)
    return plan


def plan_decode(q, kv_cache, block_table, seq_lens, *, head_dim_v, causal=False, num_splits=None,
                split_policy="grid", tile=None, max_batch=None, max_seq_len=None, plan=None, kv_format="auto",
                query_start_loc=None, max_query_len=None):
    """Plans the split-KV decode of one batch step on the GPU (FlashMLA's get_mla_metadata, FlashInfer's
    plan) and returns the plan for `decode(..., plan=plan)`.

    The arguments are decode's (softmax_scale and kv_scale aside: the kernel takes them at launch, so one
    plan and one kernel serve every scale; kv_format fixes the kernel). Every request is cut into the same number of whole-page pieces:
    `num_splits`, or for split_policy "grid" (default) the count `chooseGridSplits` fits to the GPU for
    `max_batch` requests of `max_seq_len` tokens (default: the block table's capacity), or 1 for
    "batch-invariant"; "heuristic" and "balanced" plan from host lengths and are refused here. The bounds
    are computed on the device from device `seq_lens` by a kernel enqueued on torch's current stream, which
    also checks every seq_len and every used block-table entry as decode's argument rules do; see
    `DecodePlan.check`.

    The first call allocates the plan's buffers (for `max_batch` requests, default b). Passing an earlier
    plan as `plan` re-plans into its buffers for this step's tables (b at most its max_batch, the same
    head and cache shapes): no allocation, no host copy, no synchronisation, so it can be captured in a
    CUDA graph with the decodes that use it.

    With `query_start_loc` the plan is a `VarlenDecodePlan` for varlen decodes of up to `max_query_len`
    (default 8) query tokens per request; `max_batch` then counts requests (query_start_loc's b).
    """
    if query_start_loc is not None:
        return _plan_varlen(q, kv_cache, block_table, seq_lens, query_start_loc, head_dim_v, causal, num_splits,
                            split_policy, tile, max_batch, max_seq_len, max_query_len, plan, kv_format)
    if max_query_len is not None:
        raise ValueError("max_query_len belongs to a varlen plan (with query_start_loc)")
    torch = _torch()
    names = ("q", "kv_cache", "block_table", "seq_lens")
    values = (q, kv_cache, block_table, seq_lens)
    for n, v in zip(names, values):
        _describe(torch, n, v, data=False)
    _same_device(dict(zip(names, values)), "q")
    if plan is not None:
        if not isinstance(plan, DecodePlan):
            raise ValueError(f"plan must come from mla.gpu.plan_decode, got {type(plan).__name__}")
        if _int("head_dim_v", head_dim_v) != plan._head_dim_v or bool(causal) != plan._causal:
            raise ValueError(f"head_dim_v and causal must be the plan's ({plan._head_dim_v}, {plan._causal})")
        if kv_format not in ("auto", plan.kv_format):
            raise ValueError(f"kv_format is the plan's ({plan.kv_format!r}), got {kv_format!r}")
        plan._update(q, kv_cache, block_table, seq_lens)
        return plan
    opts = _decode_options(head_dim_v, 1.0, causal, num_splits, split_policy, kv_format, None)
    if q.shape[0] == 0:
        raise ValueError("a plan needs at least one request")
    max_batch = q.shape[0] if max_batch is None else _int("max_batch", max_batch)
    max_seq_len = 0 if max_seq_len is None else _int("max_seq_len", max_seq_len)
    spec = _decode_spec_for(torch, q, kv_cache, opts.headDimV, causal, tile, kv_format)
    device, handle, workspace, status = _create_plan(torch, "mlaGpuDecodePlanCreate", spec, q, names, values,
                                                     opts, max_batch, max_seq_len)
    plan = DecodePlan(torch, _library(), handle, workspace, status, torch.device("cuda", device), None,
                      opts.headDimV, causal, max_batch, kv_format)
    plan._update(q, kv_cache, block_table, seq_lens)
    return plan


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

def kernel_spec(text):
    """The canonical form of a kernel spec text of any family (what `mla-aot --spec` takes and the kernel
    cache is keyed by); ValueError when it is malformed or names a shape no kernel can run."""
    if text in _specs:
        return _specs[text]
    lib = _library()
    spec = ctypes.create_string_buffer(512)
    err = ctypes.create_string_buffer(_ERROR_BYTES)
    _check(lib.mlaGpuCanonicalSpec(_c_string("the kernel spec", text), spec, len(spec), err, len(err)), err)
    _specs[text] = spec.value.decode()
    return _specs[text]


def _f32_bits(name, value):
    """`value` rounded to float32 (as the kernels use it), as the spec's 0x bit pattern."""
    try:
        packed = struct.pack("<f", float(value))
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be a positive finite float32, got {value!r}") from None
    (rounded,) = struct.unpack("<f", packed)
    if not (math.isfinite(rounded) and rounded > 0):
        raise ValueError(f"{name} must be positive and finite, got {value!r}")
    return f"0x{struct.unpack('<I', packed)[0]:08x}"


def cache_write_spec(latent_dim, rope_dim, page_size, dtype, cache_format, chip):
    """The spec of a cache_write kernel: `dtype` of kv_c/k_pe ("bf16", "f16", "f32"), `cache_format` a row
    format ("bf16", "f16", "f32", "fp8_e4m3", "fp8_e4m3_token", "fp8_ds_mla"). fp8_e4m3's kv_scale is a
    launch argument: one kernel serves every scale."""
    return kernel_spec(f"cache_write chip={chip} L={latent_dim} R={rope_dim} page={page_size} dtype={dtype} "
                       f"format={cache_format}")


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


_SPEC_DTYPES = {_DTYPE_BF16: "bf16", _DTYPE_F16: "f16", _DTYPE_F32: "f32"}


def _launch(torch, device, fn, *args):
    """Calls C API function `fn(spec, device, ..., stream, err, errLen)` on `device`'s current stream."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    with torch.cuda.device(index):
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        _call(fn, args[0], index, *args[1:], stream)


def cache_write(kv_c, k_pe, kv_cache, slot_mapping, *, kv_format="auto", kv_scale=None):
    """`mla.cache_write` on the GPU: row concat(kv_c[t], k_pe[t]) goes to slot slot_mapping[t] =
    page * page_size + offset of kv_cache, in place; negative slots are padding and write nothing.
    Returns None, like the CPU path.

    kv_c [T, L] and k_pe [T, R] or [T, 1, R] bfloat16, float16 or float32; slot_mapping [T] integers (CUDA
    or CPU); kv_cache [pages, page_size, row], contiguous, on kv_c's device. kv_format "auto" stores rows
    in kv_cache's float dtype (bfloat16, float16 or float32; the CPU path needs kv_c's); the fp8 formats
    take a torch.uint8 (or int8) cache with the CPU path's row bytes: L+R for "fp8_e4m3" (with kv_scale: a
    number, or a float32 CUDA tensor of one element on kv_c's device, vLLM's k_scale, which the kernel
    reads when it runs; one kernel serves every scale), L+R+8 for "fp8_e4m3_token" and
    L + 4*L/128 + 2*R for "fp8_ds_mla". Bytes are those of the CPU path. Invalid arguments raise
    ValueError and leave kv_cache untouched.
    """
    torch = _torch()
    if not isinstance(slot_mapping, torch.Tensor):
        raise ValueError(f"slot_mapping must be a torch tensor, got {type(slot_mapping).__name__}")
    if slot_mapping.dtype.is_floating_point or slot_mapping.dtype.is_complex or slot_mapping.dtype == torch.bool:
        raise ValueError(f"slot_mapping must hold integers, got dtype {slot_mapping.dtype}")
    slots_host = slot_mapping.to("cpu")
    if slots_host.numel() and (int(slots_host.min()) < -2**31 or int(slots_host.max()) > _INT32_MAX):
        raise ValueError("slot_mapping holds values that do not fit in int32")
    slots_host = slots_host.to(torch.int32).contiguous()
    slots_ptr = ctypes.cast(slots_host.data_ptr(), ctypes.POINTER(ctypes.c_int32))
    fmt = _cache_format(kv_format, kv_scale, data=False)
    names = ("kv_c", "k_pe", "slot_mapping", "kv_cache")
    values = (kv_c, k_pe, slots_host, kv_cache)
    kvc_d, kpe_d, slots_d, cache_d = [_describe(torch, n, v, data=False) for n, v in zip(names, values)]
    _call("mlaGpuCheckCacheWrite", ctypes.byref(kvc_d), ctypes.byref(kpe_d), ctypes.byref(slots_d), slots_ptr,
          ctypes.byref(cache_d), ctypes.byref(fmt))
    tensors = _with_kv_scale({"kv_c": kv_c, "k_pe": k_pe, "kv_cache": kv_cache}, kv_scale)
    if slot_mapping.is_cuda:
        tensors["slot_mapping"] = slot_mapping
    _same_device(tensors, "kv_c")

    tokens, latent = kv_c.shape
    cache_format = _SPEC_DTYPES[cache_d.dtype] if kv_format == "auto" else kv_format
    spec = cache_write_spec(latent, k_pe.shape[-1], kv_cache.shape[1], _SPEC_DTYPES[kvc_d.dtype], cache_format,
                            _chip(torch, kv_c.device)).encode()
    if tokens == 0:
        return None
    same = slot_mapping.dtype == torch.int32 and slot_mapping.is_cuda and slot_mapping.is_contiguous()
    slots_dev = slot_mapping if same else slots_host.to(kv_c.device)
    described = [_describe(torch, n, v) for n, v in zip(names, (kv_c, k_pe, slots_dev, kv_cache))]
    kvc_d, kpe_d, slots_d, cache_d = [ctypes.byref(t) for t in described]
    fmt = _cache_format(kv_format, kv_scale)
    _launch(torch, kv_c.device, "mlaGpuCacheWrite", spec, kvc_d, kpe_d, slots_d, slots_ptr, cache_d,
            ctypes.byref(fmt))
    return None


def _projection(kind, x, w, x_name, w_name):
    """Checks x and w by the C rules, then returns (torch, spec, described x and w)."""
    torch = _torch()
    xd, wd = _describe(torch, x_name, x, data=False), _describe(torch, w_name, w, data=False)
    check = "mlaGpuCheckAbsorbQ" if kind == "absorb_q" else "mlaGpuCheckUpProjOut"
    _call(check, ctypes.byref(xd), ctypes.byref(wd))
    _same_device({x_name: x, w_name: w}, x_name)
    heads, k, out_dim = w.shape
    rope = x.shape[2] - k if kind == "absorb_q" else 0
    spec = projection_spec(kind, heads, k, out_dim, rope, _SPEC_DTYPES[xd.dtype], _chip(torch, x.device)).encode()
    return torch, spec, _describe(torch, x_name, x), _describe(torch, w_name, w)


def absorb_q(q, w_uk_t, *, out=None):
    """`mla.absorb_q` on the GPU: q [T, N, P+R] -> [T, N, L+R] in q's dtype (bfloat16, float16 or
    float32), the nope part multiplied by w_uk_t [N, P, L] per head (float32 accumulation), the RoPE part
    copied; into `out` when given. Tensors are contiguous CUDA tensors on one device."""
    torch, spec, qd, wd = _projection("absorb_q", q, w_uk_t, "q", "w_uk_t")
    tokens, heads, width = q.shape
    latent, rope = w_uk_t.shape[2], width - w_uk_t.shape[1]
    out = _output(torch, "out", out, (tokens, heads, latent + rope), q.dtype, q.device, {"q": q, "w_uk_t": w_uk_t})
    if tokens:
        _launch(torch, q.device, "mlaGpuAbsorbQ", spec, ctypes.byref(qd), ctypes.byref(wd), out.data_ptr())
    return out


def up_proj_out(o, w_uv, *, out=None):
    """`mla.up_proj_out` on the GPU: o [T, N, L] -> [T, N*V] in o's dtype through w_uv [N, L, V] per head
    (float32 accumulation), into `out` when given. Tensors are contiguous CUDA tensors on one device."""
    torch, spec, od, wd = _projection("up_proj_out", o, w_uv, "o", "w_uv")
    tokens, heads, _ = o.shape
    out = _output(torch, "out", out, (tokens, heads * w_uv.shape[2]), o.dtype, o.device, {"o": o, "w_uv": w_uv})
    if tokens:
        _launch(torch, o.device, "mlaGpuUpProjOut", spec, ctypes.byref(od), ctypes.byref(wd), out.data_ptr())
    return out


# ---------------------------------------------------------------------------------------------------
# Chunked prefill: gather_cache, merge_states, up_proj_kv, mha
# ---------------------------------------------------------------------------------------------------

def gather_cache_spec(latent_dim, rope_dim, page_size, dtype, cache_format, chip):
    """The spec of a gather_cache kernel: rows of `cache_format` (as in `cache_write_spec`) dequantised
    into a workspace of `dtype` ("bf16", "f16", "f32")."""
    return kernel_spec(f"gather_cache chip={chip} L={latent_dim} R={rope_dim} page={page_size} dtype={dtype} "
                       f"format={cache_format}")


def merge_states_spec(num_heads, head_dim, dtype, chip):
    """The spec of a merge_states kernel over outputs [T, num_heads, head_dim] of `dtype`."""
    return kernel_spec(f"merge_states chip={chip} N={num_heads} H={head_dim} dtype={dtype}")


def up_proj_kv_spec(num_heads, latent_dim, nope_dim, v_dim, dtype, chip):
    """The spec of an up_proj_kv kernel (bf16 or f16)."""
    return kernel_spec(f"up_proj_kv chip={chip} N={num_heads} L={latent_dim} P={nope_dim} V={v_dim} "
                       f"dtype={dtype}")


def mha_spec(num_heads, qk_dim, v_dim, dtype, causal, softmax_scale, chip):
    """The spec of an mha kernel (D = qk_dim = P+R, V = v_dim)."""
    return kernel_spec(f"mha chip={chip} N={num_heads} D={qk_dim} V={v_dim} dtype={dtype} "
                       f"causal={1 if causal else 0} scale={_f32_bits('softmax_scale', softmax_scale)}")


def _int32_table(torch, name, value):
    """An int32 host copy of the integer torch tensor `value` (a synchronisation for a CUDA tensor), with
    a pointer to it."""
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"{name} must be a torch tensor, got {type(value).__name__}")
    if value.dtype.is_floating_point or value.dtype.is_complex or value.dtype == torch.bool:
        raise ValueError(f"{name} must hold integers, got dtype {value.dtype}")
    host = value.to("cpu")
    if host.numel() and (int(host.min()) < -2**31 or int(host.max()) > _INT32_MAX):
        raise ValueError(f"{name} holds values that do not fit in int32")
    return _host_i32(host.to(torch.int32))


def _on_device(value, host, device):
    """`value` itself when it is a contiguous int32 tensor on `device`, else `host` copied there."""
    if value.is_cuda and value.device == device and value.dtype == host.dtype and value.is_contiguous():
        return value
    return host.to(device)


def gather_cache(kv_cache, block_table, starts, cu_rows, workspace, *, latent_dim, kv_format="auto",
                 kv_scale=None):
    """`mla.gather_cache` on the GPU: workspace row r in [cu_rows[b], cu_rows[b+1]) receives cache position
    starts[b] + r - cu_rows[b] of request b (through block_table), dequantised to workspace's dtype, in
    place; rows outside [cu_rows[0], cu_rows[B]) are left as they were. Returns workspace.

    kv_cache [pages, page_size, row] (kv_format as in `cache_write`: "auto" for a float cache, or a uint8
    cache of an fp8 format; fp8_e4m3 with its kv_scale, a number or a float32 CUDA tensor of one element
    read by the kernel); block_table [B, max_pages], starts [B] and
    cu_rows [B+1] integers (CUDA or CPU; copied to the host and checked by the C rules: cu_rows
    non-decreasing, every gathered page in the block table and the cache); workspace [W, L+R] bfloat16,
    float16 or float32, contiguous, on kv_cache's device. `latent_dim` is L.
    """
    torch = _torch()
    tables = [_int32_table(torch, n, v) for n, v in
              (("block_table", block_table), ("starts", starts), ("cu_rows", cu_rows))]
    hosts, ptrs = [t[0] for t in tables], [t[1] for t in tables]
    fmt = _cache_format(kv_format, kv_scale, data=False)
    names = ("kv_cache", "block_table", "starts", "cu_rows", "workspace")
    cache_d, table_d, starts_d, cu_d, ws_d = [
        _describe(torch, n, v, data=False) for n, v in zip(names, (kv_cache, *hosts, workspace))]
    latent = _int("latent_dim", latent_dim)
    _call("mlaGpuCheckGatherCache", ctypes.byref(cache_d), ctypes.byref(table_d), ctypes.byref(starts_d),
          ctypes.byref(cu_d), *ptrs, ctypes.byref(ws_d), latent, ctypes.byref(fmt))
    _same_device(_with_kv_scale({"kv_cache": kv_cache, "workspace": workspace}, kv_scale), "kv_cache")

    cache_format = _SPEC_DTYPES[cache_d.dtype] if kv_format == "auto" else kv_format
    spec = gather_cache_spec(latent, workspace.shape[1] - latent, kv_cache.shape[1], _SPEC_DTYPES[ws_d.dtype],
                             cache_format, _chip(torch, kv_cache.device)).encode()
    device_tables = [_on_device(v, h, kv_cache.device) for v, h in zip((block_table, starts, cu_rows), hosts)]
    described = [_describe(torch, n, v) for n, v in zip(names, (kv_cache, *device_tables, workspace))]
    cache_d, table_d, starts_d, cu_d, ws_d = [ctypes.byref(t) for t in described]
    fmt = _cache_format(kv_format, kv_scale)
    _launch(torch, kv_cache.device, "mlaGpuGatherCache", spec, cache_d, table_d, starts_d, cu_d, *ptrs, ws_d,
            ctypes.byref(fmt))
    return workspace


def merge_states(out_a, lse_a, out_b, lse_b, *, out=None, lse=None):
    """`mla.merge_states` on the GPU (vLLM's merge_attn_states): out_a/out_b [T, N, H] bfloat16, float16 or
    float32, lse_a/lse_b float32 [N, T], contiguous CUDA tensors on one device; a side whose LSE is not
    finite does not contribute. Returns (out [T, N, H], lse float32 [N, T]), written into `out`/`lse` when
    given: `out=out_a, lse=lse_a` merges in place (the kernel reads each element before writing it)."""
    torch = _torch()
    names = ("out_a", "lse_a", "out_b", "lse_b")
    values = (out_a, lse_a, out_b, lse_b)
    checked = [_describe(torch, n, v, data=False) for n, v in zip(names, values)]
    _call("mlaGpuCheckMergeStates", *[ctypes.byref(t) for t in checked])
    _same_device(dict(zip(names, values)), "out_a")
    tokens, heads, dim = out_a.shape
    spec = merge_states_spec(heads, dim, _SPEC_DTYPES[checked[0].dtype], _chip(torch, out_a.device)).encode()
    # The one alias the kernel allows: the result over side a, element for element.
    same = {"out": _is_view_of(out, out_a), "lse": _is_view_of(lse, lse_a)}
    inputs = dict(zip(names, values))
    out = _output(torch, "out", out, out_a.shape, out_a.dtype, out_a.device,
                  {n: t for n, t in inputs.items() if not (same["out"] and n == "out_a")})
    lse = _output(torch, "lse", lse, lse_a.shape, torch.float32, out_a.device,
                  {n: t for n, t in {**inputs, "out": out}.items() if not (same["lse"] and n == "lse_a")})
    described = [_describe(torch, n, v) for n, v in zip(names, values)]
    _launch(torch, out_a.device, "mlaGpuMergeStates", spec, *[ctypes.byref(t) for t in described],
            out.data_ptr(), lse.data_ptr())
    return out, lse


def up_proj_kv(latent, kv_b_proj, num_heads, qk_nope_head_dim, v_head_dim, *, out=None):
    """`mla.up_proj_kv` on the GPU: latent [S, L] x kv_b_proj [N*(P+V), L]^T viewed as [S, N, P+V] and
    split into (k_nope [S, N, P], v [S, N, V]), bfloat16 or float16 with float32 accumulation (tensor
    cores), into the pair `out` when given. Needs L % 64 == 0 and P, V multiples of 8."""
    torch = _torch()
    heads, p, v = (_int("num_heads", num_heads), _int("qk_nope_head_dim", qk_nope_head_dim),
                   _int("v_head_dim", v_head_dim))
    ld, wd = _describe(torch, "latent", latent, data=False), _describe(torch, "kv_b_proj", kv_b_proj, data=False)
    _call("mlaGpuCheckUpProjKv", ctypes.byref(ld), ctypes.byref(wd), heads, p, v)
    _same_device({"latent": latent, "kv_b_proj": kv_b_proj}, "latent")
    rows, width = latent.shape
    spec = up_proj_kv_spec(heads, width, p, v, _SPEC_DTYPES[ld.dtype], _chip(torch, latent.device)).encode()
    if out is not None and (not isinstance(out, (tuple, list)) or len(out) != 2):
        raise ValueError(f"out must be a pair (k_nope, v) of tensors, got {type(out).__name__}")
    given = out if out is not None else (None, None)
    inputs = {"latent": latent, "kv_b_proj": kv_b_proj}
    k_nope = _output(torch, "out[0] (k_nope)", given[0], (rows, heads, p), latent.dtype, latent.device, inputs)
    v_out = _output(torch, "out[1] (v)", given[1], (rows, heads, v), latent.dtype, latent.device,
                    {**inputs, "out[0] (k_nope)": k_nope})
    ld, wd = _describe(torch, "latent", latent), _describe(torch, "kv_b_proj", kv_b_proj)
    _launch(torch, latent.device, "mlaGpuUpProjKv", spec, ctypes.byref(ld), ctypes.byref(wd), k_nope.data_ptr(),
            v_out.data_ptr())
    return k_nope, v_out


def mha(q, k, v, cu_seqlens_q, cu_seqlens_k, *, softmax_scale, causal=False, out=None, lse=None):
    """Varlen multi-head attention with LSE on the GPU (`mla.mha`'s semantics; the first kernel, on CUDA
    cores, correct but not FlashAttention-fast): q [T, N, D], k [S, N, D], v [S, N, V] bfloat16, float16 or
    float32; cu_seqlens_q/k [B+1] integers (copied to the host and checked by the C rules). With `causal`
    query i of a request of q_len rows sees keys [0, k_len - q_len + i]. Returns (out [T, N, V],
    lse float32 [N, T]), written into `out`/`lse` when given; rows that see no key get out 0 and lse -inf."""
    torch = _torch()
    tables = [_int32_table(torch, n, t) for n, t in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k))]
    hosts, ptrs = [t[0] for t in tables], [t[1] for t in tables]
    names = ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k")
    checked = [_describe(torch, n, t, data=False) for n, t in zip(names, (q, k, v, *hosts))]
    scale = _float("softmax_scale", softmax_scale)
    _call("mlaGpuCheckMha", *[ctypes.byref(t) for t in checked], *ptrs, scale, 1 if causal else 0)
    _same_device({"q": q, "k": k, "v": v}, "q")
    tokens, heads, dim = q.shape
    spec = mha_spec(heads, dim, v.shape[2], _SPEC_DTYPES[checked[0].dtype], causal, scale,
                    _chip(torch, q.device)).encode()
    inputs = {"q": q, "k": k, "v": v}
    out = _output(torch, "out", out, (tokens, heads, v.shape[2]), q.dtype, q.device, inputs)
    lse = _output(torch, "lse", lse, (heads, tokens), torch.float32, q.device, {**inputs, "out": out})
    device_tables = [_on_device(t, h, q.device) for t, h in zip((cu_seqlens_q, cu_seqlens_k), hosts)]
    described = [_describe(torch, n, t) for n, t in zip(names, (q, k, v, *device_tables))]
    _launch(torch, q.device, "mlaGpuMha", spec, *[ctypes.byref(t) for t in described], *ptrs, out.data_ptr(),
            lse.data_ptr())
    return out, lse


def prefill(q, kv_c, k_pe, kv_b_proj, kv_cache, block_table, query_start_loc, seq_lens, *, softmax_scale,
            v_head_dim, workspace_rows=None, kv_format="auto", kv_scale=None, out=None):
    """`mla.prefill` on the GPU: the whole chunked-context prefill (new tokens' causal attention, then per
    context chunk gather -> up-projection -> attention -> LSE merge) on q's device and current stream, with
    the CPU path's keywords, semantics and chunking. Returns out [T, N, v_head_dim] in q's dtype.

    q [T, N, P+R], kv_c [T, L], k_pe [T, R] or [T, 1, R] and kv_b_proj [N*(P+V), L] bfloat16 or float16
    (one dtype), contiguous CUDA tensors; kv_cache [pages, page_size, row] on q's device, read only:
    kv_format "auto" takes any float cache (bfloat16, float16 or float32, converted as gathered), the fp8
    formats a uint8 cache as in `cache_write` (fp8_e4m3's kv_scale a number or a float32 CUDA tensor of one
    element, read by the gather kernel). block_table [B, max_pages], query_start_loc [B+1] and
    seq_lens [B] (context + new tokens) are integers, CUDA or CPU: they are copied to the host (a
    synchronisation for CUDA tensors) because the context chunks are planned there, and checked by the C
    rules before anything is enqueued. `workspace_rows` bounds the context rows up-projected at once
    (default: the CPU path's budget); the device workspace (up-projected K/V of max(T, chunk) rows plus the
    running states) is allocated once per call with torch's allocator. `out` is an optional preallocated
    output (a contiguous tensor of the result's shape and dtype on q's device).
    """
    torch = _torch()
    tables = [_int32_table(torch, n, v) for n, v in
              (("block_table", block_table), ("query_start_loc", query_start_loc), ("seq_lens", seq_lens))]
    hosts, ptrs = [t[0] for t in tables], [t[1] for t in tables]
    opts = _PrefillOptions()
    opts.softmaxScale = _float("softmax_scale", softmax_scale)
    opts.vHeadDim = _int("v_head_dim", v_head_dim)
    if workspace_rows is not None:
        opts.hasWorkspaceRows = 1
        opts.workspaceRows = _int("workspace_rows", workspace_rows)
    opts.cache = opts.keep = _cache_format(kv_format, kv_scale, data=False)  # `keep` holds what it points at
    names = ("q", "kv_c", "k_pe", "kv_b_proj", "kv_cache", "block_table", "query_start_loc", "seq_lens")
    checked = [_describe(torch, n, v, data=False) for n, v in zip(names, (q, kv_c, k_pe, kv_b_proj, kv_cache,
                                                                          *hosts))]
    _call("mlaGpuCheckPrefill", *[ctypes.byref(t) for t in checked], *ptrs, ctypes.byref(opts))
    _same_device(_with_kv_scale({"q": q, "kv_c": kv_c, "k_pe": k_pe, "kv_b_proj": kv_b_proj,
                                 "kv_cache": kv_cache}, kv_scale), "q")
    opts.cache = opts.keep = _cache_format(kv_format, kv_scale)

    tokens, heads = q.shape[0], q.shape[1]
    out = _output(torch, "out", out, (tokens, heads, opts.vHeadDim), q.dtype, q.device,
                  {"q": q, "kv_c": kv_c, "k_pe": k_pe, "kv_b_proj": kv_b_proj, "kv_cache": kv_cache})
    device_tables = [_on_device(v, h, q.device) for v, h in zip((block_table, query_start_loc, seq_lens), hosts)]
    described = [_describe(torch, n, v) for n, v in zip(names, (q, kv_c, k_pe, kv_b_proj, kv_cache,
                                                                 *device_tables))]
    refs = [ctypes.byref(t) for t in described]
    device = q.device.index if q.device.index is not None else torch.cuda.current_device()
    chip = _chip(torch, q.device).encode()
    with torch.cuda.device(device):
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        size = ctypes.c_size_t(0)

        def call(workspace):
            _call("mlaGpuPrefill", chip, device, *refs, *ptrs, ctypes.byref(opts), out.data_ptr(), workspace,
                  ctypes.byref(size), stream)

        call(0)  # validates, plans the chunks and sizes the workspace; enqueues nothing
        workspace = torch.empty(max(size.value, 1), dtype=torch.uint8, device=q.device)
        call(workspace.data_ptr())
    return out


def attention(q, kv_c, k_pe, kv_b_proj, kv_cache, block_table, query_start_loc, seq_lens, *, softmax_scale,
              v_head_dim, decode_threshold=1, workspace_rows=None, kv_format="auto", kv_scale=None, out=None):
    """`mla.attention` on the GPU: a mixed decode/prefill batch split as the CPU path splits it (the
    mla-select-algorithm rule for a batch known at run time): with decode_threshold=1 the leading
    requests with one new token each run absorb_q -> split-KV decode over the latent cache ->
    up_proj_out, and the other requests the chunked prefill of `prefill`; decode_threshold=0 runs every
    request as a prefill. Returns out [T, N, v_head_dim] in q's dtype, on q's device and current stream.

    The tensors as for `prefill` (bfloat16 or float16 activations, contiguous CUDA tensors), and the
    cache must already hold every request's new tokens. The decode path reads caches of q's dtype only
    (kv_format "auto"): a batch with decode requests and an fp8 cache raises ValueError. block_table,
    query_start_loc and seq_lens are copied to the host (a synchronisation for CUDA tensors): the batch
    is split and both paths planned there. kv_b_proj's K and V halves for the decode path (w_uk_t
    [N, P, L], w_uv [N, L, V], as `split_kv_b_proj` makes them) are sliced out with torch on the
    current stream; the device workspace is allocated once per call with torch's allocator.
    """
    torch = _torch()
    tables = [_int32_table(torch, n, v) for n, v in
              (("block_table", block_table), ("query_start_loc", query_start_loc), ("seq_lens", seq_lens))]
    hosts, ptrs = [t[0] for t in tables], [t[1] for t in tables]
    opts = _AttentionOptions()
    opts.prefill.softmaxScale = _float("softmax_scale", softmax_scale)
    opts.prefill.vHeadDim = _int("v_head_dim", v_head_dim)
    if workspace_rows is not None:
        opts.prefill.hasWorkspaceRows = 1
        opts.prefill.workspaceRows = _int("workspace_rows", workspace_rows)
    opts.prefill.cache = _cache_format(kv_format, kv_scale)
    opts.decodeThreshold = _int("decode_threshold", decode_threshold)
    names = ("q", "kv_c", "k_pe", "kv_b_proj", "kv_cache", "block_table", "query_start_loc", "seq_lens")
    inputs = (q, kv_c, k_pe, kv_b_proj, kv_cache)
    checked = [_describe(torch, n, v, data=False) for n, v in zip(names, (*inputs, *hosts))]
    # The prefill's rules first: they vouch for kv_b_proj's shape before it is split.
    _call("mlaGpuCheckPrefill", *[ctypes.byref(t) for t in checked], *ptrs, ctypes.byref(opts.prefill))
    _same_device({"q": q, "kv_c": kv_c, "k_pe": k_pe, "kv_b_proj": kv_b_proj, "kv_cache": kv_cache}, "q")

    tokens, heads = q.shape[0], q.shape[1]
    value = opts.prefill.vHeadDim
    nope = q.shape[2] - k_pe.shape[-1]
    out = _output(torch, "out", out, (tokens, heads, value), q.dtype, q.device,
                  {"q": q, "kv_c": kv_c, "k_pe": k_pe, "kv_b_proj": kv_b_proj, "kv_cache": kv_cache})
    device_tables = [_on_device(v, h, q.device) for v, h in zip((block_table, query_start_loc, seq_lens), hosts)]
    device = q.device.index if q.device.index is not None else torch.cuda.current_device()
    chip = _chip(torch, q.device).encode()
    with torch.cuda.device(device):
        heads_w = kv_b_proj.view(heads, nope + value, kv_b_proj.shape[1])
        w_uk_t = heads_w[:, :nope, :].contiguous()
        w_uv = heads_w[:, nope:, :].transpose(1, 2).contiguous()
        described = [_describe(torch, n, v) for n, v in zip(names[:4], inputs[:4])]
        described += [_describe(torch, "w_uk_t", w_uk_t), _describe(torch, "w_uv", w_uv)]
        described += [_describe(torch, n, v) for n, v in zip(names[4:], (kv_cache, *device_tables))]
        refs = [ctypes.byref(t) for t in described]
        _call("mlaGpuCheckAttention", *refs, *ptrs, ctypes.byref(opts))
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        size = ctypes.c_size_t(0)

        def call(workspace):
            _call("mlaGpuAttention", chip, device, *refs, *ptrs, ctypes.byref(opts), out.data_ptr(), workspace,
                  ctypes.byref(size), stream)

        call(0)  # validates, splits and plans the batch and sizes the workspace; enqueues nothing
        workspace = torch.empty(max(size.value, 1), dtype=torch.uint8, device=q.device)
        call(workspace.data_ptr())
    return out
