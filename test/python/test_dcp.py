"""Decode context parallelism (mla.dcp) on the CPU: sharded decodes merged over ranks equal the
single-process decode (mla.decode) and the numpy reference, in one process, across processes over
multiprocessing queues (no torch), and across processes over torch.distributed's gloo backend.

Shapes are small (N = 2, L = 32, R = 16, pages of 16) so every case JIT-compiles a handful of kernels;
world sizes 2 and 4, token (vLLM's default) and whole-page interleave. Tolerances: float32 results of
a different summation order, rtol 1e-5 / atol 1e-5 (test_api.py's float32 bound).
"""

import multiprocessing

import numpy as np
import pytest

import mla
import mla.dcp as dcp
import mla_reference as ref

TOL = dict(rtol=1e-5, atol=1e-5)
B, N, L, R, PAGE, MAX_PAGES = 3, 2, 32, 16, 16, 4
SCALE = 0.125


def _inputs(s_q, seq_lens, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((B, s_q, N, L + R)).astype(np.float32)
    cache = rng.standard_normal((B * MAX_PAGES + 2, PAGE, L + R)).astype(np.float32)
    table = rng.permutation(B * MAX_PAGES + 2)[:B * MAX_PAGES].reshape(B, MAX_PAGES).astype(np.int32)
    return q, cache, table, np.array(seq_lens, np.int32)


# (s_q, causal, seq_lens): lengths shorter than the world size (ranks without a token: lse -inf), 0
# (no rank holds anything), a full table, and causal two-token decode whose rows see different ranks.
CASES = [
    (1, False, [1, 0, 64]),
    (1, False, [3, 2, 37]),
    (2, True, [2, 0, 64]),
    (2, True, [3, 5, 33]),
]


def test_owned_tokens_counts_the_rank_positions():
    for world in (1, 2, 3, 4):
        for interleave in (1, 2, 16):
            for rank in range(world):
                n = np.arange(-2, 80)
                brute = [sum(1 for t in range(max(k, 0)) if (t // interleave) % world == rank) for k in n]
                assert dcp.owned_tokens(n, world, rank, interleave).tolist() == brute
                local = np.arange(int(dcp.owned_tokens(80, world, rank, interleave)))
                t = dcp.global_positions(local, world, rank, interleave)
                assert ((t // interleave) % world == rank).all() and (np.diff(t) > 0).all()


@pytest.mark.parametrize("bad", [dict(world_size=0, rank=0), dict(world_size=2, rank=2),
                                 dict(world_size=2, rank=0, interleave=0)])
def test_shard_arguments_are_checked(bad):
    with pytest.raises(ValueError, match="world_size|rank|interleave"):
        dcp.owned_tokens(4, **bad)


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("interleave", [1, PAGE])
def test_shard_cache_places_every_token_once(world, interleave):
    _, cache, table, lens = _inputs(1, [37, 0, 64])
    shards = dcp.shard_cache(cache, table, lens, world, interleave=interleave)
    for b, n in enumerate(lens):
        rows = []
        for rank, (local_cache, local_table, local_lens) in enumerate(shards):
            assert local_lens[b] == dcp.owned_tokens(n, world, rank, interleave)
            j = np.arange(local_lens[b])
            t = dcp.global_positions(j, world, rank, interleave)
            got = local_cache[local_table[b, j // PAGE], j % PAGE]
            np.testing.assert_array_equal(got, cache[table[b, t // PAGE], t % PAGE])
            rows.extend(t.tolist())
        assert sorted(rows) == list(range(n))


def _single_process(q, cache, table, lens, world, interleave, causal):
    outs, lses = [], []
    for rank, (c, t, _) in enumerate(dcp.shard_cache(cache, table, lens, world, interleave=interleave)):
        o, lse = dcp.decode_local(q, c, t, lens, world_size=world, rank=rank, interleave=interleave,
                                  head_dim_v=L, softmax_scale=SCALE, causal=causal)
        outs.append(o)
        lses.append(lse)
    return np.stack(outs), np.stack(lses)


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("interleave", [1, PAGE])
@pytest.mark.parametrize("s_q,causal,seq_lens", CASES)
def test_ranks_merge_to_the_single_process_decode(world, interleave, s_q, causal, seq_lens):
    q, cache, table, lens = _inputs(s_q, seq_lens)
    expected = mla.decode(q, cache, table, lens, head_dim_v=L, softmax_scale=SCALE, causal=causal)
    reference = ref.decode_ref(q, cache, table, lens, L, SCALE, causal=causal)
    gathered_out, gathered_lse = _single_process(q, cache, table, lens, world, interleave, causal)
    # A rank that owns none of a row's positions contributes lse -inf.
    for rank in range(world):
        for b, n in enumerate(lens):
            for i in range(s_q):
                seen = n - s_q + i + 1 if causal else n
                if dcp.owned_tokens(seen, world, rank, interleave) == 0:
                    assert np.isneginf(gathered_lse[rank, b, :, i]).all()
                    assert (gathered_out[rank, b, i] == 0).all()
    out, lse = dcp.combine(gathered_out, gathered_lse)
    for want in (expected, reference):
        np.testing.assert_allclose(out, want[0], **TOL)
        np.testing.assert_allclose(lse, want[1], **TOL)
    assert np.isneginf(lse[lens == 0]).all() and (out[lens == 0] == 0).all()


# --- several processes ---------------------------------------------------------------------------------

MP_CASES = [(2, True, [2, 0, 64], 1), (1, False, [3, 1, 37], PAGE)]


def _rank_main(rank, world, shards, transport, results):
    """One rank's process: every MP_CASES decode through mla.dcp.decode."""
    if transport == "gloo":
        import torch.distributed as dist

        dist.init_process_group("gloo", init_method=shards["store"], rank=rank, world_size=world)
        gather = dcp.TorchAllGather()
    else:
        gather = dcp.QueueAllGather(rank, shards["inboxes"])
    outputs = []
    for (s_q, causal, _, interleave), (q, lens, per_rank) in zip(MP_CASES, shards["cases"]):
        c, t, _ = per_rank[rank]
        outputs.append(dcp.decode(q, c, t, lens, world_size=world, rank=rank, all_gather=gather,
                                  interleave=interleave, head_dim_v=L, softmax_scale=SCALE, causal=causal))
    if transport == "gloo":
        dist.destroy_process_group()
    results.put((rank, outputs))


def _run_ranks(world, transport, tmp_path):
    ctx = multiprocessing.get_context("spawn")
    cases, expected = [], []
    for s_q, causal, seq_lens, interleave in MP_CASES:
        q, cache, table, lens = _inputs(s_q, seq_lens, seed=world)
        cases.append((q, lens, dcp.shard_cache(cache, table, lens, world, interleave=interleave)))
        expected.append(ref.decode_ref(q, cache, table, lens, L, SCALE, causal=causal))
    shared = {"cases": cases}
    if transport == "gloo":
        shared["store"] = f"file://{tmp_path}/gloo-store"
    else:
        shared["inboxes"] = dcp.QueueAllGather.make_inboxes(ctx, world)
    results = ctx.Queue()
    procs = [ctx.Process(target=_rank_main, args=(r, world, shared, transport, results)) for r in range(world)]
    for p in procs:
        p.start()
    try:
        got = dict(results.get(timeout=300) for _ in range(world))
    finally:
        for p in procs:
            p.join(timeout=60)
    assert all(p.exitcode == 0 for p in procs)
    for rank in range(world):
        for (out, lse), (want_out, want_lse) in zip(got[rank], expected):
            np.testing.assert_allclose(out, want_out, **TOL)
            np.testing.assert_allclose(lse, want_lse, **TOL)


@pytest.mark.parametrize("world", [2, 4])
def test_processes_over_queues(world, tmp_path):
    _run_ranks(world, "queue", tmp_path)


@pytest.mark.parametrize("world", [2, 4])
def test_processes_over_gloo(world, tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.skip("torch.distributed without gloo")
    _run_ranks(world, "gloo", tmp_path)
