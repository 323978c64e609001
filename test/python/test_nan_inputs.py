"""NaN and Inf in the inputs a row reads must reach that row's outputs, as in PyTorch and FlashMLA.

An LSE of -inf is reserved for rows that see no key (seq_len 0, fully masked); a poisoned row that came
out as out 0 / lse -inf would read as "this request saw nothing". Rows that do not read the bad value
must stay exact, and NaN in cache slots nobody reads must still never leak (test_api.py covers that).
"""

import zlib

import numpy as np
import pytest

import mla
import mla_reference as ref

L, R, N, PAGE = 64, 16, 3, 16
F32 = dict(rtol=1e-4, atol=1e-5)


@pytest.fixture
def rng(request):
    return np.random.default_rng(zlib.crc32(request.node.name.encode()))


def _decode_case(rng, seq_lens):
    cache = ref.make_paged_cache(rng, seq_lens, PAGE, L, R, num_pages=12, cols=5)
    q = rng.standard_normal((len(seq_lens), 2, N, L + R)).astype(np.float32)
    return cache, q


@pytest.mark.parametrize("num_splits", [1, 3])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_decode_poisoned_query_row(rng, num_splits, bad):
    cache, q = _decode_case(rng, [40, 33, 0])
    q[1, 0, 2, 5] = bad  # request 1, query row 0, head 2
    q[2, 1, 0, 0] = np.nan  # request 2 has no keys: its rows stay empty
    out, lse = mla.decode(q, cache.kv_cache, cache.block_table, cache.seq_lens, head_dim_v=L,
                          softmax_scale=0.2, num_splits=num_splits)
    assert np.all(np.isnan(out[1, 0, 2])) and np.isnan(lse[1, 2, 0])
    assert np.all(out[2] == 0) and np.all(lse[2] == -np.inf)
    clean = np.ones(out.shape[:3], bool)
    clean[1, 0, 2] = False
    want_out, want_lse = ref.decode_ref(np.nan_to_num(q, nan=0, posinf=0, neginf=0), cache.kv_cache,
                                        cache.block_table, cache.seq_lens, L, 0.2)
    np.testing.assert_allclose(out[clean], want_out[clean], **F32)
    np.testing.assert_allclose(lse.transpose(0, 2, 1)[clean], want_lse.transpose(0, 2, 1)[clean], **F32)


def test_decode_poisoned_visible_cache_row(rng):
    """NaN inside a row the request reads poisons every query row that sees it (causal rows that
    cannot see it stay clean)."""
    cache, q = _decode_case(rng, [40, 33])
    last = cache.slots(0, np.array([39]))[0]  # request 0's newest token: only causal row 1 sees it
    cache.kv_cache.reshape(-1, L + R)[last, 7] = np.nan
    out, lse = mla.decode(q, cache.kv_cache, cache.block_table, cache.seq_lens, head_dim_v=L,
                          softmax_scale=0.2, causal=True, num_splits=2)
    assert np.all(np.isnan(out[0, 1])) and np.all(np.isnan(lse[0, :, 1]))
    assert np.all(np.isfinite(out[0, 0])) and np.all(np.isfinite(lse[0, :, 0]))
    assert np.all(np.isfinite(out[1])) and np.all(np.isfinite(lse[1]))


def test_merge_states_nan_lse():
    T, H = 2, 4
    out_a = np.ones((T, N, H), np.float32)
    out_b = np.full((T, N, H), 2.0, np.float32)
    lse_a = np.zeros((N, T), np.float32)
    lse_b = np.zeros((N, T), np.float32)
    lse_a[1, 0] = np.nan
    lse_b[2, 1] = -np.inf  # an empty side still merges to the other side exactly
    out, lse = mla.merge_states(out_a, lse_a, out_b, lse_b)
    assert np.all(np.isnan(out[0, 1])) and np.isnan(lse[1, 0])
    np.testing.assert_allclose(out[1, 2], out_a[1, 2], **F32)
    np.testing.assert_allclose(lse[2, 1], 0.0, **F32)
    np.testing.assert_allclose(out[0, 0], 1.5, **F32)


def test_prefill_poisoned_query(rng):
    """A NaN query token poisons its own output rows only."""
    P, V = 8, 5
    case = ref.make_prefill_case(rng, [4, 3], [20, 0], PAGE, L, R, N, P, V, num_pages=12, cols=5)
    q = case.q.copy()
    q[1, 2, 0] = np.nan  # request 0, token 1, head 2
    out = mla.prefill(q, case.kv_c, case.k_pe, case.kv_b_proj, case.cache.kv_cache, case.cache.block_table,
                      case.query_start_loc, case.cache.seq_lens, softmax_scale=(P + R) ** -0.5, v_head_dim=V,
                      workspace_rows=16)
    assert np.all(np.isnan(out[1, 2]))
    mask = np.ones(out.shape[:2], bool)
    mask[1, 2] = False
    assert np.all(np.isfinite(out[mask]))
