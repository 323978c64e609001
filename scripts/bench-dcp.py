#!/usr/bin/env python3
"""Decode context parallelism on GPUs: time per decode step of mla.dcp next to the single-GPU mla.decode.

One step on each of W ranks (one process and one GPU per rank, NCCL through torch.distributed, spawned
here the way torchrun would): the rank's decode of its shard of the latent cache, the all-gather of
(out, lse) on the current stream and the LSE combine (mla.dcp.decode). The baseline is mla.decode of the
whole cache on one GPU. Both take the unplanned path (seq_lens read on the host each call) so the
comparison is like for like. Every rank builds the same global inputs (same seed), checks its merged
result against its own single-GPU decode (bf16: out 2e-2, lse 1e-2 absolute) and then times both.

  MLA_KERNEL_CACHE_DIR=gpu-carry/kernel-cache PYTHONPATH=gpu-carry/python \\
      python3 scripts/bench-dcp.py --world-size 2            # needs 2 GPUs; default b=32 N=128 seq=131072
  ... --world-size 2 --simulate                               # one GPU: the ranks one after the other

--simulate runs every rank in this process on one GPU (for checking the merge path where only one GPU
is lent); its time is the sum of the ranks' decodes plus the combine, not a parallel step.
Prints one line per measurement: median and best ms per step over --iters steps after --warmup.
"""

import argparse
import statistics
import tempfile

import torch

import mla
import mla.dcp as dcp

L, R, PAGE = 512, 64, 64
SCALE = 192**-0.5


def global_inputs(args, device):
    g = torch.Generator(device=device).manual_seed(args.seed)
    pages = -(-args.seq_len // PAGE)
    q = torch.rand((args.batch, 1, args.heads, L + R), generator=g, device=device).mul_(2).sub_(1)
    cache = torch.empty((args.batch * pages, PAGE, L + R), dtype=torch.bfloat16, device=device)
    for i in range(0, cache.shape[0], 4096):  # in slices: float32 temporaries of a 4.8 GB cache are big
        part = cache[i:i + 4096]
        part.copy_(torch.rand(part.shape, generator=g, device=device).mul_(2).sub_(1))
    table = torch.randperm(args.batch * pages, generator=g, device=device).reshape(args.batch, pages)
    lens = torch.full((args.batch,), args.seq_len, dtype=torch.int32, device=device)
    return q.to(torch.bfloat16), cache, table.to(torch.int32), lens


def shard(cache, table, lens, world, rank, interleave):
    """Rank `rank`'s local cache and block table, gathered on the GPU (vLLM's layout, mla.dcp's rule)."""
    host_lens = lens.cpu().numpy()
    local_lens = dcp.owned_tokens(host_lens, world, rank, interleave)
    local_pages = int(-(-local_lens.max() // PAGE)) if len(local_lens) else 0
    b = len(host_lens)
    local_table = torch.arange(b * local_pages, dtype=torch.int32, device=cache.device).reshape(b, local_pages)
    local = torch.zeros((b * local_pages + 1, PAGE, cache.shape[2]), dtype=cache.dtype, device=cache.device)
    for i in range(b):
        j = torch.arange(int(local_lens[i]), device=cache.device)
        t = j // interleave * world * interleave + rank * interleave + j % interleave
        local[local_table[i, j // PAGE].long(), j % PAGE] = cache[table[i, t // PAGE].long(), t % PAGE]
    return local, local_table


def timed(fn, args):
    for _ in range(args.warmup):
        fn()
    times = []
    for _ in range(args.iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times), min(times)


def check(got, want):
    out_err = (got[0].float() - want[0].float()).abs().max().item()
    finite = want[1].isfinite()
    lse_err = (got[1][finite] - want[1][finite]).abs().max().item() if finite.any() else 0.0
    ok = out_err <= 2e-2 and lse_err <= 1e-2 and bool(got[1][~finite].isneginf().all())
    return ok, out_err, lse_err


def report(label, args, ms):
    print(f"{label} b={args.batch} N={args.heads} seq={args.seq_len}: median {ms[0]:.3f} ms, best {ms[1]:.3f} "
          f"ms per step", flush=True)


def single_gpu(q, cache, table, lens):
    return mla.decode(q, cache, table, lens, head_dim_v=L, softmax_scale=SCALE)


def rank_main(rank, args, store):
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    device = torch.device("cuda", rank)
    dist.init_process_group("nccl", init_method=store, rank=rank, world_size=args.world_size)
    q, cache, table, lens = global_inputs(args, device)
    want = single_gpu(q, cache, table, lens)
    if rank == 0:
        report("single-GPU mla.decode", args, timed(lambda: single_gpu(q, cache, table, lens), args))
    local, local_table = shard(cache, table, lens, args.world_size, rank, args.interleave)
    del cache, table
    torch.cuda.empty_cache()
    gather = dcp.TorchAllGather()

    def step():
        return dcp.decode(q, local, local_table, lens, world_size=args.world_size, rank=rank, all_gather=gather,
                          interleave=args.interleave, head_dim_v=L, softmax_scale=SCALE)

    ok, out_err, lse_err = check(step(), want)
    print(f"rank {rank}: DCP result vs single-GPU decode: max |out| error {out_err:.2e}, max |lse| error "
          f"{lse_err:.2e}: {'PASS' if ok else 'FAIL'}", flush=True)
    dist.barrier()
    ms = timed(step, args)
    if rank == 0:
        report(f"mla.dcp world={args.world_size} interleave={args.interleave} (NCCL)", args, ms)
        local_ms = timed(lambda: dcp.decode_local(q, local, local_table, lens, world_size=args.world_size, rank=rank,
                                                  interleave=args.interleave, head_dim_v=L,
                                                  softmax_scale=SCALE), args)
        report("  of which the rank's local decode", args, local_ms)
    dist.barrier()
    dist.destroy_process_group()
    if not ok:
        raise SystemExit(1)


def simulate(args):
    device = torch.device("cuda")
    q, cache, table, lens = global_inputs(args, device)
    want = single_gpu(q, cache, table, lens)
    report("single-GPU mla.decode", args, timed(lambda: single_gpu(q, cache, table, lens), args))
    shards = [shard(cache, table, lens, args.world_size, r, args.interleave) for r in range(args.world_size)]
    del cache, table
    torch.cuda.empty_cache()

    def step():
        states = [dcp.decode_local(q, c, t, lens, world_size=args.world_size, rank=r, interleave=args.interleave,
                                   head_dim_v=L, softmax_scale=SCALE) for r, (c, t) in enumerate(shards)]
        return dcp.combine(torch.stack([s[0] for s in states]), torch.stack([s[1] for s in states]),
                           out_dtype=q.dtype)

    ok, out_err, lse_err = check(step(), want)
    print(f"simulated world={args.world_size}: merged result vs single-GPU decode: max |out| error "
          f"{out_err:.2e}, max |lse| error {lse_err:.2e}: {'PASS' if ok else 'FAIL'}", flush=True)
    report(f"mla.dcp world={args.world_size} interleave={args.interleave} simulated on one GPU (serial)", args,
           timed(step, args))
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--interleave", type=int, default=1, help="tokens per run (vLLM's default 1)")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--heads", type=int, default=128)
    parser.add_argument("--seq-len", type=int, default=131072)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--simulate", action="store_true", help="every rank on one GPU, in this process")
    args = parser.parse_args()
    if args.simulate:
        raise SystemExit(0 if simulate(args) else 1)
    if torch.cuda.device_count() < args.world_size:
        raise SystemExit(f"{torch.cuda.device_count()} GPU(s) visible, --world-size {args.world_size} needs one "
                         f"per rank (or --simulate)")
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(rank_main, args=(args, f"file://{tmp}/store"), nprocs=args.world_size, join=True)


if __name__ == "__main__":
    main()
