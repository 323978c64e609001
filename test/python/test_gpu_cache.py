"""mla.cache_write, mla.absorb_q and mla.up_proj_out on torch CUDA tensors (mla.gpu), and their checks.

Without a GPU (libMLAGpuCAPI.so, plus torch CPU tensors where torch is installed): the spec texts, the C
API's rejections before anything is launched, and the Python layer's ValueErrors.

On an sm_90a/sm_100a GPU, with the kernels of `mla-aot --cache-dir $MLA_KERNEL_CACHE_DIR --shapes
deepseek` (bf16 input, L=512, R=64, page 64; fp8_e4m3's kv_scale is a launch argument, so any scale):
  - cache_write into every row format is compared byte for byte with the whole expected cache: rows the
    call must not touch (negative slots, unmapped slots) keep their random initial bytes. fp8 rows come
    from the numpy reference quantisers (mla_reference.encode_rows, which test_reference.py and
    test_api.py tie to the CPU path); where numpy is missing, from the torch port of them below, which
    test_torch_quantisers_match_the_numpy_reference checks wherever both are installed. Float rows are
    torch's round-to-nearest-even conversions of the inputs.
  - invalid calls raise ValueError and leave the cache's bytes unchanged;
  - absorb_q / up_proj_out against a float32 einsum of the same bf16 values: 1e-2 absolute plus 1e-2
    relative (outputs are O(0.3); bf16 output rounding is 2^-9 relative, and f32 accumulation order
    differs); absorb_q's RoPE part exactly.
"""

import ctypes
import re

import pytest

import mla
from mla import gpu

try:
    import numpy as np

    import mla_reference as ref
except ImportError:
    np = ref = None

from torch_gate import HAS_TORCH, needs_gpu_for, needs_torch, torch  # noqa: E402

needs_gpu = needs_gpu_for("the GPU cache/projection tests need an sm_90a/sm_100a device")

L, R, PAGE, PAGES = 512, 64, 64, 8
SLOTS = PAGES * PAGE
P, V = 128, 128
FP8_FORMATS = ("fp8_e4m3", "fp8_e4m3_token", "fp8_ds_mla")
CW_SPEC = "cache_write chip=sm_90a L=512 R=64 page=64 dtype=bf16 format=fp8_ds_mla"


@pytest.fixture(scope="module")
def lib():
    try:
        return gpu._library()
    except RuntimeError as error:
        pytest.skip(f"libMLAGpuCAPI.so is not built here (the build found no cuda.h): {error}")


# ---------------------------------------------------------------------------------------------------
# Spec texts and the C API, no GPU
# ---------------------------------------------------------------------------------------------------

def test_specs_are_canonical(lib):
    # fp8_e4m3's kv_scale is a launch argument: an old text's scale is ignored, every scale one kernel.
    for scale in ("1", "0x3f000000", "2.0"):
        assert gpu.kernel_spec(f"cache_write format=fp8_e4m3 scale={scale} dtype=bf16 page=64 R=64 L=512 "
                               "chip=sm90") == gpu.cache_write_spec(L, R, PAGE, "bf16", "fp8_e4m3", "sm_90a")
    assert gpu.cache_write_spec(L, R, PAGE, "bf16", "fp8_e4m3", "sm_90a") == (
        "cache_write chip=sm_90a L=512 R=64 page=64 dtype=bf16 format=fp8_e4m3")
    assert gpu.cache_write_spec(L, R, PAGE, "f16", "fp8_ds_mla", "sm_100a") == (
        "cache_write chip=sm_100a L=512 R=64 page=64 dtype=f16 format=fp8_ds_mla")
    assert gpu.projection_spec("absorb_q", 16, P, L, R, "bf16", "sm_90a") == (
        "absorb_q chip=sm_90a N=16 P=128 L=512 R=64 dtype=bf16")
    assert gpu.projection_spec("up_proj_out", 128, L, V, 0, "bf16", "sm_90a") == (
        "up_proj_out chip=sm_90a N=128 L=512 V=128 dtype=bf16")


@pytest.mark.parametrize("call, message", [
    (lambda: gpu.kernel_spec("prefill chip=sm_90a"), "starts with its family"),
    (lambda: gpu.cache_write_spec(500, R, PAGE, "bf16", "fp8_ds_mla", "sm_90a"), "L % 128 == 0"),
    (lambda: gpu.kernel_spec("cache_write chip=sm_90a L=512 R=64 page=64 dtype=bf16 format=fp8_e4m3 scale=0"),
     "scale (ignored: fp8_e4m3's kv_scale is a kernel parameter) must be a positive finite f32 when given"),
    (lambda: gpu.kernel_spec("cache_write chip=sm_90a L=512 R=64 page=64 dtype=bf16 format=bf16 scale=1"),
     "scale is only accepted (and ignored) with format fp8_e4m3, not bf16"),
    (lambda: gpu.projection_spec("absorb_q", 16, 100, L, R, "bf16", "sm_90a"), "K % 16 == 0"),
    (lambda: gpu.projection_spec("merge", 16, P, L, R, "bf16", "sm_90a"), "kind must be"),
])
def test_bad_specs_raise_value_error(lib, call, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call()


def test_spec_buffer_too_small_names_the_size_it_needs(lib):
    # Every C entry point that writes a spec text refuses a buffer without room for it and its NUL.
    merge = "merge_states chip=sm_90a N=8 H=64 dtype=bf16"
    decode = gpu.decode_spec(16, 1, L, R, PAGE, "bf16", False, "sm_90a")
    varlen = gpu.decode_varlen_spec(16, 4, L, R, PAGE, "bf16", True, "sm_90a")
    calls = [
        (merge, lambda buf, err: lib.mlaGpuCanonicalSpec(merge.encode(), buf, len(buf), err, len(err))),
        (decode, lambda buf, err: lib.mlaGpuDecodeSpec(b"sm_90a", 0, 16, 1, L, R, PAGE, gpu._DTYPE_BF16, 0,
                                                       b"auto", None, buf, len(buf), err, len(err))),
        (varlen, lambda buf, err: lib.mlaGpuDecodeVarlenSpec(b"sm_90a", 0, 16, 4, L, R, PAGE, gpu._DTYPE_BF16, 1,
                                                             b"auto", None, buf, len(buf), err, len(err))),
    ]
    for text, call in calls:
        err = ctypes.create_string_buffer(512)
        for size in (8, len(text)):
            assert call(ctypes.create_string_buffer(size), err) != 0, text
            assert f"the spec buffer holds {size} bytes; the spec needs {len(text) + 1}" in err.value.decode()
        buf = ctypes.create_string_buffer(len(text) + 1)
        assert call(buf, err) == 0, err.value.decode()
        assert buf.value.decode() == text


def test_gpu_options_follow_the_cpu_paths_number_rules():
    # One rule for numbers on both paths: an integer must fit int64 (ctypes would wrap it silently).
    with pytest.raises(ValueError, match=r"num_splits = 18446744073709551617 does not fit in int64"):
        gpu._decode_options(512, 0.1, False, 2**64 + 1, "heuristic", "auto", None)
    with pytest.raises(ValueError, match=r"head_dim_v must be an integer, got '512'"):
        gpu._decode_options("512", 0.1, False, None, "heuristic", "auto", None)
    with pytest.raises(ValueError, match=r"softmax_scale must be a number, got 'x'"):
        gpu._decode_options(512, "x", False, None, "heuristic", "auto", None)
    assert gpu._decode_options(512, 0.1, False, 2**63 - 1, "heuristic", "auto", None).numSplits == 2**63 - 1


def c_tensor(dtype, shape, data=0):
    t = gpu._Tensor()
    t.data, t.dtype, t.rank = data, dtype, len(shape)
    for i, d in enumerate(shape):
        t.shape[i] = d
    return t


BF16, I32, U8 = gpu._DTYPE_BF16, gpu._DTYPE_INT32, gpu._DTYPE_UINT8
DS_MLA_ROW = L + 4 * (L // 128) + 2 * R


def c_cache_write(lib, *, spec=CW_SPEC, pointers=4096, slots=(0, 5), host=True, latent=L, page=PAGE,
                  check_only=False, fmt=None, row=DS_MLA_ROW):
    """Calls mlaGpuCacheWrite (or mlaGpuCheckCacheWrite, for fp8_ds_mla) as mla.gpu does."""
    t = len(slots)
    host_slots = (ctypes.c_int32 * t)(*slots)
    tensors = [c_tensor(BF16, (t, latent), pointers), c_tensor(BF16, (t, R), pointers),
               c_tensor(I32, (t,), pointers), c_tensor(U8, (SLOTS // page, page, row), pointers)]
    kv_c, k_pe, slot_mapping, cache = [ctypes.byref(x) for x in tensors]
    host_ptr = ctypes.cast(host_slots, ctypes.POINTER(ctypes.c_int32)) if host else None
    err = ctypes.create_string_buffer(4096)
    if check_only:
        fmt = gpu._CacheFormat(kvFormat=b"fp8_ds_mla")
        code = lib.mlaGpuCheckCacheWrite(kv_c, k_pe, slot_mapping, host_ptr, cache, ctypes.byref(fmt), err,
                                         len(err))
    else:
        code = lib.mlaGpuCacheWrite(spec.encode(), 0, kv_c, k_pe, slot_mapping, host_ptr, cache,
                                    ctypes.byref(fmt) if fmt else None, None, err, len(err))
    return code, err.value.decode()


@pytest.mark.parametrize("kwargs, message", [
    (dict(spec="cache_write chip=sm_90a L=512"), "bad cache_write kernel spec"),
    (dict(spec="absorb_q chip=sm_90a N=16 P=128 L=512 R=64 dtype=bf16"), "starts with 'cache_write'"),
    (dict(pointers=0), "kv_c is null"),
    (dict(pointers=4104), "kv_c must be 16-byte aligned"),
    (dict(latent=-1), "kv_c has a negative dimension [2, -1]"),
    (dict(page=32), "was not made for these arguments, which need 'cache_write chip=sm_90a L=512 R=64 page=32 "),
    (dict(slots=(0, -1, 512)), "slot_mapping[2] = 512 is beyond kv_cache's 512 slots (8 pages of 64)"),
    (dict(latent=384, check_only=True), "kv_cache rows have 656 bytes but kv_format 'fp8_ds_mla' with L = 384"),
])
def test_c_cache_write_rejects_bad_calls_before_touching_the_gpu(lib, kwargs, message):
    code, text = c_cache_write(lib, **kwargs)
    assert code == gpu.ERROR_INVALID_ARGUMENT, text
    assert message in text


E4M3_SPEC = "cache_write chip=sm_90a L=512 R=64 page=64 dtype=bf16 format=fp8_e4m3"


def e4m3_format(dtype=gpu._DTYPE_F32, shape=(1,), data=4096):
    """fp8_e4m3 with its kv_scale as a device tensor description (kept alive by the format)."""
    return gpu._CacheFormat(kvFormat=b"fp8_e4m3", kvScaleTensor=ctypes.pointer(c_tensor(dtype, shape, data)))


@pytest.mark.parametrize("kwargs, message", [
    (dict(), "kv_format 'fp8_e4m3' needs kv_scale"),
    (dict(fmt=e4m3_format(shape=(2,))), "a kv_scale tensor must hold one float32 element, got float32 [2]"),
    (dict(fmt=e4m3_format(dtype=BF16)), "a kv_scale tensor must hold one float32 element, got bfloat16 [1]"),
    (dict(fmt=e4m3_format(data=0)), "mla_cache_write: fp8_e4m3 needs kv_scale, a device pointer to one f32"),
    (dict(fmt=e4m3_format(data=4098)), "mla_cache_write: kv_scale must be 4-byte aligned (got 0x1002)"),
    (dict(fmt=gpu._CacheFormat(kvFormat=b"fp8_ds_mla")), "was not made for these arguments, which need "
     "'cache_write chip=sm_90a L=512 R=64 page=64 dtype=bf16 format=fp8_ds_mla'"),
])
def test_c_cache_write_checks_the_kv_scale_before_touching_the_gpu(lib, kwargs, message):
    fmt = kwargs.get("fmt")
    row = DS_MLA_ROW if fmt is not None and fmt.kvFormat == b"fp8_ds_mla" else L + R
    code, text = c_cache_write(lib, spec=E4M3_SPEC, row=row, **kwargs)
    assert code == gpu.ERROR_INVALID_ARGUMENT, text
    assert message in text


def test_c_cache_write_of_no_tokens_does_nothing(lib):
    code, text = c_cache_write(lib, pointers=0, slots=(), host=False)
    assert code == gpu.SUCCESS, text


ABSORB_SPEC = "absorb_q chip=sm_90a N=16 P=128 L=512 R=64 dtype=bf16"
UP_SPEC = "up_proj_out chip=sm_90a N=16 L=512 V=128 dtype=bf16"


@pytest.mark.parametrize("fn, spec, pointers, heads, message", [
    ("mlaGpuAbsorbQ", UP_SPEC, 4096, 16, "is not an absorb_q spec"),
    ("mlaGpuUpProjOut", ABSORB_SPEC, 4096, 16, "is not an up_proj_out spec"),
    ("mlaGpuUpProjOut", "cache_write chip=sm_90a L=512 R=64 page=64 dtype=bf16 format=bf16", 4096, 16,
     "bad up_proj_out kernel spec"),
    ("mlaGpuAbsorbQ", ABSORB_SPEC, 0, 16, "in is null"),
    ("mlaGpuUpProjOut", UP_SPEC, 8, 16, "16-byte aligned"),
    ("mlaGpuAbsorbQ", ABSORB_SPEC, 4096, 8, "which need 'absorb_q chip=sm_90a N=8 P=128 L=512 R=64 dtype=bf16'"),
])
def test_c_projections_reject_bad_calls_before_touching_the_gpu(lib, fn, spec, pointers, heads, message):
    if fn == "mlaGpuAbsorbQ":
        x, w = c_tensor(BF16, (3, heads, P + R), pointers), c_tensor(BF16, (heads, P, L), pointers)
    else:
        x, w = c_tensor(BF16, (3, heads, L), pointers), c_tensor(BF16, (heads, L, V), pointers)
    err = ctypes.create_string_buffer(4096)
    code = getattr(lib, fn)(spec.encode(), 0, ctypes.byref(x), ctypes.byref(w), pointers, None, err, len(err))
    assert code == gpu.ERROR_INVALID_ARGUMENT, err.value.decode()
    assert message in err.value.decode()


def test_c_projection_rules_run_without_a_spec(lib):
    err = ctypes.create_string_buffer(4096)
    q, w = c_tensor(BF16, (3, 16, P + R)), c_tensor(BF16, (16, P, L))
    assert lib.mlaGpuCheckAbsorbQ(ctypes.byref(q), ctypes.byref(w), err, len(err)) == gpu.SUCCESS, err.value
    o = c_tensor(BF16, (3, 16, L))
    code = lib.mlaGpuCheckUpProjOut(ctypes.byref(o), ctypes.byref(w), err, len(err))
    assert code == gpu.ERROR_INVALID_ARGUMENT
    assert "w_uv dim 1 is 128 but o's latent width (dim 2) is 512" in err.value.decode()


# ---------------------------------------------------------------------------------------------------
# Python-level checks (torch CPU tensors reach every check but the device one)
# ---------------------------------------------------------------------------------------------------

def cw_inputs(t=4, fmt="auto", dtype=None, cache_dtype=None):
    dtype = dtype or torch.bfloat16
    row = {"auto": L + R, "fp8_e4m3": L + R, "fp8_e4m3_token": L + R + 8,
           "fp8_ds_mla": L + 4 * (L // 128) + 2 * R}[fmt]
    cache_dtype = cache_dtype or (dtype if fmt == "auto" else torch.uint8)
    return dict(kv_c=torch.zeros(t, L, dtype=dtype), k_pe=torch.zeros(t, R, dtype=dtype),
                kv_cache=torch.zeros(PAGES, PAGE, row, dtype=cache_dtype),
                slot_mapping=torch.arange(t, dtype=torch.int32))


def cw_mutations():
    return [
        (dict(), lambda a: a.update(kv_c=[[1.0]]), "kv_c must be a torch tensor"),
        (dict(), lambda a: a.update(kv_c=a["kv_c"][0]), "kv_c must have rank 2"),
        (dict(), lambda a: a.update(k_pe=a["k_pe"].view(4, 2, 32)),
         r"k_pe must be \[T, R\] or \[T, 1, R\], got shape \[4, 2, 32\]"),
        (dict(), lambda a: a.update(k_pe=a["k_pe"].repeat(1, 2)[:, ::2]), "k_pe must be contiguous"),
        (dict(), lambda a: a.update(kv_c=a["kv_c"].int()), "kv_c must be bfloat16, float16 or float32, got int32"),
        (dict(), lambda a: a.update(k_pe=a["k_pe"].half()),
         "k_pe is float16 but kv_c is bfloat16; they must have the same dtype"),
        (dict(), lambda a: a.update(slot_mapping=a["slot_mapping"].float()), "slot_mapping must hold integers"),
        (dict(), lambda a: a.update(slot_mapping=a["slot_mapping"][:3]),
         r"slot_mapping dim 0 is 3 but kv_c's token count \(dim 0\) is 4"),
        (dict(), lambda a: a.update(slot_mapping=a["slot_mapping"].view(2, 2)), "slot_mapping must have rank 1"),
        (dict(), lambda a: a.update(slot_mapping=a["slot_mapping"] + SLOTS),
         r"slot_mapping\[0\] = 512 is beyond kv_cache's 512 slots \(8 pages of 64\)"),
        (dict(), lambda a: a.update(kv_cache=a["kv_cache"][:, :, :L].contiguous()),
         "kv_cache rows have 512 elements but L \\+ R = 512 \\+ 64 = 576"),
        (dict(), lambda a: a.update(kv_cache=a["kv_cache"].to(torch.uint8)), "kv_format 'auto' stores floats"),
        (dict(fmt="fp8_e4m3_token"), lambda a: a.update(kv_cache=a["kv_cache"][..., :-8].contiguous()),
         "576 bytes but kv_format 'fp8_e4m3_token' with L = 512, R = 64 needs 584"),
        (dict(fmt="fp8_ds_mla"), lambda a: a.update(kv_cache=a["kv_cache"].half()), "needs a uint8 kv_cache"),
        (dict(), lambda a: a.update(kv_cache=a["kv_cache"][:0]), "kv_cache has no pages"),
    ]


@needs_torch
@pytest.mark.parametrize("index", range(len(cw_mutations())))
def test_cache_write_tensor_checks_raise_value_error(index):
    setup, mutate, message = cw_mutations()[index]
    args = cw_inputs(**setup)
    mutate(args)
    fmt = setup.get("fmt", "auto")
    with pytest.raises(ValueError, match=message):
        gpu.cache_write(**args, kv_format=fmt, kv_scale=1.0 if fmt == "fp8_e4m3" else None)


@needs_torch
@pytest.mark.parametrize("fmt, scale, message", [
    ("fp8", None, "kv_format 'fp8' is unknown"),
    ("fp8_e4m3", None, "needs kv_scale"),
    ("auto\x00junk", None, "kv_format holds a NUL byte at offset 4"),
    ("fp8_ds_mla", 1.0, "kv_scale is only used by kv_format 'fp8_e4m3'"),
    ("fp8_e4m3", 1.0, "kv_c is on cpu; the GPU path takes CUDA tensors"),
    ("auto", None, "kv_c is on cpu; the GPU path takes CUDA tensors"),
    # vLLM's k_scale form: a float32 tensor of one element, checked by the C rules before any device test.
    ("fp8_e4m3", lambda: torch.ones(1, dtype=torch.float16),
     re.escape("a kv_scale tensor must hold one float32 element, got float16 [1]")),
    ("fp8_e4m3", lambda: torch.ones(2), re.escape("a kv_scale tensor must hold one float32 element, got float32 [2]")),
    ("fp8_e4m3", lambda: torch.ones(1, dtype=torch.float64), "kv_scale has dtype torch.float64"),
    ("fp8_ds_mla", lambda: torch.ones(1), "kv_scale is only used by kv_format 'fp8_e4m3'"),
    ("fp8_e4m3", lambda: torch.ones(()), "kv_c is on cpu; the GPU path takes CUDA tensors"),
])
def test_cache_write_option_checks_raise_value_error(fmt, scale, message):
    scale = scale() if callable(scale) else scale
    with pytest.raises(ValueError, match=message):
        gpu.cache_write(**cw_inputs(fmt=fmt if fmt in FP8_FORMATS else "auto"), kv_format=fmt, kv_scale=scale)


@needs_torch
@pytest.mark.parametrize("fn, args, message", [
    ("absorb_q", lambda: (torch.zeros(2, 16, 192, dtype=torch.bfloat16), torch.zeros(8, P, L, dtype=torch.bfloat16)),
     r"w_uk_t dim 0 is 8 but q's head count \(dim 1\) is 16"),
    ("absorb_q", lambda: (torch.zeros(2, 16, 192, dtype=torch.bfloat16), torch.zeros(16, P, L)),
     "w_uk_t is float32 but q is bfloat16; they must have the same dtype"),
    ("absorb_q", lambda: (torch.zeros(2, 16, 128, dtype=torch.bfloat16), torch.zeros(16, P, L, dtype=torch.bfloat16)),
     "positive RoPE width"),
    ("absorb_q", lambda: (torch.zeros(2, 192, dtype=torch.bfloat16), torch.zeros(16, P, L, dtype=torch.bfloat16)),
     "q must have rank 3"),
    ("absorb_q", lambda: (torch.zeros(2, 16, 192, dtype=torch.bfloat16), torch.zeros(16, P, L, dtype=torch.bfloat16)),
     "q is on cpu"),
    ("up_proj_out", lambda: (torch.zeros(2, 16, L, dtype=torch.bfloat16), torch.zeros(16, 256, V, dtype=torch.bfloat16)),
     r"w_uv dim 1 is 256 but o's latent width \(dim 2\) is 512"),
    ("up_proj_out", lambda: (torch.zeros(2, 16, L, dtype=torch.int32), torch.zeros(16, L, V, dtype=torch.int32)),
     "o must be bfloat16, float16 or float32, got int32"),
    ("up_proj_out", lambda: (torch.zeros(2, 16, L, dtype=torch.bfloat16), torch.zeros(16, L, V, dtype=torch.bfloat16)),
     "o is on cpu"),
])
def test_projection_checks_raise_value_error(fn, args, message):
    with pytest.raises(ValueError, match=message):
        getattr(gpu, fn)(*args())


def test_numpy_projections_never_take_the_gpu_path():
    assert not mla._is_torch_cuda([[1.0]])


# ---------------------------------------------------------------------------------------------------
# The quantisers in torch, for a GPU host without numpy
# ---------------------------------------------------------------------------------------------------

E4M3_MAX, AMAX_FLOOR, TILE = 448.0, 1e-4, 128


def _e4m3_positive():
    """Values of the non-negative finite E4M3FN codes 0x00..0x7E (increasing), float64."""
    codes = torch.arange(0x7F, dtype=torch.int64)
    exp = ((codes >> 3) & 0xF).double()
    mant = (codes & 0x7).double()
    return torch.where(exp == 0, mant / 8.0 * 2.0**-6, (1.0 + mant / 8.0) * torch.exp2(exp - 7.0))


def f32_to_e4m3(x):
    """mla_reference.f32_to_e4m3: round-to-nearest-even, saturating at 448, NaN -> 0x7F with its sign."""
    table = _e4m3_positive()
    mag = x.abs().double()
    is_nan = torch.isnan(mag)
    mag = torch.where(is_nan, torch.zeros_like(mag), mag).clamp(max=E4M3_MAX)
    hi = torch.searchsorted(table, mag).clamp(0, 0x7E)
    lo = (hi - 1).clamp(min=0)
    d_lo, d_hi = mag - table[lo], table[hi] - mag
    take_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
    code = torch.where(take_hi, hi, lo)
    code = torch.where(is_nan, torch.full_like(code, 0x7F), code)
    return (code | (torch.signbit(x).long() << 7)).to(torch.uint8)


def _bytes(values, width):
    """Little-endian bytes of integers [..., k] -> uint8 [..., k * width]."""
    shifts = torch.arange(0, 8 * width, 8, dtype=torch.int64)
    b = (values.long().unsqueeze(-1) >> shifts) & 0xFF
    return b.reshape(*values.shape[:-1], -1).to(torch.uint8)


def _f32_bytes(x):
    return _bytes(x.contiguous().view(torch.int32), 4)


def _scales(x):
    """max(amax, 1e-4) / 448 over the last dim, all in float32 (true divisions, as the kernels do)."""
    amax = torch.maximum(x.abs().amax(-1), torch.full_like(x[..., 0], AMAX_FLOOR))
    return amax / torch.full_like(amax, E4M3_MAX)


def encode_rows_torch(rows, fmt, kv_scale=None):
    """mla_reference.encode_rows for the fp8 formats: float32 rows [M, L+R] -> uint8 [M, row bytes]."""
    x = rows.float()
    if fmt == "fp8_e4m3":
        return f32_to_e4m3(x / torch.full_like(x, kv_scale))
    lat, rope = x[:, :L], x[:, L:]
    if fmt == "fp8_e4m3_token":
        s0, s1 = _scales(lat), _scales(rope)
        return torch.cat([f32_to_e4m3(lat / s0[:, None]), f32_to_e4m3(rope / s1[:, None]),
                          _f32_bytes(s0[:, None]), _f32_bytes(s1[:, None])], dim=1)
    tiles = lat.reshape(-1, L // TILE, TILE)
    scales = _scales(tiles)
    codes = f32_to_e4m3(tiles / scales[..., None]).reshape(-1, L)
    return torch.cat([codes, _f32_bytes(scales), _bytes(rope.to(torch.bfloat16).view(torch.int16) & 0xFFFF, 2)],
                     dim=1)


def encode_rows(rows, fmt, kv_scale=None):
    """The stored bytes of fp8 rows: the numpy reference where numpy is installed, else the torch port."""
    if ref is not None:
        return torch.from_numpy(ref.encode_rows(rows.float().numpy(), fmt, L, R, kv_scale=kv_scale))
    return encode_rows_torch(rows, fmt, kv_scale)


@needs_torch
@pytest.mark.skipif(ref is None, reason="numpy is not installed: nothing to check the torch port against")
@pytest.mark.parametrize("fmt", FP8_FORMATS)
def test_torch_quantisers_match_the_numpy_reference(fmt):
    rows = cache_problem()["rows"]
    got = encode_rows_torch(rows, fmt, 1.0 if fmt == "fp8_e4m3" else None)
    want = torch.from_numpy(ref.encode_rows(rows.float().numpy(), fmt, L, R, kv_scale=1.0))
    assert torch.equal(got, want)


# ---------------------------------------------------------------------------------------------------
# On the GPU
# ---------------------------------------------------------------------------------------------------

T = 301  # not a multiple of the 4 tokens per CTA


def cache_problem():
    """bf16 tokens with edge values, unique slots (every 7th token padding, -1)."""
    gen = torch.Generator().manual_seed(7)
    kv_c = (torch.randn(T, L, generator=gen) * 2).to(torch.bfloat16)
    k_pe = (torch.randn(T, R, generator=gen) * 3).to(torch.bfloat16)
    edge = torch.tensor([600.0, -600.0, 448.0, 449.0, 1e-6, -0.0, 0.0, 3e-3, -2.5e-3, 0.0137])
    kv_c[0, : len(edge)] = edge.to(torch.bfloat16)
    k_pe[0, : len(edge)] = edge.to(torch.bfloat16)
    kv_c[1].zero_()  # amax floor
    k_pe[1].zero_()
    kv_c[2, 100] = 1e4  # one large entry in a tile
    slots = torch.randperm(SLOTS, generator=gen)[:T].to(torch.int32)
    slots[::7] = -1
    rows = torch.cat([kv_c, k_pe], dim=1)
    return dict(kv_c=kv_c, k_pe=k_pe, slots=slots, rows=rows, gen=gen)


def initial_cache(fmt, cache_dtype, gen):
    """Random bytes (NaN patterns included): untouched rows must keep exactly these."""
    row = L + R if fmt == "auto" else encode_rows_torch(torch.zeros(1, L + R), fmt, 1.0).shape[1]
    if fmt != "auto":
        return torch.randint(0, 256, (PAGES, PAGE, row), dtype=torch.uint8, generator=gen)
    bits = {torch.bfloat16: torch.int16, torch.float16: torch.int16, torch.float32: torch.int32}[cache_dtype]
    info = torch.iinfo(bits)
    return torch.randint(info.min, info.max, (PAGES, PAGE, row), dtype=bits, generator=gen).view(cache_dtype)


def as_bits(cache):
    return cache.view({torch.bfloat16: torch.int16, torch.float16: torch.int16, torch.float32: torch.int32,
                       torch.uint8: torch.uint8}[cache.dtype])


def expected_cache(before, rows, slots, fmt, kv_scale):
    out = before.clone()
    flat = out.view(SLOTS, out.shape[2])
    keep = slots >= 0
    kept = rows[keep]
    flat[slots[keep].long()] = kept.to(out.dtype) if fmt == "auto" else encode_rows(kept, fmt, kv_scale)
    return out


CASES = [("auto", torch.bfloat16 if HAS_TORCH else None), ("auto", torch.float16 if HAS_TORCH else None),
         ("auto", torch.float32 if HAS_TORCH else None), ("fp8_e4m3", None), ("fp8_e4m3_token", None),
         ("fp8_ds_mla", None)]


@needs_gpu
@pytest.mark.parametrize("fmt, cache_dtype", CASES, ids=["bf16", "f16", "f32"] + list(FP8_FORMATS))
def test_cache_write_matches_the_reference_bytes(fmt, cache_dtype):
    p = cache_problem()
    scale = 1.0 if fmt == "fp8_e4m3" else None
    before = initial_cache(fmt, cache_dtype, p["gen"])
    want = expected_cache(before, p["rows"], p["slots"], fmt, scale)
    cache = before.cuda()
    result = mla.cache_write(p["kv_c"].cuda(), p["k_pe"].cuda(), cache, p["slots"].cuda(), kv_format=fmt,
                             kv_scale=scale)
    assert result is None
    got = cache.cpu()
    assert torch.equal(as_bits(got), as_bits(want)), (
        f"{int((as_bits(got) != as_bits(want)).sum())} bytes/elements differ")


@needs_gpu
def test_cache_write_takes_k_pe_with_a_head_axis_and_host_int64_slots():
    p = cache_problem()
    before = initial_cache("fp8_ds_mla", None, p["gen"])
    want = expected_cache(before, p["rows"], p["slots"], "fp8_ds_mla", None)
    cache = before.cuda()
    mla.cache_write(p["kv_c"].cuda(), p["k_pe"].cuda().view(T, 1, R), cache, p["slots"].long(),
                    kv_format="fp8_ds_mla")
    assert torch.equal(cache.cpu(), want)


@needs_gpu
def test_cache_write_on_a_side_stream():
    p = cache_problem()
    before = initial_cache("fp8_e4m3_token", None, p["gen"])
    want = expected_cache(before, p["rows"], p["slots"], "fp8_e4m3_token", None)
    cache = before.cuda()
    inputs = p["kv_c"].cuda(), p["k_pe"].cuda(), p["slots"].cuda()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        mla.cache_write(inputs[0], inputs[1], cache, inputs[2], kv_format="fp8_e4m3_token")
    stream.synchronize()
    assert torch.equal(cache.cpu(), want)


def _misaligned(t):
    """A contiguous copy of `t` whose data pointer is 2 bytes past a 16-byte boundary."""
    buf = torch.empty(t.numel() + 8, dtype=t.dtype, device=t.device)
    out = buf[1 : 1 + t.numel()].view(t.shape)
    out.copy_(t)
    return out


@needs_gpu
@pytest.mark.parametrize("change, message", [
    (lambda a: a["slots"].__setitem__(3, SLOTS), f"slot_mapping\\[3\\] = {SLOTS} is beyond kv_cache's {SLOTS} slots"),
    (lambda a: a.update(kv_c=_misaligned(a["kv_c"])), "kv_c must be 16-byte aligned"),
    (lambda a: a.update(kv_format="fp8_e4m3", kv_scale=None), "needs kv_scale"),
    (lambda a: a.update(k_pe=a["k_pe"].half()), "k_pe is float16 but kv_c is bfloat16; they must have the same dtype"),
    (lambda a: a.update(kv_format="fp8_e4m3_token", kv_scale=None), "needs 584"),
])
def test_invalid_cache_writes_leave_the_cache_unchanged(change, message):
    p = cache_problem()
    before = initial_cache("fp8_e4m3", None, p["gen"])
    cache = before.cuda()
    args = dict(kv_c=p["kv_c"].cuda(), k_pe=p["k_pe"].cuda(), slots=p["slots"].cuda(), kv_format="fp8_e4m3",
                kv_scale=1.0)
    change(args)
    with pytest.raises(ValueError, match=message):
        mla.cache_write(args["kv_c"], args["k_pe"], cache, args["slots"], kv_format=args["kv_format"],
                        kv_scale=args["kv_scale"])
    torch.cuda.synchronize()
    assert torch.equal(cache.cpu(), before)


@needs_gpu
def test_cache_write_of_no_tokens_leaves_the_cache_unchanged():
    p = cache_problem()
    before = initial_cache("fp8_ds_mla", None, p["gen"])
    cache = before.cuda()
    mla.cache_write(p["kv_c"][:0].cuda(), p["k_pe"][:0].cuda(), cache, p["slots"][:0].cuda(),
                    kv_format="fp8_ds_mla")
    assert torch.equal(cache.cpu(), before)


@needs_gpu
def test_a_kernel_missing_from_the_cache_names_mla_aot(monkeypatch):
    # Page 16 is outside mla-aot's deepseek set; the package built with MLIR would compile it.
    monkeypatch.setenv("MLA_GPU_JIT", "0")
    p = cache_problem()
    cache = torch.zeros(PAGES * 4, 16, L + R, dtype=torch.bfloat16, device="cuda")
    with pytest.raises(gpu.KernelNotFoundError, match="mla-aot --cache-dir .* --spec \"cache_write .*page=16"):
        mla.cache_write(p["kv_c"].cuda(), p["k_pe"].cuda(), cache, p["slots"].cuda())


def projection_inputs(n, t, in_width, k, out_dim, seed):
    gen = torch.Generator().manual_seed(seed)
    x = (torch.rand(t, n, in_width, generator=gen) * 2 - 1).to(torch.bfloat16)
    w = ((torch.rand(n, k, out_dim, generator=gen) * 2 - 1) / k**0.5).to(torch.bfloat16)
    return x.cuda(), w.cuda()


@needs_gpu
@pytest.mark.parametrize("n", (16, 128))
@pytest.mark.parametrize("t", (1, 65, 300))
def test_absorb_q_matches_float32_einsum(n, t):
    q, w = projection_inputs(n, t, P + R, P, L, seed=n * 1000 + t)
    out = mla.absorb_q(q, w)
    assert out.shape == (t, n, L + R) and out.dtype == torch.bfloat16
    want = torch.einsum("tnp,npl->tnl", q[..., :P].float(), w.float())
    torch.testing.assert_close(out[..., :L].float(), want, atol=1e-2, rtol=1e-2)
    assert torch.equal(out[..., L:], q[..., P:])


@needs_gpu
@pytest.mark.parametrize("n", (16, 128))
@pytest.mark.parametrize("t", (1, 65, 300))
def test_up_proj_out_matches_float32_einsum(n, t):
    o, w = projection_inputs(n, t, L, L, V, seed=n * 1000 + t + 1)
    out = mla.up_proj_out(o, w)
    assert out.shape == (t, n * V) and out.dtype == torch.bfloat16
    want = torch.einsum("tnl,nlv->tnv", o.float(), w.float()).reshape(t, n * V)
    torch.testing.assert_close(out.float(), want, atol=1e-2, rtol=1e-2)


@needs_gpu
def test_projections_of_no_tokens():
    q, w = projection_inputs(16, 1, P + R, P, L, seed=1)
    assert mla.absorb_q(q[:0], w).shape == (0, 16, L + R)
    o, wv = projection_inputs(16, 1, L, L, V, seed=2)
    assert mla.up_proj_out(o[:0], wv).shape == (0, 16 * V)


def test_runtime_stats_start_empty_and_clear_resets_them(lib):
    gpu.clear_decoders()
    assert gpu.runtime_stats() == {"cache_hits": 0, "cache_misses": 0, "not_found": 0,
                                   "load_seconds": 0.0, "loaded_kernels": 0}


@needs_gpu
def test_runtime_stats_count_loads_hits_and_missing_entries(monkeypatch):
    monkeypatch.setenv("MLA_GPU_JIT", "0")  # a miss stays a miss
    gpu.clear_decoders()
    p = cache_problem()
    cache = initial_cache("fp8_ds_mla", None, p["gen"]).cuda()
    for _ in range(2):
        mla.cache_write(p["kv_c"].cuda(), p["k_pe"].cuda(), cache, p["slots"].cuda(), kv_format="fp8_ds_mla")
    stats = gpu.runtime_stats()
    assert (stats["cache_hits"], stats["cache_misses"], stats["not_found"], stats["loaded_kernels"]) == (1, 1, 0, 1)
    assert stats["load_seconds"] > 0

    # Page 16 is outside mla-aot's deepseek set: a miss that finds no entry and loads nothing.
    paged16 = torch.zeros(PAGES * 4, 16, L + R, dtype=torch.bfloat16, device="cuda")
    with pytest.raises(gpu.KernelNotFoundError):
        mla.cache_write(p["kv_c"].cuda(), p["k_pe"].cuda(), paged16, p["slots"].cuda())
    stats = gpu.runtime_stats()
    assert (stats["cache_misses"], stats["not_found"], stats["loaded_kernels"]) == (2, 1, 1)


# ---------------------------------------------------------------------------------------------------
# fp8_e4m3's kv_scale as a device tensor (vLLM's k_scale): one kernel, the value read when it runs
# ---------------------------------------------------------------------------------------------------

def gather_all(cache, kv_scale):
    """Every slot of `cache` (fp8_e4m3 rows) gathered into a bf16 workspace by one request over all pages."""
    table = torch.arange(PAGES, dtype=torch.int32, device="cuda").view(1, PAGES)
    starts = torch.zeros(1, dtype=torch.int32, device="cuda")
    cu_rows = torch.tensor([0, SLOTS], dtype=torch.int32, device="cuda")
    workspace = torch.zeros(SLOTS, L + R, dtype=torch.bfloat16, device="cuda")
    mla.gather_cache(cache, table, starts, cu_rows, workspace, latent_dim=L, kv_format="fp8_e4m3",
                     kv_scale=kv_scale)
    return workspace


def gathered_ref(cache, value):
    table = np.arange(PAGES, dtype=np.int32).reshape(1, PAGES)
    rows = ref.gather_cache_ref(cache.cpu().numpy(), "fp8_e4m3", table, [0], [0, SLOTS], L, R, value)
    return torch.from_numpy(rows).bfloat16()


@needs_gpu
@pytest.mark.skipif(ref is None, reason="numpy is not installed: the reference is numpy")
def test_fp8_e4m3_scale_tensor_serves_every_scale_with_one_kernel():
    p = cache_problem()
    kv_c, k_pe, slots = p["kv_c"].cuda(), p["k_pe"].cuda(), p["slots"].cuda()
    scale = torch.empty(1, dtype=torch.float32, device="cuda")
    gpu.clear_decoders()
    caches = {}
    for value in (0.5, 2.0):
        scale.fill_(value)  # the same tensor, its value changed in place between the calls
        cache = torch.zeros(PAGES, PAGE, L + R, dtype=torch.uint8, device="cuda")
        mla.cache_write(kv_c, k_pe, cache, slots, kv_format="fp8_e4m3", kv_scale=scale)
        want = expected_cache(torch.zeros(PAGES, PAGE, L + R, dtype=torch.uint8), p["rows"], p["slots"],
                              "fp8_e4m3", value)
        assert torch.equal(cache.cpu(), want), f"kv_scale {value}"
        caches[value] = cache
    assert not torch.equal(caches[0.5], caches[2.0])
    stats = gpu.runtime_stats()
    assert (stats["cache_misses"], stats["cache_hits"], stats["loaded_kernels"]) == (1, 1, 1)

    gpu.clear_decoders()
    for value, cache in caches.items():
        scale.fill_(value)
        assert torch.equal(gather_all(cache, scale).cpu(), gathered_ref(cache, value)), f"kv_scale {value}"
    # The cache written at 0.5 read back at 2.0: the kernel takes the tensor's value, not a baked one.
    assert torch.equal(gather_all(caches[0.5], scale).cpu(), gathered_ref(caches[0.5], 2.0))
    stats = gpu.runtime_stats()
    assert (stats["cache_misses"], stats["cache_hits"], stats["loaded_kernels"]) == (1, 2, 1)


@needs_gpu
@pytest.mark.skipif(ref is None, reason="numpy is not installed: the reference is numpy")
def test_fp8_e4m3_host_scales_and_tensor_scales_write_the_same_bytes():
    p = cache_problem()
    kv_c, k_pe, slots = p["kv_c"].cuda(), p["k_pe"].cuda(), p["slots"].cuda()
    for value in (0.5, 2.0, 0.5):  # a host value is uploaded once and reused
        by_tensor = torch.zeros(PAGES, PAGE, L + R, dtype=torch.uint8, device="cuda")
        by_value = torch.zeros_like(by_tensor)
        mla.cache_write(kv_c, k_pe, by_tensor, slots, kv_format="fp8_e4m3",
                        kv_scale=torch.full((), value, device="cuda"))
        mla.cache_write(kv_c, k_pe, by_value, slots, kv_format="fp8_e4m3", kv_scale=value)
        assert torch.equal(by_tensor, by_value)
        assert torch.equal(gather_all(by_value, value), gather_all(by_tensor, torch.full((1,), value, device="cuda")))


@needs_gpu
def test_fp8_e4m3_scale_tensor_must_be_on_the_call_device():
    p = cache_problem()
    cache = torch.zeros(PAGES, PAGE, L + R, dtype=torch.uint8, device="cuda")
    with pytest.raises(ValueError, match="kv_scale is on cpu; the GPU path takes CUDA tensors"):
        mla.cache_write(p["kv_c"].cuda(), p["k_pe"].cuda(), cache, p["slots"].cuda(), kv_format="fp8_e4m3",
                        kv_scale=torch.ones(1))
