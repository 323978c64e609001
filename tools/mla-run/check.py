"""Compares what `mla-run --check` computed for a single-op function with the numpy reference.

mla-run writes the op's operands and results as .npy files and a JSON description
(<entry>_check.json: the op name, its attributes, and the operand and result files, in the op's order)
and runs this script on it. The reference is test/python/mla_reference.py, an implementation that shares
no code with the compiler. For each result it prints the largest absolute error and the largest error
relative to the result's largest finite reference magnitude; with --tol it exits 1 if a relative error
exceeds the tolerance.

Supported ops: decode, combine, cache_write, gather_cache (not with fp8_e4m3_token rows, whose latent
width the op does not determine), split_kv_b_proj, absorb_q, up_proj_out, up_proj_kv, mha,
merge_states, prefill. decode_partial is not: the reference computes merged results only.
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "test", "python"))
import mla_reference as ref  # noqa: E402


def _kv_format(attrs):
    """The reference's name for the op's cache layout, and its per-tensor scale."""
    layout = attrs["layout"]
    fmt = layout["format"]
    return ("auto" if fmt in ("bf16", "f16", "f32") else fmt), layout.get("scale")


def _cache(a):
    """fp8 caches are i8 in the IR and uint8 in the reference: the same bytes."""
    return a.view(np.uint8) if a.dtype == np.int8 else a


def _decode(attrs, x, outs):
    q, cache, table, lens = x
    fmt, scale = _kv_format(attrs)
    latent = outs[0].shape[-1]
    return ref.decode_ref(q, _cache(cache), table, lens, latent, attrs["softmax_scale"],
                          attrs.get("causal", False), fmt, scale)


def _combine(attrs, x, outs):
    partial_out, partial_lse = x  # [S, B, Sq, N, L], [S, B, N, Sq]
    out, lse = ref.combine_ref(partial_out, partial_lse.transpose(0, 1, 3, 2))
    return out, lse.transpose(0, 2, 1)


def _cache_write(attrs, x, outs):
    kv_c, k_pe, slots, cache = x
    fmt, scale = _kv_format(attrs)
    written = ref.cache_write_ref(kv_c, k_pe, _cache(cache), slots, fmt, scale)
    if fmt == "auto":
        return (written,)
    # fp8 codes may differ by a rounding step (x / s vs x * (1 / s)); compare what a reader decodes.
    L, R = kv_c.shape[1], k_pe.shape[-1]
    outs[0] = ref.decode_rows(_cache(outs[0]), fmt, L, R, scale)
    return (ref.decode_rows(written, fmt, L, R, scale),)


def _gather_cache(attrs, x, outs):
    cache, table, starts, cu_rows, workspace = x
    fmt, scale = _kv_format(attrs)
    D, row = workspace.shape[1], cache.shape[2]
    if fmt == "fp8_e4m3_token":
        raise SystemExit("check: gather_cache over fp8_e4m3_token rows is not supported (the latent width "
                         "is not determined by the op)")
    L = 32 * (2 * D - row) // 31 if fmt == "fp8_ds_mla" else D
    rows = ref.gather_cache_ref(_cache(cache), fmt, table, starts, cu_rows, L, D - L, scale)
    expected = workspace.astype(np.float32).copy()
    expected[: rows.shape[0]] = rows
    return (expected,)


def _split_kv_b_proj(attrs, x, outs):
    N, P, _ = outs[0].shape
    return ref.split_kv_b_proj_ref(x[0], N, P, outs[1].shape[2])


def _up_proj_kv(attrs, x, outs):
    _, N, P = outs[0].shape
    return ref.up_proj_kv_ref(x[0], x[1], N, P, outs[1].shape[2])


def _mha(attrs, x, outs):
    q, k, v, cu_q, cu_k = x
    return ref.mha_ref(q, k, v, cu_q, cu_k, attrs.get("causal", False), attrs["softmax_scale"])


def _prefill(attrs, x, outs):
    q, kv_c, k_pe, w, cache, table, qsl, lens = x
    fmt, scale = _kv_format(attrs)
    return (ref.prefill_ref(q, kv_c, k_pe, w, _cache(cache), table, qsl, lens, attrs["softmax_scale"],
                            outs[0].shape[2], fmt, scale),)


# Each reference takes (attributes, operands, results) and returns the expected results; it may replace a
# result by the representation to compare (the rows an fp8 cache decodes to).
REFERENCES = {
    "decode": _decode,
    "combine": _combine,
    "cache_write": _cache_write,
    "gather_cache": _gather_cache,
    "split_kv_b_proj": _split_kv_b_proj,
    "absorb_q": lambda attrs, x, outs: (ref.absorb_q_ref(*x),),
    "up_proj_out": lambda attrs, x, outs: (ref.up_proj_out_ref(*x),),
    "up_proj_kv": _up_proj_kv,
    "mha": _mha,
    "merge_states": lambda attrs, x, outs: ref.merge_states_ref(*x),
    "prefill": _prefill,
}


def errors(actual, expected):
    """(max abs error, max abs error / max finite |expected|); equal infinities and NaN pairs count as
    exact, a NaN against a number as an infinite error."""
    a = np.asarray(actual, np.float64)
    e = np.asarray(expected, np.float64)
    if a.shape != e.shape:
        raise SystemExit(f"check: result has shape {a.shape}, the reference {e.shape}")
    if a.size == 0:
        return 0.0, 0.0
    same = (a == e) | (np.isnan(a) & np.isnan(e))
    with np.errstate(invalid="ignore"):
        diff = np.where(same, 0.0, np.abs(a - e))
    diff = np.where(np.isnan(diff), np.inf, diff)
    max_abs = float(diff.max())
    finite = np.isfinite(e)
    scale = float(np.abs(e[finite]).max()) if finite.any() else 0.0
    if max_abs == 0.0:
        return 0.0, 0.0
    return max_abs, (max_abs / scale if scale > 0 else float("inf"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec", help="the <entry>_check.json mla-run wrote")
    parser.add_argument("--tol", type=float, help="fail if a max relative error exceeds this")
    args = parser.parse_args()
    with open(args.spec) as f:
        spec = json.load(f)

    op = spec["op"]
    if op not in REFERENCES:
        raise SystemExit(f"check: mla.{op} has no reference check (supported: {', '.join(sorted(REFERENCES))})")
    inputs = [np.load(path) for path in spec["operands"]]
    outputs = [None if path is None else np.load(path) for path in spec["results"]]
    expected = REFERENCES[op](spec["attributes"], inputs, outputs)

    failed = False
    for k, (actual, reference) in enumerate(zip(outputs, expected)):
        if actual is None:
            continue  # not returned by the function
        max_abs, max_rel = errors(actual, reference)
        bad = args.tol is not None and not max_rel <= args.tol
        failed |= bad
        print(f"check mla.{op} result {k}: max abs error {max_abs:.3e}, max rel error {max_rel:.3e}"
              + (f" > tolerance {args.tol:g}" if bad else ""))
    if args.tol is not None:
        print("check: FAIL" if failed else "check: PASS")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
