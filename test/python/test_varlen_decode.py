"""Varlen decode on the CPU (`mla.decode(..., query_start_loc=...)`, speculative decoding with mixed
draft lengths) against the independent numpy reference `mla_reference.decode_varlen_ref`.

Tolerances are test_api.py's float32 ones. Free cache slots hold NaN (make_paged_cache), so any read
outside a request's positions shows up in the output.
"""

import zlib

import numpy as np
import pytest

import mla
import mla_reference as ref

F32 = dict(rtol=1e-4, atol=1e-5)
F32_LSE = dict(rtol=1e-5, atol=1e-5)
N, L, R, PAGE = 16, 512, 64, 64
SCALE = (128 + R) ** -0.5

# The batch: seq_lens {0, 1, 63, 64, 65, 8191} mixing 1..8 query tokens (seq_len 0 only takes
# q_b = 0: q_len > seq_len is an input error).
MIXED_SEQ_LENS = [0, 1, 63, 64, 65, 8191, 7, 130, 200]
MIXED_Q_LENS = [0, 1, 8, 3, 5, 2, 7, 4, 6]


@pytest.fixture
def rng(request):
    return np.random.default_rng(zlib.crc32(request.node.name.encode()))


def varlen_inputs(rng, seq_lens, q_lens, *, n=N, latent=L, rope=R, page=PAGE, dtype=np.float32):
    cache = ref.make_paged_cache(rng, seq_lens, page, latent, rope, dtype=dtype)
    qsl = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    q = rng.standard_normal((int(qsl[-1]), n, latent + rope)).astype(dtype)
    return q, cache, qsl


def run_varlen(q, cache, qsl, *, causal, latent=L, **kwargs):
    before = cache.kv_cache.copy()
    out, lse = mla.decode(q, cache.kv_cache, cache.block_table, cache.seq_lens, head_dim_v=latent,
                          softmax_scale=SCALE, causal=causal, query_start_loc=qsl, **kwargs)
    T, n = q.shape[:2]
    assert out.shape == (T, n, latent) and out.dtype == q.dtype
    assert lse.shape == (T, n) and lse.dtype == np.float32
    np.testing.assert_array_equal(cache.kv_cache.view(np.uint8), before.view(np.uint8))
    return out, lse


def reference(q, cache, qsl, *, causal, latent=L):
    return ref.decode_varlen_ref(q, cache.kv_cache, cache.block_table, cache.seq_lens, qsl, latent, SCALE,
                                 causal)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("num_splits", [None, 3])
def test_varlen_mixed_batch_matches_reference(rng, causal, num_splits):
    q, cache, qsl = varlen_inputs(rng, MIXED_SEQ_LENS, MIXED_Q_LENS)
    out, lse = run_varlen(q, cache, qsl, causal=causal, num_splits=num_splits)
    r_out, r_lse = reference(q, cache, qsl, causal=causal)
    np.testing.assert_allclose(out, r_out, err_msg="out", **F32)
    np.testing.assert_allclose(lse, r_lse, err_msg="lse", **F32_LSE)
    assert np.all(np.isfinite(out)), "poisoned slots leaked into the output"


def test_varlen_uniform_lengths_match_uniform_decode(rng):
    """Every request with the same q_b: the uniform decode's rows, lse [B, N, Sq] read token-major."""
    seq_lens, s_q = [5, 64, 129], 3
    q, cache, qsl = varlen_inputs(rng, seq_lens, [s_q] * len(seq_lens))
    out, lse = run_varlen(q, cache, qsl, causal=True)
    u_out, u_lse = mla.decode(q.reshape(len(seq_lens), s_q, N, L + R), cache.kv_cache, cache.block_table,
                              cache.seq_lens, head_dim_v=L, softmax_scale=SCALE, causal=True)
    np.testing.assert_allclose(out, u_out.reshape(out.shape), **F32)
    np.testing.assert_allclose(lse, u_lse.transpose(0, 2, 1).reshape(lse.shape), **F32_LSE)


def test_varlen_small_dims_and_outputs(rng):
    """Odd widths, a request of q_b = seq_len (its first token sees one position), out=/lse= and a plan."""
    n, latent, rope, page = 3, 64, 16, 16
    q, cache, qsl = varlen_inputs(rng, [2, 17, 0, 9], [2, 1, 0, 8], n=n, latent=latent, rope=rope, page=page)
    out = np.empty((q.shape[0], n, latent), np.float32)
    lse = np.empty((q.shape[0], n), np.float32)
    plan = mla.plan_decode(q, cache.kv_cache, cache.block_table, cache.seq_lens, head_dim_v=latent,
                           causal=True, query_start_loc=qsl)
    got = run_varlen(q, cache, qsl, causal=True, latent=latent, plan=plan, out=out, lse=lse)
    assert got[0] is out and got[1] is lse
    r_out, r_lse = reference(q, cache, qsl, causal=True, latent=latent)
    np.testing.assert_allclose(out, r_out, **F32)
    np.testing.assert_allclose(lse, r_lse, **F32_LSE)
    with pytest.raises(ValueError, match="plan was made for"):
        mla.decode(q, cache.kv_cache, cache.block_table, cache.seq_lens, head_dim_v=latent,
                   softmax_scale=SCALE, causal=True, plan=plan)


def test_varlen_all_requests_empty(rng):
    q, cache, qsl = varlen_inputs(rng, [0, 4], [0, 0])
    out, lse = run_varlen(q, cache, qsl, causal=True)
    assert out.shape == (0, N, L) and lse.shape == (0, N)


@pytest.mark.parametrize("q_lens,seq_lens,qsl,match", [
    ([1, 1], [0, 5], None, r"request 0 has 1 query tokens but seq_lens\[0\] = 0"),
    ([2, 1], [1, 5], None, r"request 0 has 2 query tokens but seq_lens\[0\] = 1"),
    ([9, 1], [20, 5], None, r"request 0 has 9 query tokens .* more than the 8"),
    ([2, 2], [5, 5], [1, 2, 4], r"query_start_loc must start at 0"),
    ([2, 2], [5, 5], [0, 3, 2], r"query_start_loc must start at 0 and never decrease"),
    ([2, 2], [5, 5], [0, 2, 3], r"query_start_loc\[2\] = 3 must equal the token count T = 4"),
    ([2, 2], [5, 5], [0, 4], r"seq_lens has 2 entries|dim 0"),
], ids=["q_len>seq_len=0", "q_len>seq_len", "q_len>8", "start", "decreasing", "end", "size"])
def test_varlen_rejects(rng, q_lens, seq_lens, qsl, match):
    q, cache, good_qsl = varlen_inputs(rng, seq_lens, q_lens, n=3, latent=64, rope=16, page=16)
    qsl = good_qsl if qsl is None else np.asarray(qsl, np.int32)
    with pytest.raises(ValueError, match=match):
        mla.decode(q, cache.kv_cache, cache.block_table, cache.seq_lens, head_dim_v=64, softmax_scale=SCALE,
                   causal=True, query_start_loc=qsl)


def test_varlen_rejects_uniform_q(rng):
    q, cache, qsl = varlen_inputs(rng, [4, 4], [2, 2], n=3, latent=64, rope=16, page=16)
    with pytest.raises(ValueError, match=r"q must have rank 3 \(\[T, h_q, d\]\)"):
        mla.decode(q.reshape(2, 2, 3, 80), cache.kv_cache, cache.block_table, cache.seq_lens, head_dim_v=64,
                   softmax_scale=SCALE, causal=True, query_start_loc=qsl)
