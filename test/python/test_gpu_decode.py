"""mla.decode on torch CUDA tensors against a PyTorch float32 reference written here.

Runs only where torch sees a CUDA GPU (sm_90a or sm_100a), with the kernels in the kernel cache
($MLA_KERNEL_CACHE_DIR): `mla-aot --cache-dir DIR --shapes deepseek` builds every bf16 spec used here. A
missing kernel fails with the mla-aot command to run; the float16 case is skipped when its kernel was not
built (it is outside the deepseek set).

Inputs: DeepSeek-V3 widths (L=512, R=64, scale 192^-0.5), page 64, q and cache uniform in [-1, 1); every
cache slot no request reads holds NaN, so a kernel that lets unread rows leak fails. One batch mixes
seq_lens 0, 1, 63, 64, 65 and 8191 (with two causal query rows, 1 becomes 2: a request must hold both
query tokens), pages shuffled in the block table.

Reference: per request and query row, float32 scores over the visible rows, logsumexp and softmax, the
weighted sum of the latent rows; the inputs are the same bf16/f16 values, upcast.

Tolerances (values have |v| <= 1, so out too): out 2e-2 absolute (bf16 output rounding is 2^-9 at 1.0;
the rest allows bf16 probabilities in the PV product), lse 1e-2 absolute (scores accumulate in f32);
empty rows exactly 0 and -inf.
"""

import functools

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the GPU decode tests need torch CUDA")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU visible to torch: the GPU decode tests need an sm_90a/sm_100a device",
                allow_module_level=True)

import mla  # noqa: E402
from mla import gpu  # noqa: E402

# Every test once per sm_90a decode variant (conftest.decode_tile).
pytestmark = pytest.mark.usefixtures("decode_tile")

L, R, PAGE = 512, 64, 64
D = L + R
SCALE = 192**-0.5
OUT_ATOL = 2e-2
LSE_ATOL = 1e-2
HEADS = (16, 32, 64, 128)
MODES = ((1, False), (2, True))  # (s_q, causal)


def seq_lens_for(sq, causal):
    return [0, sq if causal else 1, 63, 64, 65, 8191]


@functools.lru_cache(maxsize=None)
def problem(n, sq, causal, dtype=torch.bfloat16):
    """Inputs on the GPU and the reference (out float32 [b, sq, n, L], lse [b, n, sq])."""
    gen = torch.Generator(device="cpu").manual_seed(1000 * n + 10 * sq + int(causal))
    lens = seq_lens_for(sq, causal)
    b = len(lens)
    max_pages = -(-max(lens) // PAGE)
    num_pages = b * max_pages
    table = torch.randperm(num_pages, generator=gen).to(torch.int32).view(b, max_pages)
    q = (torch.rand(b, sq, n, D, generator=gen) * 2 - 1).to(dtype)
    cache = torch.full((num_pages, PAGE, D), float("nan"), dtype=dtype)
    for i, length in enumerate(lens):
        for pos in range(0, length, PAGE):
            rows = min(PAGE, length - pos)
            cache[table[i, pos // PAGE], :rows] = (torch.rand(rows, D, generator=gen) * 2 - 1).to(dtype)

    out, lse = reference(q, cache, table, lens, sq, causal)
    dev = "cuda"
    inputs = dict(q=q.to(dev), kv_cache=cache.to(dev), block_table=table.to(dev),
                  seq_lens=torch.tensor(lens, dtype=torch.int32, device=dev))
    return inputs, out, lse


def reference(q, cache, table, lens, sq, causal):
    """out float32 [b, sq, n, L] and lse [b, n, sq] of host tensors q [b, sq, n, D] and the paged cache."""
    b, n = len(lens), q.shape[2]
    out = torch.zeros(b, sq, n, L)
    lse = torch.full((b, n, sq), float("-inf"))
    dev = "cuda"
    for i, length in enumerate(lens):
        pages = table[i, : -(-length // PAGE)].long()
        rows = cache[pages].reshape(-1, D)[:length].to(dev, torch.float32)
        for t in range(sq):
            visible = length - (sq - 1 - t) if causal and length > 0 else length
            if visible <= 0:
                continue
            scores = q[i, t].to(dev, torch.float32) @ rows[:visible].T * SCALE  # [n, visible]
            lse[i, :, t] = torch.logsumexp(scores, dim=-1).cpu()
            out[i, t] = (torch.softmax(scores, dim=-1) @ rows[:visible, :L]).cpu()
    return out, lse


# Natural-log score levels of 64-token blocks: the running max jumps by more than the kernels' slack (8 in
# base 2, 5.5 natural) at blocks 2, 5, 7 and 10 (even and odd blocks, so both seesaw warpgroups) and
# creeps up or falls back elsewhere, where conditional rescaling leaves the max where it was.
STAIRS = (0.0, 2.0, 11.0, 11.0, 5.0, 20.0, 21.0, 30.0, 30.5, 25.0, 40.0, 41.0)


@functools.lru_cache(maxsize=None)
def stairs_problem(n, sq, causal):
    """Rows c_t * u + noise, with q = u for every head and c_t chosen so that the score of token t is
    STAIRS[t // 64] (+- 0.5): every block's weight in the softmax is set, and a kernel that rescales its
    output or row sum wrongly when the running max moves (or moves it when it should not) is off by far
    more than the tolerance."""
    gen = torch.Generator(device="cpu").manual_seed(7 * n + sq)
    lens = [len(STAIRS) * PAGE, len(STAIRS) * PAGE - 35, 2 * PAGE + 2]
    b = len(lens)
    max_pages = -(-max(lens) // PAGE)
    table = torch.randperm(b * max_pages, generator=gen).to(torch.int32).view(b, max_pages)
    u = torch.where(torch.rand(D, generator=gen) < 0.5, -0.5, 0.5)
    q = u.expand(b, sq, n, D).to(torch.bfloat16)
    cache = torch.full((b * max_pages, PAGE, D), float("nan"), dtype=torch.bfloat16)
    for i, length in enumerate(lens):
        levels = torch.tensor([STAIRS[t // PAGE] for t in range(length)])
        levels += torch.rand(length, generator=gen) - 0.5
        rows = levels[:, None] / (SCALE * float(u @ u)) * u + 0.05 * (torch.rand(length, D, generator=gen) - 0.5)
        for pos in range(0, length, PAGE):
            cache[table[i, pos // PAGE], : min(PAGE, length - pos)] = rows[pos : pos + PAGE].to(torch.bfloat16)
    out, lse = reference(q, cache, table, lens, sq, causal)
    dev = "cuda"
    inputs = dict(q=q.to(dev), kv_cache=cache.to(dev), block_table=table.to(dev),
                  seq_lens=torch.tensor(lens, dtype=torch.int32, device=dev))
    return inputs, out, lse


def check(result, out_ref, lse_ref):
    out, lse = result
    assert out.dtype in (torch.bfloat16, torch.float16) and lse.dtype == torch.float32
    out, lse = out.float().cpu(), lse.cpu()
    assert out.shape == out_ref.shape and lse.shape == lse_ref.shape
    assert not torch.isnan(out).any(), "NaN in out: unread cache slots (NaN) leaked"
    empty = torch.isinf(lse_ref)
    assert torch.equal(torch.isinf(lse) & (lse < 0), empty), "lse must be -inf exactly for rows that see nothing"
    torch.testing.assert_close(out, out_ref, atol=OUT_ATOL, rtol=0)
    torch.testing.assert_close(lse[~empty], lse_ref[~empty], atol=LSE_ATOL, rtol=0)
    rows_empty = empty.permute(0, 2, 1)  # [b, sq, n]
    assert (out[rows_empty] == 0).all(), "rows that see nothing must be exactly 0"


@pytest.mark.parametrize("n", HEADS)
@pytest.mark.parametrize("sq, causal", MODES)
@pytest.mark.parametrize("num_splits", [None, 1, 2, 7, 16, 64])
def test_decode_matches_reference(n, sq, causal, num_splits):
    inputs, out_ref, lse_ref = problem(n, sq, causal)
    result = mla.decode(**inputs, head_dim_v=L, softmax_scale=SCALE, causal=causal, num_splits=num_splits)
    check(result, out_ref, lse_ref)


@pytest.mark.parametrize("n", (16, 128))
@pytest.mark.parametrize("sq, causal", MODES)
@pytest.mark.parametrize("policy", sorted(gpu.SPLIT_POLICIES))
def test_split_policies_match_reference(n, sq, causal, policy):
    inputs, out_ref, lse_ref = problem(n, sq, causal)
    result = gpu.decode(**inputs, head_dim_v=L, softmax_scale=SCALE, causal=causal, split_policy=policy)
    check(result, out_ref, lse_ref)


@pytest.mark.parametrize("n", (16, 128))
@pytest.mark.parametrize("sq, causal", MODES)
@pytest.mark.parametrize("num_splits", [1, 3])
def test_running_max_jumps(n, sq, causal, num_splits):
    inputs, out_ref, lse_ref = stairs_problem(n, sq, causal)
    result = mla.decode(**inputs, head_dim_v=L, softmax_scale=SCALE, causal=causal, num_splits=num_splits)
    check(result, out_ref, lse_ref)


# The seesaw build in clusters of two sharing the KV boxes (tile suffix m; N a multiple of 128): mixed seq_lens
# (the two CTAs of a cluster load alternate boxes of every block and free a slot only when both are done with
# it), split counts that leave pieces of one block, of none and of many, and the running max's stairs.
MULTICAST = "64x2x64x2m"


@pytest.mark.parametrize("sq, causal", MODES)
@pytest.mark.parametrize("num_splits", [None, 1, 2, 7, 64])
def test_multicast_matches_reference(sq, causal, num_splits):
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip(f"tile {MULTICAST} is an sm_90a kernel")
    inputs, out_ref, lse_ref = problem(128, sq, causal)
    result = gpu.decode(**inputs, head_dim_v=L, softmax_scale=SCALE, causal=causal, num_splits=num_splits,
                        tile=MULTICAST)
    check(result, out_ref, lse_ref)
    inputs, out_ref, lse_ref = stairs_problem(128, sq, causal)
    check(gpu.decode(**inputs, head_dim_v=L, softmax_scale=SCALE, causal=causal, num_splits=num_splits,
                     tile=MULTICAST), out_ref, lse_ref)


def test_every_split_count_agrees():
    inputs, out_ref, lse_ref = problem(16, 1, False)
    for k in range(1, 65):
        check(mla.decode(**inputs, head_dim_v=L, softmax_scale=SCALE, num_splits=k), out_ref, lse_ref)


def test_host_seq_lens_and_side_stream():
    inputs, out_ref, lse_ref = problem(64, 1, False)
    inputs = dict(inputs, seq_lens=inputs["seq_lens"].cpu())
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        result = mla.decode(**inputs, head_dim_v=L, softmax_scale=SCALE)
    stream.synchronize()
    check(result, out_ref, lse_ref)


def test_float16():
    inputs, out_ref, lse_ref = problem(16, 1, False, torch.float16)
    try:
        result = mla.decode(**inputs, head_dim_v=L, softmax_scale=SCALE)
    except gpu.KernelNotFoundError as error:
        pytest.skip(f"the f16 kernel is not in the cache (outside mla-aot's deepseek set): {error}")
    check(result, out_ref, lse_ref)


def test_causal_rows_beyond_the_cache_are_rejected():
    inputs, _, _ = problem(16, 2, True)
    inputs = dict(inputs, seq_lens=torch.tensor([0, 1, 63, 64, 65, 8191], dtype=torch.int32, device="cuda"))
    with pytest.raises(ValueError, match=r"causal decode needs seq_lens\[1\] = 1 >= s_q = 2"):
        mla.decode(**inputs, head_dim_v=L, softmax_scale=SCALE, causal=True)


def test_empty_batch():
    inputs, _, _ = problem(16, 1, False)
    inputs = {k: v[:0] if k != "kv_cache" else v for k, v in inputs.items()}
    out, lse = mla.decode(**inputs, head_dim_v=L, softmax_scale=SCALE)
    assert out.shape == (0, 1, 16, L) and lse.shape == (0, 16, 1)


@pytest.mark.parametrize("n", (16, 128))
@pytest.mark.parametrize("num_splits", [1, 7])
@pytest.mark.parametrize("bad", ["nan", "inf"])
def test_non_finite_query_gives_nan_rows(n, num_splits, bad):
    """A NaN or Inf in q makes the rows it touches NaN in out and lse (as PyTorch's softmax does);
    -inf lse stays reserved for rows that see no key, and every other row is unchanged."""
    inputs, out_ref, lse_ref = problem(n, 1, False)
    q = inputs["q"].clone()
    q[2, 0, 3, 17] = float(bad)   # request 2 (63 keys), head 3
    q[0, 0, 5, 0] = float(bad)    # request 0 sees no key: stays empty
    out, lse = mla.decode(**dict(inputs, q=q), head_dim_v=L, softmax_scale=SCALE, num_splits=num_splits)
    out, lse = out.float().cpu(), lse.cpu()
    assert torch.isnan(out[2, 0, 3]).all() and torch.isnan(lse[2, 3, 0])
    assert (out[0] == 0).all() and torch.equal(lse[0], torch.full_like(lse[0], float("-inf")))
    touched = torch.zeros_like(lse_ref, dtype=torch.bool)
    touched[2, 3, 0] = True
    assert not torch.isnan(lse[~touched]).any()
    keep = ~touched.permute(0, 2, 1)  # [b, sq, n]
    torch.testing.assert_close(out[keep], out_ref[keep], atol=OUT_ATOL, rtol=0)
