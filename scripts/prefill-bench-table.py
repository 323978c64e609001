"""Joins the JSON lines of scripts/bench-prefill.sh's raw folder into the ratio tables of
docs/benchmarks.md: mla_mha against PyTorch's fastest SDPA backend per (b, s, causal), mla_up_proj_kv
against cuBLAS per T (the issue's bar: >= 0.8 for T >= 4096), and the end-to-end split by kernel.
Usage: python3 scripts/prefill-bench-table.py RAW_DIR (reads mla-mha.jsonl, sdpa.jsonl,
mla-up-proj-kv.jsonl, cublas.jsonl, mla-e2e.jsonl; a missing file leaves its table out)."""
import json
import os
import sys


def records(path):
    """The JSON objects of `path`, one per line; other lines (and a missing file) give nothing."""
    if not os.path.exists(path):
        return []
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                out.append(json.loads(line))
    return out


def mha_table(mla, sdpa):
    best = {}
    for r in sdpa:
        if "ms" not in r:
            continue  # a backend that refused the shape
        key = (r["b"], r["s"], r["causal"])
        if key not in best or r["ms"] < best[key]["ms"]:
            best[key] = r
    lines = ["| (b, s, causal) | mla ms | mla TFLOPS | fastest SDPA | SDPA ms | SDPA TFLOPS | mla / SDPA |",
             "|---|---|---|---|---|---|---|"]
    for r in mla:
        key = (r["b"], r["s"], r["causal"])
        peer = best.get(key)
        cells = [f"({r['b']}, {r['s']}, {'causal' if r['causal'] else 'full'})", f"{r['ms']:.4f}",
                 f"{r['tflops']:.1f}"]
        if peer:
            cells += [peer["backend"], f"{peer['ms']:.4f}", f"{peer['tflops']:.1f}",
                      f"{peer['ms'] / r['ms']:.3f}x"]
        else:
            cells += ["-", "-", "-", "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def up_proj_table(mla, cublas):
    peer = {r["T"]: r for r in cublas}
    lines = ["| T | mla ms | mla TFLOPS | cuBLAS ms | cuBLAS TFLOPS | mla / cuBLAS |", "|---|---|---|---|---|---|"]
    for r in mla:
        p = peer.get(r["T"])
        cells = [str(r["T"]), f"{r['ms']:.4f}", f"{r['tflops']:.1f}"]
        cells += [f"{p['ms']:.4f}", f"{p['tflops']:.1f}", f"{p['ms'] / r['ms']:.3f}x"] if p else ["-", "-", "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def e2e_table(e2e):
    if not e2e:
        return []
    kinds = list(e2e[0]["ms"])
    lines = ["| cache | chunks | " + " | ".join(f"{k} ms" for k in kinds) + " | total ms | TFLOPS |",
             "|---" * (len(kinds) + 4) + "|"]
    for r in e2e:
        share = [f"{r['ms'][k]:.3f} ({100 * r['ms'][k] / r['total_ms']:.0f}%)" for k in kinds]
        lines.append(f"| {r['format']} | {r['chunks']} | " + " | ".join(share) +
                     f" | {r['total_ms']:.3f} | {r['tflops']:.1f} |")
    return lines


def main(raw):
    mla_mha = records(os.path.join(raw, "mla-mha.jsonl"))
    if mla_mha:
        print("\n".join(["mha (ratio = fastest SDPA time / mla time):"] +
                        mha_table(mla_mha, records(os.path.join(raw, "sdpa.jsonl")))) + "\n")
    mla_up = records(os.path.join(raw, "mla-up-proj-kv.jsonl"))
    if mla_up:
        print("\n".join(["up_proj_kv (ratio = cuBLAS time / mla time; bar >= 0.8):"] +
                        up_proj_table(mla_up, records(os.path.join(raw, "cublas.jsonl")))) + "\n")
    e2e = records(os.path.join(raw, "mla-e2e.jsonl"))
    if e2e:
        r = e2e[0]
        print("\n".join([f"chunked prefill, {r['requests']} x {r['new_tokens']} new tokens over "
                         f"{r['context']} cached, workspace {r['workspace_rows']} rows:"] + e2e_table(e2e)))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: prefill-bench-table.py RAW_DIR")
    main(sys.argv[1])
