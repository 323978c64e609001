#!/usr/bin/env python3
"""The Python share of a planned mla.decode call's host time, measured without a GPU.

bench-host-cost.py measures the whole planned call on the GPU machine (Python, ctypes and the two kernel
launches). This script measures the part before the launches on any machine with torch (CPU is enough):
mla.decode(..., plan=, out=, lse=) at b=1, N=128, seq 1024 as bench-host-cost.py calls it, with CPU tensors
standing in for CUDA ones and a stand-in libMLAGpuCAPI.so whose mlaGpuDecodeRunPacked returns success at
once (compiled here with cc, with the real function's signature, so the ctypes call costs what it costs).
It also times the two ways of reaching the launch from Python: the twelve-argument mlaGpuDecodeRun through
ctypes, and one struct.pack_into of mlaGpuDecodeRunArgs plus the four-argument mlaGpuDecodeRunPacked (the
planned call's way).

Usage: PYTHONPATH=build/python_packages python3 scripts/bench-host-cost-python.py
Prints the best and median of --repeats runs of --calls calls, in us per call.
"""

import argparse
import ctypes
import os
import statistics
import subprocess
import tempfile
import time

import torch

import mla
from mla import gpu

L, R, PAGE = 512, 64, 64
_ERROR_BYTES = gpu._ERROR_BYTES

STAND_IN = """
#include <stddef.h>
#include <stdint.h>
int mlaGpuDecodeRun(const void *plan, uint64_t q, uint64_t cache, uint64_t blockTable, uint64_t seqLens,
                    uint64_t out, uint64_t lse, double softmaxScale, uint64_t kvScale, void *stream, char *err,
                    size_t errLen) {
  return 0;
}
int mlaGpuDecodeRunPacked(const void *plan, const void *args, char *err, size_t errLen) { return 0; }
int64_t mlaGpuDecodePlanNumSplits(const void *plan) { return 1; }
void mlaGpuDecodePlanDestroy(void *plan) {}
"""


def stand_in_library(folder):
    source, library = os.path.join(folder, "standin.c"), os.path.join(folder, "libstandin.so")
    with open(source, "w") as f:
        f.write(STAND_IN)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", source, "-o", library], check=True)
    lib = ctypes.CDLL(library)
    u64 = ctypes.c_uint64
    lib.mlaGpuDecodeRun.argtypes = [ctypes.c_void_p, u64, u64, u64, u64, u64, u64, ctypes.c_double, u64,
                                    ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.mlaGpuDecodeRun.restype = ctypes.c_int
    lib.mlaGpuDecodeRunPacked.argtypes = [ctypes.c_void_p, ctypes.POINTER(gpu._DecodeRunArgs), ctypes.c_char_p,
                                          ctypes.c_size_t]
    lib.mlaGpuDecodeRunPacked.restype = ctypes.c_int
    lib.mlaGpuDecodePlanNumSplits.argtypes = [ctypes.c_void_p]
    lib.mlaGpuDecodePlanNumSplits.restype = ctypes.c_int64
    lib.mlaGpuDecodePlanDestroy.argtypes = [ctypes.c_void_p]
    lib.mlaGpuDecodePlanDestroy.restype = None
    return lib


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=128)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()

    pages = -(-args.seq // PAGE)
    x = dict(q=torch.randn(args.batch, 1, args.heads, L + R).to(torch.bfloat16),
             kv_cache=torch.randn(args.batch * pages, PAGE, L + R).to(torch.bfloat16),
             block_table=torch.arange(args.batch * pages, dtype=torch.int32).view(args.batch, pages),
             seq_lens=torch.full((args.batch,), args.seq, dtype=torch.int32))
    out = torch.empty(args.batch, 1, args.heads, L, dtype=torch.bfloat16)
    lse = torch.empty(args.batch, args.heads, 1, dtype=torch.float32)

    # CPU tensors pass for CUDA ones: the dispatch's CUDA test takes any torch tensor, the plan's device
    # index is what get_device() says of a CPU tensor, and the stream lookup returns stream 0.
    mla._is_torch_cuda = lambda value: type(value).__module__.startswith("torch")
    gpu._raw_stream_function = lambda torch: lambda device: 0
    with tempfile.TemporaryDirectory() as folder:
        lib = stand_in_library(folder)
        plan = gpu.DecodePlan(torch, lib, ctypes.c_void_p(1), None, None, torch.device("cpu"), None, L, False,
                              args.batch)
        plan._device_index = -1
        plan._set_step(tuple(tuple(v.shape) for v in x.values()), torch.bfloat16, torch.bfloat16)
        # As DecodePlan._update records them: the tables of the planned step.
        plan._tables = (x["block_table"], x["seq_lens"], x["block_table"].data_ptr(), x["seq_lens"].data_ptr())
        plan._cache = (x["kv_cache"], x["kv_cache"].data_ptr())
        scale = 192**-0.5
        ptrs = [t.data_ptr() for t in (*x.values(), out, lse)]
        run, packed = lib.mlaGpuDecodeRun, lib.mlaGpuDecodeRunPacked
        handle, err, size = plan._handle, plan._err, plan._error_bytes

        def twelve():
            run(handle, *ptrs, scale, 0, 0, err, _ERROR_BYTES)

        def pack_and_call():
            plan._pack(plan._args, 0, *ptrs, 0, 0, scale)
            packed(handle, plan._args, err, size)

        calls = {
            "decode (plan=, out=, lse=), Python side": lambda: mla.decode(**x, head_dim_v=L, softmax_scale=scale,
                                                                          plan=plan, out=out, lse=lse),
            "  mlaGpuDecodeRun, 12 ctypes arguments": twelve,
            "  pack_into + mlaGpuDecodeRunPacked": pack_and_call,
        }
        print(f"b={args.batch} N={args.heads} seq={args.seq} ({args.repeats} runs of {args.calls} calls)")
        for name, fn in calls.items():
            fn()
            per_call = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                for _ in range(args.calls):
                    fn()
                per_call.append((time.perf_counter() - start) / args.calls * 1e6)
            print(f"  {name:42s} best {min(per_call):.2f} us/call  median {statistics.median(per_call):.2f} us/call")


if __name__ == "__main__":
    main()
