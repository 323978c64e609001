#!/usr/bin/env python3
"""Host time of one Python mla.decode call on the GPU, with and without a device plan.

The planned path (mla.plan_decode once per step, then mla.decode(..., plan=, out=, lse=)) must cost at
most 15 us of host time per call at b=1, N=128, seq 1024 (issue 12, item 3). The time is the host wall
time of the calls themselves: the kernels run asynchronously, and the GPU work of one call (a few us at
this size) is shorter than its launch cost, so the launch queue never fills and the loop measures the host.

Usage (GPU machine, kernels in the cache):
  MLA_KERNEL_CACHE_DIR=/path/to/cache PYTHONPATH=gpu-carry/python python3 scripts/bench-host-cost.py
Prints one line per path: median and best of --repeats runs of --calls calls each, in us per call.
The last lines split the planned call's host time: the C API's run function called through ctypes with
the pointers precomputed (argument checks plus the two kernel launches), a ctypes call that does no work
(the binding's floor), and torch's current-stream lookup.
"""

import argparse
import statistics
import time

import torch

import mla

L, R, PAGE = 512, 64, 64


def inputs(batch, heads, seq):
    pages = -(-seq // PAGE)
    q = torch.randn(batch, 1, heads, L + R, dtype=torch.bfloat16, device="cuda")
    cache = torch.randn(batch * pages, PAGE, L + R, dtype=torch.bfloat16, device="cuda")
    table = torch.arange(batch * pages, dtype=torch.int32, device="cuda").view(batch, pages)
    lens = torch.full((batch,), seq, dtype=torch.int32, device="cuda")
    return dict(q=q, kv_cache=cache, block_table=table, seq_lens=lens)


def time_calls(fn, calls, repeats):
    """Per-call host microseconds of `calls` back-to-back calls, over `repeats` runs."""
    per_call = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        per_call.append((time.perf_counter() - start) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(per_call), min(per_call)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=128)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()

    x = inputs(args.batch, args.heads, args.seq)
    scale = 192**-0.5
    plan = mla.plan_decode(**x, head_dim_v=L)
    out = torch.empty(args.batch, 1, args.heads, L, dtype=torch.bfloat16, device="cuda")
    lse = torch.empty(args.batch, args.heads, 1, dtype=torch.float32, device="cuda")

    paths = {
        "decode (plan=, out=, lse=)": lambda: mla.decode(**x, head_dim_v=L, softmax_scale=scale, plan=plan,
                                                         out=out, lse=lse),
        "plan_decode (plan=)": lambda: mla.plan_decode(**x, head_dim_v=L, plan=plan),
        "decode (no plan)": lambda: mla.decode(**x, head_dim_v=L, softmax_scale=scale),
    }
    # The parts of the planned call (DecodePlan._run's launch, with its arguments computed once).
    ptrs = [t.data_ptr() for t in (x["q"], x["kv_cache"], x["block_table"], x["seq_lens"], out, lse)]
    stream = torch.cuda.current_stream().cuda_stream
    paths["  C run + launches (ctypes)"] = lambda: plan._launch(plan._handle, *ptrs, scale, 0, stream, plan._err,
                                                                len(plan._err))
    paths["  ctypes call doing nothing"] = lambda: plan._lib.mlaGpuDecodePlanNumSplits(plan._handle)
    paths["  current stream lookup"] = lambda: plan._stream(0)
    print(f"b={args.batch} N={args.heads} seq={args.seq} num_splits={plan.num_splits} "
          f"({args.repeats} runs of {args.calls} calls)")
    for name, fn in paths.items():
        fn()  # loads the kernels
        median, best = time_calls(fn, args.calls, args.repeats)
        print(f"  {name:28s} median {median:7.2f} us/call  best {best:7.2f} us/call")
    plan.check()


if __name__ == "__main__":
    main()
