"""Varlen mla.decode (query_start_loc) on torch CUDA tensors against the numpy float64 reference
(`mla_reference.decode_varlen_ref`), run on the same bf16 values upcast.

Runs only where torch sees an sm_90a GPU, with the kernels in the kernel cache ($MLA_KERNEL_CACHE_DIR):
scripts/gpu-carry-with-kernels.sh builds the varlen specs used here (N = 16 and 128, largest draft 8 or
3). sm_100a has no varlen kernel (it is rejected with a clear error).

Inputs: DeepSeek-V3 widths (L=512, R=64, scale 192^-0.5), page 64, q and cache uniform in [-1, 1); every
cache slot no request reads holds NaN. The issue's batch mixes seq_lens {0, 1, 63, 64, 65, 8191} (plus
three more requests so that every draft length 1..8 occurs) with q_b = 0 for the empty request.
Tolerances as test_gpu_decode.py: out 2e-2 and lse 1e-2 absolute; empty tokens exactly 0 / -inf.
"""

import functools

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the GPU decode tests need torch CUDA")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU visible to torch: the GPU decode tests need an sm_90a device",
                allow_module_level=True)
if torch.cuda.get_device_capability()[0] != 9:
    pytest.skip("varlen decode kernels are built for sm_90a only", allow_module_level=True)

import mla  # noqa: E402
import mla_reference as ref  # noqa: E402

L, R, PAGE = 512, 64, 64
D = L + R
SCALE = 192**-0.5
OUT_ATOL = 2e-2
LSE_ATOL = 1e-2
MIXED_SEQ_LENS = [0, 1, 63, 64, 65, 8191, 7, 130, 200]
MIXED_Q_LENS = [0, 1, 8, 3, 5, 2, 7, 4, 6]


@functools.lru_cache(maxsize=None)
def problem(n, seq_lens, q_lens, causal):
    """GPU inputs and the reference (out [T, n, L], lse [T, n]) for one varlen batch."""
    gen = torch.Generator(device="cpu").manual_seed(1000 * n + sum(q_lens) + int(causal))
    b = len(seq_lens)
    max_pages = max(1, -(-max(seq_lens) // PAGE))
    table = torch.randperm(b * max_pages, generator=gen).to(torch.int32).view(b, max_pages)
    qsl = torch.tensor(np.concatenate([[0], np.cumsum(q_lens)]), dtype=torch.int32)
    q = (torch.rand(int(qsl[-1]), n, D, generator=gen) * 2 - 1).to(torch.bfloat16)
    cache = torch.full((b * max_pages, PAGE, D), float("nan"), dtype=torch.bfloat16)
    for i, length in enumerate(seq_lens):
        for pos in range(0, length, PAGE):
            rows = min(PAGE, length - pos)
            cache[table[i, pos // PAGE], :rows] = (torch.rand(rows, D, generator=gen) * 2 - 1).to(torch.bfloat16)
    out, lse = ref.decode_varlen_ref(q.float().numpy(), cache.float().numpy(), table.numpy(),
                                     np.array(seq_lens, np.int32), qsl.numpy(), L, SCALE, causal)
    inputs = dict(q=q.cuda(), kv_cache=cache.cuda(), block_table=table.cuda(),
                  seq_lens=torch.tensor(seq_lens, dtype=torch.int32, device="cuda"), query_start_loc=qsl.cuda())
    return inputs, out, lse


def check(result, out_ref, lse_ref):
    out, lse = (t.float().cpu().numpy() for t in result)
    assert out.shape == out_ref.shape and lse.shape == lse_ref.shape
    assert np.all(np.isfinite(out)), "NaN from unused cache slots leaked into out"
    np.testing.assert_allclose(out, out_ref, atol=OUT_ATOL, rtol=0)
    empty = np.isneginf(lse_ref)
    assert np.array_equal(np.isneginf(lse), empty), "tokens that see nothing must have lse -inf, only they"
    assert np.all(out[empty] == 0), "tokens that see nothing must be exactly 0"
    np.testing.assert_allclose(lse[~empty], lse_ref[~empty], atol=LSE_ATOL, rtol=0)


def decode(inputs, causal, **kwargs):
    return mla.decode(inputs["q"], inputs["kv_cache"], inputs["block_table"], inputs["seq_lens"], head_dim_v=L,
                      softmax_scale=SCALE, causal=causal, query_start_loc=inputs["query_start_loc"], **kwargs)


@pytest.mark.parametrize("n,causal", [(16, True), (16, False), (128, True)])
def test_mixed_batch(n, causal):
    inputs, out_ref, lse_ref = problem(n, tuple(MIXED_SEQ_LENS), tuple(MIXED_Q_LENS), causal)
    check(decode(inputs, causal), out_ref, lse_ref)


@pytest.mark.parametrize("num_splits", [1, 5])
def test_mixed_batch_forced_splits(num_splits):
    inputs, out_ref, lse_ref = problem(16, tuple(MIXED_SEQ_LENS), tuple(MIXED_Q_LENS), True)
    check(decode(inputs, True, num_splits=num_splits), out_ref, lse_ref)


def test_same_length_drafts():
    """Every request with 3 tokens (the varlen kernel with Sq = 3)."""
    inputs, out_ref, lse_ref = problem(16, (3, 64, 65, 1000), (3, 3, 3, 3), True)
    check(decode(inputs, True), out_ref, lse_ref)


def test_plan_and_outputs():
    """plan_decode on the varlen tables (largest draft 8 by default), then decodes into given outputs, and
    a re-plan in place for the next step's tables."""
    inputs, out_ref, lse_ref = problem(16, tuple(MIXED_SEQ_LENS), tuple(MIXED_Q_LENS), True)
    args = (inputs["q"], inputs["kv_cache"], inputs["block_table"], inputs["seq_lens"])
    plan = mla.plan_decode(*args, head_dim_v=L, causal=True, query_start_loc=inputs["query_start_loc"])
    out = torch.empty(inputs["q"].shape[0], 16, L, dtype=torch.bfloat16, device="cuda")
    lse = torch.empty(inputs["q"].shape[0], 16, dtype=torch.float32, device="cuda")
    result = mla.decode(*args, head_dim_v=L, softmax_scale=SCALE, causal=True, plan=plan, out=out, lse=lse,
                        query_start_loc=inputs["query_start_loc"])
    assert result[0] is out and result[1] is lse
    check(result, out_ref, lse_ref)
    plan.check()
    assert mla.plan_decode(*args, head_dim_v=L, causal=True, query_start_loc=inputs["query_start_loc"],
                           plan=plan) is plan
    check(mla.decode(*args, head_dim_v=L, softmax_scale=SCALE, causal=True, plan=plan,
                     query_start_loc=inputs["query_start_loc"]), out_ref, lse_ref)
    plan.check()
    with pytest.raises(ValueError, match="pass its query_start_loc"):
        mla.decode(*args, head_dim_v=L, softmax_scale=SCALE, causal=True, plan=plan)


def test_plan_flags_a_query_longer_than_its_seq_len():
    """The device planner checks q_b <= seq_len: the request is planned as empty and check() says why."""
    inputs, _, _ = problem(16, (5, 64), (2, 3), True)
    lens = torch.tensor([1, 64], dtype=torch.int32, device="cuda")
    args = (inputs["q"], inputs["kv_cache"], inputs["block_table"], lens)
    plan = mla.plan_decode(*args, head_dim_v=L, causal=True, query_start_loc=inputs["query_start_loc"])
    out, lse = mla.decode(*args, head_dim_v=L, softmax_scale=SCALE, causal=True, plan=plan,
                          query_start_loc=inputs["query_start_loc"])
    with pytest.raises(ValueError, match="seq_lens value"):
        plan.check()
    assert torch.all(out[:2] == 0) and torch.all(torch.isneginf(lse[:2]))
    plan.check()  # the status word was cleared


@pytest.mark.parametrize("seq_lens,q_lens,qsl,match", [
    ((0, 5), (1, 1), None, r"request 0 has 1 query tokens but seq_lens\[0\] = 0"),
    ((20, 5), (9, 1), None, r"more than the 8 a varlen decode takes"),
    ((5, 5), (2, 2), (1, 2, 4), r"query_start_loc must start at 0"),
    ((5, 5), (2, 2), (0, 2, 3), r"must equal the token count T = 4"),
], ids=["q_len>seq_len=0", "q_len>8", "start", "end"])
def test_rejects(seq_lens, q_lens, qsl, match):
    inputs, _, _ = problem(16, seq_lens, q_lens, True)
    if qsl is not None:
        inputs = dict(inputs, query_start_loc=torch.tensor(qsl, dtype=torch.int32, device="cuda"))
    with pytest.raises(ValueError, match=match):
        decode(inputs, True)
