"""DeepSeek Multi-head Latent Attention, compiled by the mla MLIR compiler and run on the CPU.

Every call builds mla IR for its arrays' shapes, dtypes and options, JIT-compiles it (kept in memory, so
later calls with the same shapes and options reuse it; see `runtime_stats`) and runs it. Shapes and
semantics follow FlashMLA's `flash_mla_with_kvcache` and vLLM's MLA backends:

  decode(q, kv_cache, block_table, seq_lens, ...) -> (out, lse)
  cache_write(kv_c, k_pe, kv_cache, slot_mapping, ...)           in place
  split_kv_b_proj(kv_b_proj, num_heads, qk_nope_head_dim, v_head_dim) -> (w_uk_t, w_uv)
  absorb_q(q, w_uk_t) -> q_absorbed
  up_proj_out(o, w_uv) -> out
  gather_cache(kv_cache, block_table, starts, cu_rows, workspace, latent_dim=...)  in place
  up_proj_kv(latent, kv_b_proj, num_heads, qk_nope_head_dim, v_head_dim) -> (k_nope, v)
  merge_states(out_a, lse_a, out_b, lse_b) -> (out, lse)
  mha(q, k, v, cu_seqlens_q, cu_seqlens_k, softmax_scale=..., causal=...) -> (out, lse)
  prefill(q, kv_c, k_pe, kv_b_proj, kv_cache, block_table, query_start_loc, seq_lens, ...) -> out
  attention(q, kv_c, k_pe, kv_b_proj, kv_cache, block_table, query_start_loc, seq_lens, ...) -> out

Float arrays are float32 or float16 (results take the activations' dtype; log-sum-exp values are always
float32); index arrays may be any integer dtype holding int32 values. `kv_format` is "auto" (a float
cache of the activations' dtype), "fp8_e4m3" (uint8 e4m3 codes with a per-tensor `kv_scale`),
"fp8_e4m3_token" (D + 8 bytes per row) or "fp8_ds_mla" (L + 4*L/128 + 2*R bytes per row).

Every function that returns arrays (but decode, for now) also writes them into preallocated ones
(`out=`, and `lse=` where it returns a log-sum-exp; a pair for the two-result projections), which must
have the result's shape and dtype, be C-contiguous and writeable: engines own their buffers.
`mla.compat` has FlashMLA's and vLLM's entry points with their names and conventions.

Invalid arguments raise ValueError before anything runs (a cache is never partly written); compiler
failures raise RuntimeError.

`decode`, `absorb_q`, `up_proj_out`, `gather_cache`, `up_proj_kv`, `merge_states`, `mha`, `prefill` and
`attention` also
run on the GPU when one of their arrays is a PyTorch CUDA tensor, and `cache_write` when kv_c or kv_cache is (see
`mla.gpu`): that path needs neither numpy nor the
MLIR-built CPU library, so a GPU-only installation (scripts/build-gpu-carry.sh) imports this package
without them and raises ImportError only when a CPU function is called.
"""

import ctypes
import functools
import numbers
import operator

from ._version import __version__

try:
    import numpy as np

    from . import _capi
except ImportError as error:
    _CPU_UNAVAILABLE = error
else:
    _CPU_UNAVAILABLE = None

__all__ = [
    "__version__",
    "absorb_q",
    "attention",
    "cache_write",
    "clear_kernel_cache",
    "decode",
    "gather_cache",
    "merge_states",
    "mha",
    "plan_decode",
    "prefill",
    "runtime_stats",
    "split_kv_b_proj",
    "up_proj_kv",
    "up_proj_out",
]

if _CPU_UNAVAILABLE is None:
    _TO_CAPI = {
        np.dtype(np.float32): _capi.DTYPE_FLOAT32,
        np.dtype(np.float16): _capi.DTYPE_FLOAT16,
        np.dtype(np.int32): _capi.DTYPE_INT32,
        np.dtype(np.uint8): _capi.DTYPE_UINT8,
    }
    _FROM_CAPI = {code: dtype for dtype, code in _TO_CAPI.items()}
    _INT32 = np.iinfo(np.int32)
    _INT64 = np.iinfo(np.int64)
_ERROR_BYTES = 1 << 16

# The plan classes whose decode(..., plan=) calls skip straight to plan._run: mla.gpu adds its uniform
# DecodePlan when it is imported (which making such a plan requires).
_DEVICE_PLAN_TYPES = set()


def _cpu(fn):
    """Marks a function of the CPU path, which needs numpy and libMLACAPI.so."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if _CPU_UNAVAILABLE is not None:
            raise ImportError(f"mla's CPU runtime (numpy and libMLACAPI.so) is unavailable here: "
                              f"{_CPU_UNAVAILABLE}")
        return fn(*args, **kwargs)
    return wrapper


def _is_torch_cuda(value):
    """Whether `value` is a torch CUDA tensor, without importing torch."""
    return type(value).__module__.startswith("torch") and getattr(value, "is_cuda", False) is True


def _array(name, value):
    """A C-contiguous array of a dtype the C API takes (int8 is viewed as uint8: fp8 bytes)."""
    a = np.asarray(value)
    if a.dtype == np.int8:
        a = a.view(np.uint8)
    if a.dtype not in _TO_CAPI:
        raise ValueError(f"{name} has dtype {a.dtype}; mla takes float32 or float16 values, int32 tables "
                         "and uint8 fp8 caches")
    if a.ndim > _capi.MAX_RANK:
        raise ValueError(f"{name} has rank {a.ndim}; at most {_capi.MAX_RANK} is supported")
    return np.ascontiguousarray(a)


def _indices(name, value):
    """An int32 array of the integers in `value` (e.g. int64 tables from numpy defaults)."""
    a = np.asarray(value)
    if not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"{name} must hold integers, got dtype {a.dtype}")
    if a.dtype != np.int32 and a.size and (a.min() < _INT32.min or a.max() > _INT32.max):
        bad = a.min() if a.min() < _INT32.min else a.max()
        raise ValueError(f"{name} holds {bad}, which does not fit in int32")
    return _array(name, a.astype(np.int32, copy=False))


def _cache_to_write(value, name="kv_cache"):
    """An array written in place (cache_write's kv_cache, gather_cache's workspace), so it cannot be a
    converted copy."""
    if not isinstance(value, np.ndarray):
        raise ValueError(f"{name} must be a numpy array to be written in place, got {type(value).__name__}")
    if not value.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous to be written in place")
    if not value.flags.writeable:
        raise ValueError(f"{name} is read-only")
    return _array(name, value)


def _int(name, value):
    try:
        v = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None
    if not _INT64.min <= v <= _INT64.max:
        raise ValueError(f"{name} = {v} does not fit in int64")
    return v


def _float(name, value):
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None


def _tensor_struct(a):
    t = _capi.Tensor()
    t.data = a.ctypes.data
    t.dtype = _TO_CAPI[a.dtype]
    t.rank = a.ndim
    for i, d in enumerate(a.shape):
        t.shape[i] = d
    return t


def _tensor(a):
    return ctypes.byref(_tensor_struct(a))


def _c_string(name, value):
    """`value` as the bytes of a C string. C stops at the first NUL, so a string holding one would run as
    its prefix ("auto\\x00junk" as "auto"); that is the one check of a string option C cannot make."""
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, got {value!r}")
    nul = value.find("\x00")
    if nul >= 0:
        raise ValueError(f"{name} holds a NUL byte at offset {nul}; options are plain text")
    return value.encode()


def _cache_format(kv_format, kv_scale):
    """The C API's cache format. fp8_e4m3's `kv_scale` is a number, or an array of one element (numpy, or
    a torch tensor such as vLLM's k_scale, copied to the host) whose value the C rules check and read."""
    fmt = _capi.CacheFormat()
    fmt.kvFormat = _c_string("kv_format", kv_format)
    if hasattr(kv_scale, "shape") and not isinstance(kv_scale, numbers.Real):
        if type(kv_scale).__module__.startswith("torch"):
            kv_scale = kv_scale.detach().cpu().numpy()
        fmt.array = _array("kv_scale", kv_scale)  # kept alive with the format
        fmt.kvScaleTensor = ctypes.pointer(_tensor_struct(fmt.array))
    elif kv_scale is not None:
        fmt.hasKvScale = 1
        fmt.kvScale = _float("kv_scale", kv_scale)
    return fmt


def _check(code, err):
    if code == _capi.SUCCESS:
        return
    message = err.value.decode(errors="replace")
    if code == _capi.ERROR_INVALID_ARGUMENT:
        raise ValueError(message)
    raise RuntimeError(message)


def _given_output(name, given, shape, dtype):
    """Checks a caller's preallocated output against the shape and dtype the call writes."""
    if not isinstance(given, np.ndarray):
        raise ValueError(f"{name} must be a numpy array to be written in place, got {type(given).__name__}")
    if given.shape != shape:
        raise ValueError(f"{name} has shape {given.shape}; this call writes {shape}")
    if given.dtype != dtype:
        raise ValueError(f"{name} has dtype {given.dtype}; this call writes {dtype}")
    if not given.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous to be written in place")
    if not given.flags.writeable:
        raise ValueError(f"{name} is read-only")
    return given


def _pair(name, value, names):
    """`_run`'s `given` for an entry point whose `out` is a pair of arrays (or None)."""
    if value is None:
        return []
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise ValueError(f"{name} must be a pair ({names[0]}, {names[1]}) of arrays, got {type(value).__name__}")
    return [(f"{name}[0] ({names[0]})", value[0]), (f"{name}[1] ({names[1]})", value[1])]


def _run(fn, args, num_outputs, given=(), inputs=()):
    """Calls `fn(*args, *outputs, err, len)`: first with empty outputs, which validates the arguments and
    reports the outputs' shapes, then with numpy arrays of those shapes. Returns the arrays.

    `given` holds (name, array or None) per output: a caller's array is checked and written instead of a
    new one. The compiled code assumes outputs and `inputs` (the argument arrays) do not overlap, so an
    output that shares memory with an input is computed into a new array and copied over."""
    outputs = [_capi.Tensor() for _ in range(num_outputs)]
    err = ctypes.create_string_buffer(_ERROR_BYTES)
    out_refs = [ctypes.byref(o) for o in outputs]
    _check(fn(*args, *out_refs, err, len(err)), err)
    if not num_outputs:
        return []
    given = list(given) + [(None, None)] * (num_outputs - len(given))
    supplied = [(n, g) for n, g in given if g is not None]
    for i, (name, g) in enumerate(supplied):
        for other, h in supplied[i + 1:]:
            if np.may_share_memory(g, h):
                raise ValueError(f"{name} and {other} overlap; each output needs its own memory")
    results = []
    for o, (name, g) in zip(outputs, given):
        shape, dtype = tuple(o.shape[: o.rank]), np.dtype(_FROM_CAPI[o.dtype])
        results.append(_given_output(name, g, shape, dtype) if g is not None else np.empty(shape, dtype))
    written = [np.empty_like(r) if any(np.may_share_memory(r, i) for i in inputs) else r for r in results]
    for o, a in zip(outputs, written):
        o.data = a.ctypes.data
    _check(fn(*args, *out_refs, err, len(err)), err)
    for r, w in zip(results, written):
        if w is not r:
            np.copyto(r, w)
    return results


def decode(q, kv_cache, block_table, seq_lens, *, head_dim_v, softmax_scale, causal=False, num_splits=None,
           kv_format="auto", kv_scale=None, plan=None, out=None, lse=None, query_start_loc=None):
    """Absorbed MLA decode over a paged latent cache (FlashMLA's flash_mla_with_kvcache).

    numpy arrays run on the CPU; when q is a torch CUDA tensor, every array must be a torch tensor and the
    call runs `mla.gpu.decode` on q's device (bfloat16 or float16 q; kv_format "auto", or on sm_90a an fp8
    format, fp8_e4m3's kv_scale then a number or a float32 CUDA tensor of one element).

    q [b, s_q, h_q, d] with d = L + R (RoPE part last); kv_cache [pages, page_size, row];
    block_table [b, max_pages]; seq_lens [b] (counting the s_q new tokens). head_dim_v is the latent
    width L. With `causal`, query row i of request b sees positions [0, seq_lens[b] - s_q + i].
    `num_splits` forces that many split-KV pieces per request (default: the compiler's choice).
    Returns out [b, s_q, h_q, head_dim_v] (q's dtype) and lse float32 [b, h_q, s_q] (natural log;
    -inf where a row sees nothing), written into `out` and `lse` when given. `plan` is what
    `plan_decode` returned for this step's tables: on the GPU the call then enqueues without a host copy or
    synchronisation (see `mla.gpu.decode`); on the CPU it fixes num_splits. Any CUDA tensor among the
    arrays sends the call to the GPU path, which then requires q, kv_cache and block_table on one device.

    Variable-length queries (speculative decoding with mixed draft lengths): with `query_start_loc`
    int32 [b+1] (from 0, non-decreasing, ending at T), q is [T, h_q, d] packed by request, request b owning
    tokens query_start_loc[b]..query_start_loc[b+1]-1 (q_b of them, at most 8 and at most seq_lens[b]);
    causal token i of request b sees positions [0, seq_lens[b] - q_b + i]. Returns out [T, h_q, head_dim_v]
    and lse float32 [T, h_q] (token-major, FlashMLA's packed layout).
    """
    # A planned GPU call has a few microseconds of host time to spend: a device plan (its type is registered
    # by mla.gpu) runs the call itself, checking every tensor against the plan (a non-tensor gets its clear
    # error there). Anything else (a plan with options it fixes, or no device plan at all) takes gpu.decode,
    # which explains what is wrong.
    if type(plan) in _DEVICE_PLAN_TYPES and num_splits is None and kv_format == "auto" and kv_scale is None:
        return plan._run(q, kv_cache, block_table, seq_lens, head_dim_v, softmax_scale, causal, out, lse,
                         query_start_loc=query_start_loc)
    if _is_torch_cuda(q) or any(_is_torch_cuda(v) for v in (kv_cache, block_table, seq_lens)):
        from . import gpu

        return gpu.decode(q, kv_cache, block_table, seq_lens, head_dim_v=head_dim_v,
                          softmax_scale=softmax_scale, causal=causal, num_splits=num_splits,
                          kv_format=kv_format, kv_scale=kv_scale, plan=plan, out=out, lse=lse,
                          query_start_loc=query_start_loc)
    if plan is not None:
        if not isinstance(plan, HostDecodePlan):
            raise ValueError(f"plan must come from mla.plan_decode on numpy arrays, got {type(plan).__name__}")
        if num_splits is not None:
            raise ValueError("with a plan, num_splits is the plan's: leave it at None")
        plan._check_call(q, block_table, seq_lens, head_dim_v, causal, query_start_loc)
        num_splits = plan.num_splits
    result = _decode_cpu(q, kv_cache, block_table, seq_lens, head_dim_v, softmax_scale, causal, num_splits,
                         kv_format, kv_scale, query_start_loc)
    return tuple(_into(name, given, value) for name, given, value in zip(("out", "lse"), (out, lse), result))


def _into(name, given, value):
    """`value`, or `value` copied into the preallocated array `given`."""
    if given is None:
        return value
    if not isinstance(given, np.ndarray) or given.shape != value.shape or given.dtype != value.dtype \
            or not given.flags.writeable:
        raise ValueError(f"{name} must be a writeable {value.dtype} numpy array of shape {list(value.shape)}, "
                         f"got {getattr(given, 'dtype', type(given).__name__)} "
                         f"{list(getattr(given, 'shape', ()))}")
    np.copyto(given, value)
    return given


class HostDecodePlan:
    """The CPU counterpart of `mla.gpu.DecodePlan`, so that plan/run call sites also run on numpy arrays: it
    records the step's shapes and the split count (`num_splits`: the one asked for, 1 for the
    batch-invariant policy, else None for the compiler's choice), and `decode(..., plan=plan)` checks the
    call against them."""

    def __init__(self, shapes, head_dim_v, causal, num_splits):
        self._shapes, self._head_dim_v, self._causal = shapes, head_dim_v, bool(causal)
        self.num_splits = num_splits

    def _check_call(self, q, block_table, seq_lens, head_dim_v, causal, query_start_loc=None):
        shapes = _plan_shapes(q, block_table, seq_lens, query_start_loc)
        if shapes != self._shapes:
            raise ValueError(f"q, block_table, seq_lens and query_start_loc have shapes "
                             f"{[list(s) if s is not None else None for s in shapes]}; the plan was made for "
                             f"{[list(s) if s is not None else None for s in self._shapes]}")
        if head_dim_v != self._head_dim_v or bool(causal) != self._causal:
            raise ValueError(f"head_dim_v and causal must be the plan's ({self._head_dim_v}, {self._causal})")

    def check(self):
        """Nothing to report: the CPU decode checks every value when it runs."""


def _plan_shapes(q, block_table, seq_lens, query_start_loc):
    """The shapes a decode plan is made for (None for a uniform call's query_start_loc)."""
    return (np.shape(q), np.shape(block_table), np.shape(seq_lens),
            None if query_start_loc is None else np.shape(query_start_loc))


def plan_decode(q, kv_cache, block_table, seq_lens, *, head_dim_v, causal=False, num_splits=None,
                split_policy="grid", max_batch=None, max_seq_len=None, plan=None, kv_format="auto",
                query_start_loc=None, max_query_len=None):
    """Plans the decodes of one batch step (FlashMLA's get_mla_metadata, FlashInfer's plan) and returns
    the plan for `decode(..., plan=plan)`. On torch CUDA tensors this is `mla.gpu.plan_decode` (split bounds
    computed on the GPU from device seq_lens, capturable in a CUDA graph); on numpy arrays it returns a
    `HostDecodePlan`, whose decodes check every value on the host as a plain decode does. `kv_format` is
    the cache's (it picks the GPU kernel; a CPU plan does not depend on it). A varlen batch passes its
    `query_start_loc` (see `decode`); on the GPU `max_query_len` (default 8) is the largest per-request
    query length the plan's kernel takes."""
    if any(_is_torch_cuda(v) for v in (q, kv_cache, block_table, seq_lens)):
        from . import gpu

        return gpu.plan_decode(q, kv_cache, block_table, seq_lens, head_dim_v=head_dim_v, causal=causal,
                               num_splits=num_splits, split_policy=split_policy, max_batch=max_batch,
                               max_seq_len=max_seq_len, plan=plan, kv_format=kv_format,
                               query_start_loc=query_start_loc, max_query_len=max_query_len)
    return _plan_decode_cpu(q, block_table, seq_lens, head_dim_v, causal, num_splits, split_policy,
                            query_start_loc)


@_cpu
def _plan_decode_cpu(q, block_table, seq_lens, head_dim_v, causal, num_splits, split_policy, query_start_loc):
    if split_policy not in ("grid", "batch-invariant"):
        raise ValueError("a decode plan cuts every request into one count of pieces: split_policy must be "
                         f"'grid' or 'batch-invariant', got {split_policy!r}")
    if num_splits is not None:
        num_splits = _int("num_splits", num_splits)
    elif split_policy == "batch-invariant":
        num_splits = 1
    return HostDecodePlan(_plan_shapes(q, block_table, seq_lens, query_start_loc),
                          _int("head_dim_v", head_dim_v), causal, num_splits)


@_cpu
def _decode_cpu(q, kv_cache, block_table, seq_lens, head_dim_v, softmax_scale, causal, num_splits,
                kv_format, kv_scale, query_start_loc=None):
    arrays = [_array("q", q), _array("kv_cache", kv_cache), _indices("block_table", block_table),
              _indices("seq_lens", seq_lens)]
    if query_start_loc is not None:
        arrays.append(_indices("query_start_loc", query_start_loc))
    opts = _capi.DecodeOptions()
    opts.headDimV = _int("head_dim_v", head_dim_v)
    opts.softmaxScale = _float("softmax_scale", softmax_scale)
    opts.causal = 1 if causal else 0
    if num_splits is not None:
        opts.hasNumSplits = 1
        opts.numSplits = _int("num_splits", num_splits)
    opts.cache = opts.keep = _cache_format(kv_format, kv_scale)  # `keep` holds what it points at
    entry = _capi.mlaDecode if query_start_loc is None else _capi.mlaDecodeVarlen
    out, lse = _run(entry, [_tensor(a) for a in arrays] + [ctypes.byref(opts)], 2)
    return out, lse


def cache_write(kv_c, k_pe, kv_cache, slot_mapping, *, kv_format="auto", kv_scale=None):
    """Store concat(kv_c[t], k_pe[t]) at slot slot_mapping[t] = page * page_size + offset of kv_cache,
    in place, quantised as kv_format says; negative slots are padding tokens and write nothing.

    kv_c [T, L], k_pe [T, R] or [T, 1, R], kv_cache [pages, page_size, row] (C-contiguous, writeable),
    slot_mapping [T]. Returns None. When kv_c or kv_cache is a torch CUDA tensor, every array must be a
    torch tensor and the call runs `mla.gpu.cache_write` on their device (same bytes).
    """
    if _is_torch_cuda(kv_c) or _is_torch_cuda(kv_cache):
        from . import gpu

        return gpu.cache_write(kv_c, k_pe, kv_cache, slot_mapping, kv_format=kv_format, kv_scale=kv_scale)
    return _cache_write_cpu(kv_c, k_pe, kv_cache, slot_mapping, kv_format, kv_scale)


@_cpu
def _cache_write_cpu(kv_c, k_pe, kv_cache, slot_mapping, kv_format, kv_scale):
    cache = _cache_to_write(kv_cache)
    arrays = [_array("kv_c", kv_c), _array("k_pe", k_pe), cache, _indices("slot_mapping", slot_mapping)]
    fmt = _cache_format(kv_format, kv_scale)
    _run(_capi.mlaCacheWrite, [_tensor(a) for a in arrays] + [ctypes.byref(fmt)], 0)


@_cpu
def split_kv_b_proj(kv_b_proj, num_heads, qk_nope_head_dim, v_head_dim, *, out=None):
    """kv_b_proj [N*(P+V), L] (out x in) -> (w_uk_t [N, P, L], w_uv [N, L, V]). `out`, a pair of
    preallocated arrays (w_uk_t, w_uv), receives the results instead of new arrays."""
    w = _array("kv_b_proj", kv_b_proj)
    args = [_tensor(w), _int("num_heads", num_heads), _int("qk_nope_head_dim", qk_nope_head_dim),
            _int("v_head_dim", v_head_dim)]
    w_uk_t, w_uv = _run(_capi.mlaSplitKvBProj, args, 2, _pair("out", out, ("w_uk_t", "w_uv")), [w])
    return w_uk_t, w_uv


def absorb_q(q, w_uk_t, *, out=None):
    """q [T, N, P+R] -> [T, N, L+R]: the nope part multiplied by W_UK_T per head, the RoPE part kept.
    `out`, a preallocated [T, N, L+R] array of q's dtype, receives the result and is returned.

    When q is a torch CUDA tensor, w_uk_t must be one too and the call runs `mla.gpu.absorb_q`.
    """
    if _is_torch_cuda(q) or _is_torch_cuda(w_uk_t):
        from . import gpu

        return gpu.absorb_q(q, w_uk_t, out=out)
    return _absorb_q_cpu(q, w_uk_t, out)


@_cpu
def _absorb_q_cpu(q, w_uk_t, out):
    arrays = [_array("q", q), _array("w_uk_t", w_uk_t)]
    (result,) = _run(_capi.mlaAbsorbQ, [_tensor(a) for a in arrays], 1, [("out", out)], arrays)
    return result


def up_proj_out(o, w_uv, *, out=None):
    """Latent attention output o [T, N, L] -> [T, N*V] through W_UV [N, L, V]. `out`, a preallocated
    [T, N*V] array of o's dtype, receives the result and is returned.

    When o is a torch CUDA tensor, w_uv must be one too and the call runs `mla.gpu.up_proj_out`.
    """
    if _is_torch_cuda(o) or _is_torch_cuda(w_uv):
        from . import gpu

        return gpu.up_proj_out(o, w_uv, out=out)
    return _up_proj_out_cpu(o, w_uv, out)


@_cpu
def _up_proj_out_cpu(o, w_uv, out):
    arrays = [_array("o", o), _array("w_uv", w_uv)]
    (result,) = _run(_capi.mlaUpProjOut, [_tensor(a) for a in arrays], 1, [("out", out)], arrays)
    return result


def merge_states(out_a, lse_a, out_b, lse_b, *, out=None, lse=None):
    """Merge two attention states over disjoint keys by their LSE (vLLM's merge_attn_states).

    out_* [T, N, H], lse_* float32 [N, T]; an LSE that is not finite (+inf, -inf, NaN) means "no
    contribution", and a side that does not contribute is never read into the result.
    Returns (out [T, N, H], lse [N, T]). `out` and `lse`, preallocated arrays of those shapes (out of
    out_a's dtype, lse float32), receive the results; `out=out_a, lse=lse_a` merges in place. When any
    array is a torch CUDA tensor, every array must be one and the call runs `mla.gpu.merge_states`.
    """
    if any(_is_torch_cuda(a) for a in (out_a, lse_a, out_b, lse_b, out, lse)):
        from . import gpu

        return gpu.merge_states(out_a, lse_a, out_b, lse_b, out=out, lse=lse)
    return _merge_states_cpu(out_a, lse_a, out_b, lse_b, out, lse)


@_cpu
def _merge_states_cpu(out_a, lse_a, out_b, lse_b, out, lse):
    arrays = [_array("out_a", out_a), _array("lse_a", lse_a), _array("out_b", out_b), _array("lse_b", lse_b)]
    merged, merged_lse = _run(_capi.mlaMergeStates, [_tensor(a) for a in arrays], 2,
                              [("out", out), ("lse", lse)], arrays)
    return merged, merged_lse


def gather_cache(kv_cache, block_table, starts, cu_rows, workspace, *, latent_dim, kv_format="auto",
                 kv_scale=None):
    """Gather paged cache rows into a contiguous workspace, dequantising fp8 rows (chunked prefill).

    Workspace row r in [cu_rows[b], cu_rows[b+1]) receives cache position starts[b] + r - cu_rows[b] of
    request b (found through block_table [B, max_pages]); starts [B], cu_rows [B+1] (non-decreasing);
    workspace [W, L+R] float (C-contiguous, writeable), written in place; rows outside
    [cu_rows[0], cu_rows[B]) keep their values. kv_format as in `cache_write` ("auto": the cache holds
    the workspace's dtype); `latent_dim` is L. Returns workspace. When any array is a torch CUDA tensor,
    every array must be a torch tensor and the call runs `mla.gpu.gather_cache`.
    """
    if any(_is_torch_cuda(a) for a in (kv_cache, block_table, starts, cu_rows, workspace)):
        from . import gpu

        return gpu.gather_cache(kv_cache, block_table, starts, cu_rows, workspace, latent_dim=latent_dim,
                                kv_format=kv_format, kv_scale=kv_scale)
    return _gather_cache_cpu(kv_cache, block_table, starts, cu_rows, workspace, latent_dim, kv_format,
                             kv_scale)


@_cpu
def _gather_cache_cpu(kv_cache, block_table, starts, cu_rows, workspace, latent_dim, kv_format, kv_scale):
    ws = _cache_to_write(workspace, "workspace")
    arrays = [_array("kv_cache", kv_cache), _indices("block_table", block_table), _indices("starts", starts),
              _indices("cu_rows", cu_rows), ws]
    fmt = _cache_format(kv_format, kv_scale)
    _run(_capi.mlaGatherCache,
         [_tensor(a) for a in arrays] + [_int("latent_dim", latent_dim), ctypes.byref(fmt)], 0)
    return workspace


def up_proj_kv(latent, kv_b_proj, num_heads, qk_nope_head_dim, v_head_dim, *, out=None):
    """Up-project latent rows: latent [S, L] x kv_b_proj [N*(P+V), L]^T viewed as [S, N, P+V] and split
    into (k_nope [S, N, P], v [S, N, V]). `out`, a pair of preallocated arrays (k_nope, v) of latent's
    dtype, receives them. When latent or kv_b_proj is a torch CUDA tensor, both must be and the call
    runs `mla.gpu.up_proj_kv` (bfloat16/float16 tensor cores)."""
    if _is_torch_cuda(latent) or _is_torch_cuda(kv_b_proj):
        from . import gpu

        return gpu.up_proj_kv(latent, kv_b_proj, num_heads, qk_nope_head_dim, v_head_dim, out=out)
    return _up_proj_kv_cpu(latent, kv_b_proj, num_heads, qk_nope_head_dim, v_head_dim, out)


@_cpu
def _up_proj_kv_cpu(latent, kv_b_proj, num_heads, qk_nope_head_dim, v_head_dim, out):
    arrays = [_array("latent", latent), _array("kv_b_proj", kv_b_proj)]
    args = [_tensor(a) for a in arrays] + [_int("num_heads", num_heads),
                                           _int("qk_nope_head_dim", qk_nope_head_dim),
                                           _int("v_head_dim", v_head_dim)]
    k_nope, v = _run(_capi.mlaUpProjKv, args, 2, _pair("out", out, ("k_nope", "v")), arrays)
    return k_nope, v


def mha(q, k, v, cu_seqlens_q, cu_seqlens_k, *, softmax_scale, causal=False, out=None, lse=None):
    """Variable-length multi-head attention with LSE (the prefill kernel of primer section 7).

    q [T, N, D], k [S, N, D], v [S, N, V]; request b owns q rows cu_seqlens_q[b]:cu_seqlens_q[b+1] and
    keys cu_seqlens_k[b]:cu_seqlens_k[b+1] (both [B+1], from 0, non-decreasing). With `causal` query i of
    q_len sees keys [0, k_len - q_len + i]. Returns (out [T, N, V], lse float32 [N, T]); rows that see
    no key get out 0 and lse -inf. `out` and `lse`, preallocated arrays of those shapes (out of q's
    dtype, lse float32), receive the results. When any array is a torch CUDA tensor the call runs
    `mla.gpu.mha` (the first GPU kernel, on CUDA cores).
    """
    if any(_is_torch_cuda(a) for a in (q, k, v, cu_seqlens_q, cu_seqlens_k)):
        from . import gpu

        return gpu.mha(q, k, v, cu_seqlens_q, cu_seqlens_k, softmax_scale=softmax_scale, causal=causal,
                       out=out, lse=lse)
    return _mha_cpu(q, k, v, cu_seqlens_q, cu_seqlens_k, softmax_scale, causal, out, lse)


@_cpu
def _mha_cpu(q, k, v, cu_seqlens_q, cu_seqlens_k, softmax_scale, causal, out, lse):
    arrays = [_array("q", q), _array("k", k), _array("v", v), _indices("cu_seqlens_q", cu_seqlens_q),
              _indices("cu_seqlens_k", cu_seqlens_k)]
    args = [_tensor(a) for a in arrays] + [_float("softmax_scale", softmax_scale), 1 if causal else 0]
    result, result_lse = _run(_capi.mlaMha, args, 2, [("out", out), ("lse", lse)], arrays)
    return result, result_lse


def prefill(q, kv_c, k_pe, kv_b_proj, kv_cache, block_table, query_start_loc, seq_lens, *, softmax_scale,
            v_head_dim, workspace_rows=None, kv_format="auto", kv_scale=None, out=None):
    """Chunked-context MLA prefill: new tokens attend causally to each other and to their request's
    cached context, whose latent rows are up-projected with kv_b_proj `workspace_rows` at a time.

    q [T, N, P+R], kv_c [T, L] and k_pe [T, R] or [T, 1, R] (the new tokens), kv_b_proj [N*(P+V), L],
    kv_cache, block_table [B, max_pages], query_start_loc [B+1], seq_lens [B] (context + new tokens).
    Returns out [T, N, v_head_dim] in q's dtype (written into `out` when that preallocated array is
    given). When q is a torch CUDA tensor the call runs `mla.gpu.prefill` on its device (bfloat16 or
    float16; the same chunks).
    """
    if any(_is_torch_cuda(a) for a in (q, kv_c, k_pe, kv_b_proj, kv_cache)):
        from . import gpu

        return gpu.prefill(q, kv_c, k_pe, kv_b_proj, kv_cache, block_table, query_start_loc, seq_lens,
                           softmax_scale=softmax_scale, v_head_dim=v_head_dim, workspace_rows=workspace_rows,
                           kv_format=kv_format, kv_scale=kv_scale, out=out)
    return _prefill_cpu(q, kv_c, k_pe, kv_b_proj, kv_cache, block_table, query_start_loc, seq_lens,
                        softmax_scale, v_head_dim, workspace_rows, kv_format, kv_scale, out)


@_cpu
def _prefill_cpu(q, kv_c, k_pe, kv_b_proj, kv_cache, block_table, query_start_loc, seq_lens, softmax_scale,
                 v_head_dim, workspace_rows, kv_format, kv_scale, out):
    arrays = [_array("q", q), _array("kv_c", kv_c), _array("k_pe", k_pe), _array("kv_b_proj", kv_b_proj),
              _array("kv_cache", kv_cache), _indices("block_table", block_table),
              _indices("query_start_loc", query_start_loc), _indices("seq_lens", seq_lens)]
    opts = _capi.PrefillOptions()
    opts.softmaxScale = _float("softmax_scale", softmax_scale)
    opts.vHeadDim = _int("v_head_dim", v_head_dim)
    if workspace_rows is not None:
        opts.hasWorkspaceRows = 1
        opts.workspaceRows = _int("workspace_rows", workspace_rows)
    opts.cache = opts.keep = _cache_format(kv_format, kv_scale)  # `keep` holds what it points at
    (result,) = _run(_capi.mlaPrefill, [_tensor(a) for a in arrays] + [ctypes.byref(opts)], 1, [("out", out)],
                     arrays)
    return result


def attention(q, kv_c, k_pe, kv_b_proj, kv_cache, block_table, query_start_loc, seq_lens, *, softmax_scale,
              v_head_dim, decode_threshold=1, workspace_rows=None, kv_format="auto", kv_scale=None, out=None):
    """MLA attention of a mixed decode/prefill batch (`mla.attention`), split as mla-select-algorithm
    decides: with decode_threshold=1 the leading requests of one new token each (decode requests first,
    as vLLM orders its batches) take the absorbed path (absorb_q, decode over the latent cache,
    up_proj_out) and the rest the chunked prefill (`workspace_rows` context rows up-projected at once);
    0 sends every request through the prefill. The batch is split when the call runs, so larger
    thresholds are rejected (mla.decode's query rows are fixed when it is compiled).

    The operands and result of `prefill` (q [T, N, P+R] un-absorbed, kv_c, k_pe, kv_b_proj [N*(P+V), L],
    kv_cache, block_table [B, max_pages], query_start_loc [B+1], seq_lens [B] = context + new tokens),
    but the cache must already hold every request's new tokens (cache_write ran first): the decode
    path reads them from it. Returns out [T, N, v_head_dim] in q's dtype (into `out` when given).
    When q is a torch CUDA tensor the call runs `mla.gpu.attention` on its device.
    """
    if any(_is_torch_cuda(a) for a in (q, kv_c, k_pe, kv_b_proj, kv_cache)):
        from . import gpu

        return gpu.attention(q, kv_c, k_pe, kv_b_proj, kv_cache, block_table, query_start_loc, seq_lens,
                             softmax_scale=softmax_scale, v_head_dim=v_head_dim,
                             decode_threshold=decode_threshold, workspace_rows=workspace_rows,
                             kv_format=kv_format, kv_scale=kv_scale, out=out)
    return _attention_cpu(q, kv_c, k_pe, kv_b_proj, kv_cache, block_table, query_start_loc, seq_lens,
                          softmax_scale, v_head_dim, decode_threshold, workspace_rows, kv_format, kv_scale, out)


@_cpu
def _attention_cpu(q, kv_c, k_pe, kv_b_proj, kv_cache, block_table, query_start_loc, seq_lens, softmax_scale,
                   v_head_dim, decode_threshold, workspace_rows, kv_format, kv_scale, out):
    arrays = [_array("q", q), _array("kv_c", kv_c), _array("k_pe", k_pe), _array("kv_b_proj", kv_b_proj),
              _array("kv_cache", kv_cache), _indices("block_table", block_table),
              _indices("query_start_loc", query_start_loc), _indices("seq_lens", seq_lens)]
    opts = _capi.AttentionOptions()
    opts.prefill.softmaxScale = _float("softmax_scale", softmax_scale)
    opts.prefill.vHeadDim = _int("v_head_dim", v_head_dim)
    if workspace_rows is not None:
        opts.prefill.hasWorkspaceRows = 1
        opts.prefill.workspaceRows = _int("workspace_rows", workspace_rows)
    opts.prefill.cache = _cache_format(kv_format, kv_scale)
    opts.decodeThreshold = _int("decode_threshold", decode_threshold)
    (result,) = _run(_capi.mlaAttention, [_tensor(a) for a in arrays] + [ctypes.byref(opts)], 1,
                     [("out", out)], arrays)
    return result


@_cpu
def runtime_stats():
    """The JIT cache's counters: calls answered from it, compilations, their total wall time in seconds,
    and the kernels it holds."""
    s = _capi.RuntimeStats()
    _capi.lib.mlaGetRuntimeStats(ctypes.byref(s))
    return {"cache_hits": s.cacheHits, "compiles": s.compiles, "compile_seconds": s.compileSeconds,
            "cached_kernels": s.cachedKernels}


@_cpu
def clear_kernel_cache():
    """Drop every compiled kernel and reset runtime_stats()."""
    _capi.lib.mlaClearKernelCache()
