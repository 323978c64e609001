#!/usr/bin/env python3
"""Would an E4M3 P V product (issue 13's "fp8-wgmma variant for the PV product") keep the decode within
the 2e-2 tolerance? An emulation of the seesaw fp8_e4m3 kernel's numerics, run here, before any kernel.

  /usr/bin/python3 scripts/fp8-pv-numerics.py [--seed S] [--q-parts]

The cache and the float64 reference are test/python/mla_reference.py's (make_paged_cache, decode_ref on
the dequantised cache): latent rows N(0, 1) quantised to fp8_e4m3 with kv_scale 0.02, q N(0, 1) in bf16,
softmax scale 192^-0.5, DeepSeek widths. The emulation follows the kernel per 64-token block: scores in
f64 from the exact codes, base-2 online softmax with a running maximum, O += P V over the exact V codes,
l summed from the unrounded p; only P's rounding differs between the variants:

  f16      the kernel as built: p (<= 2^8 under the lazy maximum) rounded to f16;
  e4m3     p rounded once to E4M3 (3 mantissa bits), with the lazy maximum (p <= 2^8, no headroom);
  e4m3x2^8 the running maximum kept exact (slack 0, p <= 1) and p * 2^8 rounded to E4M3 (the wgmma's
           A operand), the 2^-8 folded into the output;
  e4m3 hi+lo  p * 2^8 = hi + lo, two E4M3 parts (two wgmmas per k-step, as Q's two parts are).

With --q-parts 1, Q's E4M3 rounding is emulated too (the kernel scales q by a power of two so that max |q| < 2^8,
then stages it as hi + lo, two E4M3 parts, two wgmmas per k-step; one part would halve the scores' tensor time): the
table compares the two (P as the kernel rounds it, f16).

Error: max |out - ref| / max |ref| over the batch (the GPU tests' metric, test_gpu_fp8_decode.check),
and the same per row (each row's error relative to its own max |ref|), whose max is the harder bound.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "python"))
import mla_reference as ref  # noqa: E402

L, R, PAGE, BLOCK = 512, 64, 64, 64
D = L + R
SCALE = 192**-0.5
KV_SCALE = 0.02
LOG2E = 1.4426950408889634
LAZY_SLACK = 8.0  # softmax::kLazySlack (base 2)


def round_e4m3(x):
    """Round-to-nearest-even of non-negative x to E4M3 (saturating at 448, subnormal step 2^-9)."""
    x = np.asarray(x, dtype=np.float64)
    e = np.floor(np.log2(np.maximum(x, 2.0**-30)))
    step = np.where(x < 2.0**-6, 2.0**-9, 2.0 ** (e - 3))
    return np.minimum(np.round(x / step) * step, 448.0)


def round_f16(x):
    return np.asarray(x, dtype=np.float16).astype(np.float64)


def round_e4m3_signed(x):
    return np.sign(x) * round_e4m3(np.abs(x))


def stage_q(q, parts):
    """q [n, D] as the kernel stages it: times 2^k (max |q| 2^k < 2^8), then `parts` E4M3 parts (1 or 2)."""
    k = np.floor(np.log2(256.0 / np.abs(q).max()))
    qs = q * 2.0**k
    hi = round_e4m3_signed(qs)
    return (hi if parts == 1 else hi + round_e4m3_signed(qs - hi)) / 2.0**k


def attend(scores, values, variant):
    """One row: scores [n] (natural units, scaled), values [n, L] exact; the kernel's block loop."""
    m, l, o = -np.inf, 0.0, np.zeros(values.shape[1])
    s2 = scores * LOG2E
    for b0 in range(0, len(s2), BLOCK):
        blk = s2[b0:b0 + BLOCK]
        bmax = blk.max()
        slack = 0.0 if variant in ("e4m3x2^8", "e4m3 hi+lo") else LAZY_SLACK
        m_new = bmax if m == -np.inf or bmax > m + slack else m
        if m_new != m and m != -np.inf:
            alpha = 2.0 ** (m - m_new)
            o *= alpha
            l *= alpha
        m = m_new
        p = 2.0 ** (blk - m)
        l += p.sum()
        if variant == "f16":
            pq = round_f16(p)
        elif variant == "e4m3":
            pq = round_e4m3(p)
        elif variant == "e4m3x2^8":
            pq = round_e4m3(p * 256.0) / 256.0
        else:
            hi = round_e4m3(p * 256.0)
            pq = (hi + round_e4m3(p * 256.0 - hi)) / 256.0
        o += pq @ values[b0:b0 + BLOCK]
    return o / l


def run(seq_lens, n, seed, variants, q_parts=None):
    rng = np.random.default_rng(seed)
    cache = ref.make_paged_cache(rng, seq_lens, PAGE, L, R, kv_format="fp8_e4m3", kv_scale=KV_SCALE)
    q = rng.standard_normal((len(seq_lens), 1, n, D)).astype(np.float32)
    q = ref.bf16_bits_to_f32(ref.f32_to_bf16_bits(q))
    out_ref, _ = ref.decode_ref(q, cache.kv_cache, cache.block_table, cache.seq_lens, L, SCALE, False,
                                "fp8_e4m3", KV_SCALE)
    deq = ref.dequant_cache_ref(cache.kv_cache, "fp8_e4m3", L, R, KV_SCALE)
    results = {}
    for variant in variants:
        out = np.zeros_like(out_ref, dtype=np.float64)
        for b, s in enumerate(seq_lens):
            if s == 0:
                continue
            pages = cache.block_table[b, :-(-s // PAGE)]
            kv = deq[pages].reshape(-1, D)[:s].astype(np.float64)
            qb = q[b, 0].astype(np.float64)
            if q_parts is not None:  # variant is the number of Q parts; P as the kernel (f16)
                qb = stage_q(qb, variant)
            scores = (qb @ kv.T) * SCALE
            for h in range(n):
                out[b, 0, h] = attend(scores[h], kv[:, :L], "f16" if q_parts is not None else variant)
        err = np.abs(out - out_ref)
        batch = err.max() / np.abs(out_ref).max()
        rows = (err.max(axis=-1) / np.maximum(np.abs(out_ref).max(axis=-1), 1e-30))[np.array(seq_lens) > 0]
        results[variant] = (batch, rows.max())
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--q-parts", action="store_true",
                    help="compare Q staged as two E4M3 parts (the kernel) and as one, P in f16")
    args = ap.parse_args()
    variants = (2, 1) if args.q_parts else ("f16", "e4m3", "e4m3x2^8", "e4m3 hi+lo")
    cases = [("GPU tests' batch, N = 16", [0, 1, 63, 64, 65, 1000], 16),
             ("long rows, N = 16", [4096, 8192], 16),
             ("long rows, N = 128", [8192], 128)]
    names = {2: "Q hi+lo", 1: "Q one part"}
    print("| case | " + " | ".join(f"{names.get(v, v)}: batch / worst row" for v in variants) + " |")
    print("|---|" + "---|" * len(variants))
    for name, lens, n in cases:
        res = run(lens, n, args.seed, variants, q_parts=True if args.q_parts else None)
        print(f"| {name} | " + " | ".join(f"{res[v][0]:.2e} / {res[v][1]:.2e}" for v in variants) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
