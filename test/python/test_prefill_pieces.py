"""The chunked-prefill pieces: mla.gather_cache, mla.up_proj_kv and mla.merge_states, on the CPU (numpy)
and on the GPU (torch CUDA tensors, mla.gpu), against the numpy reference (mla_reference.py).

CPU (runs everywhere the package is built): gather_cache from every row format against
ref.gather_cache_ref (the dequantisation is exact, so float32 workspaces must match exactly), with
starts inside pages, requests crossing pages, empty requests and rows outside [cu_rows[0], cu_rows[B])
left untouched; caches are poisoned (NaN / e4m3 NaN bytes) in every slot no request owns, so a read past
a request shows up. up_proj_kv against a float64 product (float32 tolerances).

No GPU needed: spec texts, the C API's rejections before anything is launched (null and misaligned
pointers, bad host tables), and the Python layer's ValueErrors with torch CPU tensors.

GPU (an sm_90a/sm_100a device and the kernels of `mla-aot --cache-dir $MLA_KERNEL_CACHE_DIR --shapes
deepseek`: L=512, R=64, page 64, bf16 workspace / activations; fp8_e4m3 at any kv_scale):
  - gather_cache from every row format: gathered rows equal, bit for bit, the reference's float32 rows
    rounded to bfloat16 (the kernel decodes to float32 exactly and rounds once, as torch does); rows the
    call must not write keep their sentinel.
  - merge_states (N = 16 and 128, H = 128): against ref.merge_states_ref with +inf/-inf/NaN LSEs and NaN
    in the outputs of sides that do not contribute; out within bf16 rounding (1e-2 absolute + relative),
    LSE within 1e-4 (ex2/lg2.approx).
  - up_proj_kv (N = 16 and 128): against a float32 product of the same bf16 values, 1e-2 absolute +
    1e-2 relative (outputs are O(1); bf16 output rounding is 2^-9 relative).
"""

import ctypes

import pytest

np = pytest.importorskip("numpy", reason="the checks compare with the numpy reference")

import mla  # noqa: E402
import mla_reference as ref  # noqa: E402
from mla import gpu  # noqa: E402

from torch_gate import needs_gpu_for, needs_torch, torch  # noqa: E402

# A GPU-only installation (gpu-carry) has no CPU library: the CPU-path cases are skipped there.
needs_cpu = pytest.mark.skipif(mla._CPU_UNAVAILABLE is not None,
                               reason="the package has no CPU library (a GPU-only installation)")
needs_gpu = needs_gpu_for("the GPU prefill tests need an sm_90a/sm_100a device")

L, R, PAGE = 512, 64, 64
FORMATS = ("auto", "fp8_e4m3", "fp8_e4m3_token", "fp8_ds_mla")
SENTINEL = 7.0


def gather_case(rng, kv_format, dtype=np.float32, *, L=L, R=R, page=PAGE, fp8_scale=float(np.float32(0.05))):
    """A poisoned paged cache of three requests and a gather of parts of them: request 0 from inside
    its first page across a page boundary, request 1 empty, request 2 from a mid-page start to its end.
    Workspace rows [0, 3) and those past cu_rows[B] are not written. The fp8_e4m3 scale is a float32
    value (as the kernels hold it), so the reference's float64 product rounds to the kernels' one."""
    seq_lens = [page + 37, 5, 2 * page + 3]
    scale = fp8_scale if kv_format == "fp8_e4m3" else None
    cache = ref.make_paged_cache(rng, seq_lens, page, L, R, kv_format=kv_format, dtype=dtype, kv_scale=scale)
    starts = np.array([page - 9, 2, page + 1], np.int32)
    counts = [9 + 20, 0, seq_lens[2] - (page + 1)]
    cu_rows = np.cumsum([3] + counts).astype(np.int32)
    workspace_rows = int(cu_rows[-1]) + 6
    return cache, starts, cu_rows, workspace_rows, scale


def expected_workspace(cache, starts, cu_rows, workspace_rows, scale, kv_format):
    gathered = ref.gather_cache_ref(cache.kv_cache, kv_format, cache.block_table, starts, cu_rows - cu_rows[0],
                                    cache.L, cache.R, kv_scale=scale)
    out = np.full((workspace_rows, cache.L + cache.R), SENTINEL, np.float32)
    out[cu_rows[0]:cu_rows[-1]] = gathered
    return out


# ---------------------------------------------------------------------------------------------------
# CPU
# ---------------------------------------------------------------------------------------------------

@needs_cpu
@pytest.mark.parametrize("kv_format", FORMATS)
def test_cpu_gather_cache_matches_the_reference(kv_format):
    rng = np.random.default_rng(11)
    cache, starts, cu_rows, rows, scale = gather_case(rng, kv_format, L=256, R=32, page=16)
    ws = np.full((rows, 256 + 32), SENTINEL, np.float32)
    result = mla.gather_cache(cache.kv_cache, cache.block_table, starts, cu_rows, ws, latent_dim=256,
                              kv_format=kv_format, kv_scale=scale)
    assert result is ws
    np.testing.assert_array_equal(ws, expected_workspace(cache, starts, cu_rows, rows, scale, kv_format))
    assert not np.isnan(ws).any()


@needs_cpu
def test_cpu_gather_cache_rejects_pages_outside_the_cache():
    rng = np.random.default_rng(3)
    cache, starts, cu_rows, rows, _ = gather_case(rng, "auto", L=64, R=16, page=16)
    ws = np.full((rows, 80), SENTINEL, np.float32)
    table = cache.block_table.copy()
    table[2, 2] = cache.kv_cache.shape[0]
    with pytest.raises(ValueError, match=r"block_table\[2, 2\] = .* is not a page of kv_cache"):
        mla.gather_cache(cache.kv_cache, table, starts, cu_rows, ws, latent_dim=64)
    with pytest.raises(ValueError, match="cu_rows must be non-decreasing"):
        mla.gather_cache(cache.kv_cache, cache.block_table, starts, cu_rows[::-1].copy(), ws, latent_dim=64)
    with pytest.raises(ValueError, match="past its"):
        mla.gather_cache(cache.kv_cache, cache.block_table, starts + 1000, cu_rows, ws, latent_dim=64)
    assert (ws == SENTINEL).all()


@needs_cpu
@pytest.mark.parametrize("N, Lw, P, V", [(3, 64, 8, 5), (16, 512, 128, 128)])
def test_cpu_up_proj_kv_matches_the_reference(N, Lw, P, V):
    rng = np.random.default_rng(5)
    latent = rng.standard_normal((37, Lw)).astype(np.float32)
    w = (rng.standard_normal((N * (P + V), Lw)) / np.sqrt(Lw)).astype(np.float32)
    k_nope, v = mla.up_proj_kv(latent, w, N, P, V)
    k_ref, v_ref = ref.up_proj_kv_ref(latent, w, N, P, V)
    np.testing.assert_allclose(k_nope, k_ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(v, v_ref, rtol=1e-4, atol=1e-5)


@needs_cpu
def test_cpu_up_proj_kv_checks_the_weight_rows():
    with pytest.raises(ValueError, match=r"kv_b_proj dim 0 is 10 but N\*\(P\+V\)"):
        mla.up_proj_kv(np.zeros((2, 8), np.float32), np.zeros((10, 8), np.float32), 2, 2, 2)


# ---------------------------------------------------------------------------------------------------
# Spec texts and the C API, no GPU
# ---------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def lib():
    try:
        return gpu._library()
    except RuntimeError as error:
        pytest.skip(f"libMLAGpuCAPI.so is not built here (the build found no cuda.h): {error}")


def test_prefill_specs_are_canonical(lib):
    assert gpu.gather_cache_spec(L, R, PAGE, "bf16", "fp8_e4m3", "sm_90a") == (
        "gather_cache chip=sm_90a L=512 R=64 page=64 dtype=bf16 format=fp8_e4m3")
    assert gpu.kernel_spec("gather_cache format=fp8_e4m3 scale=0.5 dtype=bf16 page=64 R=64 L=512 chip=sm90") == (
        "gather_cache chip=sm_90a L=512 R=64 page=64 dtype=bf16 format=fp8_e4m3")
    assert gpu.kernel_spec("gather_cache format=fp8_ds_mla dtype=bf16 page=64 R=64 L=512 chip=sm90") == (
        "gather_cache chip=sm_90a L=512 R=64 page=64 dtype=bf16 format=fp8_ds_mla")
    assert gpu.merge_states_spec(16, 128, "bf16", "sm_100a") == "merge_states chip=sm_100a N=16 H=128 dtype=bf16"
    assert gpu.up_proj_kv_spec(128, L, 128, 128, "bf16", "sm_90a") == (
        "up_proj_kv chip=sm_90a N=128 L=512 P=128 V=128 dtype=bf16")
    with pytest.raises(ValueError, match="L must be a multiple of 64"):
        gpu.up_proj_kv_spec(16, 500, 128, 128, "bf16", "sm_90a")


GATHER_SPEC = b"gather_cache chip=sm_90a L=512 R=64 page=64 dtype=bf16 format=bf16"


def desc(dtype, shape, data=4096):
    """A C API tensor description (dtype one of gpu's _DTYPE_* codes) at device address `data`."""
    t = gpu._Tensor()
    t.data, t.dtype, t.rank = data, dtype, len(shape)
    for i, d in enumerate(shape):
        t.shape[i] = d
    return ctypes.byref(t)


BF16, F32, I32 = gpu._DTYPE_BF16, gpu._DTYPE_F32, gpu._DTYPE_INT32


def c_gather(lib, *, pointers=4096, table=(0, 1), starts=(0,), cu_rows=(0, 70), host=True, rows=128,
             num_pages=2):
    arrays = [(ctypes.c_int32 * len(a))(*a) for a in (table, starts, cu_rows)]
    ptrs = [ctypes.cast(a, ctypes.POINTER(ctypes.c_int32)) if host else None for a in arrays]
    batch = len(starts)
    err = ctypes.create_string_buffer(4096)
    code = lib.mlaGpuGatherCache(GATHER_SPEC, 0, desc(BF16, (num_pages, PAGE, L + R), pointers),
                                 desc(I32, (batch, len(table) // max(1, batch))), desc(I32, (batch,)),
                                 desc(I32, (batch + 1,)), *ptrs, desc(BF16, (rows, L + R)), None, None, err,
                                 len(err))
    return code, err.value.decode()


@pytest.mark.parametrize("kwargs, message", [
    (dict(pointers=0), "cache is null"),
    (dict(pointers=4100), "cache must be 16-byte aligned"),
    (dict(rows=-1), "workspace has a negative dimension"),
    (dict(cu_rows=(5, 2)), "cu_rows must be non-decreasing"),
    (dict(starts=(-1,)), "starts[0] = -1 is negative"),
    (dict(cu_rows=(0, 129), rows=200), "gathers position 128, past its 2 block_table pages"),
    (dict(table=(0, 2)), "block_table[0, 1] = 2 is not a page of kv_cache's 2"),
])
def test_c_gather_rejects_bad_calls_before_touching_the_gpu(lib, kwargs, message):
    code, text = c_gather(lib, **kwargs)
    assert code == gpu.ERROR_INVALID_ARGUMENT, text
    assert message in text


MERGE_ARGS = [desc(BF16, (3, 16, 128)), desc(F32, (16, 3)), desc(BF16, (3, 16, 128)), desc(F32, (16, 3))]
UP_KV_SPEC = b"up_proj_kv chip=sm_90a N=16 L=512 P=128 V=128 dtype=bf16"


@pytest.mark.parametrize("fn, spec, args, message", [
    ("mlaGpuMergeStates", b"merge_states chip=sm_90a N=16 H=128 dtype=bf16", MERGE_ARGS + [0, 4096], "out is null"),
    ("mlaGpuMergeStates", UP_KV_SPEC, MERGE_ARGS + [4096, 4096], "bad merge_states kernel spec"),
    ("mlaGpuMergeStates", b"merge_states chip=sm_90a N=16 H=64 dtype=bf16", MERGE_ARGS + [4096, 4096],
     "was not made for these arguments"),
    ("mlaGpuUpProjKv", UP_KV_SPEC, [desc(BF16, (3, L), 4104), desc(BF16, (16 * 256, L)), 4096, 4096],
     "latent must be 16-byte aligned"),
    # The sm_90a build stores 16-byte vectors.
    ("mlaGpuUpProjKv", UP_KV_SPEC, [desc(BF16, (3, L)), desc(BF16, (16 * 256, L)), 4096, 4104],
     "v must be 16-byte aligned"),
    ("mlaGpuUpProjKv", UP_KV_SPEC, [desc(BF16, (3, L)), desc(BF16, (16 * 255, L)), 4096, 4096],
     "kv_b_proj dim 0 is 4080 but N*(P+V)"),
])
def test_c_merge_and_up_proj_reject_bad_calls(lib, fn, spec, args, message):
    err = ctypes.create_string_buffer(4096)
    code = getattr(lib, fn)(spec, 0, *args, None, err, len(err))
    assert code == gpu.ERROR_INVALID_ARGUMENT, err.value.decode()
    assert message in err.value.decode()


@needs_torch
def test_python_checks_raise_value_error():
    with pytest.raises(ValueError, match="kv_format 'fp8_ds_mla' needs a uint8 kv_cache"):
        gpu.gather_cache(torch.zeros(2, PAGE, 656), torch.zeros(1, 2, dtype=torch.int32),
                         torch.zeros(1, dtype=torch.int32), torch.zeros(2, dtype=torch.int32),
                         torch.zeros(4, L + R), latent_dim=L, kv_format="fp8_ds_mla")
    with pytest.raises(ValueError, match=r"cu_rows dim 0 is 3 but block_table's batch size \+ 1 is 2"):
        gpu.gather_cache(torch.zeros(2, PAGE, L + R), torch.zeros(1, 2, dtype=torch.int32),
                         torch.zeros(1, dtype=torch.int32), torch.zeros(3, dtype=torch.int32),
                         torch.zeros(4, L + R), latent_dim=L)
    with pytest.raises(ValueError, match=r"lse_b must be \[N, T\] = \[16, 2\] for out_a \[2, 16, 128\], got \[16, 3\]"):
        gpu.merge_states(torch.zeros(2, 16, 128), torch.zeros(16, 2), torch.zeros(2, 16, 128), torch.zeros(16, 3))
    with pytest.raises(ValueError, match="latent must be bfloat16 or float16, got float32"):
        gpu.up_proj_kv(torch.zeros(2, L), torch.zeros(16 * 256, L), 16, 128, 128)
    with pytest.raises(ValueError, match="latent is on cpu"):
        gpu.up_proj_kv(torch.zeros(2, L, dtype=torch.bfloat16), torch.zeros(16 * 256, L, dtype=torch.bfloat16),
                       16, 128, 128)


# ---------------------------------------------------------------------------------------------------
# GPU
# ---------------------------------------------------------------------------------------------------

def gpu_cache(cache, kv_format, cache_dtype):
    """The numpy cache as a CUDA tensor: float caches converted to `cache_dtype` (NaN poison stays NaN),
    fp8 caches as their bytes."""
    if kv_format != "auto":
        return torch.from_numpy(cache.kv_cache).cuda()
    return torch.from_numpy(cache.kv_cache).to(cache_dtype).cuda()


@needs_gpu
@pytest.mark.parametrize("kv_format, cache_dtype", [
    ("auto", "bfloat16"), ("auto", "float16"), ("auto", "float32"),
    ("fp8_e4m3", None), ("fp8_e4m3_token", None), ("fp8_ds_mla", None)])
def test_gpu_gather_cache_is_bit_exact(kv_format, cache_dtype):
    rng = np.random.default_rng(17)
    # fp8_e4m3 at scale 1.0: the --shapes deepseek kernel's.
    cache, starts, cu_rows, rows, scale = gather_case(rng, kv_format, fp8_scale=1.0)
    dtype = getattr(torch, cache_dtype) if cache_dtype else None
    kv = gpu_cache(cache, kv_format, dtype)
    if kv_format == "auto":
        # The reference reads the cache the GPU reads: the float rows rounded to its dtype.
        cache.kv_cache = kv.float().cpu().numpy()
    ws = torch.full((rows, L + R), SENTINEL, dtype=torch.bfloat16, device="cuda")
    mla.gather_cache(kv, torch.from_numpy(cache.block_table).cuda(), torch.from_numpy(starts).cuda(),
                     torch.from_numpy(cu_rows), ws, latent_dim=L, kv_format=kv_format, kv_scale=scale)
    torch.cuda.synchronize()
    want = torch.from_numpy(expected_workspace(cache, starts, cu_rows, rows, scale, kv_format)).to(torch.bfloat16)
    got = ws.cpu()
    assert not torch.isnan(got).any()
    assert torch.equal(got, want), (got.float() - want.float()).abs().max()


@needs_gpu
def test_gpu_gather_cache_rejects_a_bad_table_and_writes_nothing():
    rng = np.random.default_rng(2)
    cache, starts, cu_rows, rows, _ = gather_case(rng, "fp8_ds_mla")
    table = cache.block_table.copy()
    table[0, 1] = -1
    ws = torch.full((rows, L + R), SENTINEL, dtype=torch.bfloat16, device="cuda")
    with pytest.raises(ValueError, match=r"block_table\[0, 1\] = -1"):
        mla.gather_cache(torch.from_numpy(cache.kv_cache).cuda(), torch.from_numpy(table), torch.from_numpy(starts),
                         torch.from_numpy(cu_rows), ws, latent_dim=L, kv_format="fp8_ds_mla")
    assert (ws.cpu() == SENTINEL).all()


@needs_gpu
@pytest.mark.parametrize("N", [16, 128])
def test_gpu_merge_states_matches_the_reference(N):
    rng = np.random.default_rng(N)
    T, H = 67, 128
    out_a = rng.standard_normal((T, N, H)).astype(np.float32)
    out_b = rng.standard_normal((T, N, H)).astype(np.float32)
    lse_a = (rng.standard_normal((N, T)) * 4).astype(np.float32)
    lse_b = (rng.standard_normal((N, T)) * 4).astype(np.float32)
    # Empty sides (+-inf, NaN LSE) hold NaN outputs that must not leak; row 3 has no live side at all.
    for lse, out, toks in ((lse_a, out_a, [0, 3, 9]), (lse_b, out_b, [3, 5, 60])):
        for i, t in enumerate(toks):
            lse[:, t] = (-np.inf, np.inf, np.nan)[i % 3] if t != 3 else -np.inf
            out[t] = np.nan
    lse_b[:, 3] = np.inf
    a = torch.from_numpy(out_a).to(torch.bfloat16)
    b = torch.from_numpy(out_b).to(torch.bfloat16)
    out, lse = mla.merge_states(a.cuda(), torch.from_numpy(lse_a).cuda(), b.cuda(), torch.from_numpy(lse_b).cuda())
    want_out, want_lse = ref.merge_states_ref(a.float().numpy(), lse_a, b.float().numpy(), lse_b)
    got = out.float().cpu().numpy()
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, want_out, rtol=1e-2, atol=1e-2)
    np.testing.assert_allclose(lse.cpu().numpy(), want_lse, rtol=0, atol=1e-4)
    assert (got[3] == 0).all() and np.isneginf(lse.cpu().numpy()[:, 3]).all()


@needs_gpu
# (16, 1300): 11 row tiles of 128 by 16 column tiles, so the grouped tile order visits a full group of 8
# row tiles and a partial one of 3, the last row tile itself partial.
@pytest.mark.parametrize("N, S", [(16, 100), (128, 1), (16, 0), (16, 1300)])
def test_gpu_up_proj_kv_matches_a_float32_product(N, S):
    gen = torch.Generator().manual_seed(N + S)
    latent = torch.randn(S, L, generator=gen).to(torch.bfloat16)
    w = (torch.randn(N * 256, L, generator=gen) / L ** 0.5).to(torch.bfloat16)
    k_nope, v = mla.up_proj_kv(latent.cuda(), w.cuda(), N, 128, 128)
    kv = (latent.float() @ w.float().T).view(S, N, 256)
    torch.testing.assert_close(k_nope.float().cpu(), kv[..., :128], rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(v.float().cpu(), kv[..., 128:], rtol=1e-2, atol=1e-2)


# ---------------------------------------------------------------------------------------------------
# mha (the first GPU kernel: CUDA cores)
# ---------------------------------------------------------------------------------------------------

MHA_SPEC = b"mha chip=sm_90a N=16 D=192 V=128 dtype=bf16 causal=1 scale=0x3d93cd3a"


@pytest.mark.parametrize("cu_q, cu_k, message", [
    ((1, 5), (0, 9), "cu_seqlens_q[0] = 1 must be 0"),
    ((0, 7, 5), (0, 4, 9), "cu_seqlens_q must be non-decreasing"),
    ((0, 5), (0, 11), "cu_seqlens_k ends at 11, past the 10 rows"),
    ((0, 6), (0, 4), "cu_seqlens_q ends at 6, past the 5 rows"),
])
def test_c_mha_checks_the_host_seqlens(lib, cu_q, cu_k, message):
    arrays = [(ctypes.c_int32 * len(a))(*a) for a in (cu_q, cu_k)]
    ptrs = [ctypes.cast(a, ctypes.POINTER(ctypes.c_int32)) for a in arrays]
    err = ctypes.create_string_buffer(4096)
    tensors = [desc(BF16, (5, 16, 192)), desc(BF16, (10, 16, 192)), desc(BF16, (10, 16, 128)),
               desc(I32, (len(cu_q),)), desc(I32, (len(cu_k),))]
    code = lib.mlaGpuMha(MHA_SPEC, 0, *tensors, *ptrs, 4096, 4096, None, err, len(err))
    assert code == gpu.ERROR_INVALID_ARGUMENT, err.value.decode()
    assert message in err.value.decode()


def test_mha_spec_is_canonical(lib):
    assert gpu.mha_spec(16, 192, 128, "bf16", True, 192 ** -0.5, "sm_90a") == MHA_SPEC.decode()


MHA_Q_LENS, MHA_K_LENS = [7, 5, 0, 0, 6], [19, 5, 4, 0, 3]


@needs_cpu
@pytest.mark.parametrize("causal", [True, False])
def test_cpu_mha_matches_the_reference(causal):
    cu_q = np.cumsum([0] + MHA_Q_LENS).astype(np.int32)
    cu_k = np.cumsum([0] + MHA_K_LENS).astype(np.int32)
    rng = np.random.default_rng(9)
    q = rng.standard_normal((int(cu_q[-1]) + 2, 3, 24)).astype(np.float32)
    k = rng.standard_normal((int(cu_k[-1]), 3, 24)).astype(np.float32)
    v = rng.standard_normal((int(cu_k[-1]), 3, 10)).astype(np.float32)
    out, lse = mla.mha(q, k, v, cu_q, cu_k, softmax_scale=24 ** -0.5, causal=causal)
    want_out, want_lse = ref.mha_ref(q, k, v, cu_q, cu_k, causal, 24 ** -0.5)
    np.testing.assert_allclose(out, want_out, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-5, atol=1e-5)


@needs_cpu
def test_cpu_mha_checks_the_seqlens():
    q = np.zeros((4, 2, 8), np.float32)
    with pytest.raises(ValueError, match="cu_seqlens_k ends at 9, past the 8 rows of k"):
        mla.mha(q, np.zeros((8, 2, 8), np.float32), np.zeros((8, 2, 4), np.float32), [0, 4], [0, 9],
                softmax_scale=0.5)


@needs_gpu
@pytest.mark.parametrize("causal", [True, False])
def test_gpu_mha_matches_the_reference(causal):
    # Requests: more keys than queries (context), equal, an empty query range, keys but no queries, and
    # q_len > k_len (causal rows that see nothing: out 0, lse -inf). Rows past cu_seqlens_q[B] too.
    cu_q = np.cumsum([0] + MHA_Q_LENS).astype(np.int32)
    cu_k = np.cumsum([0] + MHA_K_LENS).astype(np.int32)
    T, S, N, D, V = int(cu_q[-1]) + 2, int(cu_k[-1]), 16, 192, 128
    gen = torch.Generator().manual_seed(7)
    q = torch.randn(T, N, D, generator=gen).to(torch.bfloat16)
    k = torch.randn(S, N, D, generator=gen).to(torch.bfloat16)
    v = torch.randn(S, N, V, generator=gen).to(torch.bfloat16)
    scale = D ** -0.5
    out, lse = mla.mha(q.cuda(), k.cuda(), v.cuda(), torch.from_numpy(cu_q), torch.from_numpy(cu_k),
                       softmax_scale=scale, causal=causal)
    want_out, want_lse = ref.mha_ref(q.float().numpy(), k.float().numpy(), v.float().numpy(), cu_q, cu_k,
                                     causal, scale)
    np.testing.assert_allclose(out.float().cpu().numpy(), want_out, rtol=1e-2, atol=1e-2)
    np.testing.assert_allclose(lse.cpu().numpy(), want_lse, rtol=0, atol=1e-3)
    if causal:
        assert (out[cu_q[4]:cu_q[4] + 3].float().cpu() == 0).all()
        assert np.isneginf(lse.cpu().numpy()[:, cu_q[4]:cu_q[4] + 3]).all()
    assert (out[-2:].float().cpu() == 0).all() and np.isneginf(lse.cpu().numpy()[:, -2:]).all()
