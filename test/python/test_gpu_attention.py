"""A mixed decode/prefill batch on the GPU: `mla.attention` with torch CUDA tensors (mla.gpu.attention over
mlaGpuAttention), against the float64 numpy reference (mla_reference.attention_ref: every request's new
tokens attend causally over the cache rows, which already hold them, however the batch is split).

No GPU needed: the C API's rejections before anything is enqueued (mlaGpuCheckAttention, and
mlaGpuAttention with a named chip and no workspace for batches without decode requests, which only
validates, plans and sizes the workspace), and the Python layer's ValueErrors with torch CPU tensors.

GPU (an sm_90a device and the kernels of `mla-aot --shapes deepseek`: L=512, R=64, P=V=128, page 64,
bf16, N in {16, 128}; the decode path's absorb_q, decode Sq=1 and up_proj_out are in that set): batches
mixing q_len-1 decode requests (first, as vLLM orders them) with prompts, 1-token prompts, empty
contexts, requests without tokens, decode-only and prefill-only batches. The reference reads what the
GPU reads (bf16-rounded activations, the cache as stored); the difference is the GPU's bf16
intermediates (absorbed q, the decode's latent output, up-projected K/V, merges): outputs within 2e-2
absolute + 2e-2 relative, as for test_gpu_prefill.py. Every case checks that the cache's bytes are
unchanged.
"""

import ctypes

import pytest

np = pytest.importorskip("numpy", reason="the checks compare with the numpy reference")

import mla  # noqa: E402
import mla_reference as ref  # noqa: E402
from mla import gpu  # noqa: E402

from torch_gate import needs_gpu_for, needs_torch, torch  # noqa: E402

needs_gpu = needs_gpu_for("the GPU attention tests need an sm_90a device")

L, R, P, V, PAGE = 512, 64, 128, 128, 64
SCALE = (P + R) ** -0.5

# (q_lens, ctx_lens) per batch; decode requests (q_len 1) first.
BATCHES = {
    # Decodes over one row (a 1-token prompt's next step), a page exactly and several pages, then a
    # 1-token prompt without context and prompts with and without context.
    "mixed": ([1, 1, 1, 1, 5, 33, 7], [0, 63, 200, 130, 0, 64, 1]),
    "decode_only": ([1, 1, 1], [10, 300, 64]),
    "prefill_only": ([3, 1, 12], [70, 0, 129]),
    # A request without tokens ends the decode run; the q_len-1 requests after it are prefills.
    "zero_token_requests": ([1, 0, 1, 6, 0], [40, 9, 17, 0, 3]),
}


def make_case(rng, N, q_lens, ctx_lens, kv_format="auto"):
    """An attention case whose activations are bf16-representable (what the GPU reads)."""
    case = ref.make_prefill_case(rng, q_lens, ctx_lens, PAGE, L, R, N, P, V, kv_format=kv_format,
                                 kv_scale=1.0 if kv_format == "fp8_e4m3" else None)
    for name in ("q", "kv_c", "k_pe", "kv_b_proj"):
        setattr(case, name, torch.from_numpy(getattr(case, name)).to(torch.bfloat16).float().numpy())
    return case


def run_on_gpu(case, kv_format="auto", **kwargs):
    """mla.attention on CUDA tensors; returns (out, the cache as the GPU read it)."""
    if kv_format == "auto":
        kv = torch.from_numpy(case.cache.kv_cache).to(torch.bfloat16).cuda()
    else:
        kv = torch.from_numpy(case.cache.kv_cache).cuda()
    before = kv.clone()
    cuda = [torch.from_numpy(getattr(case, n)).to(torch.bfloat16).cuda() for n in ("q", "kv_c", "k_pe", "kv_b_proj")]
    tables = [torch.from_numpy(np.asarray(t)).cuda()
              for t in (case.cache.block_table, case.query_start_loc, case.seq_lens)]
    scale = 1.0 if kv_format == "fp8_e4m3" else None
    out = mla.attention(*cuda, kv, *tables, softmax_scale=SCALE, v_head_dim=V, kv_format=kv_format,
                        kv_scale=scale, **kwargs)
    torch.cuda.synchronize()
    # Bit patterns, not values: unused slots hold NaN, which never equals itself.
    assert torch.equal(kv.view(torch.uint8), before.view(torch.uint8)), "attention wrote into the cache"
    read = kv.float().cpu().numpy() if kv_format == "auto" else case.cache.kv_cache
    return out, read


def expected(case, read, kv_format="auto"):
    return ref.attention_ref(case.q, case.kv_b_proj, read, case.cache.block_table, case.query_start_loc,
                             case.seq_lens, SCALE, V, L, R, kv_format=kv_format,
                             kv_scale=1.0 if kv_format == "fp8_e4m3" else None)


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
@pytest.mark.parametrize("batch", sorted(BATCHES))
def test_gpu_attention_matches_the_reference(batch, N):
    rng = np.random.default_rng(N + len(batch))
    case = make_case(rng, N, *BATCHES[batch])
    out, read = run_on_gpu(case)
    assert out.dtype == torch.bfloat16 and tuple(out.shape) == (case.q.shape[0], N, V)
    want = expected(case, read)
    assert_close(out, want)
    # Every request through the prefill path: the same attention.
    out, read = run_on_gpu(case, decode_threshold=0, workspace_rows=128)
    assert_close(out, want)


@needs_gpu
def test_gpu_decode_requests_take_the_decode_path():
    """The decode path reads the new token's row from the cache, the prefill path from kv_c: with kv_c rows
    of the leading q_len-1 requests that differ from their cache rows, threshold 1 gives the attention over
    the cache and threshold 0 the attention over the cache with those rows replaced by kv_c's. (Finite
    rows, not NaN: how NaN travels through the prefill's LSE merge is not what this test is about.)"""
    rng = np.random.default_rng(5)
    case = make_case(rng, 16, [1, 1, 4], [30, 70, 10])
    changed = torch.from_numpy(1.0 - 2.0 * case.kv_c[:2]).to(torch.bfloat16).float().numpy()
    case.kv_c[:2] = changed
    out, read = run_on_gpu(case)
    assert_close(out, expected(case, read))
    out, read = run_on_gpu(case, decode_threshold=0)
    swapped = read.copy()
    for i in range(2):
        pos = int(case.seq_lens[i]) - 1
        swapped[case.cache.block_table[i][pos // PAGE], pos % PAGE, :L] = changed[i]
    assert_close(out, expected(case, swapped))
    assert not np.allclose(expected(case, swapped)[:2], expected(case, read)[:2], atol=1e-2)


@needs_gpu
def test_gpu_attention_into_a_preallocated_output():
    rng = np.random.default_rng(6)
    case = make_case(rng, 16, *BATCHES["mixed"])
    given = torch.full((case.q.shape[0], 16, V), float("nan"), dtype=torch.bfloat16, device="cuda")
    out, read = run_on_gpu(case, out=given)
    assert out is given
    assert_close(out, expected(case, read))


@needs_gpu
def test_gpu_attention_fp8_cache_needs_the_prefill_path():
    """The GPU decode kernels read caches of q's dtype only: an fp8 batch with decode requests is
    rejected before anything runs, and runs with decode_threshold=0."""
    rng = np.random.default_rng(7)
    case = make_case(rng, 16, *BATCHES["mixed"], kv_format="fp8_ds_mla")
    with pytest.raises(ValueError, match="no GPU decode path for this batch's 4 decode requests"):
        run_on_gpu(case, kv_format="fp8_ds_mla")
    out, read = run_on_gpu(case, kv_format="fp8_ds_mla", decode_threshold=0)
    # The prefill path takes the new tokens from kv_c (unquantised), the reference from the cache.
    want = ref.prefill_ref(case.q, case.kv_c, case.k_pe, case.kv_b_proj, read, case.cache.block_table,
                           case.query_start_loc, case.seq_lens, SCALE, V, kv_format="fp8_ds_mla")
    assert_close(out, want)


# ---------------------------------------------------------------------------------------------------
# The C API and the Python layer, no GPU
# ---------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def lib():
    try:
        return gpu._library()
    except RuntimeError as error:
        pytest.skip(f"libMLAGpuCAPI.so is not built here (the build found no cuda.h): {error}")


BF16, F16, I32 = gpu._DTYPE_BF16, gpu._DTYPE_F16, gpu._DTYPE_INT32


def desc(dtype, shape, data=4096):
    t = gpu._Tensor()
    t.data, t.dtype, t.rank = data, dtype, len(shape)
    for i, d in enumerate(shape):
        t.shape[i] = d
    return t


def attention_call(*, N=16, table=(0, 1, 2, 3), qsl=(0, 3, 5), lens=(67, 2), pages=4, threshold=1,
                   w_uv=None, workspace_rows=None):
    """The C arguments of a batch of two requests (3 and 2 new tokens, contexts of 64 and 0 rows, no
    decode request by default): (tensors, host table pointers, options, what they point at)."""
    T, B = qsl[-1], len(lens)
    tensors = [desc(BF16, (T, N, P + R)), desc(BF16, (T, L)), desc(BF16, (T, 1, R)),
               desc(BF16, (N * (P + V), L)), desc(BF16, (N, P, L)), desc(BF16, w_uv or (N, L, V)),
               desc(BF16, (pages, PAGE, L + R)), desc(I32, (B, len(table) // B)), desc(I32, (B + 1,)),
               desc(I32, (B,))]
    arrays = [(ctypes.c_int32 * len(a))(*a) for a in (table, qsl, lens)]
    ptrs = [ctypes.cast(a, ctypes.POINTER(ctypes.c_int32)) for a in arrays]
    opts = gpu._AttentionOptions()
    opts.prefill.softmaxScale, opts.prefill.vHeadDim = SCALE, V
    if workspace_rows is not None:
        opts.prefill.hasWorkspaceRows, opts.prefill.workspaceRows = 1, workspace_rows
    opts.prefill.cache.kvFormat = b"auto"
    opts.decodeThreshold = threshold
    return [ctypes.byref(t) for t in tensors], ptrs, opts, (tensors, arrays)


def c_attention(lib, *, workspace=0, **kwargs):
    refs, ptrs, opts, _keep = attention_call(**kwargs)
    err = ctypes.create_string_buffer(4096)
    size = ctypes.c_size_t(0)
    code = lib.mlaGpuAttention(b"sm_90a", 0, *refs, *ptrs, ctypes.byref(opts), 4096, workspace,
                               ctypes.byref(size), None, err, len(err))
    return code, err.value.decode(), size.value


@pytest.mark.parametrize("kwargs, message", [
    (dict(threshold=2), "decode_threshold 2 needs the batch at compile time"),
    (dict(w_uv=(16, L, V + 8)), "w_uv's last dim 136 must equal v_head_dim 128"),
    (dict(w_uv=(16, L - 64, V)), "w_uv dim 1"),
    # Request 1's new tokens are positions 64 and 65 of a 66-row sequence: page 1 of its row (entry 4,
    # past the 4-page cache) holds them. The prefill reads only the context, but the decode path would
    # read the cache there, so attention checks every page under seq_lens.
    (dict(table=(0, 1, 2, 4), lens=(67, 66)), "block_table[1, 1] = 4 is not a page of kv_cache"),
    (dict(lens=(2, 2)), "seq_lens[0] = 2 is shorter than request 0's 3 new tokens"),
])
def test_c_check_attention_applies_the_argument_rules(lib, kwargs, message):
    refs, ptrs, opts, _keep = attention_call(**kwargs)
    err = ctypes.create_string_buffer(4096)
    code = lib.mlaGpuCheckAttention(*refs, *ptrs, ctypes.byref(opts), err, len(err))
    assert code == gpu.ERROR_INVALID_ARGUMENT, err.value.decode()
    assert message in err.value.decode()
    code, text, _ = c_attention(lib, **kwargs)
    assert code == gpu.ERROR_INVALID_ARGUMENT and message in text, text


def test_c_attention_without_decodes_sizes_the_prefill_workspace(lib):
    """Without q_len-1 requests in front the batch is one prefill: the workspace is the prefill's plus
    the rebased query_start_loc."""
    code, text, size = c_attention(lib)
    assert code == gpu.SUCCESS, text
    refs, ptrs, opts, _keep = attention_call()
    prefill_refs = refs[:4] + refs[6:]
    err = ctypes.create_string_buffer(4096)
    prefill_size = ctypes.c_size_t(0)
    code = lib.mlaGpuPrefill(b"sm_90a", 0, *prefill_refs, *ptrs, ctypes.byref(opts.prefill), 4096, 0,
                             ctypes.byref(prefill_size), None, err, len(err))
    assert code == gpu.SUCCESS, err.value.decode()
    # The decode sections are empty; the rebased query_start_loc takes one 256-byte section.
    assert size == prefill_size.value + 256
    # Threshold 0 sends everything through the prefill alike.
    code, text, size0 = c_attention(lib, threshold=0)
    assert code == gpu.SUCCESS and size0 == size, text


def test_c_attention_rejects_a_short_workspace(lib):
    code, text, _ = c_attention(lib, workspace=4096)
    assert code == gpu.ERROR_INVALID_ARGUMENT, text
    assert "the attention workspace holds 0 bytes at 0x1000; this call needs" in text


@needs_torch
def test_python_attention_checks_raise_value_error(lib):
    def call(q_dtype=torch.bfloat16, query_start_loc=(0, 2), **kw):
        return gpu.attention(torch.zeros(2, 16, P + R, dtype=q_dtype), torch.zeros(2, L, dtype=torch.bfloat16),
                             torch.zeros(2, R, dtype=torch.bfloat16),
                             torch.zeros(16 * (P + V), L, dtype=torch.bfloat16),
                             torch.zeros(2, PAGE, L + R, dtype=torch.bfloat16),
                             torch.zeros(1, 2, dtype=torch.int32), torch.tensor(query_start_loc),
                             torch.tensor([9]), softmax_scale=SCALE, v_head_dim=V, **kw)

    with pytest.raises(ValueError, match="q is on cpu; the GPU path takes CUDA tensors"):
        call()
    with pytest.raises(ValueError, match="kv_c is bfloat16 but q is float16"):
        call(q_dtype=torch.float16)
    with pytest.raises(ValueError, match="decode_threshold must be an integer"):
        call(decode_threshold="one")
