"""Tests of the `mla` Python package against the independent numpy reference (mla_reference.py).

The CPU path JIT-compiles per distinct shape, so the cases below pin array shapes (batch, page count,
block-table width) per configuration and vary only runtime values such as seq_lens; `slow` marks the
128-head and long-context cases.

Tolerances (all comparisons are against the float64 reference rounded to float32):
  * float32: outputs rtol 1e-4 / atol 1e-5, LSE rtol 1e-5 / atol 1e-5. Outputs are convex combinations of
    O(1) values; a float32 kernel with any summation order stays within ~1e-6 of the exact answer, and the
    slack allows exp2-based softmax and blocked accumulation.
  * float16 (q and cache in float16): rtol/atol 2e-3, i.e. two float16 ulps at 1.0, enough for a final
    rounding plus probabilities held in float16 for the PV product.
  * fp8 caches: against the reference reading the *same bytes* the float32 tolerances apply (the
    dequantisation is exact); against the unquantised rows, ref.FP8_OUT_TOL (2^-4 of the largest
    |value|, e4m3's half-ulp relative error) and ref.FP8_LSE_TOL (0.25 absolute).
  * split-KV: different num_splits agree within rtol 1e-5 / atol 1e-6.
"""

import re
import zlib
from dataclasses import dataclass

import numpy as np
import pytest

import mla
import mla_reference as ref

F32 = dict(rtol=1e-4, atol=1e-5)
F32_LSE = dict(rtol=1e-5, atol=1e-5)
F16 = dict(rtol=2e-3, atol=2e-3)
SPLITS = dict(rtol=1e-5, atol=1e-6)


@dataclass(frozen=True)
class Dims:
    N: int
    L: int
    R: int
    P: int
    V: int

    @property
    def D(self):
        return self.L + self.R

    @property
    def scale(self):
        # (P+R)^-0.5, never D^-0.5 (primer section 1).
        return (self.P + self.R) ** -0.5

    def __str__(self):
        return f"N{self.N}_L{self.L}_R{self.R}_P{self.P}_V{self.V}"


DSV3 = Dims(N=16, L=512, R=64, P=128, V=128)  # DeepSeek-V3 at TP8
DSV3_TP1 = Dims(N=128, L=512, R=64, P=128, V=128)
SMALL = Dims(N=3, L=64, R=16, P=8, V=5)  # odd widths catch hard-coded 512/64/128


@pytest.fixture
def rng(request):
    # Seeded from the test id (not hash(), which varies per process) so a failure reproduces alone.
    return np.random.default_rng(zlib.crc32(request.node.name.encode()))


def assert_close(actual, expected, tol, what):
    np.testing.assert_allclose(np.asarray(actual, np.float64), np.asarray(expected, np.float64),
                               err_msg=what, **tol)


def assert_unchanged(after, before):
    """Bitwise equality (NaN poison included)."""
    np.testing.assert_array_equal(np.ascontiguousarray(after).view(np.uint8),
                                  np.ascontiguousarray(before).view(np.uint8))


# ---------------------------------------------------------------------------------------------------
# Decode
# ---------------------------------------------------------------------------------------------------

# One batch geometry per page size: 6 requests, 12 physical pages, 4 block-table columns, whatever the
# seq_lens, so every case of a (dims, page_size, s_q, dtype) shares one compiled kernel.
BATCH, NUM_PAGES, COLS = 6, 12, 4


def boundary_seq_lens(page_size, s_q, causal):
    """Lengths around page boundaries; 0 and 1 only where they are legal (causal needs seq_len >= s_q)."""
    short = [s_q, s_q + 1] if causal else [0, 1]
    return short + [page_size - 1, page_size, page_size + 1, 2 * page_size + 7]


def decode_inputs(rng, dims, seq_lens, page_size, s_q, *, kv_format="auto", dtype=np.float32, kv_scale=None,
                  num_pages=NUM_PAGES, cols=COLS):
    cache = ref.make_paged_cache(rng, seq_lens, page_size, dims.L, dims.R, kv_format=kv_format, dtype=dtype,
                                 kv_scale=kv_scale, num_pages=num_pages, cols=cols)
    q = rng.standard_normal((len(seq_lens), s_q, dims.N, dims.D)).astype(dtype)
    return q, cache


def run_decode(q, cache, dims, *, causal, num_splits=None, kv_format="auto", kv_scale=None, seq_lens=None,
               block_table=None):
    """mla.decode plus the invariants every call must keep: shapes, dtypes, cache untouched."""
    seq_lens = cache.seq_lens if seq_lens is None else seq_lens
    block_table = cache.block_table if block_table is None else block_table
    before = cache.kv_cache.copy()
    out, lse = mla.decode(q, cache.kv_cache, block_table, seq_lens, head_dim_v=dims.L,
                          softmax_scale=dims.scale, causal=causal, num_splits=num_splits,
                          kv_format=kv_format, kv_scale=kv_scale)
    B, s_q = q.shape[:2]
    assert out.shape == (B, s_q, dims.N, dims.L) and out.dtype == q.dtype
    assert lse.shape == (B, dims.N, s_q) and lse.dtype == np.float32
    assert_unchanged(cache.kv_cache, before)
    return out, lse


def reference_decode(q, cache, dims, *, causal, kv_format="auto", kv_scale=None, kv_cache=None):
    kv_cache = cache.kv_cache if kv_cache is None else kv_cache
    return ref.decode_ref(q, kv_cache, cache.block_table, cache.seq_lens, dims.L, dims.scale, causal,
                          kv_format, kv_scale)


def check_empty_requests(out, lse, seq_lens):
    for b, s in enumerate(seq_lens):
        if s == 0:
            assert np.all(out[b] == 0), "seq_len 0 must give exact zeros"
            assert np.all(lse[b] == -np.inf), "seq_len 0 must give lse -inf"


DECODE_CASES = [
    (SMALL, 16, 1, False), (SMALL, 16, 2, True), (SMALL, 16, 3, False), (SMALL, 16, 4, True),
    (SMALL, 64, 1, False), (SMALL, 128, 3, True),
    (DSV3, 64, 1, False), (DSV3, 64, 2, True), (DSV3, 64, 4, False), (DSV3, 64, 4, True),
    (DSV3, 128, 1, False), (DSV3, 16, 2, True),
    pytest.param(DSV3_TP1, 64, 1, False, marks=pytest.mark.slow),
    pytest.param(DSV3_TP1, 64, 2, True, marks=pytest.mark.slow),
]


@pytest.mark.parametrize("dims,page_size,s_q,causal", DECODE_CASES, ids=str)
def test_decode_matches_reference(rng, dims, page_size, s_q, causal):
    q, cache = decode_inputs(rng, dims, boundary_seq_lens(page_size, s_q, causal), page_size, s_q)
    out, lse = run_decode(q, cache, dims, causal=causal)
    r_out, r_lse = reference_decode(q, cache, dims, causal=causal)
    assert_close(out, r_out, F32, "out")
    assert_close(lse, r_lse, F32_LSE, "lse")
    check_empty_requests(out, lse, cache.seq_lens)
    assert np.all(np.isfinite(out)), "poisoned slots leaked into the output"


@pytest.mark.slow
def test_decode_long_context(rng):
    """One request past 4096 tokens (several default splits' worth) next to a short one."""
    dims, page_size = DSV3, 64
    seq_lens = [4097, 63]
    q, cache = decode_inputs(rng, dims, seq_lens, page_size, 2, num_pages=70, cols=66)
    r_out, r_lse = reference_decode(q, cache, dims, causal=True)
    single = None
    for num_splits in (1, None, 8):
        out, lse = run_decode(q, cache, dims, causal=True, num_splits=num_splits)
        assert_close(out, r_out, F32, f"out, num_splits={num_splits}")
        assert_close(lse, r_lse, F32_LSE, f"lse, num_splits={num_splits}")
        single = out if single is None else single
        assert_close(out, single, SPLITS, f"num_splits={num_splits} vs 1")


@pytest.mark.parametrize("dims,page_size,s_q,causal", [(DSV3, 64, 1, False), (SMALL, 16, 3, True)], ids=str)
def test_decode_num_splits_agree(rng, dims, page_size, s_q, causal):
    """Splits may be empty (num_splits > seq_len, seq_len 0); every count gives the same answer."""
    q, cache = decode_inputs(rng, dims, boundary_seq_lens(page_size, s_q, causal), page_size, s_q)
    single, single_lse = run_decode(q, cache, dims, causal=causal, num_splits=1)
    for num_splits in (2, 3, 5, 8):
        out, lse = run_decode(q, cache, dims, causal=causal, num_splits=num_splits)
        assert_close(out, single, SPLITS, f"out, num_splits={num_splits}")
        assert_close(lse, single_lse, SPLITS, f"lse, num_splits={num_splits}")
        r_out, r_lse = ref.decode_split_ref(q, cache.kv_cache, cache.block_table, cache.seq_lens, dims.L,
                                            dims.scale, causal, num_splits=num_splits)
        assert_close(out, r_out, F32, f"out vs split reference, num_splits={num_splits}")
        assert_close(lse, r_lse, F32_LSE, f"lse vs split reference, num_splits={num_splits}")
        check_empty_requests(out, lse, cache.seq_lens)


@pytest.mark.parametrize("policy, num_splits, planned", [("grid", 3, 3), ("batch-invariant", None, 1),
                                                         ("grid", None, None)])
def test_host_plan_runs_the_planned_split(rng, policy, num_splits, planned):
    """mla.plan_decode on numpy arrays: the same plan/run call sites as on the GPU, the plan's split count,
    and out=/lse= filled in place."""
    s_q, causal = 2, True
    q, cache = decode_inputs(rng, SMALL, boundary_seq_lens(16, s_q, causal), 16, s_q)
    plan = mla.plan_decode(q, cache.kv_cache, cache.block_table, cache.seq_lens, head_dim_v=SMALL.L,
                           causal=causal, num_splits=num_splits, split_policy=policy)
    assert plan.num_splits == planned
    plan.check()
    out = np.full((len(cache.seq_lens), s_q, SMALL.N, SMALL.L), np.nan, np.float32)
    lse = np.full((len(cache.seq_lens), SMALL.N, s_q), np.nan, np.float32)
    got = mla.decode(q, cache.kv_cache, cache.block_table, cache.seq_lens, head_dim_v=SMALL.L,
                     softmax_scale=SMALL.scale, causal=causal, plan=plan, out=out, lse=lse)
    assert got[0] is out and got[1] is lse
    want = run_decode(q, cache, SMALL, causal=causal, num_splits=planned)
    np.testing.assert_array_equal(out, want[0])
    np.testing.assert_array_equal(lse, want[1])


def test_host_plan_checks_its_calls(rng):
    q, cache = decode_inputs(rng, SMALL, [5, 9], 16, 1)
    args = (q, cache.kv_cache, cache.block_table, cache.seq_lens)
    plan = mla.plan_decode(*args, head_dim_v=SMALL.L)
    with pytest.raises(ValueError, match="the plan was made for"):
        mla.decode(q[:1], cache.kv_cache, cache.block_table[:1], cache.seq_lens[:1], head_dim_v=SMALL.L,
                   softmax_scale=SMALL.scale, plan=plan)
    with pytest.raises(ValueError, match="head_dim_v and causal must be the plan's"):
        mla.decode(*args, head_dim_v=SMALL.L, softmax_scale=SMALL.scale, causal=True, plan=plan)
    with pytest.raises(ValueError, match="num_splits is the plan's"):
        mla.decode(*args, head_dim_v=SMALL.L, softmax_scale=SMALL.scale, plan=plan, num_splits=2)
    with pytest.raises(ValueError, match="plan must come from mla.plan_decode"):
        mla.decode(*args, head_dim_v=SMALL.L, softmax_scale=SMALL.scale, plan="plan")
    with pytest.raises(ValueError, match="split_policy must be 'grid' or 'batch-invariant'"):
        mla.plan_decode(*args, head_dim_v=SMALL.L, split_policy="balanced")
    with pytest.raises(ValueError, match=r"out must be a writeable float32 numpy array of shape \[2, 1,"):
        mla.decode(*args, head_dim_v=SMALL.L, softmax_scale=SMALL.scale, out=np.zeros((2, 1), np.float32))


@pytest.mark.parametrize("dims,page_size,s_q,causal", [(SMALL, 16, 2, True), (DSV3, 64, 1, False)], ids=str)
def test_decode_float16(rng, dims, page_size, s_q, causal):
    q, cache = decode_inputs(rng, dims, boundary_seq_lens(page_size, s_q, causal), page_size, s_q,
                             dtype=np.float16)
    out, lse = run_decode(q, cache, dims, causal=causal)
    r_out, r_lse = reference_decode(q, cache, dims, causal=causal)
    assert_close(out, r_out, F16, "out")
    assert_close(lse, r_lse, F16, "lse")
    check_empty_requests(out, lse, cache.seq_lens)


FP8_FORMATS = [("fp8_e4m3", 0.02), ("fp8_e4m3_token", None), ("fp8_ds_mla", None)]

FP8_DECODE_CASES = [
    ("fp8_e4m3", 0.02, SMALL, 1, False), ("fp8_e4m3", 0.02, DSV3, 2, True),
    ("fp8_e4m3_token", None, SMALL, 2, True), ("fp8_e4m3_token", None, DSV3, 1, False),
    ("fp8_ds_mla", None, DSV3, 1, False), ("fp8_ds_mla", None, DSV3, 3, True),
]


@pytest.mark.parametrize("kv_format,kv_scale,dims,s_q,causal", FP8_DECODE_CASES, ids=str)
def test_decode_fp8(rng, kv_format, kv_scale, dims, s_q, causal):
    # kv_scale 0.02 keeps N(0,1) values (|x| < ~6) well inside e4m3's +-448 after division.
    page_size = 64
    q, cache = decode_inputs(rng, dims, boundary_seq_lens(page_size, s_q, causal), page_size, s_q,
                             kv_format=kv_format, kv_scale=kv_scale)
    out, lse = run_decode(q, cache, dims, causal=causal, kv_format=kv_format, kv_scale=kv_scale)
    r_out, r_lse = reference_decode(q, cache, dims, causal=causal, kv_format=kv_format, kv_scale=kv_scale)
    assert_close(out, r_out, F32, "out vs reference on the same fp8 bytes")
    assert_close(lse, r_lse, F32_LSE, "lse vs reference on the same fp8 bytes")
    f_out, f_lse = reference_decode(q, cache, dims, causal=causal, kv_cache=cache.unquantised())
    value_max = max(np.abs(np.concatenate(cache.kv_c + [np.zeros((0, dims.L))])).max(), 1.0)
    live = np.isfinite(f_lse)
    assert np.max(np.abs(out - f_out)) <= ref.FP8_OUT_TOL * value_max
    assert np.max(np.abs(lse[live] - f_lse[live])) <= ref.FP8_LSE_TOL
    check_empty_requests(out, lse, cache.seq_lens)


@pytest.mark.parametrize("filler", ["minus_one", "past_end"])
def test_decode_ignores_unused_block_table_entries(rng, filler):
    """Entries past a request's last page (all of them for seq_len 0) are never read nor validated."""
    dims, page_size = SMALL, 16
    q, cache = decode_inputs(rng, dims, boundary_seq_lens(page_size, 1, False), page_size, 1)
    table = cache.block_table.copy()
    for b, s in enumerate(cache.seq_lens):
        table[b, -(-int(s) // page_size):] = -1 if filler == "minus_one" else NUM_PAGES + 1000
    out, lse = run_decode(q, cache, dims, causal=False, block_table=table)
    r_out, r_lse = reference_decode(q, cache, dims, causal=False)
    assert_close(out, r_out, F32, "out")
    assert_close(lse, r_lse, F32_LSE, "lse")


# ---------------------------------------------------------------------------------------------------
# Weight preparation and the absorbed path vs the up-projected MHA formulation
# ---------------------------------------------------------------------------------------------------


def random_kv_b_proj(rng, dims, dtype=np.float32):
    return (rng.standard_normal((dims.N * (dims.P + dims.V), dims.L)) / np.sqrt(dims.L)).astype(dtype)


@pytest.mark.parametrize("dims", [SMALL, DSV3, pytest.param(DSV3_TP1, marks=pytest.mark.slow)], ids=str)
def test_weight_products(rng, dims):
    w = random_kv_b_proj(rng, dims)
    w_uk_t, w_uv = mla.split_kv_b_proj(w, dims.N, dims.P, dims.V)
    r_uk_t, r_uv = ref.split_kv_b_proj_ref(w, dims.N, dims.P, dims.V)
    np.testing.assert_array_equal(w_uk_t, r_uk_t)  # pure data movement: exact
    np.testing.assert_array_equal(w_uv, r_uv)
    T = 5
    q = rng.standard_normal((T, dims.N, dims.P + dims.R)).astype(np.float32)
    qa = mla.absorb_q(q, w_uk_t)
    assert qa.shape == (T, dims.N, dims.D)
    assert_close(qa, ref.absorb_q_ref(q, r_uk_t), F32, "absorb_q")
    o = rng.standard_normal((T, dims.N, dims.L)).astype(np.float32)
    up = mla.up_proj_out(o, w_uv)
    assert up.shape == (T, dims.N * dims.V)
    assert_close(up, ref.up_proj_out_ref(o, r_uv), F32, "up_proj_out")


def mha_formulation(case, dims):
    """Primer section 7 written out with the reference: up-project every cached latent row (new tokens
    included) and run causal MHA per request."""
    cache = case.cache
    k_parts, v_parts = [], []
    for b, s in enumerate(cache.seq_lens):
        rows = cache.latent(b)
        k_nope, v = ref.up_proj_kv_ref(rows[:, :dims.L], case.kv_b_proj, dims.N, dims.P, dims.V)
        k_pe = np.broadcast_to(rows[:, None, dims.L:], (int(s), dims.N, dims.R))
        k_parts.append(np.concatenate([k_nope, k_pe], axis=-1))
        v_parts.append(v)
    cu_k = np.cumsum([0] + [int(s) for s in cache.seq_lens])
    out, _ = ref.mha_ref(case.q, np.concatenate(k_parts), np.concatenate(v_parts), case.query_start_loc,
                         cu_k, True, dims.scale)
    return out.reshape(out.shape[0], -1)


@pytest.mark.parametrize("dims,page_size", [(SMALL, 16), (DSV3, 64),
                                            pytest.param(DSV3_TP1, 64, marks=pytest.mark.slow)], ids=str)
def test_absorbed_decode_equals_mha(rng, dims, page_size):
    """absorb_q -> decode -> up_proj_out (primer section 5) equals MHA over up-projected K/V (section 7),
    and mla.prefill over the same tokens agrees with both."""
    s_q = 2
    ctx_lens = [0, page_size - 2, page_size, 2 * page_size + 3]
    case = ref.make_prefill_case(rng, [s_q] * 4, ctx_lens, page_size, dims.L, dims.R, dims.N, dims.P, dims.V)
    cache = case.cache
    B, T = len(ctx_lens), case.q.shape[0]
    expected = mha_formulation(case, dims)

    w_uk_t, w_uv = mla.split_kv_b_proj(case.kv_b_proj, dims.N, dims.P, dims.V)
    qa = mla.absorb_q(case.q, w_uk_t).reshape(B, s_q, dims.N, dims.D)
    o_lat, _ = run_decode(qa, cache, dims, causal=True)
    absorbed = mla.up_proj_out(o_lat.reshape(T, dims.N, dims.L), w_uv)
    # Three float32 stages (absorb, attend, up-project) each add ~1e-6 relative.
    assert_close(absorbed, expected, dict(rtol=1e-4, atol=5e-5), "absorbed decode vs MHA")

    out = mla.prefill(case.q, case.kv_c, case.k_pe, case.kv_b_proj, cache.kv_cache, cache.block_table,
                      case.query_start_loc, cache.seq_lens, softmax_scale=dims.scale, v_head_dim=dims.V)
    assert_close(out.reshape(T, -1), expected, dict(rtol=1e-4, atol=5e-5), "prefill vs MHA")


# ---------------------------------------------------------------------------------------------------
# Prefill
# ---------------------------------------------------------------------------------------------------

# (dims, page_size, q_lens, ctx_lens, workspace sizes). Each list includes None (the default), one
# larger than all context, exactly one page, a size smaller than one page per request, and an odd size
# that is not page aligned.
PREFILL_CASES = [
    (SMALL, 16, [5, 1, 7], [0, 37, 16], [None, 1000, 16, 40, 13, 1]),
    (DSV3, 64, [3, 17, 1], [64, 0, 130], [None, 1000, 64, 100, 17]),
    (DSV3, 128, [2, 4], [129, 255], [None, 200]),
    pytest.param(DSV3_TP1, 64, [4, 2], [100, 0], [None, 48], marks=pytest.mark.slow),
]


def run_prefill(case, dims, *, workspace_rows=None, kv_format="auto", kv_scale=None, kv_cache=None):
    cache = case.cache
    kv_cache = cache.kv_cache if kv_cache is None else kv_cache
    before = kv_cache.copy()
    out = mla.prefill(case.q, case.kv_c, case.k_pe, case.kv_b_proj, kv_cache, cache.block_table,
                      case.query_start_loc, cache.seq_lens, softmax_scale=dims.scale, v_head_dim=dims.V,
                      workspace_rows=workspace_rows, kv_format=kv_format, kv_scale=kv_scale)
    assert out.shape == (case.q.shape[0], dims.N, dims.V) and out.dtype == case.q.dtype
    assert_unchanged(kv_cache, before)
    return out


def reference_prefill(case, dims, *, kv_format="auto", kv_scale=None, kv_cache=None):
    cache = case.cache
    kv_cache = cache.kv_cache if kv_cache is None else kv_cache
    return ref.prefill_ref(case.q, case.kv_c, case.k_pe, case.kv_b_proj, kv_cache, cache.block_table,
                           case.query_start_loc, cache.seq_lens, dims.scale, dims.V, kv_format, kv_scale)


@pytest.mark.parametrize("dims,page_size,q_lens,ctx_lens,workspaces", PREFILL_CASES, ids=str)
def test_prefill_chunked_matches_reference(rng, dims, page_size, q_lens, ctx_lens, workspaces):
    case = ref.make_prefill_case(rng, q_lens, ctx_lens, page_size, dims.L, dims.R, dims.N, dims.P, dims.V,
                                 num_pages=NUM_PAGES, cols=COLS)
    expected = reference_prefill(case, dims)
    unchunked = None
    for rows in workspaces:
        out = run_prefill(case, dims, workspace_rows=rows)
        assert_close(out, expected, F32, f"workspace_rows={rows}")
        if unchunked is None:
            unchunked = out
        else:  # chunking only changes the merge order
            assert_close(out, unchunked, SPLITS, f"workspace_rows={rows} vs default")


def test_prefill_reads_only_context(rng):
    """New tokens' K/V come from kv_c/k_pe: poisoning their cache slots must not matter."""
    dims = SMALL
    case = ref.make_prefill_case(rng, [5, 1, 7], [0, 37, 16], 16, dims.L, dims.R, dims.N, dims.P, dims.V,
                                 num_pages=NUM_PAGES, cols=COLS)
    poisoned = case.cache.kv_cache.copy()
    poisoned.reshape(-1, dims.D)[case.new_token_slots()] = np.nan
    for rows in (None, 13):
        out = run_prefill(case, dims, workspace_rows=rows, kv_cache=poisoned)
        assert_close(out, reference_prefill(case, dims), F32, f"workspace_rows={rows}")


@pytest.mark.parametrize("kv_format,kv_scale", FP8_FORMATS)
def test_prefill_fp8(rng, kv_format, kv_scale):
    dims = DSV3
    case = ref.make_prefill_case(rng, [3, 17, 1], [64, 0, 130], 64, dims.L, dims.R, dims.N, dims.P, dims.V,
                                 kv_format=kv_format, kv_scale=kv_scale, num_pages=NUM_PAGES, cols=COLS)
    expected = reference_prefill(case, dims, kv_format=kv_format, kv_scale=kv_scale)
    unquantised = reference_prefill(case, dims, kv_cache=case.cache.unquantised())
    _, v = ref.up_proj_kv_ref(np.concatenate(case.cache.kv_c), case.kv_b_proj, dims.N, dims.P, dims.V)
    for rows in (None, 100):
        out = run_prefill(case, dims, workspace_rows=rows, kv_format=kv_format, kv_scale=kv_scale)
        assert_close(out, expected, F32, f"vs reference on the same fp8 bytes, workspace_rows={rows}")
        assert np.max(np.abs(out - unquantised)) <= ref.FP8_OUT_TOL * np.abs(v).max()


# ---------------------------------------------------------------------------------------------------
# Cache writes
# ---------------------------------------------------------------------------------------------------


def e4m3_codes_within_one_step(a, b):
    """Codes equal, or neighbours on the e4m3 number line (a float32 1-ulp difference in x/scale can
    move a value across a rounding boundary); +0 and -0 count as equal."""
    a, b = a.astype(np.int64), b.astype(np.int64)
    ordinal = lambda c: np.where(c & 0x80, -(c & 0x7F), c & 0x7F)
    return np.abs(ordinal(a) - ordinal(b)) <= 1


def check_fp8_rows(actual, expected, kv_format, L, R, exact_codes):
    D = L + R
    if kv_format == "fp8_e4m3":
        code_cols, scale_cols, bf16_cols = slice(0, D), None, None
    elif kv_format == "fp8_e4m3_token":
        code_cols, scale_cols, bf16_cols = slice(0, D), slice(D, D + 8), None
    else:
        tiles = L // 128
        code_cols, scale_cols, bf16_cols = slice(0, L), slice(L, L + 4 * tiles), slice(L + 4 * tiles, None)
    if exact_codes:
        np.testing.assert_array_equal(actual[:, code_cols], expected[:, code_cols])
    else:
        assert np.all(e4m3_codes_within_one_step(actual[:, code_cols], expected[:, code_cols]))
    if scale_cols is not None:
        # Scales are amax/448 in float32; an implementation multiplying by 1/448 may differ by an ulp.
        got = np.ascontiguousarray(actual[:, scale_cols]).view("<f4")
        want = np.ascontiguousarray(expected[:, scale_cols]).view("<f4")
        np.testing.assert_allclose(got, want, rtol=2.5e-7, atol=0)
    if bf16_cols is not None:
        np.testing.assert_array_equal(actual[:, bf16_cols], expected[:, bf16_cols])  # RNE is deterministic


# kv_scale 0.25 is a power of two, so x / s and x * (1/s) are the same float32 and the bytes must match
# exactly; 0.0173 is not, so codes may move by one step.
CACHE_WRITE_CASES = [
    ("auto", None, np.float32, SMALL, 3), ("auto", None, np.float16, SMALL, 3),
    ("auto", None, np.float32, DSV3, 3), ("auto", None, np.float32, SMALL, 2),
    ("fp8_e4m3", 0.25, np.float32, SMALL, 3), ("fp8_e4m3", 0.25, np.float32, DSV3, 3),
    ("fp8_e4m3", 0.0173, np.float32, SMALL, 3),
    ("fp8_e4m3_token", None, np.float32, SMALL, 3), ("fp8_e4m3_token", None, np.float32, DSV3, 2),
    ("fp8_ds_mla", None, np.float32, DSV3, 3),
]


@pytest.mark.parametrize("kv_format,kv_scale,dtype,dims,k_pe_rank", CACHE_WRITE_CASES, ids=str)
def test_cache_write(rng, kv_format, kv_scale, dtype, dims, k_pe_rank):
    pages, page_size, T = 8, 16, 20
    width = ref.kv_row_width(kv_format, dims.L, dims.R)
    if kv_format == "auto":
        cache = rng.standard_normal((pages, page_size, width)).astype(dtype)
    else:
        cache = rng.integers(0, 256, (pages, page_size, width)).astype(np.uint8)
    kv_c = (rng.standard_normal((T, dims.L)) * 4).astype(dtype)
    kv_c[3] = 0.0  # exercises the amax floor
    k_pe = rng.standard_normal((T, 1, dims.R) if k_pe_rank == 3 else (T, dims.R)).astype(dtype)
    slots = rng.choice(pages * page_size, size=T, replace=False).astype(np.int64)
    slots[[1, 7, 8]] = -1  # padding tokens
    expected = ref.cache_write_ref(kv_c, k_pe, cache, slots, kv_format, kv_scale)
    assert mla.cache_write(kv_c, k_pe, cache, slots, kv_format=kv_format, kv_scale=kv_scale) is None
    written = np.zeros(pages * page_size, bool)
    written[slots[slots >= 0]] = True
    flat, flat_expected = cache.reshape(-1, width), expected.reshape(-1, width)
    assert_unchanged(flat[~written], flat_expected[~written])
    if kv_format == "auto":
        assert_unchanged(flat[written], flat_expected[written])
    else:
        check_fp8_rows(flat[written], flat_expected[written], kv_format, dims.L, dims.R,
                       exact_codes=kv_format == "fp8_e4m3" and kv_scale == 0.25)


@pytest.mark.parametrize("kv_format,kv_scale", [("auto", None), ("fp8_e4m3_token", None), ("fp8_ds_mla", None)])
def test_cache_write_then_decode(rng, kv_format, kv_scale):
    """The writer's bytes are what the reader expects: fill a poisoned cache with mla.cache_write, decode
    it with mla.decode, compare with the reference reading the same bytes."""
    dims, page_size = DSV3, 64
    seq_lens = boundary_seq_lens(page_size, 1, False)
    _, layout = decode_inputs(rng, dims, seq_lens, page_size, 1, kv_format=kv_format, kv_scale=kv_scale)
    cache = np.full_like(layout.kv_cache, ref.poison_value(kv_format))
    slots = np.concatenate([layout.slots(b, np.arange(s)) for b, s in enumerate(seq_lens)])
    mla.cache_write(np.concatenate(layout.kv_c), np.concatenate(layout.k_pe)[:, None, :], cache, slots,
                    kv_format=kv_format, kv_scale=kv_scale)
    layout.kv_cache = cache
    q = rng.standard_normal((BATCH, 1, dims.N, dims.D)).astype(np.float32)
    out, lse = run_decode(q, layout, dims, causal=False, kv_format=kv_format, kv_scale=kv_scale)
    r_out, r_lse = reference_decode(q, layout, dims, causal=False, kv_format=kv_format, kv_scale=kv_scale)
    assert_close(out, r_out, F32, "out")
    assert_close(lse, r_lse, F32_LSE, "lse")


# ---------------------------------------------------------------------------------------------------
# Merge
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("T,N,H", [(7, 3, 5), (33, 16, 512)], ids=str)
def test_merge_states(rng, T, N, H):
    out_a = rng.standard_normal((T, N, H)).astype(np.float32)
    out_b = rng.standard_normal((T, N, H)).astype(np.float32)
    lse_a = (rng.standard_normal((N, T)) * 3).astype(np.float32)
    lse_b = (rng.standard_normal((N, T)) * 3).astype(np.float32)
    lse_a[0, 0] = -np.inf  # only b contributes
    lse_b[0, 1] = np.inf  # +inf also means "no contribution"
    lse_a[1, 2] = lse_b[1, 2] = -np.inf  # neither: out 0, lse -inf
    lse_a[2 % N, 3] = np.inf
    lse_b[2 % N, 3] = -np.inf
    out, lse = mla.merge_states(out_a, lse_a, out_b, lse_b)
    r_out, r_lse = ref.merge_states_ref(out_a, lse_a, out_b, lse_b)
    assert out.shape == (T, N, H) and lse.shape == (N, T)
    assert_close(out, r_out, F32, "out")
    assert_close(lse, r_lse, F32_LSE, "lse")
    np.testing.assert_array_equal(out[0, 0], out_b[0, 0])
    np.testing.assert_array_equal(out[1, 0], out_a[1, 0])
    assert np.all(out[2, 1] == 0) and lse[1, 2] == -np.inf
    assert np.all(out[3, 2 % N] == 0) and lse[2 % N, 3] == -np.inf


# ---------------------------------------------------------------------------------------------------
# Input validation: ValueError before anything runs, cache untouched
# ---------------------------------------------------------------------------------------------------


def small_decode_args(rng, kv_format="auto", kv_scale=None, dims=SMALL, s_q=1):
    q, cache = decode_inputs(rng, dims, [s_q + 3, 40], 16, s_q, kv_format=kv_format, kv_scale=kv_scale,
                             num_pages=8, cols=4)
    return dict(q=q, kv_cache=cache.kv_cache, block_table=cache.block_table.copy(),
                seq_lens=cache.seq_lens.copy(), head_dim_v=dims.L, softmax_scale=dims.scale, causal=False,
                kv_format=kv_format, kv_scale=kv_scale)


def with_(args, **changes):
    new = dict(args)
    new.update(changes)
    return new


def _seq(args, values):
    return np.asarray(values, dtype=args["seq_lens"].dtype)


def _table(args, b, k, value):
    t = args["block_table"].copy()
    t[b, k] = value
    return t


DECODE_ERRORS = {
    "q_rank": lambda a: with_(a, q=a["q"][:, 0]),
    "cache_rank": lambda a: with_(a, kv_cache=a["kv_cache"].reshape(-1, a["kv_cache"].shape[-1])),
    "block_table_rank": lambda a: with_(a, block_table=a["block_table"].ravel()),
    "seq_lens_rank": lambda a: with_(a, seq_lens=a["seq_lens"][None]),
    "q_width_vs_cache": lambda a: with_(a, q=np.ascontiguousarray(a["q"][..., :-1])),
    "batch_vs_block_table": lambda a: with_(a, block_table=a["block_table"][:1]),
    "batch_vs_seq_lens": lambda a: with_(a, seq_lens=a["seq_lens"][:1]),
    "head_dim_v_too_wide": lambda a: with_(a, head_dim_v=a["q"].shape[-1] + 1),
    "negative_seq_len": lambda a: with_(a, seq_lens=_seq(a, [-1, 40])),
    "seq_len_beyond_block_table": lambda a: with_(a, seq_lens=_seq(a, [4, 4 * 16 + 1])),
    "page_index_too_large": lambda a: with_(a, block_table=_table(a, 1, 2, 8)),
    "page_index_negative": lambda a: with_(a, block_table=_table(a, 1, 0, -1)),
    "causal_q_len_beyond_seq_len": lambda a: with_(a, q=np.repeat(a["q"], 3, axis=1), causal=True,
                                                   seq_lens=_seq(a, [2, 40])),
    "unknown_kv_format": lambda a: with_(a, kv_format="fp8"),
    "num_splits_zero": lambda a: with_(a, num_splits=0),
    "float_cache_with_fp8_format": lambda a: with_(a, kv_format="fp8_e4m3_token"),
}


@pytest.mark.parametrize("name", sorted(DECODE_ERRORS))
def test_decode_rejects(rng, name):
    args = DECODE_ERRORS[name](small_decode_args(rng))
    cache = args["kv_cache"]
    before = cache.copy()
    with pytest.raises(ValueError):
        mla.decode(args.pop("q"), args.pop("kv_cache"), args.pop("block_table"), args.pop("seq_lens"), **args)
    assert_unchanged(cache, before)


def fp8_decode_error_args(rng, name):
    dims = DSV3 if "ds_mla" in name else SMALL
    if name == "e4m3_without_scale":
        return with_(small_decode_args(rng, "fp8_e4m3", 0.02), kv_scale=None)
    if name == "token_rows_too_short":  # a per-tensor cache (D bytes) read as per-token (D + 8)
        return with_(small_decode_args(rng, "fp8_e4m3", 0.02), kv_format="fp8_e4m3_token", kv_scale=None)
    if name == "ds_mla_rows_as_token":  # 656-byte rows read as 584-byte rows
        return with_(small_decode_args(rng, "fp8_ds_mla", None, dims), kv_format="fp8_e4m3_token")
    if name == "e4m3_rows_too_long":
        return with_(small_decode_args(rng, "fp8_e4m3_token", None), kv_format="fp8_e4m3", kv_scale=0.02)
    if name == "uint8_cache_as_auto":
        return with_(small_decode_args(rng, "fp8_e4m3", 0.02), kv_format="auto", kv_scale=None)
    if name == "ds_mla_latent_not_multiple_of_128":  # SMALL has L = 64
        args = small_decode_args(rng, "fp8_e4m3", 0.02)
        return with_(args, kv_format="fp8_ds_mla", kv_scale=None,
                     kv_cache=np.zeros(args["kv_cache"].shape[:2] + (64 + 2 + 32,), np.uint8))
    raise AssertionError(name)


FP8_DECODE_ERRORS = ["e4m3_without_scale", "token_rows_too_short", "ds_mla_rows_as_token", "e4m3_rows_too_long",
                     "uint8_cache_as_auto", "ds_mla_latent_not_multiple_of_128"]


@pytest.mark.parametrize("name", FP8_DECODE_ERRORS)
def test_decode_rejects_fp8_misuse(rng, name):
    args = fp8_decode_error_args(rng, name)
    cache = args["kv_cache"]
    before = cache.copy()
    with pytest.raises(ValueError):
        mla.decode(args.pop("q"), args.pop("kv_cache"), args.pop("block_table"), args.pop("seq_lens"), **args)
    assert_unchanged(cache, before)


def small_write_args(rng, kv_format="auto", kv_scale=None, dims=SMALL):
    T, pages, page_size = 4, 4, 16
    width = ref.kv_row_width(kv_format, dims.L, dims.R)
    dtype = np.float32 if kv_format == "auto" else np.uint8
    return dict(kv_c=rng.standard_normal((T, dims.L)).astype(np.float32),
                k_pe=rng.standard_normal((T, 1, dims.R)).astype(np.float32),
                kv_cache=np.full((pages, page_size, width), ref.poison_value(kv_format, dtype), dtype),
                slot_mapping=np.array([5, -1, 17, 63], np.int64), kv_format=kv_format, kv_scale=kv_scale)


WRITE_ERRORS = {
    "kv_c_rank": lambda a: with_(a, kv_c=a["kv_c"][None]),
    "k_pe_heads": lambda a: with_(a, k_pe=np.repeat(a["k_pe"], 2, axis=1)),
    "k_pe_tokens": lambda a: with_(a, k_pe=a["k_pe"][:3]),
    "slot_mapping_tokens": lambda a: with_(a, slot_mapping=a["slot_mapping"][:3]),
    "slot_mapping_rank": lambda a: with_(a, slot_mapping=a["slot_mapping"][None]),
    # A valid slot precedes the bad one: nothing at all may be written.
    "slot_beyond_cache": lambda a: with_(a, slot_mapping=np.array([5, -1, 17, 64], np.int64)),
    "row_width": lambda a: with_(a, kv_c=a["kv_c"][:, :-1]),
    "unknown_kv_format": lambda a: with_(a, kv_format="bf16"),
    "e4m3_without_scale": lambda a: with_(a, kv_format="fp8_e4m3", kv_scale=None,
                                          kv_cache=np.zeros(a["kv_cache"].shape, np.uint8)),
    "token_rows_too_short": lambda a: with_(a, kv_format="fp8_e4m3_token",
                                            kv_cache=np.zeros(a["kv_cache"].shape, np.uint8)),
    "float_cache_with_fp8_format": lambda a: with_(a, kv_format="fp8_e4m3", kv_scale=0.25),
}


@pytest.mark.parametrize("name", sorted(WRITE_ERRORS))
def test_cache_write_rejects(rng, name):
    args = WRITE_ERRORS[name](small_write_args(rng))
    cache = args["kv_cache"]
    before = cache.copy()
    with pytest.raises(ValueError):
        mla.cache_write(args.pop("kv_c"), args.pop("k_pe"), args.pop("kv_cache"), args.pop("slot_mapping"),
                        **args)
    assert_unchanged(cache, before)


def _kv_scale_forms():
    """fp8_e4m3's kv_scale as arrays of one float32 element: numpy [1] and [], and vLLM's k_scale tensor."""
    forms = [np.array([0.25], np.float32), np.float32(0.25)]
    try:
        import torch
    except ImportError:
        return forms
    return forms + [torch.tensor([0.25], dtype=torch.float32)]


def test_cache_write_takes_kv_scale_as_a_one_element_array(rng):
    args = small_write_args(rng, "fp8_e4m3", 0.25)
    before = args["kv_cache"].copy()
    mla.cache_write(**args)
    for form in _kv_scale_forms():
        cache = before.copy()
        mla.cache_write(**with_(args, kv_cache=cache, kv_scale=form))
        assert_unchanged(cache, args["kv_cache"])


@pytest.mark.parametrize("kv_scale, message", [
    (np.array([0.25], np.float16), "a kv_scale tensor must hold one float32 element, got float16 [1]"),
    (np.array([0.25, 0.5], np.float32), "a kv_scale tensor must hold one float32 element, got float32 [2]"),
    (np.array([-1.0], np.float32), "kv_scale must be positive and finite, got -1.000000"),
    (np.array([1], np.int32), "a kv_scale tensor must hold one float32 element, got int32 [1]"),
], ids=["float16", "two_elements", "negative", "int32"])
def test_cache_write_rejects_bad_kv_scale_arrays(rng, kv_scale, message):
    args = small_write_args(rng, "fp8_e4m3", 0.25)
    before = args["kv_cache"].copy()
    with pytest.raises(ValueError, match=re.escape(message)):
        mla.cache_write(**with_(args, kv_scale=kv_scale))
    assert_unchanged(args["kv_cache"], before)


def small_prefill_args(rng):
    dims = SMALL
    case = ref.make_prefill_case(rng, [3, 2], [5, 20], 16, dims.L, dims.R, dims.N, dims.P, dims.V,
                                 num_pages=8, cols=4)
    return dict(q=case.q, kv_c=case.kv_c, k_pe=case.k_pe, kv_b_proj=case.kv_b_proj, kv_cache=case.cache.kv_cache,
                block_table=case.cache.block_table.copy(), query_start_loc=case.query_start_loc.copy(),
                seq_lens=case.cache.seq_lens.copy(), softmax_scale=dims.scale, v_head_dim=dims.V)


PREFILL_ERRORS = {
    "q_rank": lambda a: with_(a, q=a["q"][:, 0]),
    "kv_c_tokens": lambda a: with_(a, kv_c=a["kv_c"][:-1]),
    "k_pe_tokens": lambda a: with_(a, k_pe=a["k_pe"][:-1]),
    "kv_b_proj_rows": lambda a: with_(a, kv_b_proj=a["kv_b_proj"][:-1]),
    "kv_b_proj_cols": lambda a: with_(a, kv_b_proj=np.ascontiguousarray(a["kv_b_proj"][:, :-1])),
    "query_start_loc_length": lambda a: with_(a, query_start_loc=a["query_start_loc"][:-1]),
    "query_start_loc_total": lambda a: with_(a, query_start_loc=np.array([0, 3, 4], np.int32)),
    "seq_len_shorter_than_new_tokens": lambda a: with_(a, seq_lens=np.array([2, 22], np.int32)),
    "seq_len_beyond_block_table": lambda a: with_(a, seq_lens=np.array([8, 4 * 16 + 1], np.int32)),
    "context_page_out_of_range": lambda a: with_(a, block_table=_table(a, 1, 0, 8)),
    "unknown_kv_format": lambda a: with_(a, kv_format="fp8"),
    "workspace_rows_zero": lambda a: with_(a, workspace_rows=0),
}


@pytest.mark.parametrize("name", sorted(PREFILL_ERRORS))
def test_prefill_rejects(rng, name):
    args = PREFILL_ERRORS[name](small_prefill_args(rng))
    cache = args["kv_cache"]
    before = cache.copy()
    positional = [args.pop(k) for k in ("q", "kv_c", "k_pe", "kv_b_proj", "kv_cache", "block_table",
                                        "query_start_loc", "seq_lens")]
    with pytest.raises(ValueError):
        mla.prefill(*positional, **args)
    assert_unchanged(cache, before)


def test_weight_and_merge_reject_mismatched_shapes(rng):
    dims = SMALL
    w = random_kv_b_proj(rng, dims)
    with pytest.raises(ValueError):
        mla.split_kv_b_proj(w[:-1], dims.N, dims.P, dims.V)
    w_uk_t, w_uv = ref.split_kv_b_proj_ref(w, dims.N, dims.P, dims.V)
    with pytest.raises(ValueError):  # head count differs from the weights'
        mla.absorb_q(np.zeros((2, dims.N + 1, dims.P + dims.R), np.float32), w_uk_t)
    with pytest.raises(ValueError):  # latent width differs from the weights'
        mla.up_proj_out(np.zeros((2, dims.N, dims.L + 1), np.float32), w_uv)
    out = np.zeros((4, 2, 8), np.float32)
    lse = np.zeros((2, 4), np.float32)
    with pytest.raises(ValueError):
        mla.merge_states(out, lse, out[:3], lse[:, :3])
    with pytest.raises(ValueError):  # lse must be [N, T], not [T, N]
        mla.merge_states(out, lse.T.copy(), out, lse.T.copy())
