"""The whole chunked prefill on the GPU: `mla.prefill` with torch CUDA tensors (mla.gpu.prefill over
mlaGpuPrefill), against the float64 numpy reference (mla_reference.prefill_ref: one softmax per query row,
no chunking).

No GPU needed: the C API's rejections before anything is enqueued (mlaGpuCheckPrefill, and mlaGpuPrefill
with a named chip and no workspace, which only validates, plans the chunks and sizes the workspace), and
the Python layer's ValueErrors with torch CPU tensors.

GPU (an sm_90a device and the kernels of `mla-aot --shapes deepseek`: L=512, R=64, P=V=128, page 64,
bf16 activations, fp8_e4m3 at any kv_scale, N in {16, 128}): varlen batches with 1-token prompts, empty
contexts, contexts crossing chunk boundaries, workspace budgets from the default down to one page and
below, every row format, N = 16 and 128. The reference reads the inputs the GPU reads (bf16-rounded
activations, the cache as stored), so the difference is the GPU's bf16 intermediates (K/V, each chunk's
output and every merge are rounded to bf16): outputs within 2e-2 absolute + 2e-2 relative (out entries
are O(1)). Every case also checks that prefill leaves the cache's bytes as they were: it only reads it.
The context attention is the non-causal kernel and the new tokens' the causal one; prefill has no
non-causal mode of its own.
"""

import ctypes

import pytest

np = pytest.importorskip("numpy", reason="the checks compare with the numpy reference")

import mla  # noqa: E402
import mla_reference as ref  # noqa: E402
from mla import gpu  # noqa: E402

from torch_gate import HAS_TORCH, needs_gpu_for, needs_torch, torch  # noqa: E402

needs_gpu = needs_gpu_for("the GPU prefill tests need an sm_90a device")

L, R, P, V, PAGE = 512, 64, 128, 128, 64
SCALE = (P + R) ** -0.5
# A 1-token prompt without context, one whose context is a single row, contexts of one page exactly and
# of several pages ending mid-page, and a request with no context but many new tokens.
Q_LENS = [5, 1, 33, 1, 7, 12]
CTX_LENS = [0, 1, 64, 200, 130, 0]


def make_case(rng, N, kv_format, q_lens=Q_LENS, ctx_lens=CTX_LENS):
    """A prefill case whose activations are bf16-representable (what the GPU reads)."""
    scale = 1.0 if kv_format == "fp8_e4m3" else None
    case = ref.make_prefill_case(rng, q_lens, ctx_lens, PAGE, L, R, N, P, V, kv_format=kv_format,
                                 kv_scale=scale)
    for name in ("q", "kv_c", "k_pe", "kv_b_proj"):
        value = getattr(case, name)
        setattr(case, name, torch.from_numpy(value).to(torch.bfloat16).float().numpy())
    return case, scale


def run_on_gpu(case, kv_format, scale, cache_dtype=torch.bfloat16 if HAS_TORCH else None, tables="cuda",
               **kwargs):
    """mla.prefill on CUDA tensors; returns (out, the cache as the GPU read it, its bytes afterwards)."""
    if kv_format == "auto":
        kv = torch.from_numpy(case.cache.kv_cache).to(cache_dtype).cuda()
    else:
        kv = torch.from_numpy(case.cache.kv_cache).cuda()
    before = kv.clone()
    cuda = [torch.from_numpy(getattr(case, n)).to(torch.bfloat16).cuda() for n in ("q", "kv_c", "k_pe", "kv_b_proj")]
    host = [torch.from_numpy(np.asarray(t)) for t in (case.cache.block_table, case.query_start_loc, case.seq_lens)]
    table_args = [t.cuda() for t in host] if tables == "cuda" else host
    out = mla.prefill(*cuda, kv, *table_args, softmax_scale=SCALE, v_head_dim=V, kv_format=kv_format,
                      kv_scale=scale, **kwargs)
    torch.cuda.synchronize()
    # Bit patterns, not values: unused slots hold NaN, which never equals itself.
    assert torch.equal(kv.view(torch.uint8), before.view(torch.uint8)), "prefill wrote into the cache"
    read = kv.float().cpu().numpy() if kv_format == "auto" else case.cache.kv_cache
    return out, read


def expected(case, read, kv_format, scale):
    return ref.prefill_ref(case.q, case.kv_c, case.k_pe, case.kv_b_proj, read, case.cache.block_table,
                           case.query_start_loc, case.seq_lens, SCALE, V, kv_format=kv_format, kv_scale=scale)


def assert_close(out, want):
    got = out.float().cpu().numpy()
    assert got.shape == want.shape
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)


# ---------------------------------------------------------------------------------------------------
# GPU
# ---------------------------------------------------------------------------------------------------

@needs_gpu
@pytest.mark.parametrize("N", [16, 128])
@pytest.mark.parametrize("kv_format", ["auto", "fp8_e4m3", "fp8_e4m3_token", "fp8_ds_mla"])
def test_gpu_prefill_matches_the_reference(kv_format, N):
    # 256 rows over 4 requests with context: one page each per chunk, so the 200-row context takes 4
    # chunks and the 130-row one crosses two page-aligned chunk boundaries.
    rng = np.random.default_rng(N)
    case, scale = make_case(rng, N, kv_format)
    out, read = run_on_gpu(case, kv_format, scale, workspace_rows=256)
    assert out.dtype == torch.bfloat16 and tuple(out.shape) == (sum(Q_LENS), N, V)
    assert_close(out, expected(case, read, kv_format, scale))


@needs_gpu
@pytest.mark.parametrize("value", [0.5, 2.0])
def test_gpu_prefill_reads_fp8_e4m3_scale_from_a_device_tensor(value):
    # vLLM's k_scale: one float32 CUDA tensor the gather kernel reads; every scale is the same kernel.
    rng = np.random.default_rng(3)
    case = ref.make_prefill_case(rng, Q_LENS, CTX_LENS, PAGE, L, R, 16, P, V, kv_format="fp8_e4m3",
                                 kv_scale=value)
    for name in ("q", "kv_c", "k_pe", "kv_b_proj"):
        setattr(case, name, torch.from_numpy(getattr(case, name)).to(torch.bfloat16).float().numpy())
    out, read = run_on_gpu(case, "fp8_e4m3", torch.full((1,), value, device="cuda"), workspace_rows=256)
    assert_close(out, expected(case, read, "fp8_e4m3", value))


@needs_gpu
@pytest.mark.parametrize("workspace_rows", [None, 1024, 100, 64, 40, 1])
def test_gpu_prefill_chunk_budgets(workspace_rows):
    # None: the default budget (every context in one chunk); 1024: 256 rows per request per chunk;
    # 100 and 64: requests take turns a page at a time; 40 and 1: chunks smaller than a page, starting
    # inside pages.
    rng = np.random.default_rng(3)
    q_lens, ctx_lens = [3, 1, 9], [150, 70, 0]
    case, scale = make_case(rng, 16, "auto", q_lens, ctx_lens)
    out, read = run_on_gpu(case, "auto", scale, workspace_rows=workspace_rows)
    assert_close(out, expected(case, read, "auto", scale))


@needs_gpu
@pytest.mark.parametrize("cache_dtype", ["float16", "float32"])
def test_gpu_prefill_converts_float_caches(cache_dtype):
    rng = np.random.default_rng(8)
    case, scale = make_case(rng, 16, "auto")
    out, read = run_on_gpu(case, "auto", scale, cache_dtype=getattr(torch, cache_dtype), tables="cpu")
    assert_close(out, expected(case, read, "auto", scale))


@needs_gpu
def test_gpu_prefill_without_context_is_causal_attention_of_the_new_tokens():
    rng = np.random.default_rng(4)
    case, scale = make_case(rng, 16, "auto", [1, 6, 1], [0, 0, 0])
    out, read = run_on_gpu(case, "auto", scale)
    assert_close(out, expected(case, read, "auto", scale))
    # The first token of each request sees only itself: its output is its own value row.
    k_nope, v = ref.up_proj_kv_ref(case.kv_c, case.kv_b_proj, 16, P, V)
    np.testing.assert_allclose(out[0].float().cpu().numpy(), v[0], rtol=2e-2, atol=2e-2)


@needs_gpu
def test_gpu_prefill_with_no_tokens_returns_an_empty_output():
    kv = torch.zeros(2, PAGE, L + R, dtype=torch.bfloat16, device="cuda")
    out = mla.prefill(torch.zeros(0, 16, P + R, dtype=torch.bfloat16, device="cuda"),
                      torch.zeros(0, L, dtype=torch.bfloat16, device="cuda"),
                      torch.zeros(0, R, dtype=torch.bfloat16, device="cuda"),
                      torch.zeros(16 * (P + V), L, dtype=torch.bfloat16, device="cuda"), kv,
                      torch.zeros(1, 1, dtype=torch.int32), torch.tensor([0, 0], dtype=torch.int32),
                      torch.tensor([10], dtype=torch.int32), softmax_scale=SCALE, v_head_dim=V)
    assert tuple(out.shape) == (0, 16, V)


@needs_gpu
def test_gpu_prefill_rejects_a_bad_table_before_running():
    rng = np.random.default_rng(6)
    case, scale = make_case(rng, 16, "fp8_ds_mla")
    case.cache.block_table[3, 1] = case.cache.kv_cache.shape[0]
    with pytest.raises(ValueError, match=r"block_table\[3, 1\] = .* is not a page of kv_cache"):
        run_on_gpu(case, "fp8_ds_mla", scale)


# ---------------------------------------------------------------------------------------------------
# The C API and the Python layer, no GPU
# ---------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def lib():
    try:
        return gpu._library()
    except RuntimeError as error:
        pytest.skip(f"libMLAGpuCAPI.so is not built here (the build found no cuda.h): {error}")


BF16, F32, I32 = gpu._DTYPE_BF16, gpu._DTYPE_F32, gpu._DTYPE_INT32


def desc(dtype, shape, data=4096):
    t = gpu._Tensor()
    t.data, t.dtype, t.rank = data, dtype, len(shape)
    for i, d in enumerate(shape):
        t.shape[i] = d
    return t


def prefill_call(*, N=16, act=BF16, latent=L, table=(0, 1, 2, 3), qsl=(0, 3, 5), lens=(67, 2), pages=4,
                 workspace_rows=None, host=True, kv_scale=None, kv_format=b"auto", kv_c_at=4096, tokens=None):
    """The C arguments of a prefill of two requests of 3 and 2 new tokens over contexts of 64 and 0 rows:
    (tensors, host table pointers, options), with the arrays they point at kept alive in the result."""
    T, B = qsl[-1] if tokens is None else tokens, len(lens)
    tensors = [desc(act, (T, N, P + R)), desc(act, (T, latent), kv_c_at), desc(act, (T, 1, R)),
               desc(act, (N * (P + V), latent)), desc(BF16, (pages, PAGE, latent + R)),
               desc(I32, (B, len(table) // B)), desc(I32, (B + 1,)), desc(I32, (B,))]
    arrays = [(ctypes.c_int32 * len(a))(*a) for a in (table, qsl, lens)]
    ptrs = [ctypes.cast(a, ctypes.POINTER(ctypes.c_int32)) if host else None for a in arrays]
    opts = gpu._PrefillOptions()
    opts.softmaxScale, opts.vHeadDim = SCALE, V
    if workspace_rows is not None:
        opts.hasWorkspaceRows, opts.workspaceRows = 1, workspace_rows
    opts.cache.kvFormat = kv_format
    if kv_scale is not None:
        opts.cache.hasKvScale, opts.cache.kvScale = 1, kv_scale
    return [ctypes.byref(t) for t in tensors], ptrs, opts, (tensors, arrays)


def c_prefill(lib, *, workspace=0, workspace_bytes=0, chip=b"sm_90a", **kwargs):
    """mlaGpuPrefill (with workspace 0: validate, plan and size only); returns (code, message, bytes)."""
    refs, ptrs, opts, _keep = prefill_call(**kwargs)
    err = ctypes.create_string_buffer(4096)
    size = ctypes.c_size_t(workspace_bytes)
    code = lib.mlaGpuPrefill(chip, 0, *refs, *ptrs, ctypes.byref(opts), 4096, workspace, ctypes.byref(size),
                             None, err, len(err))
    return code, err.value.decode(), size.value


def test_c_prefill_sizes_the_workspace_from_the_plan(lib):
    code, text, one_chunk = c_prefill(lib)
    assert code == gpu.SUCCESS, text
    # K/V regions of max(T, 64) rows, the 64-row gather and dense latent, the states and the tables.
    e, N = 2, 16
    kv = 64 * N * (P + V + P + R) * e
    assert one_chunk >= kv + 64 * (L + R + L) * e + 2 * 5 * N * V * e + 3 * N * 5 * 4
    # Without context there is nothing to gather: K/V of the 5 tokens and one LSE.
    code, text, no_context = c_prefill(lib, lens=(3, 2))
    assert code == gpu.SUCCESS, text
    assert no_context < one_chunk
    assert no_context >= 5 * N * (P + V + P + R) * e + N * 5 * 4
    # Chunks below a page: the gather region shrinks with the budget.
    code, text, small = c_prefill(lib, workspace_rows=16)
    assert code == gpu.SUCCESS, text
    assert small < one_chunk


@pytest.mark.parametrize("kwargs, message", [
    (dict(host=False), "prefill needs the host copy of block_table"),
    (dict(act=F32), "q must be bfloat16 or float16, got float32"),
    (dict(table=(4, 1, 2, 3)), "block_table[0, 0] = 4 is not a page of kv_cache"),
    (dict(lens=(2, 2)), "seq_lens[0] = 2 is shorter than request 0's 3 new tokens"),
    (dict(qsl=(0, 3, 4), tokens=5), "query_start_loc[2] = 4 must equal the token count T = 5"),
    (dict(workspace_rows=0), "workspace_rows must be positive, got 0"),
    (dict(kv_format=b"fp8_e4m3", kv_scale=1.0), "kv_format 'fp8_e4m3' needs a uint8 kv_cache"),
])
def test_c_check_prefill_applies_the_argument_rules(lib, kwargs, message):
    refs, ptrs, opts, _keep = prefill_call(**kwargs)
    err = ctypes.create_string_buffer(4096)
    code = lib.mlaGpuCheckPrefill(*refs, *ptrs, ctypes.byref(opts), err, len(err))
    assert code == gpu.ERROR_INVALID_ARGUMENT, err.value.decode()
    assert message in err.value.decode()
    code, text, _ = c_prefill(lib, **kwargs)
    assert code == gpu.ERROR_INVALID_ARGUMENT and message in text, text


@pytest.mark.parametrize("kwargs, message", [
    (dict(latent=96), "no GPU prefill kernels for these arguments: L must be a multiple of 64"),
    (dict(chip=b"sm_80"), "unknown chip 'sm_80'"),
    (dict(workspace=4096), "the prefill workspace holds 0 bytes at 0x1000; this call needs"),
    (dict(workspace=4096, workspace_bytes=1 << 40, kv_c_at=4100), "latent must be 16-byte aligned"),
    (dict(workspace=4096, workspace_bytes=1 << 40, kv_c_at=0), "latent is null"),
])
def test_c_prefill_rejects_bad_calls_before_touching_the_gpu(lib, kwargs, message):
    code, text, _ = c_prefill(lib, **kwargs)
    assert code == gpu.ERROR_INVALID_ARGUMENT, text
    assert message in text


@needs_torch
def test_python_prefill_checks_raise_value_error(lib):
    def call(q_dtype=torch.bfloat16, query_start_loc=(0, 2), **kw):
        return gpu.prefill(torch.zeros(2, 16, P + R, dtype=q_dtype), torch.zeros(2, L, dtype=torch.bfloat16),
                           torch.zeros(2, R, dtype=torch.bfloat16),
                           torch.zeros(16 * (P + V), L, dtype=torch.bfloat16),
                           torch.zeros(2, PAGE, L + R, dtype=torch.bfloat16), torch.zeros(1, 2, dtype=torch.int32),
                           torch.tensor(query_start_loc), torch.tensor([9]), softmax_scale=SCALE, v_head_dim=V,
                           **kw)

    with pytest.raises(ValueError, match="q is on cpu; the GPU path takes CUDA tensors"):
        call()
    with pytest.raises(ValueError, match="kv_c is bfloat16 but q is float16"):
        call(q_dtype=torch.float16)
    with pytest.raises(ValueError, match="query_start_loc must hold integers"):
        call(query_start_loc=(0.0, 2.0))
    with pytest.raises(ValueError, match="workspace_rows must be an integer"):
        call(workspace_rows="many")
