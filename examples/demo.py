"""The main job: DeepSeek-V3-shaped MLA decode and chunked prefill, compiled by
mla and run on the CPU, checked against the independent numpy reference.

Run with `make demo` (or PYTHONPATH=build/python_packages:test/python
/usr/bin/python3 examples/demo.py).
"""
import time

import numpy as np

import mla
import mla_reference as ref

N, P, R, V, L = 128, 128, 64, 128, 512   # DeepSeek-V3 at TP1
SCALE = (P + R) ** -0.5                  # 192^-0.5, never (L+R)^-0.5
PAGE = 64


def timed(fn, *args, **kw):
    """Runs fn twice: the first call JIT-compiles, the second is warm."""
    t0 = time.perf_counter()
    fn(*args, **kw)
    t1 = time.perf_counter()
    res = fn(*args, **kw)
    t2 = time.perf_counter()
    return res, t1 - t0, t2 - t1


def report(name, got, want, cold, warm):
    err = np.max(np.abs(got.astype(np.float64) - want))
    rel = err / max(np.max(np.abs(want)), 1e-30)
    print(f"{name:42s} max|err| {err:.2e} (rel {rel:.2e})  "
          f"first call {cold * 1e3:7.1f} ms  warm {warm * 1e3:7.1f} ms")


def decode_demo(rng):
    b, s_q = 4, 2
    seq_lens = np.array([1 + 1, 700, 2048, 4096], np.int32)   # MTP: 2 causal rows
    cache = ref.make_paged_cache(rng, seq_lens, PAGE, L, R, kv_format="auto",
                                 dtype=np.float32)
    q = (rng.standard_normal((b, s_q, N, L + R)) * 0.5).astype(np.float32)
    (out, lse), cold, warm = timed(
        mla.decode, q, cache.kv_cache, cache.block_table, seq_lens,
        head_dim_v=L, softmax_scale=SCALE, causal=True)
    want_out, want_lse = ref.decode_ref(q, cache.kv_cache, cache.block_table,
                                        seq_lens, L, SCALE, causal=True)
    print(f"decode: b={b} s_q={s_q} (causal) N={N} D={L + R} page={PAGE} "
          f"seq_lens={seq_lens.tolist()}, f32 cache, NaN in unused slots")
    report("  out [b, s_q, N, L]", out, want_out, cold, warm)
    report("  lse [b, N, s_q]", lse, want_lse, cold, warm)


def prefill_demo(rng):
    heads = 16                                          # TP8 keeps the CPU demo short
    case = ref.make_prefill_case(rng, q_lens=[40, 56], ctx_lens=[150, 260],
                                 page_size=PAGE, L=L, R=R, N=heads, P=P, V=V)
    args = (case.q, case.kv_c, case.k_pe, case.kv_b_proj, case.cache.kv_cache,
            case.cache.block_table, case.query_start_loc, case.seq_lens)
    out, cold, warm = timed(mla.prefill, *args, softmax_scale=SCALE,
                            v_head_dim=V, workspace_rows=128)
    want = ref.prefill_ref(*args, SCALE, V)
    print(f"prefill: 2 requests, {case.q.shape[0]} new tokens, context "
          f"{[150, 260]} rows in chunks of <= 128 workspace rows, N={heads}")
    report("  out [T, N, V]", out, want, cold, warm)


def main():
    rng = np.random.default_rng(2026)
    print(f"mla CPU path (JIT through convert-mla-to-linalg / mla-to-llvm-cpu)")
    decode_demo(rng)
    prefill_demo(rng)


if __name__ == "__main__":
    main()
