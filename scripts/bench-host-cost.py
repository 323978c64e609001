#!/usr/bin/env python3
"""Host time of one Python mla.decode call on the GPU, with and without a device plan.

The planned path (mla.plan_decode once per step, then mla.decode(..., plan=, out=, lse=)) must cost at
most 15 us of host time per call at b=1, N=128, seq 1024 (issue 12, item 3). The time is the host wall
time of the calls themselves. Each path is timed twice: back to back, where the loop also waits whenever
a call's GPU work outlasts its host time and the launch queue backs up, and behind a spin kernel
enqueued before the run and outlasting it, where the launches only queue and the loop times the host
alone (the figure the bar is about). Paths that synchronise (the unplanned decode) are timed back to back.

Usage (GPU machine, kernels in the cache):
  MLA_KERNEL_CACHE_DIR=/path/to/cache PYTHONPATH=gpu-carry/python python3 scripts/bench-host-cost.py
Prints one line per path: median and best of --repeats runs of --calls calls each, in us per call.
The last lines split the planned call's host time: the C API's run function called through ctypes with
the arguments packed once (argument checks plus the kernel launches: one when the seesaw kernel merges its
pieces itself, else two), the same through the twelve-argument mlaGpuDecodeRun, the Python side alone (the planned call with its launch replaced by a Python
function that returns at once), a ctypes call that does no work (the binding's floor), torch's
current-stream lookup and a torch op that launches one kernel (the host's launch floor).
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


def time_calls(fn, calls, repeats, busy_cycles=0):
    """Per-call host microseconds of `calls` back-to-back calls, over `repeats` runs. With `busy_cycles`,
    each run first enqueues a spin kernel of that many GPU cycles, so the calls' launches queue behind it
    and the loop times the host alone, never waiting for the GPU to drain the launch queue."""
    per_call = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        if busy_cycles:
            torch.cuda._sleep(busy_cycles)
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
    parser.add_argument("--busy-us-per-call", type=float, default=100.0,
                        help="GPU spin enqueued before each run of the busy timing, in us per call")
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
    # The parts of the planned call (DecodePlan._run's launch, with its arguments packed once), and the
    # twelve-argument mlaGpuDecodeRun it replaced (the same launch; ctypes converts each argument).
    ptrs = [t.data_ptr() for t in (x["q"], x["kv_cache"], x["block_table"], x["seq_lens"], out, lse)]
    stream = torch.cuda.current_stream().cuda_stream
    packed = type(plan._args)()
    plan._pack(packed, 0, *ptrs, 0, stream, scale)
    paths["  C run + launches (packed)"] = lambda: plan._launch(plan._handle, packed, plan._err,
                                                                plan._error_bytes)
    run12 = plan._lib.mlaGpuDecodeRun
    paths["  C run + launches (12 args)"] = lambda: run12(plan._handle, *ptrs, scale, 0, stream, plan._err,
                                                          len(plan._err))
    # The Python share: the same planned call on a second plan whose launch is a Python function that
    # returns success at once.
    dry = mla.plan_decode(**x, head_dim_v=L)
    dry._launch = lambda *unused: 0
    paths["  Python side (no launch)"] = lambda: mla.decode(**x, head_dim_v=L, softmax_scale=scale, plan=dry,
                                                            out=out, lse=lse)
    paths["  ctypes call doing nothing"] = lambda: plan._lib.mlaGpuDecodePlanNumSplits(plan._handle)
    paths["  current stream lookup"] = lambda: plan._stream(0)
    # A floor for comparison: one torch op that launches one kernel (a one-element fill).
    cell = torch.empty(1, device="cuda")
    paths["  torch one-kernel op"] = lambda: cell.fill_(1.0)
    # Spin cycles at the H200's 1.98 GHz boost clock; a lower clock only makes the spin longer.
    busy = int(args.busy_us_per_call * 1e-6 * 1.98e9 * args.calls)
    syncs = {"decode (no plan)"}
    print(f"b={args.batch} N={args.heads} seq={args.seq} num_splits={plan.num_splits} "
          f"({args.repeats} runs of {args.calls} calls)")
    print("  back to back: the loop may wait for the GPU when a call's GPU work outlasts its host time;")
    print("  behind a spin: the GPU runs a spin kernel through the whole run, so only the host is timed")
    for name, fn in paths.items():
        fn()  # loads the kernels
        median, best = time_calls(fn, args.calls, args.repeats)
        line = f"  {name:28s} back to back: median {median:7.2f} best {best:7.2f} us/call"
        if name not in syncs:
            busy_median, busy_best = time_calls(fn, args.calls, args.repeats, busy)
            line += f";  behind a spin: median {busy_median:7.2f} best {busy_best:7.2f} us/call"
        print(line)
    plan.check()


if __name__ == "__main__":
    main()
