"""The sm_90a tensor-core `mla_mha` (FlashAttention-3 structure: TMA ring, wgmma, register-A P V)
against the float64 numpy reference (mla_reference.mha_ref), on the shapes whose tiles exercise it:
requests longer than one 128-row tile and one 128-key block, partial tiles and blocks, 1-token prompts,
empty query ranges, q_len > k_len (causal rows that see nothing: out 0, lse -inf), rows after
cu_seqlens_q[B] (out 0, lse -inf), N in {16, 128}, qk/v widths 192/128 (DeepSeek) and 64/64, 128/128.

Tolerances: out within 1e-2 absolute + 1e-2 relative (bf16 inputs and output, P rounded to bf16 for the
P V product as every FlashAttention kernel does), lse within 1e-3 absolute (float32 throughout).
Needs an sm_90 GPU and the kernels `mla-aot --shapes deepseek` builds; skipped elsewhere.
"""
import importlib.util

import pytest

np = pytest.importorskip("numpy", reason="the checks compare with the numpy reference")

import mla  # noqa: E402
import mla_reference as ref  # noqa: E402

HAS_TORCH = importlib.util.find_spec("torch") is not None
if HAS_TORCH:
    import torch

    HAS_SM90 = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
else:
    HAS_SM90 = False

needs_sm90 = pytest.mark.skipif(
    not HAS_SM90, reason="needs torch with an sm_90 (Hopper) GPU: the tensor-core mha build is sm_90a's")

# (q_len, k_len) per request: partial and whole tiles, 1-token prompts, an empty query range, keys but no
# queries, q_len > k_len, and long context.
REQUESTS = [(1, 1), (130, 200), (300, 300), (0, 40), (257, 1000), (128, 128), (200, 50), (1, 513)]


def run_case(requests, N, D, V, causal, extra_rows=3, seed=0, key_levels=None):
    """`key_levels`: factors for the keys of each 128-key block of a request (the last one repeats), so
    that the scores' scale, and each query row's running max, steps from block to block."""
    q_lens, k_lens = zip(*requests)
    cu_q = np.cumsum((0,) + q_lens).astype(np.int32)
    cu_k = np.cumsum((0,) + k_lens).astype(np.int32)
    T, S = int(cu_q[-1]) + extra_rows, int(cu_k[-1])
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(T, N, D, generator=gen).to(torch.bfloat16)
    k = torch.randn(S, N, D, generator=gen)
    if key_levels is not None:
        pos = np.concatenate([np.arange(n) for n in k_lens]) // 128
        k *= torch.tensor(key_levels, dtype=torch.float32)[np.minimum(pos, len(key_levels) - 1)][:, None, None]
    k = k.to(torch.bfloat16)
    v = torch.randn(S, N, V, generator=gen).to(torch.bfloat16)
    scale = D ** -0.5
    out, lse = mla.mha(q.cuda(), k.cuda(), v.cuda(), torch.from_numpy(cu_q), torch.from_numpy(cu_k),
                       softmax_scale=scale, causal=causal)
    torch.cuda.synchronize()
    want_out, want_lse = ref.mha_ref(q.float().numpy(), k.float().numpy(), v.float().numpy(), cu_q, cu_k,
                                     causal, scale)
    got_out, got_lse = out.float().cpu().numpy(), lse.cpu().numpy()
    assert not np.isnan(got_out).any() and not np.isnan(got_lse).any()
    np.testing.assert_allclose(got_out, want_out, rtol=1e-2, atol=1e-2)
    np.testing.assert_allclose(got_lse, want_lse, rtol=0, atol=1e-3)
    assert (got_out[T - extra_rows:] == 0).all() and np.isneginf(got_lse[:, T - extra_rows:]).all()
    return cu_q, got_out, got_lse


@needs_sm90
@pytest.mark.parametrize("causal", [True, False])
def test_deepseek_widths_varlen(causal):
    cu_q, out, lse = run_case(REQUESTS, N=16, D=192, V=128, causal=causal)
    if causal:
        # Request 6 has q_len 200 > k_len 50: its first 150 rows see no key.
        rows = slice(int(cu_q[6]), int(cu_q[6]) + 150)
        assert (out[rows] == 0).all() and np.isneginf(lse[:, rows]).all()


@needs_sm90
@pytest.mark.parametrize("causal", [True, False])
def test_128_heads(causal):
    run_case([(700, 700), (64, 900)], N=128, D=192, V=128, causal=causal, seed=1)


@needs_sm90
@pytest.mark.parametrize("causal", [True, False])
def test_running_max_jumps(causal):
    # Key scales per 128-key block: a row's max over a block is about 2.5x its scale, so the running max
    # jumps by more than the kernel's slack (8 in base 2, 5.5 natural) at blocks 1, 3, 5 and 6 and falls
    # back or creeps elsewhere; a wrong rescaling of o or l when it moves is off by O(1).
    run_case([(300, 1000), (130, 900)], N=16, D=192, V=128, causal=causal, seed=4,
             key_levels=(1.0, 3.5, 3.5, 7.0, 2.0, 10.0, 13.0, 13.5))


@needs_sm90
@pytest.mark.parametrize("width", [64, 128])
@pytest.mark.parametrize("causal", [True, False])
def test_equal_qk_and_v_widths(width, causal):
    run_case(REQUESTS, N=16, D=width, V=width, causal=causal, seed=2)


@needs_sm90
def test_no_keys_at_all():
    # Every request has an empty key range: all rows out 0, lse -inf (and the kernel loads no K/V).
    run_case([(5, 0), (130, 0)], N=16, D=192, V=128, causal=False, seed=3)
