"""Medians and ratios of a device call's decode benchmark log (docs/gpu-runs.md's run*.sh scripts):
sections `# variant V round R` (mla-bench rows), `# flashmla round R` (flashmla_bench's steady_fl_ms lines)
and `# fp8bar V-F round R` (mla-bench rows of build V over cache format F, `auto` being bf16). Rows are
keyed by their own (b, N, seq, s_q, causal), so any shapes and round counts work. Any other `# ... round R`
header (e.g. a tile sweep's `# tile T round R`) ends the section before it: its rows count nowhere.
Prints, as docs/benchmarks.md's tables:
  - per shape: FlashMLA's median steady_fl_ms, each variant's median median_ms, and FlashMLA / variant;
  - per build and shape of the fp8bar sections: each format's median and bf16 / format (bf16 from the
    build's `auto` rows, else from its variant section).
Usage: python3 scripts/decode-bench-table.py LOG"""
import re
import sys
from statistics import median

SECTION = re.compile(r"#\s+(variant|flashmla|fp8bar)\s*(\S*)\s+round\s+(\d+)")
OTHER_SECTION = re.compile(r"#\s+\S+.*\s+round\s+\d+\s*$")
MLA_ROW = re.compile(r"\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(no|yes)\s+\d+\s+\S+\s+([0-9.]+)\s")
FL_ROW = re.compile(r"\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d)\s.*steady_fl_ms\s+([0-9.]+)")


def parse(lines):
    """{(kind, name): {shape: [ms per round]}}; shape = (b, N, seq, s_q, causal)."""
    data, section = {}, None
    for line in lines:
        m = SECTION.match(line.strip())
        if m:
            section = (m.group(1), m.group(2))
            continue
        if OTHER_SECTION.match(line.strip()):
            section = None
            continue
        if section is None:
            continue
        if section[0] == "flashmla":
            m = FL_ROW.match(line)
            if m:  # flashmla_bench: b, s_q, h_q, seq, causal
                b, sq, n, seq, causal = (int(m.group(i)) for i in range(1, 6))
                shape = (b, n, seq, sq, bool(causal))
                data.setdefault(section, {}).setdefault(shape, []).append(float(m.group(6)))
            continue
        m = MLA_ROW.match(line)
        if m:
            shape = (int(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(4)), m.group(5) == "yes")
            data.setdefault(section, {}).setdefault(shape, []).append(float(m.group(6)))
    return data


def name(shape):
    b, n, seq, sq, causal = shape
    return f"({b}, {n}, {seq}, {sq}){' causal' if causal else ''}"


def tables(data):
    out = []
    variants = [v for (kind, v) in data if kind == "variant"]
    peer = data.get(("flashmla", ""), {})
    if variants:
        shapes = list(data[("variant", variants[0])])
        out.append("| shape | FlashMLA ms | " + " | ".join(variants) + " | "
                   + " | ".join(f"speed {v}" for v in variants) + " |")
        out.append("|---" * (2 + 2 * len(variants)) + "|")
        for s in shapes:
            ms = [median(data[("variant", v)][s]) if s in data[("variant", v)] else None for v in variants]
            fl = median(peer[s]) if s in peer else None
            cells = [name(s), f"{fl:.4f}" if fl else "-"]
            cells += [f"{x:.4f}" if x else "-" for x in ms]
            cells += [f"{fl / x:.3f}x" if fl and x else "-" for x in ms]
            out.append("| " + " | ".join(cells) + " |")
    builds = {}
    for (kind, key), rows in data.items():
        if kind == "fp8bar":
            build, _, fmt = key.rpartition("-")
            builds.setdefault(build or "-", {})[fmt] = rows
    for build, formats in builds.items():
        out.append("")
        fmts = [f for f in formats if f != "auto"]
        out.append(f"| {build}: shape | bf16 ms | " + " | ".join(f"{f} ms" for f in fmts) + " | "
                   + " | ".join(f"bf16 / {f}" for f in fmts) + " |")
        out.append("|---" * (2 + 2 * len(fmts)) + "|")
        # bf16 from the section's own `auto` rows, else from the build's variant rows.
        bf16 = formats.get("auto") or data.get(("variant", build), {})
        for s in formats.get("auto", formats[fmts[0]] if fmts else {}):
            bf = median(bf16[s]) if s in bf16 else None
            ms = [median(formats[f][s]) if s in formats[f] else None for f in fmts]
            cells = [name(s), f"{bf:.4f}" if bf else "-"] + [f"{x:.4f}" if x else "-" for x in ms]
            cells += [f"{bf / x:.3f}x" if bf and x else "-" for x in ms]
            out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        print(tables(parse(f)))
