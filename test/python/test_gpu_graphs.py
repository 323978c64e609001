"""Plan/run decode on torch CUDA tensors: device plans, CUDA graphs and the runtime softmax scale.

Runs only where torch sees a CUDA GPU (sm_90a or sm_100a), with the DeepSeek-V3 decode kernels in the
kernel cache ($MLA_KERNEL_CACHE_DIR; `mla-aot --shapes deepseek` builds them, planning kernel included).

What must hold:
  * the device plan's split bounds equal the host planner's (planUniformBounds: every request cut into
    num_splits pieces of whole pages), read back from the plan's workspace;
  * decode(plan=) equals decode() without a plan (both launch the same kernels on the same bounds);
  * plan_decode + decode captured in one torch.cuda.graph, replayed after q, seq_lens and block_table were
    changed in place (lengths varying between replays, zeros included), equals the eager result;
  * invalid lengths or pages are planned as empty and reported by plan.check(), never read;
  * one cache entry serves two softmax scales (runtime_stats: the second scale loads nothing).
"""

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the GPU plan tests need torch CUDA")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU visible to torch: the GPU plan tests need an sm_90a/sm_100a device",
                allow_module_level=True)

import mla  # noqa: E402
from mla import gpu  # noqa: E402

# Every test once per sm_90a decode variant (conftest.decode_tile).
pytestmark = pytest.mark.usefixtures("decode_tile")

L, R, PAGE = 512, 64, 64
D = L + R
SCALE = 192**-0.5
MAX_PAGES = 32  # capacity 2048 tokens


def make_inputs(n, lens, sq=1, seed=0):
    gen = torch.Generator(device="cpu").manual_seed(seed)
    b = len(lens)
    num_pages = b * MAX_PAGES
    table = torch.randperm(num_pages, generator=gen).to(torch.int32).view(b, MAX_PAGES)
    q = (torch.rand(b, sq, n, D, generator=gen) * 2 - 1).to(torch.bfloat16)
    cache = (torch.rand(num_pages, PAGE, D, generator=gen) * 2 - 1).to(torch.bfloat16)
    return dict(q=q.cuda(), kv_cache=cache.cuda(), block_table=table.cuda(),
                seq_lens=torch.tensor(lens, dtype=torch.int32, device="cuda"))


def uniform_bounds(lens, splits):
    """planUniformBounds(lens, splits, PAGE) of GpuDecode.cpp."""
    rows = []
    for length in lens:
        piece = -(-length // splits)
        chunk = max(-(-piece // PAGE) * PAGE, 1)
        rows.append([min(s * chunk, length) for s in range(splits + 1)])
    return rows


def plan_bounds(plan, batch, n, sq=1):
    """The split_bounds section of the plan's workspace (decodeWorkspaceLayout)."""
    align = lambda v: -(-v // 256) * 256  # noqa: E731
    rows = plan.num_splits * plan.max_batch * sq * n
    offset = align(rows * L * 4) + align(rows * 4)
    words = plan._workspace[offset:offset + batch * (plan.num_splits + 1) * 4].view(torch.int32)
    return words.view(batch, plan.num_splits + 1).tolist()


@pytest.mark.parametrize("splits", [1, 3, 7])
def test_device_plan_equals_host_planner(splits):
    lens = [0, 1, 63, 64, 65, 1000, 2048]
    inputs = make_inputs(128, lens)
    plan = mla.plan_decode(**inputs, head_dim_v=L, num_splits=splits)
    torch.cuda.synchronize()
    assert plan.num_splits == splits
    assert plan_bounds(plan, len(lens), 128) == uniform_bounds(lens, splits)
    plan.check()


@pytest.mark.parametrize("n", [16, 128])
@pytest.mark.parametrize("policy", ["grid", "batch-invariant"])
def test_planned_decode_equals_unplanned(n, policy):
    lens = [5, 700, 2048, 0]
    inputs = make_inputs(n, lens, seed=n)
    plan = mla.plan_decode(**inputs, head_dim_v=L, split_policy=policy)
    out = torch.empty(len(lens), 1, n, L, dtype=torch.bfloat16, device="cuda")
    lse = torch.empty(len(lens), n, 1, dtype=torch.float32, device="cuda")
    got = mla.decode(**inputs, head_dim_v=L, softmax_scale=SCALE, plan=plan, out=out, lse=lse)
    assert got[0] is out and got[1] is lse
    want = mla.decode(**inputs, head_dim_v=L, softmax_scale=SCALE, num_splits=plan.num_splits)
    torch.testing.assert_close(out, want[0], atol=0, rtol=0)
    torch.testing.assert_close(lse, want[1], atol=0, rtol=0)
    plan.check()


def test_graph_replay_equals_eager():
    n, b = 128, 4
    inputs = make_inputs(n, [2048, 1024, 17, 0], seed=7)
    plan = mla.plan_decode(**inputs, head_dim_v=L, num_splits=4)
    out = torch.empty(b, 1, n, L, dtype=torch.bfloat16, device="cuda")
    lse = torch.empty(b, n, 1, dtype=torch.float32, device="cuda")
    # Warm up on a side stream (loads the kernels), as torch.cuda.graph wants.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        mla.plan_decode(**inputs, head_dim_v=L, plan=plan)
        mla.decode(**inputs, head_dim_v=L, softmax_scale=SCALE, plan=plan, out=out, lse=lse)
    torch.cuda.current_stream().wait_stream(side)

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        mla.plan_decode(**inputs, head_dim_v=L, plan=plan)
        mla.decode(**inputs, head_dim_v=L, softmax_scale=SCALE, plan=plan, out=out, lse=lse)

    gen = torch.Generator(device="cpu").manual_seed(11)
    for lens in ([0, 0, 0, 0], [1, 2048, 0, 64], [2048, 2048, 2048, 2048], [63, 65, 1, 1000]):
        fresh = make_inputs(n, lens, seed=int(torch.randint(1 << 30, (1,), generator=gen)))
        for name in ("q", "block_table", "seq_lens"):
            inputs[name].copy_(fresh[name])
        inputs["kv_cache"].copy_(fresh["kv_cache"])
        graph.replay()
        torch.cuda.synchronize()
        want = mla.decode(**inputs, head_dim_v=L, softmax_scale=SCALE, num_splits=4)
        torch.testing.assert_close(out, want[0], atol=0, rtol=0, msg=f"out for seq_lens {lens}")
        torch.testing.assert_close(lse, want[1], atol=0, rtol=0, msg=f"lse for seq_lens {lens}")
    plan.check()


def test_plan_sized_for_a_larger_batch():
    n = 16
    full = make_inputs(n, [100, 200, 300, 400], seed=3)
    plan = mla.plan_decode(**full, head_dim_v=L, num_splits=2, max_batch=8)
    part = {k: v[:2].contiguous() if k != "kv_cache" else v for k, v in full.items()}
    mla.plan_decode(**part, head_dim_v=L, plan=plan)
    got = mla.decode(**part, head_dim_v=L, softmax_scale=SCALE, plan=plan)
    want = mla.decode(**part, head_dim_v=L, softmax_scale=SCALE, num_splits=2)
    torch.testing.assert_close(got[0], want[0], atol=0, rtol=0)
    with pytest.raises(ValueError, match="at most 8 requests"):
        big = make_inputs(n, [1] * 9)
        mla.plan_decode(**big, head_dim_v=L, plan=plan)


def test_invalid_tables_are_planned_empty_and_reported():
    n = 16
    inputs = make_inputs(n, [100, 200, 300])
    plan = mla.plan_decode(**inputs, head_dim_v=L, num_splits=2)
    plan.check()
    inputs["seq_lens"][1] = MAX_PAGES * PAGE + 1  # past the block table's capacity
    inputs["block_table"][2, 0] = 1 << 20  # past the cache
    mla.plan_decode(**inputs, head_dim_v=L, plan=plan)
    out, lse = mla.decode(**inputs, head_dim_v=L, softmax_scale=SCALE, plan=plan)
    torch.cuda.synchronize()
    assert torch.all(out[1:] == 0) and torch.all(lse[1:] == float("-inf"))
    with pytest.raises(ValueError, match="seq_lens value was outside.*block table entry"):
        plan.check()
    plan.check()  # reported once, then cleared


def test_one_kernel_serves_two_scales():
    n = 128
    inputs = make_inputs(n, [1024], seed=5)
    plan = mla.plan_decode(**inputs, head_dim_v=L)
    a = mla.decode(**inputs, head_dim_v=L, softmax_scale=SCALE, plan=plan)
    before = gpu.runtime_stats()
    b = mla.decode(**inputs, head_dim_v=L, softmax_scale=2 * SCALE, plan=plan)
    c = mla.decode(**inputs, head_dim_v=L, softmax_scale=2 * SCALE, num_splits=plan.num_splits)
    after = gpu.runtime_stats()
    assert after["cache_misses"] == before["cache_misses"]
    assert not torch.equal(a[1], b[1])
    torch.testing.assert_close(b[0], c[0], atol=0, rtol=0)
    # Against a float32 reference at the second scale.
    rows = inputs["kv_cache"][inputs["block_table"][0, :16].long()].reshape(-1, D)[:1024].float()
    scores = inputs["q"][0, 0].float() @ rows.T * (2 * SCALE)
    torch.testing.assert_close(b[1][0, :, 0], torch.logsumexp(scores, -1), atol=1e-2, rtol=0)
    torch.testing.assert_close(b[0][0, 0].float(), torch.softmax(scores, -1) @ rows[:, :L], atol=2e-2, rtol=0)


def test_planned_call_checks_shapes():
    inputs = make_inputs(16, [10, 20])
    plan = mla.plan_decode(**inputs, head_dim_v=L)
    other = make_inputs(16, [10, 20, 30])
    with pytest.raises(ValueError, match="plan this step"):
        mla.decode(**other, head_dim_v=L, softmax_scale=SCALE, plan=plan)
    with pytest.raises(ValueError, match="num_splits"):
        mla.decode(**inputs, head_dim_v=L, softmax_scale=SCALE, plan=plan, num_splits=2)
    with pytest.raises(ValueError, match="out must be"):
        mla.decode(**inputs, head_dim_v=L, softmax_scale=SCALE, plan=plan,
                   out=torch.empty(2, 1, 16, L, device="cuda"), lse=torch.empty(2, 16, 1, device="cuda"))
    with pytest.raises(ValueError, match="softmax_scale"):
        mla.decode(**inputs, head_dim_v=L, softmax_scale=0.0, plan=plan)
    with pytest.raises(ValueError, match="balanced"):
        mla.plan_decode(**inputs, head_dim_v=L, split_policy="balanced")
