"""mla.dcp on torch CUDA tensors: sharded decodes merged over ranks equal the single-GPU mla.decode.

Runs only where torch sees a CUDA GPU, with the kernels in the kernel cache ($MLA_KERNEL_CACHE_DIR):
`mla-aot --shapes deepseek` has the decode kernels (every rank runs s_q = 1 non-causal decodes) and
scripts/gpu-carry-with-kernels.sh adds the float32 merge_states kernels (H = 512) the combine uses.

* world size 1 through torch.distributed's NCCL backend (one process, one GPU);
* world sizes 2 and 4 simulated on one GPU in one process (the ranks' decodes one after the other, the
  GPU combine over the stacked states), token and whole-page interleave;
* world sizes 2 and 4 as NCCL processes, one GPU each, when that many GPUs are visible.

Inputs: DeepSeek-V3 widths (L=512, R=64, scale 192^-0.5), page 64, bf16 q and cache uniform in [-1, 1),
seq_lens 0, 1 (2 when causal), 3, 64, 8191, pages shuffled. Tolerances against the single-GPU decode:
out 2e-2 absolute (each rank's bf16 output is rounded before the float32 merge, the single-GPU one once),
lse 1e-2 absolute; empty rows exactly 0 and -inf.
"""

import multiprocessing

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the GPU DCP tests need torch CUDA")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU visible to torch: the GPU DCP tests need an sm_90a/sm_100a device",
                allow_module_level=True)

import mla  # noqa: E402
import mla.dcp as dcp  # noqa: E402

L, R, PAGE = 512, 64, 64
SCALE = 192**-0.5
OUT_ATOL, LSE_ATOL = 2e-2, 1e-2


def _inputs(n, s_q, device, seed=0):
    lens = [0, 2 if s_q > 1 else 1, 3, 64, 8191]
    g = torch.Generator().manual_seed(seed)
    pages_per = -(-max(lens) // PAGE)
    b = len(lens)
    q = (torch.rand((b, s_q, n, L + R), generator=g) * 2 - 1).to(torch.bfloat16)
    cache = (torch.rand((b * pages_per, PAGE, L + R), generator=g) * 2 - 1).to(torch.bfloat16)
    table = torch.randperm(b * pages_per, generator=g).reshape(b, pages_per).to(torch.int32)
    return (q.to(device), cache.to(device), table.to(device), torch.tensor(lens, dtype=torch.int32, device=device))


def _shards(cache, table, lens, world, interleave, device):
    """The ranks' local caches: shard_cache on the bf16 bits."""
    bits = cache.view(torch.int16).cpu().numpy()
    out = []
    for c, t, _ in dcp.shard_cache(bits, table.cpu().numpy(), lens.cpu().numpy(), world, interleave=interleave):
        out.append((torch.from_numpy(c).view(torch.bfloat16).to(device), torch.from_numpy(t).to(device)))
    return out


def _assert_close(got, want):
    out, lse = got
    want_out, want_lse = want
    assert out.dtype == want_out.dtype and lse.dtype == torch.float32
    torch.testing.assert_close(out.float(), want_out.float(), atol=OUT_ATOL, rtol=0)
    torch.testing.assert_close(lse, want_lse, atol=LSE_ATOL, rtol=0)
    empty = want_lse.isneginf()
    assert lse[empty].isneginf().all()


@pytest.mark.parametrize("s_q,causal", [(1, False), (2, True)])
@pytest.mark.parametrize("world,interleave", [(2, 1), (2, PAGE), (4, 1)])
def test_ranks_simulated_on_one_gpu(world, interleave, s_q, causal):
    device = torch.device("cuda")
    q, cache, table, lens = _inputs(16, s_q, device)
    want = mla.decode(q, cache, table, lens, head_dim_v=L, softmax_scale=SCALE, causal=causal)
    outs, lses = [], []
    for rank, (c, t) in enumerate(_shards(cache, table, lens, world, interleave, device)):
        o, lse = dcp.decode_local(q, c, t, lens, world_size=world, rank=rank, interleave=interleave,
                                  head_dim_v=L, softmax_scale=SCALE, causal=causal)
        outs.append(o)
        lses.append(lse)
    _assert_close(dcp.combine(torch.stack(outs), torch.stack(lses), out_dtype=q.dtype), want)


def test_world_size_one_over_nccl(tmp_path):
    import torch.distributed as dist

    if not dist.is_nccl_available():
        pytest.skip("torch.distributed without NCCL")
    device = torch.device("cuda")
    dist.init_process_group("nccl", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        q, cache, table, lens = _inputs(128, 2, device)
        want = mla.decode(q, cache, table, lens, head_dim_v=L, softmax_scale=SCALE, causal=True)
        got = dcp.decode(q, cache, table, lens, world_size=1, rank=0, all_gather=dcp.TorchAllGather(),
                         head_dim_v=L, softmax_scale=SCALE, causal=True)
        _assert_close(got, want)
    finally:
        dist.destroy_process_group()


def _nccl_rank(rank, world, store, interleave, results):
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    device = torch.device("cuda", rank)
    dist.init_process_group("nccl", init_method=store, rank=rank, world_size=world)
    q, cache, table, lens = _inputs(128, 2, device)
    c, t = _shards(cache, table, lens, world, interleave, device)[rank]
    out, lse = dcp.decode(q, c, t, lens, world_size=world, rank=rank, all_gather=dcp.TorchAllGather(),
                          interleave=interleave, head_dim_v=L, softmax_scale=SCALE, causal=True)
    torch.cuda.synchronize()
    dist.destroy_process_group()
    results.put((rank, out.cpu(), lse.cpu()))


@pytest.mark.parametrize("world", [2, 4])
def test_nccl_ranks_match_one_gpu(world, tmp_path):
    if torch.cuda.device_count() < world:
        pytest.skip(f"{torch.cuda.device_count()} GPU(s) visible, world size {world} needs one per rank")
    q, cache, table, lens = _inputs(128, 2, torch.device("cuda", 0))
    want = [x.cpu() for x in mla.decode(q, cache, table, lens, head_dim_v=L, softmax_scale=SCALE, causal=True)]
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=_nccl_rank, args=(r, world, f"file://{tmp_path}/store", 1, results))
             for r in range(world)]
    for p in procs:
        p.start()
    got = [results.get(timeout=600) for _ in range(world)]
    for p in procs:
        p.join(timeout=60)
    assert all(p.exitcode == 0 for p in procs)
    for _, out, lse in got:
        _assert_close((out, lse), want)
