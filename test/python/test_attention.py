"""mla.attention (a mixed decode/prefill batch, split by mla-select-algorithm) on the CPU against the
numpy reference: ref.attention_ref attends every request's new tokens causally over the cache rows,
which already hold them, independently of how the batch is split.

Tolerances: the decode path is three float32 stages (absorb_q, decode, up_proj_out), each adding
~1e-6 relative, hence rtol 1e-4 / atol 5e-5 as for the absorbed-vs-MHA test of test_api.py; float16
activations use test_api.py's F16 tolerance; fp8 caches are compared with the reference reading the
same bytes.

Shapes are pinned per case (NUM_PAGES, COLS) because the JIT compiles per shape.
"""

import zlib
from dataclasses import dataclass

import numpy as np
import pytest

import mla
import mla_reference as ref

TOL = dict(rtol=1e-4, atol=5e-5)
F16 = dict(rtol=2e-3, atol=2e-3)
NUM_PAGES, COLS = 24, 5


@dataclass(frozen=True)
class Dims:
    N: int
    L: int
    R: int
    P: int
    V: int

    @property
    def scale(self):
        return (self.P + self.R) ** -0.5

    def __str__(self):
        return f"N{self.N}_L{self.L}_R{self.R}_P{self.P}_V{self.V}"


N16 = Dims(N=16, L=64, R=16, P=16, V=8)
N128 = Dims(N=128, L=32, R=8, P=16, V=8)


@pytest.fixture
def rng(request):
    return np.random.default_rng(zlib.crc32(request.node.name.encode()))


def make_case(rng, dims, q_lens, ctx_lens, page_size=16, **kwargs):
    return ref.make_prefill_case(rng, q_lens, ctx_lens, page_size, dims.L, dims.R, dims.N, dims.P, dims.V,
                                 num_pages=NUM_PAGES, cols=COLS, **kwargs)


def run_attention(case, dims, *, kv_cache=None, kv_c=None, **kwargs):
    cache = case.cache
    kv_cache = cache.kv_cache if kv_cache is None else kv_cache
    before = kv_cache.copy()
    out = mla.attention(case.q, case.kv_c if kv_c is None else kv_c, case.k_pe, case.kv_b_proj, kv_cache,
                        cache.block_table, case.query_start_loc, cache.seq_lens, softmax_scale=dims.scale,
                        v_head_dim=dims.V, **kwargs)
    assert out.shape == (case.q.shape[0], dims.N, dims.V) and out.dtype == case.q.dtype
    np.testing.assert_array_equal(kv_cache.view(np.uint8), before.view(np.uint8))
    return out


def reference(case, dims, *, kv_format="auto", kv_scale=None):
    cache = case.cache
    return ref.attention_ref(case.q, case.kv_b_proj, cache.kv_cache, cache.block_table, case.query_start_loc,
                             cache.seq_lens, dims.scale, dims.V, dims.L, dims.R, kv_format, kv_scale)


def assert_close(actual, expected, tol, what):
    np.testing.assert_allclose(np.asarray(actual, np.float64), np.asarray(expected, np.float64),
                               err_msg=what, **tol)


# (q_lens, ctx_lens): decode requests first, as engines order them.
BATCHES = {
    # Three decodes (one with a single cached token, i.e. a 1-token prompt) and two prompts, one of
    # them without context.
    "mixed": ([1, 1, 1, 5, 3], [20, 0, 33, 0, 17]),
    "decode_only": ([1, 1, 1, 1], [15, 16, 0, 40]),
    "prefill_only": ([4, 2, 7], [0, 18, 31]),
    # A 1-token prompt behind a longer one takes the prefill path, as does every request after it.
    "one_token_prompts_after_prefill": ([1, 3, 1, 1], [5, 0, 0, 12]),
    # Requests without tokens take no path; the first one ends the decode run.
    "zero_token_requests": ([1, 0, 1, 4, 0], [7, 9, 3, 2, 0]),
    "leading_zero_token_request": ([0, 1, 1, 2], [4, 6, 0, 1]),
}


@pytest.mark.parametrize("dims", [N16, pytest.param(N128, marks=pytest.mark.slow)], ids=str)
@pytest.mark.parametrize("batch", sorted(BATCHES))
def test_attention_matches_reference(rng, dims, batch):
    q_lens, ctx_lens = BATCHES[batch]
    case = make_case(rng, dims, q_lens, ctx_lens)
    expected = reference(case, dims)
    split = run_attention(case, dims)
    assert_close(split, expected, TOL, "decode_threshold=1")
    prefill_only = run_attention(case, dims, decode_threshold=0, workspace_rows=16)
    assert_close(prefill_only, expected, TOL, "decode_threshold=0")


def test_attention_n128_mixed(rng):
    """N = 128 on the one mixed batch (the slow mark above runs every batch)."""
    q_lens, ctx_lens = BATCHES["mixed"]
    case = make_case(rng, N128, q_lens, ctx_lens)
    assert_close(run_attention(case, N128), reference(case, N128), TOL, "N=128")


def test_decode_requests_take_the_decode_path(rng):
    """The leading q_len-1 requests read their new token from the cache (decode path) and the others
    from kv_c (prefill path): NaN kv_c rows of the decode tokens must not reach the output with
    threshold 1, and do with threshold 0, where every request is a prefill."""
    dims = N16
    case = make_case(rng, dims, [1, 1, 3, 1], [9, 30, 4, 6])
    kv_c = case.kv_c.copy()
    kv_c[:2] = np.nan
    out = run_attention(case, dims, kv_c=kv_c)
    assert_close(out, reference(case, dims), TOL, "decode tokens' kv_c unused")
    assert np.isnan(run_attention(case, dims, kv_c=kv_c, decode_threshold=0)[:2]).all()
    # Token 3 (q_len 1 behind a prompt) takes the prefill path and reads kv_c.
    kv_c = case.kv_c.copy()
    kv_c[5] = np.nan
    assert np.isnan(run_attention(case, dims, kv_c=kv_c)[5]).all()


def test_workspace_rows_and_out(rng):
    dims = N16
    q_lens, ctx_lens = BATCHES["mixed"]
    case = make_case(rng, dims, q_lens, ctx_lens)
    expected = reference(case, dims)
    for rows in (None, 16, 40, 1):
        assert_close(run_attention(case, dims, workspace_rows=rows), expected, TOL, f"workspace_rows={rows}")
    out = np.full((case.q.shape[0], dims.N, dims.V), np.nan, np.float32)
    result = run_attention(case, dims, out=out)
    assert result is out
    assert_close(out, expected, TOL, "out=")


def test_float16(rng):
    dims = N16
    q_lens, ctx_lens = BATCHES["mixed"]
    case = make_case(rng, dims, q_lens, ctx_lens, dtype=np.float16)
    assert_close(run_attention(case, dims), reference(case, dims), F16, "float16")


@pytest.mark.parametrize("kv_format,kv_scale", [("fp8_e4m3", 0.02), ("fp8_ds_mla", None)])
def test_fp8_cache(rng, kv_format, kv_scale):
    """fp8 rows against the reference on the same bytes. The prefill path takes the new tokens from
    kv_c, so the case's kv_c is the dequantised cache rows: both paths then see the same values."""
    dims = Dims(N=16, L=128, R=16, P=16, V=8)
    q_lens, ctx_lens = BATCHES["mixed"]
    case = make_case(rng, dims, q_lens, ctx_lens, kv_format=kv_format, kv_scale=kv_scale)
    cache = case.cache
    stored = np.concatenate([ref.decode_rows(ref._read_positions(cache.kv_cache, cache.block_table[b], c,
                                                                 int(cache.seq_lens[b]) - c),
                                             kv_format, dims.L, dims.R, kv_scale)
                             for b, c in enumerate(ctx_lens)]).astype(np.float32)
    case.kv_c, case.k_pe = stored[:, :dims.L].copy(), stored[:, dims.L:].copy()
    out = run_attention(case, dims, kv_format=kv_format, kv_scale=kv_scale)
    assert_close(out, reference(case, dims, kv_format=kv_format, kv_scale=kv_scale), TOL, kv_format)


def small_args(rng):
    dims = N16
    case = ref.make_prefill_case(rng, [1, 3, 2], [5, 20, 0], 16, dims.L, dims.R, dims.N, dims.P, dims.V,
                                 num_pages=8, cols=4)
    return dict(q=case.q, kv_c=case.kv_c, k_pe=case.k_pe, kv_b_proj=case.kv_b_proj, kv_cache=case.cache.kv_cache,
                block_table=case.cache.block_table.copy(), query_start_loc=case.query_start_loc.copy(),
                seq_lens=case.cache.seq_lens.copy(), softmax_scale=dims.scale, v_head_dim=dims.V)


def with_(args, **changes):
    return {**args, **changes}


def _new_token_page_out_of_range(a):
    # Request 0 has 6 positions (5 context + its new token) in page 0 of its row: prefill reads only
    # the context, but the decode path reads the new token's row, and the page under it must exist.
    table = a["block_table"].copy()
    seq_lens = a["seq_lens"].copy()
    seq_lens[0] = 17  # context 16 (page 0), the new token in page 1
    table[0, 1] = 8
    return with_(a, block_table=table, seq_lens=seq_lens)


ERRORS = {
    "decode_threshold_above_one": lambda a: with_(a, decode_threshold=2),
    "decode_threshold_not_an_integer": lambda a: with_(a, decode_threshold=1.5),
    "new_token_page_out_of_range": _new_token_page_out_of_range,
    "q_rank": lambda a: with_(a, q=a["q"][:, 0]),
    "kv_b_proj_rows": lambda a: with_(a, kv_b_proj=a["kv_b_proj"][:-1]),
    "query_start_loc_total": lambda a: with_(a, query_start_loc=np.array([0, 1, 4, 5], np.int32)),
    "seq_len_shorter_than_new_tokens": lambda a: with_(a, seq_lens=np.array([6, 2, 2], np.int32)),
    "unknown_kv_format": lambda a: with_(a, kv_format="fp8"),
    "workspace_rows_zero": lambda a: with_(a, workspace_rows=0),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_attention_rejects(rng, name):
    args = ERRORS[name](small_args(rng))
    cache = args["kv_cache"]
    before = cache.copy()
    positional = [args.pop(k) for k in ("q", "kv_c", "k_pe", "kv_b_proj", "kv_cache", "block_table",
                                        "query_start_loc", "seq_lens")]
    with pytest.raises(ValueError):
        mla.attention(*positional, **args)
    np.testing.assert_array_equal(cache.view(np.uint8), before.view(np.uint8))


def test_valid_small_args_run(rng):
    """The arguments the error cases start from are valid (so each case fails for its own change)."""
    args = small_args(rng)
    positional = [args.pop(k) for k in ("q", "kv_c", "k_pe", "kv_b_proj", "kv_cache", "block_table",
                                        "query_start_loc", "seq_lens")]
    out = mla.attention(*positional, **args)
    assert np.isfinite(out).all()
