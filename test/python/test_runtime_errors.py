"""Tests of the runtime behind the `mla` package: the messages of its ValueErrors, that invalid calls
neither compile nor write, its argument conversions, and the in-memory JIT cache.

test_api.py checks that every invalid call raises ValueError; here the messages are pinned, because
naming the argument, the index and the limit is what makes them actionable.
"""

import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import mla
import mla_reference as ref

# N = 3, L = 64, R = 16, P = 8, V = 5: small and odd.
N, L, R = 3, 64, 16
D = L + R
SCALE = 24**-0.5
PAGES, PAGE_SIZE, COLS = 8, 16, 4


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def decode_args(rng, seq_lens=(5, 40), s_q=1, kv_format="auto", kv_scale=None):
    cache = ref.make_paged_cache(rng, list(seq_lens), PAGE_SIZE, L, R, kv_format=kv_format, kv_scale=kv_scale,
                                 num_pages=PAGES, cols=COLS)
    q = rng.standard_normal((len(seq_lens), s_q, N, D)).astype(np.float32)
    return dict(q=q, kv_cache=cache.kv_cache, block_table=cache.block_table, seq_lens=cache.seq_lens,
                head_dim_v=L, softmax_scale=SCALE, kv_format=kv_format, kv_scale=kv_scale)


def call_decode(args, **changes):
    args = dict(args, **changes)
    return mla.decode(args.pop("q"), args.pop("kv_cache"), args.pop("block_table"), args.pop("seq_lens"), **args)


def raises(fragment):
    return pytest.raises(ValueError, match=re.escape(fragment))


# ---------------------------------------------------------------------------------------------------
# Messages
# ---------------------------------------------------------------------------------------------------


def test_seq_len_beyond_capacity(rng):
    with raises("seq_lens[1] = 65 exceeds block_table capacity 64 (4 pages of 16)"):
        call_decode(decode_args(rng), seq_lens=np.array([5, 65], np.int32))


def test_page_out_of_range(rng):
    args = decode_args(rng)
    table = args["block_table"].copy()
    table[1, 2] = 99
    with raises("block_table[1, 2] = 99 is not a page of kv_cache (8 pages)"):
        call_decode(args, block_table=table)


def test_negative_seq_len(rng):
    with raises("seq_lens[0] = -1 is negative"):
        call_decode(decode_args(rng), seq_lens=np.array([-1, 4], np.int32))


def test_causal_query_longer_than_sequence(rng):
    with raises("causal decode needs seq_lens[0] = 2 >= s_q = 3"):
        call_decode(decode_args(rng, seq_lens=(2, 40), s_q=3), causal=True)


def test_causal_empty_request_is_allowed(rng):
    """An idle batch slot (seq_len 0) has no query rows to place: zeros and -inf, not an error."""
    out, lse = call_decode(decode_args(rng, seq_lens=(0, 40), s_q=2), causal=True)
    assert np.all(out[0] == 0) and np.all(lse[0] == -np.inf)


def test_unknown_kv_format(rng):
    with raises("kv_format 'fp9' is unknown (expected auto, fp8_e4m3, fp8_e4m3_token, fp8_ds_mla)"):
        call_decode(decode_args(rng), kv_format="fp9")


def test_fp8_messages(rng):
    args = decode_args(rng, kv_format="fp8_e4m3", kv_scale=0.02)
    with raises("kv_format 'fp8_e4m3' needs kv_scale"):
        call_decode(args, kv_scale=None)
    with raises("kv_cache rows have 80 bytes but kv_format 'fp8_e4m3_token' with L = 64, R = 16 needs 88"):
        call_decode(args, kv_format="fp8_e4m3_token", kv_scale=None)
    with raises("kv_format 'fp8_ds_mla' needs a latent width L that is a multiple of 128, got L = 64"):
        call_decode(args, kv_format="fp8_ds_mla", kv_scale=None)
    with raises("kv_scale is only used by kv_format 'fp8_e4m3', not 'auto'"):
        call_decode(decode_args(rng), kv_scale=0.5)
    with raises("kv_cache is uint8 but kv_format 'auto' stores q's dtype float32"):
        call_decode(args, kv_format="auto", kv_scale=None)


def test_shape_messages(rng):
    args = decode_args(rng)
    with raises("q must have rank 4 ([b, s_q, h_q, d]), got shape [2, 3, 80]"):
        call_decode(args, q=args["q"][:, 0])
    with raises("block_table dim 0 is 1 but q's batch size (dim 0) is 2"):
        call_decode(args, block_table=args["block_table"][:1])
    with raises("head_dim_v = 80 must be in [1, 79]"):
        call_decode(args, head_dim_v=80)
    with raises("num_splits must be positive, got 0"):
        call_decode(args, num_splits=0)
    with raises("softmax_scale must be positive and finite"):
        call_decode(args, softmax_scale=float("nan"))


def test_num_splits_beyond_the_table_capacity(rng):
    """Issue 17 item 3: num_splits=2**28 used to kill the process (the compiled code allocates the
    [S, B, Sq, N, L] partial state without a failure path). The call runs in a subprocess so a crash
    fails this test instead of ending the suite."""
    script = textwrap.dedent("""
        import numpy as np, mla, mla_reference as ref
        rng = np.random.default_rng(0)
        cache = ref.make_paged_cache(rng, [5, 40], 16, 64, 16, num_pages=8, cols=4)
        q = rng.standard_normal((2, 1, 3, 80)).astype(np.float32)
        for splits in (64, 65, 2**28, 2**40):
            try:
                mla.decode(q, cache.kv_cache, cache.block_table, cache.seq_lens, head_dim_v=64,
                           softmax_scale=0.1, num_splits=splits)
                print(splits, "ran")
            except ValueError as error:
                print(splits, error)
        """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "64 ran"
    assert lines[1] == ("65 num_splits = 65 must be in [1, 64]: a piece holds at least one of the block "
                        "table's 64 positions")
    assert lines[2].startswith(f"{2**28} num_splits = {2**28} must be in [1, 64]")
    assert lines[3].startswith(f"{2**40} num_splits = {2**40} must be in [1, 64]")


@pytest.mark.parametrize("option", ["kv_format"])
def test_string_options_with_nul_are_rejected(rng, option):
    """Issue 17 item 8: C strings end at the first NUL, so "auto\\x00junk" used to run as "auto"."""
    with raises(f"{option} holds a NUL byte at offset 4; options are plain text"):
        call_decode(decode_args(rng), **{option: "auto\x00junk"})
    with raises("kv_format holds a NUL byte"):
        mla.cache_write(np.ones((1, L), np.float32), np.ones((1, R), np.float32),
                        np.zeros((4, PAGE_SIZE, D), np.float32), np.array([0]), kv_format="auto\x00")


def test_prefill_messages(rng):
    case = ref.make_prefill_case(rng, [3, 2], [5, 20], PAGE_SIZE, L, R, N, 8, 5, num_pages=PAGES, cols=COLS)
    positional = [case.q, case.kv_c, case.k_pe, case.kv_b_proj, case.cache.kv_cache, case.cache.block_table,
                  case.query_start_loc, case.cache.seq_lens]

    def prefill(index=None, value=None, **options):
        args = list(positional)
        if index is not None:
            args[index] = value
        return mla.prefill(*args, **dict(dict(softmax_scale=SCALE, v_head_dim=5), **options))

    with raises("query_start_loc[2] = 4 must equal the token count T = 5 (q dim 0)"):
        prefill(6, np.array([0, 3, 4], np.int32))
    with raises("seq_lens[0] = 2 is shorter than request 0's 3 new tokens"):
        prefill(7, np.array([2, 22], np.int32))
    with raises("kv_b_proj dim 0 is 38 but N*(P+V) = 3*(8+5) = 39"):
        prefill(3, case.kv_b_proj[:-1])
    with raises("workspace_rows must be positive, got 0"):
        prefill(workspace_rows=0)


def test_merge_states_lse_layout():
    out, lse = np.zeros((4, 2, 8), np.float32), np.zeros((2, 4), np.float32)
    with raises("lse_a must be [N, T] = [2, 4] for out_a [4, 2, 8], got [4, 2]"):
        mla.merge_states(out, lse.T.copy(), out, lse)
    with raises("lse_b must be float32 (log-sum-exp values), got float16"):
        mla.merge_states(out, lse, out, lse.astype(np.float16))


# ---------------------------------------------------------------------------------------------------
# Nothing compiles or is written on error
# ---------------------------------------------------------------------------------------------------


def test_bad_slot_writes_nothing_and_compiles_nothing(rng):
    cache = np.full((4, PAGE_SIZE, D), np.nan, np.float32)
    before = cache.copy()
    kv_c = rng.standard_normal((3, L)).astype(np.float32)
    k_pe = rng.standard_normal((3, R)).astype(np.float32)
    compiles = mla.runtime_stats()["compiles"]
    with raises("slot_mapping[2] = 64 is beyond kv_cache's 64 slots (4 pages of 16)"):
        mla.cache_write(kv_c, k_pe, cache, np.array([5, 17, 64]))
    assert mla.runtime_stats()["compiles"] == compiles
    np.testing.assert_array_equal(cache.view(np.uint32), before.view(np.uint32))


def test_padding_only_write_runs_nothing(rng):
    cache = np.zeros((4, PAGE_SIZE, D), np.float32)
    stats = mla.runtime_stats()
    mla.cache_write(np.ones((2, L), np.float32), np.ones((2, 1, R), np.float32), cache, np.array([-1, -1]))
    assert mla.runtime_stats()["compiles"] == stats["compiles"]
    assert not cache.any()


# ---------------------------------------------------------------------------------------------------
# Argument conversion
# ---------------------------------------------------------------------------------------------------


def test_index_arrays_of_any_integer_dtype(rng):
    args = decode_args(rng)
    out32, _ = call_decode(args)
    out64, _ = call_decode(args, block_table=args["block_table"].astype(np.int64),
                           seq_lens=args["seq_lens"].astype(np.uint16))
    np.testing.assert_array_equal(out32, out64)
    with raises("seq_lens holds 4294967296, which does not fit in int32"):
        call_decode(args, seq_lens=np.array([1, 2**32]))
    with raises("block_table must hold integers, got dtype float32"):
        call_decode(args, block_table=args["block_table"].astype(np.float32))


def test_unsupported_float_dtype(rng):
    args = decode_args(rng)
    with raises("q has dtype float64; mla takes float32 or float16 values"):
        call_decode(args, q=args["q"].astype(np.float64))


def test_non_contiguous_inputs_are_copied(rng):
    args = decode_args(rng)
    out, lse = call_decode(args)
    q_strided = np.asfortranarray(args["q"])
    out2, lse2 = call_decode(args, q=q_strided)
    np.testing.assert_array_equal(out, out2)
    np.testing.assert_array_equal(lse, lse2)


def test_cache_write_needs_a_writeable_contiguous_cache(rng):
    kv_c, k_pe = np.ones((1, L), np.float32), np.ones((1, R), np.float32)
    cache = np.zeros((PAGE_SIZE, 4, D), np.float32).transpose(1, 0, 2)
    with raises("kv_cache must be C-contiguous to be written in place"):
        mla.cache_write(kv_c, k_pe, cache, np.array([0]))
    frozen = np.zeros((4, PAGE_SIZE, D), np.float32)
    frozen.flags.writeable = False
    with raises("kv_cache is read-only"):
        mla.cache_write(kv_c, k_pe, frozen, np.array([0]))


def test_inputs_are_never_written(rng):
    """Results get their own buffers even where a lowering could reuse an input's."""
    out_a = rng.standard_normal((5, N, 8)).astype(np.float32)
    lse_a = rng.standard_normal((N, 5)).astype(np.float32)
    copies = [a.copy() for a in (out_a, lse_a)]
    mla.merge_states(out_a, lse_a, out_a, lse_a)
    np.testing.assert_array_equal(out_a, copies[0])
    np.testing.assert_array_equal(lse_a, copies[1])


# ---------------------------------------------------------------------------------------------------
# The JIT cache
# ---------------------------------------------------------------------------------------------------


def test_kernel_cache_by_shapes_and_options(rng):
    mla.clear_kernel_cache()
    assert mla.runtime_stats() == dict(cache_hits=0, compiles=0, compile_seconds=0.0, cached_kernels=0)
    args = decode_args(rng)
    call_decode(args)
    first = mla.runtime_stats()
    assert first["compiles"] == 1 and first["cache_hits"] == 0 and first["cached_kernels"] == 1
    assert first["compile_seconds"] > 0
    # New values, same shapes and options: served from the cache.
    call_decode(args, q=args["q"] * 2, seq_lens=np.array([1, 17], np.int32))
    assert mla.runtime_stats()["compiles"] == 1 and mla.runtime_stats()["cache_hits"] == 1
    # Another option or shape compiles again.
    call_decode(args, causal=True)
    call_decode(args, q=args["q"][:, :, :2].copy())
    stats = mla.runtime_stats()
    assert stats["compiles"] == 3 and stats["cached_kernels"] == 3 and stats["cache_hits"] == 1
