"""mla.compat (FlashMLA's get_mla_metadata / flash_mla_with_kvcache, vLLM's merge_attn_states /
concat_and_cache_mla), the out=/lse= preallocated outputs of every array-returning entry point, and the
in-process GPU kernel JIT (mla.gpu_jit).

The compat cases are written as the peers' own tests call them (FlashMLA's tests/test_flash_mla.py:
block_table = arange(...).view(b, -1), NaN in every cache slot past a request, get_mla_metadata(
cache_seqlens, s_q * h_q // h_kv, h_kv) then flash_mla_with_kvcache(q, blocked_k, block_table,
cache_seqlens, dv, tile_scheduler_metadata, num_splits, causal=causal); vLLM's tests/kernels: slot_mapping
from random.sample, scale a float32 tensor, padding slots -1) and checked against a float64 reference of
the peers' documented behaviour. CPU: numpy arrays and, where torch is installed, torch CPU tensors.
GPU (torch CUDA, an sm_90a/sm_100a device): the same call sites in the shapes of the AOT kernel set
(`mla-aot --shapes deepseek`: h_q 16, d 576, page 64, bf16, softmax scale 192^-0.5, fp8_e4m3 at any scale).
"""

import os
import random
import struct

import pytest

np = pytest.importorskip("numpy", reason="the checks compare with the numpy reference")

import mla  # noqa: E402
import mla_reference as ref  # noqa: E402
from mla import compat, gpu_jit  # noqa: E402

from torch_gate import HAS_TORCH, needs_gpu_for, needs_torch, torch  # noqa: E402

needs_cpu = pytest.mark.skipif(mla._CPU_UNAVAILABLE is not None, reason="the package has no CPU library")
needs_gpu = needs_gpu_for("the GPU cases need an sm_90a device")
needs_jit = pytest.mark.skipif(not gpu_jit.available(), reason="this package has no GPU kernel compiler")

# The backends the CPU cases run on: numpy arrays always, torch CPU tensors where torch is installed.
CPU_BACKENDS = ["numpy", pytest.param("torch", marks=needs_torch)]


def to_backend(backend, a):
    return torch.from_numpy(np.ascontiguousarray(a)) if backend == "torch" else a


def as_numpy(x):
    return x.detach().cpu().float().numpy() if HAS_TORCH and isinstance(x, torch.Tensor) else np.asarray(x)


# ---------------------------------------------------------------------------------------------------
# FlashMLA: get_mla_metadata + flash_mla_with_kvcache
# ---------------------------------------------------------------------------------------------------

def flash_mla_ref(q, blocked_k, block_table, cache_seqlens, dv, scale, causal):
    """FlashMLA's documented result in float64: per request, softmax(scale * q k^T) v over the first
    cache_seqlens[i] cached rows (v = k[..., :dv]); with `causal` query row j of s_q sees rows
    [0, seqlen - s_q + j]. Returns out [b, s_q, h_q, dv] and lse [b, h_q, s_q]."""
    b, s_q, h_q, d = q.shape
    page = blocked_k.shape[1]
    out = np.zeros((b, s_q, h_q, dv))
    lse = np.full((b, h_q, s_q), -np.inf)
    for i in range(b):
        n = int(cache_seqlens[i])
        rows = np.concatenate([blocked_k[block_table[i, p], :, 0, :] for p in range(-(-n // page))] +
                              [np.zeros((0, d))])[:n].astype(np.float64)
        for j in range(s_q):
            visible = n - s_q + j + 1 if causal else n
            if visible <= 0:
                continue
            s = scale * q[i, j].astype(np.float64) @ rows[:visible].T  # [h_q, visible]
            m = s.max(axis=1, keepdims=True)
            p = np.exp(s - m)
            out[i, j] = (p @ rows[:visible, :dv]) / p.sum(axis=1, keepdims=True)
            lse[i, :, j] = (m[:, 0] + np.log(p.sum(axis=1)))
    return out, lse


def flash_mla_problem(b, s_q, h_q, d, dv, seqlens, block_size, rng):
    """FlashMLA's test setup: block_table = arange(...).view(b, max_seqlen_pad // block_size), random
    blocked_k [pages, block_size, 1, d], NaN in every slot past a request's length."""
    cache_seqlens = np.asarray(seqlens, dtype=np.int32)
    max_seqlen_pad = -(-int(cache_seqlens.max()) // 256) * 256
    block_table = np.arange(b * max_seqlen_pad // block_size, dtype=np.int32).reshape(b, -1)
    q = rng.standard_normal((b, s_q, h_q, d)).astype(np.float32)
    blocked_k = rng.standard_normal((block_table.size, block_size, 1, d)).astype(np.float32)
    flat = blocked_k.reshape(b, max_seqlen_pad, 1, d)
    for i in range(b):
        flat[i, cache_seqlens[i]:] = np.nan
    return q, blocked_k, block_table, cache_seqlens


@needs_cpu
@pytest.mark.parametrize("backend", CPU_BACKENDS)
@pytest.mark.parametrize("s_q,causal", [(1, False), (2, True)])
def test_flash_mla_with_kvcache_matches_flashmla_semantics(backend, s_q, causal):
    rng = np.random.default_rng(1)
    b, h_q, h_kv, d, dv, block_size = 3, 4, 1, 192, 128, 64
    q, blocked_k, block_table, cache_seqlens = flash_mla_problem(b, s_q, h_q, d, dv, [70, 5, 129],
                                                                 block_size, rng)
    expected_out, expected_lse = flash_mla_ref(q, blocked_k, block_table, cache_seqlens, dv, d ** -0.5, causal)
    q, blocked_k, block_table, cache_seqlens = (to_backend(backend, a)
                                                for a in (q, blocked_k, block_table, cache_seqlens))

    tile_scheduler_metadata, num_splits = compat.get_mla_metadata(cache_seqlens, s_q * h_q // h_kv, h_kv)
    for _ in range(2):  # the metadata is reused across calls of one shape, as in a model's layers
        out_flash, lse_flash = compat.flash_mla_with_kvcache(q, blocked_k, block_table, cache_seqlens, dv,
                                                             tile_scheduler_metadata, num_splits, causal=causal)
        assert type(out_flash) is type(q)
        assert tuple(out_flash.shape) == (b, s_q, h_q, dv) and tuple(lse_flash.shape) == (b, h_q, s_q)
        np.testing.assert_allclose(as_numpy(out_flash), expected_out, rtol=2e-5, atol=2e-5)
        np.testing.assert_allclose(as_numpy(lse_flash), expected_lse, rtol=2e-5, atol=2e-5)


@needs_cpu
def test_flash_mla_softmax_scale_and_fp8_cache():
    rng = np.random.default_rng(2)
    L, R, page = 128, 64, 16
    cache = ref.make_paged_cache(rng, [20, 33], page, L, R, kv_format="fp8_ds_mla")
    q = rng.standard_normal((2, 1, 4, L + R)).astype(np.float32)
    meta, splits = compat.get_mla_metadata()
    out, lse = compat.flash_mla_with_kvcache(q, cache.kv_cache[:, :, None, :], cache.block_table,
                                             cache.seq_lens, L, meta, splits, softmax_scale=0.1,
                                             is_fp8_kvcache=True)
    expected_out, expected_lse = ref.decode_ref(q, cache.kv_cache, cache.block_table, cache.seq_lens, L, 0.1,
                                                kv_format="fp8_ds_mla")
    np.testing.assert_allclose(out, expected_out, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(lse, expected_lse, rtol=2e-5, atol=2e-5)


@needs_cpu
def test_flash_mla_metadata_is_bound_to_one_problem():
    rng = np.random.default_rng(3)
    q, blocked_k, block_table, seqlens = flash_mla_problem(2, 1, 4, 192, 128, [10, 20], 64, rng)
    meta, splits = compat.get_mla_metadata(seqlens, 4, 1)
    compat.flash_mla_with_kvcache(q, blocked_k, block_table, seqlens, 128, meta, splits)
    with pytest.raises(ValueError, match="num_heads_q 4, this call has 8"):
        compat.flash_mla_with_kvcache(np.concatenate([q, q], axis=2), blocked_k, block_table, seqlens, 128,
                                      meta, splits)
    with pytest.raises(ValueError, match="causal False, this call has True"):
        compat.flash_mla_with_kvcache(q, blocked_k, block_table, seqlens, 128, meta, splits, causal=True)
    with pytest.raises(ValueError, match="get_mla_metadata"):
        compat.flash_mla_with_kvcache(q, blocked_k, block_table, seqlens, 128, None, None)
    with pytest.raises(ValueError, match="KV heads"):
        compat.flash_mla_with_kvcache(q, np.concatenate([blocked_k] * 2, axis=2), block_table, seqlens, 128,
                                      compat.get_mla_metadata()[0], None)
    with pytest.raises(ValueError, match="num_heads_k must be 1"):
        compat.get_mla_metadata(seqlens, 8, 2)


@needs_gpu
@pytest.mark.parametrize("s_q,causal", [(1, False), (2, True)])
def test_flash_mla_with_kvcache_gpu(s_q, causal):
    rng = np.random.default_rng(4)
    b, h_q, h_kv, d, dv, block_size = 4, 16, 1, 576, 512, 64
    q, blocked_k, block_table, cache_seqlens = flash_mla_problem(b, s_q, h_q, d, dv, [2, 64, 300, 1025],
                                                                 block_size, rng)
    q_bf, k_bf = torch.from_numpy(q).bfloat16(), torch.from_numpy(blocked_k).bfloat16()
    scale = 192 ** -0.5  # the AOT set's scale (DeepSeek-V3's (P+R)^-0.5); FlashMLA callers pass theirs
    expected_out, expected_lse = flash_mla_ref(q_bf.float().numpy(), k_bf.float().numpy(), block_table,
                                               cache_seqlens, dv, scale, causal)
    cache_seqlens_t = torch.from_numpy(cache_seqlens).cuda()
    tile_scheduler_metadata, num_splits = compat.get_mla_metadata(cache_seqlens_t, s_q * h_q // h_kv, h_kv)
    out, lse = compat.flash_mla_with_kvcache(q_bf.cuda(), k_bf.cuda(), torch.from_numpy(block_table).cuda(),
                                             cache_seqlens_t, dv, tile_scheduler_metadata, num_splits,
                                             softmax_scale=scale, causal=causal)
    assert out.is_cuda and out.dtype == torch.bfloat16 and lse.dtype == torch.float32
    np.testing.assert_allclose(out.float().cpu().numpy(), expected_out, rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(lse.cpu().numpy(), expected_lse, rtol=1e-3, atol=1e-3)
    # The step's first call made the device plan; the next layer's call decodes with it, unchanged.
    assert isinstance(tile_scheduler_metadata.plan, mla.gpu.DecodePlan)
    plan = tile_scheduler_metadata.plan
    out2, lse2 = compat.flash_mla_with_kvcache(q_bf.cuda(), k_bf.cuda(), torch.from_numpy(block_table).cuda(),
                                               cache_seqlens_t, dv, tile_scheduler_metadata, num_splits,
                                               softmax_scale=scale, causal=causal)
    assert tile_scheduler_metadata.plan is plan
    assert torch.equal(out2, out) and torch.equal(lse2, lse)


# ---------------------------------------------------------------------------------------------------
# vLLM: merge_attn_states
# ---------------------------------------------------------------------------------------------------

def merge_inputs(rng, tokens, heads, head_size):
    prefix_output = rng.standard_normal((tokens, heads, head_size)).astype(np.float32)
    suffix_output = rng.standard_normal((tokens, heads, head_size)).astype(np.float32)
    prefix_lse = rng.standard_normal((heads, tokens)).astype(np.float32)
    suffix_lse = rng.standard_normal((heads, tokens)).astype(np.float32)
    # vLLM's convention: an LSE of +inf (an empty prefix or suffix) means no contribution.
    prefix_lse[0, 0] = np.inf
    suffix_lse[1, 1] = np.inf
    prefix_lse[0, 2] = suffix_lse[0, 2] = -np.inf
    return prefix_output, prefix_lse, suffix_output, suffix_lse


def merge_expected(prefix_output, prefix_lse, suffix_output, suffix_lse):
    p = np.where(np.isfinite(prefix_lse), prefix_lse, -np.inf).astype(np.float64)
    s = np.where(np.isfinite(suffix_lse), suffix_lse, -np.inf).astype(np.float64)
    m = np.maximum(p, s)
    m_safe = np.where(np.isfinite(m), m, 0.0)
    wp, ws = np.exp(p - m_safe), np.exp(s - m_safe)
    total = wp + ws
    lse = np.where(total > 0, m_safe + np.log(np.where(total > 0, total, 1.0)), -np.inf)
    denom = np.where(total > 0, total, 1.0)
    out = ((wp / denom).T[:, :, None] * np.where(wp.T[:, :, None] > 0, prefix_output, 0.0) +
           (ws / denom).T[:, :, None] * np.where(ws.T[:, :, None] > 0, suffix_output, 0.0))
    return out, lse


@needs_cpu
@pytest.mark.parametrize("backend", CPU_BACKENDS)
@pytest.mark.parametrize("with_output_lse", [True, False])
def test_merge_attn_states(backend, with_output_lse):
    rng = np.random.default_rng(5)
    num_tokens, num_heads, head_size = 7, 3, 32
    inputs = merge_inputs(rng, num_tokens, num_heads, head_size)
    expected_out, expected_lse = merge_expected(*inputs)
    prefix_output, prefix_lse, suffix_output, suffix_lse = (to_backend(backend, a) for a in inputs)
    output = to_backend(backend, np.full((num_tokens, num_heads, head_size), np.nan, np.float32))
    output_lse = to_backend(backend, np.full((num_heads, num_tokens), np.nan, np.float32)) if with_output_lse \
        else None
    assert compat.merge_attn_states(output, prefix_output, prefix_lse, suffix_output, suffix_lse,
                                    output_lse) is None
    np.testing.assert_allclose(as_numpy(output), expected_out, rtol=1e-5, atol=1e-6)
    if with_output_lse:
        np.testing.assert_allclose(as_numpy(output_lse), expected_lse, rtol=1e-5, atol=1e-6)


@needs_cpu
@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_merge_attn_states_into_the_prefix_output(backend):
    rng = np.random.default_rng(6)
    inputs = merge_inputs(rng, 5, 2, 16)
    expected_out, expected_lse = merge_expected(*inputs)
    prefix_output, prefix_lse, suffix_output, suffix_lse = (to_backend(backend, a.copy()) for a in inputs)
    compat.merge_attn_states(prefix_output, prefix_output, prefix_lse, suffix_output, suffix_lse, prefix_lse)
    np.testing.assert_allclose(as_numpy(prefix_output), expected_out, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(as_numpy(prefix_lse), expected_lse, rtol=1e-5, atol=1e-6)


@needs_gpu
def test_merge_attn_states_gpu():
    rng = np.random.default_rng(7)
    inputs = merge_inputs(rng, 33, 16, 128)
    prefix_output, prefix_lse, suffix_output, suffix_lse = [torch.from_numpy(a).cuda() for a in inputs]
    prefix_output, suffix_output = prefix_output.bfloat16(), suffix_output.bfloat16()
    expected_out, expected_lse = merge_expected(prefix_output.float().cpu().numpy(), inputs[1],
                                                suffix_output.float().cpu().numpy(), inputs[3])
    output = torch.empty_like(prefix_output)
    output_lse = torch.empty_like(prefix_lse)
    compat.merge_attn_states(output, prefix_output, prefix_lse, suffix_output, suffix_lse, output_lse)
    np.testing.assert_allclose(output.float().cpu().numpy(), expected_out, rtol=1e-2, atol=1e-2)
    np.testing.assert_allclose(output_lse.cpu().numpy(), expected_lse, rtol=1e-4, atol=1e-4)
    # In place into the prefix, vLLM's common use.
    compat.merge_attn_states(prefix_output, prefix_output, prefix_lse, suffix_output, suffix_lse)
    assert torch.equal(prefix_output, output)


# ---------------------------------------------------------------------------------------------------
# vLLM: concat_and_cache_mla
# ---------------------------------------------------------------------------------------------------

VLLM_FORMATS = {"auto": "auto", "fp8": "fp8_e4m3", "fp8_ds_mla": "fp8_ds_mla"}


def vllm_cache_case(kv_cache_dtype, num_tokens, kv_lora_rank, qk_rope_head_dim, block_size, num_blocks, seed):
    """vLLM's test setup: random.sample slots as int64, two of them -1 (padding)."""
    random.seed(seed)
    rng = np.random.default_rng(seed)
    total_slots = num_blocks * block_size
    slot_mapping = np.array(random.sample(range(total_slots), num_tokens), dtype=np.int64)
    slot_mapping[[1, num_tokens - 1]] = -1
    kv_c = rng.standard_normal((num_tokens, kv_lora_rank)).astype(np.float32)
    k_pe = rng.standard_normal((num_tokens, qk_rope_head_dim)).astype(np.float32)
    kv_format = VLLM_FORMATS[kv_cache_dtype]
    width = ref.kv_row_width(kv_format, kv_lora_rank, qk_rope_head_dim)
    dtype = np.float32 if kv_format == "auto" else np.uint8
    kv_cache = np.zeros((num_blocks, block_size, width), dtype=dtype)
    return kv_c, k_pe, kv_cache, slot_mapping, kv_format


@needs_cpu
@pytest.mark.parametrize("backend", CPU_BACKENDS)
@pytest.mark.parametrize("kv_cache_dtype", list(VLLM_FORMATS))
def test_concat_and_cache_mla(backend, kv_cache_dtype):
    kv_c, k_pe, kv_cache, slot_mapping, kv_format = vllm_cache_case(kv_cache_dtype, 12, 128, 64, 16, 4, 8)
    scale = 0.1
    expected = ref.cache_write_ref(kv_c, k_pe, kv_cache.copy(), slot_mapping, kv_format,
                                   scale if kv_format == "fp8_e4m3" else None)
    scale_t = torch.tensor(scale, dtype=torch.float32) if backend == "torch" else np.float32(scale)
    kv_cache_b = to_backend(backend, kv_cache)
    assert compat.concat_and_cache_mla(to_backend(backend, kv_c), to_backend(backend, k_pe), kv_cache_b,
                                       to_backend(backend, slot_mapping), kv_cache_dtype, scale_t) is None
    np.testing.assert_array_equal(np.asarray(kv_cache_b), expected)


@needs_cpu
def test_concat_and_cache_mla_rejects_unknown_dtypes():
    kv_c, k_pe, kv_cache, slot_mapping, _ = vllm_cache_case("auto", 4, 128, 64, 16, 2, 9)
    with pytest.raises(ValueError, match="kv_cache_dtype must be one of"):
        compat.concat_and_cache_mla(kv_c, k_pe, kv_cache, slot_mapping, "fp8_e5m2", 1.0)
    with pytest.raises(ValueError, match="scale must be"):
        compat.concat_and_cache_mla(kv_c, k_pe, kv_cache.astype(np.uint8), slot_mapping, "fp8", "x")


@needs_gpu
@pytest.mark.parametrize("kv_cache_dtype", list(VLLM_FORMATS))
def test_concat_and_cache_mla_gpu(kv_cache_dtype):
    kv_c, k_pe, kv_cache, slot_mapping, kv_format = vllm_cache_case(kv_cache_dtype, 40, 512, 64, 64, 8, 10)
    kv_c_bf, k_pe_bf = torch.from_numpy(kv_c).bfloat16(), torch.from_numpy(k_pe).bfloat16()
    if kv_format == "auto":
        kv_cache = kv_cache.astype(np.float32)
    scale = torch.tensor(1.0, dtype=torch.float32, device="cuda")  # vLLM's k_scale, read by the kernel
    expected = ref.cache_write_ref(kv_c_bf.float().numpy(), k_pe_bf.float().numpy(), kv_cache.copy(),
                                   slot_mapping, kv_format, 1.0 if kv_format == "fp8_e4m3" else None)
    cache = torch.from_numpy(kv_cache).cuda()
    cache = cache.bfloat16() if kv_format == "auto" else cache
    compat.concat_and_cache_mla(kv_c_bf.cuda(), k_pe_bf.cuda(), cache, torch.from_numpy(slot_mapping).cuda(),
                                kv_cache_dtype, scale)
    got = cache.float().cpu().numpy() if kv_format == "auto" else cache.cpu().numpy()
    np.testing.assert_array_equal(got, expected.astype(np.float32) if kv_format == "auto" else expected)


# ---------------------------------------------------------------------------------------------------
# out= / lse=: every entry point that returns arrays writes into the caller's buffers
# ---------------------------------------------------------------------------------------------------

def projection_calls(rng):
    """(name, call(out, lse) -> result, result names) per array-returning CPU entry point but decode."""
    T, N, P, R, L, V = 5, 2, 16, 8, 32, 16
    q = rng.standard_normal((T, N, P + R)).astype(np.float32)
    kv_b_proj = rng.standard_normal((N * (P + V), L)).astype(np.float32)
    w_uk_t, w_uv = mla.split_kv_b_proj(kv_b_proj, N, P, V)
    o = rng.standard_normal((T, N, L)).astype(np.float32)
    latent = rng.standard_normal((7, L)).astype(np.float32)
    mq, mk, mv = (rng.standard_normal(s).astype(np.float32) for s in ((6, N, 24), (9, N, 24), (9, N, 16)))
    cu_q, cu_k = np.array([0, 2, 6], np.int32), np.array([0, 4, 9], np.int32)
    merge = [rng.standard_normal(s).astype(np.float32) for s in ((T, N, 16), (N, T), (T, N, 16), (N, T))]
    case = ref.make_prefill_case(rng, [3, 2], [5, 0], 16, L, R, N, P, V)
    pre = (case.q, case.kv_c, case.k_pe, case.kv_b_proj, case.cache.kv_cache, case.cache.block_table,
           case.query_start_loc, case.cache.seq_lens)
    return {
        "split_kv_b_proj": lambda out, lse: mla.split_kv_b_proj(kv_b_proj, N, P, V, out=out),
        "absorb_q": lambda out, lse: mla.absorb_q(q, w_uk_t, out=out),
        "up_proj_out": lambda out, lse: mla.up_proj_out(o, w_uv, out=out),
        "up_proj_kv": lambda out, lse: mla.up_proj_kv(latent, kv_b_proj, N, P, V, out=out),
        "merge_states": lambda out, lse: mla.merge_states(*merge, out=out, lse=lse),
        "mha": lambda out, lse: mla.mha(mq, mk, mv, cu_q, cu_k, softmax_scale=0.2, causal=True, out=out,
                                        lse=lse),
        "prefill": lambda out, lse: mla.prefill(*pre, softmax_scale=0.2, v_head_dim=V, out=out),
    }


PROJECTION_CALLS = ("split_kv_b_proj", "absorb_q", "up_proj_out", "up_proj_kv", "merge_states", "mha", "prefill")
PAIRS = ("split_kv_b_proj", "up_proj_kv")  # out= is a pair of arrays
WITH_LSE = ("merge_states", "mha")


def as_tuple(result):
    return result if isinstance(result, tuple) else (result,)


@needs_cpu
@pytest.mark.parametrize("name", PROJECTION_CALLS)
def test_out_writes_into_the_given_arrays(name):
    call = projection_calls(np.random.default_rng(11))[name]
    fresh = as_tuple(call(None, None))
    given = tuple(np.full_like(a, np.nan) for a in fresh)
    if name in PAIRS:
        result = call(given, None)
    elif name in WITH_LSE:
        result = call(given[0], given[1])
    else:
        result = call(given[0], None)
    for got, buffer, expected in zip(as_tuple(result), given, fresh):
        assert got is buffer
        np.testing.assert_array_equal(buffer, expected)


@needs_cpu
@pytest.mark.parametrize("name", PROJECTION_CALLS)
def test_out_is_checked_before_anything_runs(name):
    call = projection_calls(np.random.default_rng(12))[name]
    fresh = as_tuple(call(None, None))

    def attempt(bad):
        buffers = [np.empty_like(a) for a in fresh]
        buffers[0] = bad
        if name in PAIRS:
            return call(tuple(buffers), None)
        return call(buffers[0], buffers[1] if name in WITH_LSE else None)

    a = fresh[0]
    with pytest.raises(ValueError, match="has shape"):
        attempt(np.empty(a.shape[:-1] + (a.shape[-1] + 1,), a.dtype))
    with pytest.raises(ValueError, match="has dtype float16"):
        attempt(np.empty(a.shape, np.float16))
    with pytest.raises(ValueError, match="C-contiguous"):
        attempt(np.empty(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)[..., ::2])
    read_only = np.empty_like(a)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        attempt(read_only)
    with pytest.raises(ValueError, match="numpy array"):
        attempt(a.tolist())
    if name in WITH_LSE:
        with pytest.raises(ValueError, match="lse has shape"):
            call(np.empty_like(a), np.empty((1,), np.float32))


@needs_cpu
def test_out_overlapping_an_input_gets_the_same_result():
    rng = np.random.default_rng(13)
    o = rng.standard_normal((4, 2, 8)).astype(np.float32)
    w = rng.standard_normal((2, 8, 4)).astype(np.float32)
    expected = mla.up_proj_out(o, w)
    buffer = o.copy()  # the result [4, 8] written over the input's own memory
    got = mla.up_proj_out(buffer, w, out=buffer.reshape(-1)[:32].reshape(4, 8))
    np.testing.assert_array_equal(got, expected)
    # Two outputs in one buffer cannot both hold their results.
    latent = rng.standard_normal((3, 8)).astype(np.float32)
    kv_b_proj = rng.standard_normal((2 * 8, 8)).astype(np.float32)
    shared = np.empty((3, 2, 4), np.float32)
    with pytest.raises(ValueError, match="overlap"):
        mla.up_proj_kv(latent, kv_b_proj, 2, 4, 4, out=(shared, shared))


@needs_gpu
def test_out_on_the_gpu_is_the_given_tensor():
    rng = np.random.default_rng(14)
    inputs = [torch.from_numpy(a).cuda() for a in merge_inputs(rng, 9, 16, 128)]
    inputs[0], inputs[2] = inputs[0].bfloat16(), inputs[2].bfloat16()
    fresh_out, fresh_lse = mla.merge_states(*inputs)
    out, lse = torch.empty_like(fresh_out), torch.empty_like(fresh_lse)
    got_out, got_lse = mla.merge_states(*inputs, out=out, lse=lse)
    assert got_out.data_ptr() == out.data_ptr() and got_lse.data_ptr() == lse.data_ptr()
    assert torch.equal(out, fresh_out) and torch.equal(lse, fresh_lse)
    with pytest.raises(ValueError, match="has shape"):
        mla.merge_states(*inputs, out=out[:1])
    with pytest.raises(ValueError, match="overlaps out_b"):
        mla.merge_states(*inputs, out=inputs[2])
    with pytest.raises(ValueError, match="is on cpu"):
        mla.merge_states(*inputs, out=out.cpu())

    N, P, L, R, V = 16, 128, 512, 64, 128
    q = torch.randn(5, N, P + R, device="cuda").bfloat16()
    w_uk_t = (torch.randn(N, P, L, device="cuda") * 0.05).bfloat16()
    absorbed = torch.empty(5, N, L + R, dtype=torch.bfloat16, device="cuda")
    assert mla.absorb_q(q, w_uk_t, out=absorbed).data_ptr() == absorbed.data_ptr()
    assert torch.equal(absorbed, mla.absorb_q(q, w_uk_t))
    w_uv = (torch.randn(N, L, V, device="cuda") * 0.05).bfloat16()
    projected = torch.empty(5, N * V, dtype=torch.bfloat16, device="cuda")
    assert mla.up_proj_out(absorbed[..., :L].contiguous(), w_uv, out=projected).data_ptr() == projected.data_ptr()
    assert torch.equal(projected, mla.up_proj_out(absorbed[..., :L].contiguous(), w_uv))


# ---------------------------------------------------------------------------------------------------
# The GPU kernel JIT of the package built with MLIR
# ---------------------------------------------------------------------------------------------------

def fnv1a64(data):
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


@needs_jit
def test_a_missing_kernel_is_compiled_into_the_cache(tmp_path, capsys):
    # merge_states for 8 heads is outside mla-aot's deepseek set: a cold entry.
    spec = "merge_states chip=sm_90a N=8 H=64 dtype=bf16"
    cold = gpu_jit.compile_kernel(spec, tmp_path)
    warm = gpu_jit.compile_kernel(spec, tmp_path)
    assert not cold["hit"] and warm["hit"] and warm["path"] == cold["path"]
    assert os.path.dirname(cold["path"]) == str(tmp_path) and os.listdir(tmp_path) == [
        os.path.basename(cold["path"])]
    with capsys.disabled():
        print(f"\nmla.gpu_jit: cold compile {cold['seconds'] * 1e3:.1f} ms, warm lookup "
              f"{warm['seconds'] * 1e6:.1f} us ({spec})")
    assert warm["seconds"] < cold["seconds"]

    # The entry's checked header (KernelCache.cpp): magic, version, spec and image lengths, FNV-1a checksum.
    data = open(cold["path"], "rb").read()
    magic, version, spec_len, image_len, checksum = struct.unpack("<8sIIQQ", data[:32])
    assert magic == b"MLAKERNL" and version >= 1
    assert data[32:32 + spec_len].decode() == spec
    image = data[32 + spec_len:]
    assert len(image) == image_len and fnv1a64(image) == checksum
    assert image[:4] == b"\x7fELF"  # a cubin


@needs_jit
def test_the_jit_rejects_malformed_specs_and_can_be_turned_off(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="invalid kernel spec"):
        gpu_jit.compile_kernel("merge_states chip=sm_90a N=8", tmp_path)
    assert os.listdir(tmp_path) == []
    monkeypatch.setenv("MLA_GPU_JIT", "0")
    assert not gpu_jit.available()


@needs_gpu
@needs_jit
def test_a_gpu_call_compiles_its_missing_kernel(tmp_path, monkeypatch):
    monkeypatch.setenv("MLA_KERNEL_CACHE_DIR", str(tmp_path))
    mla.gpu.clear_decoders()
    inputs = [torch.from_numpy(a).cuda() for a in merge_inputs(np.random.default_rng(15), 3, 8, 64)]
    inputs[0], inputs[2] = inputs[0].bfloat16(), inputs[2].bfloat16()
    before = gpu_jit.stats()["compiles"]
    out, lse = mla.merge_states(*inputs)
    assert gpu_jit.stats()["compiles"] == before + 1 and len(os.listdir(tmp_path)) == 1
    expected_out, _ = merge_expected(inputs[0].float().cpu().numpy(), inputs[1].cpu().numpy(),
                                     inputs[2].float().cpu().numpy(), inputs[3].cpu().numpy())
    np.testing.assert_allclose(out.float().cpu().numpy(), expected_out, rtol=1e-2, atol=1e-2)


@needs_cpu
def test_projection_call_names_are_every_case():
    # The parametrisation names the cases without building them (a GPU-only install has no CPU path).
    assert tuple(projection_calls(np.random.default_rng(0))) == PROJECTION_CALLS
