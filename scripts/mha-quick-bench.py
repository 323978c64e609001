"""Quick same-process timing of mla.mha (torch CUDA tensors) beside PyTorch SDPA's cuDNN backend on the
issue 11 prefill shapes (N=128, qk 192, v 128, bf16). FLOPs = 2 * b * N * pairs * (192 + 128), pairs =
s*s/2 causal, s*s otherwise. A development check; tools/mla-prefill-bench is the benchmark of record.
Usage: python3 scripts/mha-quick-bench.py [--check]"""
import json
import sys

import torch
import torch.nn.functional as F

import mla

H, DQK, DV = 128, 192, 128
SHAPES = [(1, 4096, True), (1, 8192, True), (2, 8192, False), (4, 2048, True), (1, 16384, True)]


def timeit(fn, iters=10, warm=3):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2]


def main():
    from torch.nn.attention import sdpa_kernel, SDPBackend
    for b, s, causal in SHAPES:
        g = torch.Generator(device="cuda").manual_seed(0)
        q = torch.randn(b * s, H, DQK, device="cuda", dtype=torch.bfloat16, generator=g)
        k = torch.randn(b * s, H, DQK, device="cuda", dtype=torch.bfloat16, generator=g)
        v = torch.randn(b * s, H, DV, device="cuda", dtype=torch.bfloat16, generator=g)
        cu = torch.arange(0, (b + 1) * s, s, dtype=torch.int32)
        flops = 2 * b * H * (s * s / 2 if causal else s * s) * (DQK + DV)
        ms = timeit(lambda: mla.mha(q, k, v, cu, cu, softmax_scale=DQK ** -0.5, causal=causal))
        qb, kb, vb = (x.view(b, s, H, -1).transpose(1, 2) for x in (q, k, v))
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            ref_ms = timeit(lambda: F.scaled_dot_product_attention(qb, kb, vb, is_causal=causal, scale=DQK ** -0.5))
        row = dict(b=b, s=s, causal=causal, mla_ms=round(ms, 4), mla_tflops=round(flops / ms / 1e9, 1),
                   cudnn_ms=round(ref_ms, 4), cudnn_tflops=round(flops / ref_ms / 1e9, 1),
                   ratio=round(ref_ms / ms, 3))
        if "--check" in sys.argv:
            out, _ = mla.mha(q, k, v, cu, cu, softmax_scale=DQK ** -0.5, causal=causal)
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                want = F.scaled_dot_product_attention(qb, kb, vb, is_causal=causal, scale=DQK ** -0.5)
            want = want.transpose(1, 2).reshape(b * s, H, DV)
            row["max_abs_diff_vs_cudnn"] = float((out.float() - want.float()).abs().max())
        print(json.dumps(row), flush=True)
        del q, k, v


if __name__ == "__main__":
    main()
