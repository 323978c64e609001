"""Varlen decode through libMLAGpuCAPI.so without a GPU: spec texts and every argument rule the C API
applies before a driver is touched (the workspace size query enqueues nothing). Numerical results are
checked on a GPU by test_gpu_varlen_decode.py."""

import ctypes

import pytest

from mla import gpu

SCALE = 192**-0.5


@pytest.fixture(scope="module")
def lib():
    try:
        return gpu._library()
    except RuntimeError as error:
        pytest.skip(f"libMLAGpuCAPI.so is not built here (the build found no cuda.h): {error}")


def c_tensor(dtype, shape):
    t = gpu._Tensor()
    t.data, t.dtype, t.rank = 0, dtype, len(shape)
    for i, d in enumerate(shape):
        t.shape[i] = d
    return t


# The uint8 row bytes of each fp8 format at L = 512, R = 64 (the primer's row formats).
FP8_ROW_BYTES = {"fp8_e4m3": 576, "fp8_e4m3_token": 584, "fp8_ds_mla": 656}


def c_varlen(lib, *, q_lens=(2, 0, 3), lens=(64, 0, 100), qsl=None, max_rows=3, num_splits=2, heads=16,
             tokens=None, host_qsl=True, kv_format="auto", kv_scale=0, extra_row_bytes=0):
    """mlaGpuDecodeVarlen's size query, as mla.gpu calls it; returns (code, message, workspace bytes)."""
    spec = gpu.decode_varlen_spec(heads, max_rows, 512, 64, 64, "bf16", True, "sm_90a",
                                  kv_format=kv_format).encode()
    if qsl is None:
        qsl = [0]
        for q in q_lens:
            qsl.append(qsl[-1] + q)
    b, t = len(lens), qsl[-1] if tokens is None else tokens
    bf16, i32 = gpu._DTYPE_BF16, gpu._DTYPE_INT32
    cache = c_tensor(bf16, (8, 64, 576)) if kv_format == "auto" else \
        c_tensor(gpu._DTYPE_UINT8, (8, 64, FP8_ROW_BYTES[kv_format] + extra_row_bytes))
    tensors = [c_tensor(bf16, (t, heads, 576)), cache, c_tensor(i32, (b, 2)),
               c_tensor(i32, (b,)), c_tensor(i32, (len(qsl),))]
    opts = gpu._DecodeOptions(headDimV=512, softmaxScale=SCALE, causal=1, splitPolicy=3)
    opts.cache = opts.keep = gpu._cache_format(kv_format, None)
    opts.hasNumSplits, opts.numSplits = 1, num_splits
    as_ptr = lambda values: ctypes.cast((ctypes.c_int32 * len(values))(*values),  # noqa: E731
                                        ctypes.POINTER(ctypes.c_int32))
    size = ctypes.c_size_t(0)
    err = ctypes.create_string_buffer(4096)
    code = lib.mlaGpuDecodeVarlen(spec, 0, *[ctypes.byref(x) for x in tensors], as_ptr(lens), None,
                                  as_ptr(qsl) if host_qsl else None, ctypes.byref(opts), 0, 0, kv_scale, 0,
                                  ctypes.byref(size), None, err, len(err))
    return code, err.value.decode(), size.value


def test_varlen_spec_text():
    text = gpu.decode_varlen_spec(16, 8, 512, 64, 64, "bf16", True, "sm_90a")
    assert text.endswith(" varlen=1") and " Sq=8 " in text
    assert "varlen" not in gpu.decode_spec(16, 8, 512, 64, 64, "bf16", True, "sm_90a")
    with pytest.raises(ValueError, match="built for sm_90a only"):
        gpu.decode_varlen_spec(16, 8, 512, 64, 64, "bf16", True, "sm_100a")
    with pytest.raises(ValueError, match=r"largest query length Sq = 9 must be in \[1, 8\]"):
        gpu.decode_varlen_spec(16, 9, 512, 64, 64, "bf16", True, "sm_90a")


def test_varlen_refuses_the_pipelined_build(lib):
    """A varlen kernel is a wgmma or mma.sync build: the pipelined tile is refused by name, the same tile
    without varlen stays usable."""
    with pytest.raises(ValueError, match=r"not built for the pipelined decode \(tile suffix p\)"):
        gpu.decode_varlen_spec(16, 4, 512, 64, 64, "bf16", True, "sm_90a", tile="64x2x64x2p")
    assert gpu.decode_spec(16, 4, 512, 64, 64, "bf16", True, "sm_90a", tile="64x2x64x2p").endswith("p")
    assert " varlen=1" in gpu.decode_varlen_spec(16, 4, 512, 64, 64, "bf16", True, "sm_90a", tile="64x2x64x2w")


@pytest.mark.parametrize("kv_format", sorted(FP8_ROW_BYTES))
@pytest.mark.parametrize("heads", [16, 128])
def test_varlen_fp8_spec_takes_an_fp8_build(lib, kv_format, heads):
    """A varlen kernel over an fp8 cache: the spec names the format and varlen, and the tiling is one that
    dequantises (wgmma or mma.sync; never the seesaw or pipelined build: neither is built for varlen)."""
    text = gpu.decode_varlen_spec(heads, 8, 512, 64, 64, "bf16", True, "sm_90a", kv_format=kv_format)
    assert f" format={kv_format}" in text and text.endswith(" varlen=1"), text
    tile = text.split(" tile=")[1].split()[0]
    assert not tile.endswith(("p", "s")), text
    refused = (r"does not read fp8_e4m3_token caches" if kv_format == "fp8_e4m3_token"
               else r"varlen decode \(query_start_loc\) is not built for the seesaw decode")
    with pytest.raises(ValueError, match=refused):
        gpu.decode_varlen_spec(heads, 8, 512, 64, 64, "bf16", True, "sm_90a", tile="64x2x64x2s",
                               kv_format=kv_format)


@pytest.mark.parametrize("kv_format", sorted(FP8_ROW_BYTES))
def test_varlen_fp8_size_query(lib, kv_format):
    """The size query of a varlen decode over an fp8 cache passes the argument rules (the workspace is that
    of a bf16 cache: partial rows are f32 either way), and a cache of another row width is refused."""
    code, message, size = c_varlen(lib, kv_format=kv_format, kv_scale=4096)
    assert code == gpu.SUCCESS, message
    assert size == c_varlen(lib)[2]
    code, message, _ = c_varlen(lib, kv_format=kv_format, kv_scale=4096, extra_row_bytes=16)
    assert code == gpu.ERROR_INVALID_ARGUMENT and "kv_cache" in message, message


def test_workspace_is_sized_for_b_times_sq_tokens(lib):
    code, message, size = c_varlen(lib)
    assert code == gpu.SUCCESS, message
    rows = 2 * 3 * 3 * 16  # S * B * Sq * N: the token capacity a plan needs too
    align = lambda n: (n + 255) // 256 * 256  # noqa: E731
    assert size == align(rows * 512 * 4) + align(rows * 4) + 3 * (2 + 1) * 4


@pytest.mark.parametrize("kwargs, message", [
    (dict(q_lens=(2, 1, 3)), "request 1 has 1 query tokens but seq_lens[1] = 0"),
    (dict(q_lens=(4, 0, 3)), "a request has 4 query tokens, more than the 3 the kernel spec"),
    (dict(q_lens=(9, 0, 0), max_rows=8, lens=(64, 0, 0)), "more than the 8 a varlen decode takes"),
    (dict(qsl=[1, 2, 2, 5]), "query_start_loc must start at 0"),
    (dict(qsl=[0, 2, 2, 5], tokens=6), "query_start_loc[3] = 5 must equal the token count T = 6"),
    (dict(host_qsl=False), "needs the host copy of query_start_loc"),
    (dict(heads=16, max_rows=3, tokens=5, qsl=[0, 2, 5]), "B (query_start_loc dim 0 - 1) is 2"),
], ids=["q_len>seq_len=0", "q_len>spec Sq", "q_len>8", "start", "end", "no host copy", "batch"])
def test_varlen_rules_run_before_the_gpu(lib, kwargs, message):
    code, text, _ = c_varlen(lib, **kwargs)
    assert code == gpu.ERROR_INVALID_ARGUMENT, text
    assert message in text, text


def test_varlen_plan_functions_reject_a_null_plan(lib):
    err = ctypes.create_string_buffer(512)
    code = lib.mlaGpuDecodeVarlenRun(None, 1, 2, 3, 4, 5, 6, 7, SCALE, 0, None, err, len(err))
    assert code == gpu.ERROR_INVALID_ARGUMENT and b"plan is null" in err.value
    t = c_tensor(gpu._DTYPE_INT32, (3,))
    code = lib.mlaGpuDecodeVarlenPlanUpdate(None, None, None, None, None, ctypes.byref(t), None, err, len(err))
    assert code == gpu.ERROR_INVALID_ARGUMENT and b"plan is null" in err.value
