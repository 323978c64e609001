"""The bf16 GEMM rate that mla-prefill-bench --up-proj-kv is held to: torch.matmul (cuBLAS) of the
same product, latent [T, 512] x kv_b_proj [128 * (128 + 128), 512]^T -> [T, 32768] bf16, on one GPU.
Same timing as PyTorch's SDPA peer (bench_prefill_sdpa.py): 5 warm-up calls, median of 20 CUDA-event
intervals, L2 not flushed. FLOPs = 2 * T * L * N * (P + V). Prints one JSON line per T, in
mla-prefill-bench's format."""
import json
import torch

N, L, P, V = 128, 512, 128, 128
ROWS = (4096, 16384)


def timeit(fn, iters=20, warm=5):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def main():
    g = torch.Generator(device="cuda").manual_seed(0)
    weight = torch.rand(N * (P + V), L, device="cuda", dtype=torch.bfloat16, generator=g) * 2 - 1
    for rows in ROWS:
        latent = torch.rand(rows, L, device="cuda", dtype=torch.bfloat16, generator=g) * 2 - 1
        out = torch.empty(rows, N * (P + V), device="cuda", dtype=torch.bfloat16)
        ms = timeit(lambda: torch.matmul(latent, weight.t(), out=out))
        flops = 2 * rows * L * N * (P + V)
        print(json.dumps(dict(backend="cublas", op="up_proj_kv", T=rows, ms=round(ms, 4),
                              tflops=round(flops / ms / 1e9, 1))), flush=True)


if __name__ == "__main__":
    main()
