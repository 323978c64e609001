"""Structure-aware fuzzer of mla-opt over the suite's own mla IR.

mutate_inputs.py flips bytes, so most of its inputs die in the lexer. This one
parses the suite's .mlir files loosely (per `// -----` chunk, token-aware
regexes for tensor types, mla attributes, integer attributes and operand
lists) and mutates what the verifiers and passes actually look at:

  * a tensor type's dimensions (0, 1, ?, neighbours, doubled, 2^31, 2^40,
    2^62), its rank and its element type, or one dimension value renamed in
    every type at once (so operand relations still hold);
  * the values of #mla.cache_layout, #mla.target, #mla.split_plan and
    #mla.gpu_tiling (at and past their limits, bogus enum cases) and of the
    integer and float attributes in op syntax (num_splits, workspace_rows,
    heads, rows, scale);
  * integer constants in dense<...> tables (negative, huge);
  * the operands of an op (two swapped) and whole ops spliced in from other
    files.

Each input that parses and verifies is run through every mla pass and the
named pipelines (mla-to-llvm-cpu, mla-plan{target=sm90},
mla-to-nvvm{chip=sm_90a}, mla-to-nvvm{chip=sm_100a}), each with a timeout.
A run fails on a signal, an LLVM crash report, a timeout, a non-zero exit
without a diagnostic, or output that mla-opt cannot parse back. Failing
inputs are saved in the working directory. Deterministic: the seed and the
run count fix every mutation. MLA_FUZZ_RUNS overrides --runs.
"""
import argparse
import concurrent.futures
import os
import pathlib
import random
import re
import subprocess
import sys

PIPELINES = [
    ["--mla-to-llvm-cpu"],
    ["--mla-plan=target=sm90"],
    ["--mla-to-nvvm=chip=sm_90a format=isa"],
    ["--mla-to-nvvm=chip=sm_100a format=isa"],
]

DIM_VALUES = ["0", "1", "?", "2", "3", "16", "2147483648", "1099511627776", "4611686018427387904"]
INT_VALUES = ["0", "-1", "1", "2", "3", "7", "15", "16", "17", "48", "64", "65", "128", "129", "256",
              "65536", "2147483647", "2147483648", "4294967296", "9223372036854775807"]
FLOAT_VALUES = ["0.0", "-1.0", "1.0e+38", "3.4e+39", "0x7F800000", "0x7FC00000", "1.0e-45", "0.5"]
ELEMENT_TYPES = ["f32", "bf16", "f16", "i8", "i32", "i64", "f64", "i1"]
ENUM_WORDS = ["bf16", "f16", "f32", "fp8_e4m3", "fp8_e4m3_token", "fp8_ds_mla", "cpu", "sm90", "sm100",
              "sm80", "heuristic", "balanced", "batch_invariant", "bogus"]

TENSOR_RE = re.compile(r"(tensor|memref)<((?:[0-9?]+x)*)([a-z][a-z0-9]*)>")
MLA_ATTR_RE = re.compile(r"#mla\.(cache_layout|target|split_plan|gpu_tiling)<([^<>]*(?:<[^<>]*>[^<>]*)*)>")
ATTR_FIELD_RE = re.compile(r"(\w+)\s*=\s*(-?[0-9][0-9.e+x-]*|[A-Za-z_][A-Za-z0-9_]*|array<[^>]*>)")
OP_INT_RE = re.compile(r"\b(num_splits|workspace_rows|heads|rows|latent_dim|padded_heads)\s+(-?\d+)")
OP_SCALE_RE = re.compile(r"\bscale\s+(-?[0-9][0-9.e+-]*)")
DENSE_INT_RE = re.compile(r"dense<(\[[-0-9, \[\]]*\]|-?\d+)>")
OPERANDS_RE = re.compile(r"(= mla\.\w+ )([^:{]*?)(\s*(?:layout|scale|bounds|into|:|heads|starts|rows|\{))")
MLA_OP_RE = re.compile(r"^\s*%[^=]*= mla\.\w+.*(?:\n\s+:.*)?", re.M)


def load_chunks(dirs):
    chunks = []
    for d in dirs:
        for path in sorted(pathlib.Path(d).rglob("*.mlir")):
            for chunk in re.split(r"^// -----\s*$", path.read_text(), flags=re.M):
                if "mla." in chunk:
                    chunks.append((str(path), chunk))
    return chunks


def replace_match(text, m, group, value):
    return text[: m.start(group)] + value + text[m.end(group):]


def pick(rng, matches):
    return rng.choice(matches) if matches else None


def mutate_tensor_dims(text, rng):
    m = pick(rng, list(TENSOR_RE.finditer(text)))
    if not m:
        return None
    dims = [d for d in m.group(2).split("x") if d]
    kind = rng.randrange(4)
    if kind == 0 and dims:  # one dimension to a limit value or a neighbour
        i = rng.randrange(len(dims))
        if dims[i].isdigit() and rng.random() < 0.4:
            dims[i] = str(max(0, int(dims[i]) + rng.choice([-1, 1, int(dims[i])])))
        else:
            dims[i] = rng.choice(DIM_VALUES)
    elif kind == 1 and dims:  # drop a dimension
        dims.pop(rng.randrange(len(dims)))
    elif kind == 2:  # add one
        dims.insert(rng.randrange(len(dims) + 1), rng.choice(DIM_VALUES))
    else:  # every static dimension dynamic
        dims = ["?" for _ in dims]
    return replace_match(text, m, 2, "".join(d + "x" for d in dims))


def mutate_dim_everywhere(text, rng):
    """Renames one dimension value in every tensor type at once, so relations between operands (the
    same N, L or page size everywhere) still hold and the input reaches the passes."""
    values = sorted({d for m in TENSOR_RE.finditer(text) for d in m.group(2).split("x") if d.isdigit()})
    if not values:
        return None
    old, new = rng.choice(values), rng.choice(DIM_VALUES + ["5", "48", "63", "96", "192"])

    def rename(m):
        dims = [new if d == old else d for d in m.group(2).split("x") if d]
        return m.group(1) + "<" + "".join(d + "x" for d in dims) + m.group(3) + ">"

    return TENSOR_RE.sub(rename, text)


def mutate_element_type(text, rng):
    m = pick(rng, list(TENSOR_RE.finditer(text)))
    return replace_match(text, m, 3, rng.choice(ELEMENT_TYPES)) if m else None


def mutate_mla_attr(text, rng):
    m = pick(rng, list(MLA_ATTR_RE.finditer(text)))
    if not m:
        return None
    body = m.group(2)
    fields = list(ATTR_FIELD_RE.finditer(body))
    if not fields or rng.random() < 0.15:  # drop or duplicate a field, or empty the attribute
        choice = rng.randrange(3)
        if choice == 0 or not fields:
            new_body = ""
        elif choice == 1:
            f = rng.choice(fields)
            new_body = body[: f.start()] + body[f.end():].lstrip(", ")
        else:
            f = rng.choice(fields)
            new_body = body + ", " + f.group(0)
    else:
        f = rng.choice(fields)
        old = f.group(2)
        if old.startswith("array<"):
            n = rng.randint(0, 6)
            value = "array<i32: " + ", ".join(rng.choice(INT_VALUES[:12] + ["-5"]) for _ in range(n)) + ">"
        elif re.match(r"-?\d+$", old):
            value = rng.choice(INT_VALUES)
        elif re.match(r"-?[0-9]", old):
            value = rng.choice(FLOAT_VALUES)
        else:
            value = rng.choice(ENUM_WORDS)
        new_body = body[: f.start(2)] + value + body[f.end(2):]
    return replace_match(text, m, 2, new_body)


def mutate_op_attr(text, rng):
    ints = list(OP_INT_RE.finditer(text))
    scales = list(OP_SCALE_RE.finditer(text))
    if ints and (not scales or rng.random() < 0.6):
        return replace_match(text, rng.choice(ints), 2, rng.choice(INT_VALUES))
    if scales:
        return replace_match(text, rng.choice(scales), 1, rng.choice(FLOAT_VALUES))
    return None


def mutate_dense(text, rng):
    m = pick(rng, list(DENSE_INT_RE.finditer(text)))
    if not m:
        return None
    nums = list(re.finditer(r"-?\d+", m.group(1)))
    n = rng.choice(nums)
    value = rng.choice(["-1", "-7", "0", "1000000", "2147483647", "-2147483648", str(int(n.group(0)) + 1)])
    start = m.start(1) + n.start()
    return text[:start] + value + text[m.start(1) + n.end():]


def mutate_operands(text, rng):
    m = pick(rng, list(OPERANDS_RE.finditer(text)))
    if not m:
        return None
    ops = list(re.finditer(r"%[\w.#]+", m.group(2)))
    if len(ops) < 2:
        return None
    a, b = rng.sample(ops, 2)
    if a.start() > b.start():
        a, b = b, a
    s = m.group(2)
    swapped = s[: a.start()] + b.group(0) + s[a.end(): b.start()] + a.group(0) + s[b.end():]
    return replace_match(text, m, 2, swapped)


def mutate_splice(text, rng, chunks):
    _, other = rng.choice(chunks)
    ops = [m.group(0) for m in MLA_OP_RE.finditer(other)]
    ret = list(re.finditer(r"^\s*(?:func\.)?return\b", text, re.M))
    if not ops or not ret:
        return None
    at = rng.choice(ret).start()
    return text[:at] + rng.choice(ops) + "\n" + text[at:]


MUTATORS = [mutate_tensor_dims, mutate_dim_everywhere, mutate_dim_everywhere, mutate_element_type,
            mutate_mla_attr, mutate_mla_attr, mutate_op_attr, mutate_dense, mutate_operands]


def make_input(chunks, rng):
    # Chunks that expect a diagnostic already fail to verify; start from them only now and then.
    valid = [c for c in chunks if "expected-error" not in c[1]]
    path, text = rng.choice(valid if valid and rng.random() < 0.85 else chunks)
    kinds = []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        if rng.random() < 0.1:
            new, name = mutate_splice(text, rng, chunks), "splice"
        else:
            fn = rng.choice(MUTATORS)
            new, name = fn(text, rng), fn.__name__[len("mutate_"):]
        if new is not None and new != text:
            text = new
            kinds.append(name)
    return path, "+".join(kinds) or "none", text


CRASH_MARKS = ("PLEASE submit a bug report", "Stack dump", "LLVM ERROR", "Assertion")


def run(mla_opt, args, text, timeout):
    try:
        proc = subprocess.run([mla_opt, "-"] + args, input=text.encode(),
                              capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", b"", ""
    err = proc.stderr.decode(errors="replace")
    if proc.returncode < 0 or any(mark in err for mark in CRASH_MARKS):
        return "crash", proc.stdout, err
    if proc.returncode != 0:
        return ("ok" if "error" in err else "nodiag"), proc.stdout, err
    return "success", proc.stdout, err


def check_input(mla_opt, passes, text, timeout):
    """Runs the input with no pass, then (if it verifies) with every pass and pipeline; returns
    (runs, failures) with failures as (kind, args, stderr)."""
    failures, runs = [], 0
    for args in [[]] + passes:
        runs += 1
        status, out, err = run(mla_opt, args, text, timeout)
        if status in ("crash", "timeout", "nodiag"):
            failures.append((status, args, err))
        elif status == "success":
            back, _, err2 = run(mla_opt, [], out.decode(errors="replace"), timeout)
            if back != "success":
                failures.append(("nonreparsable" if back != "crash" else "crash", args, err2))
        if not args and status != "success":
            break  # the input does not verify: every pass would stop at the same point
    return runs, failures


def list_passes(mla_opt):
    help_text = subprocess.run([mla_opt, "--help"], capture_output=True, text=True).stdout
    names = re.findall(r"^\s+--((?:mla|convert-mla)-[\w-]+)\s", help_text, re.M)
    named = {"mla-to-llvm-cpu", "mla-plan", "mla-to-nvvm"}
    return [["--" + n] for n in names if n not in named] + PIPELINES


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mla-opt", required=True)
    ap.add_argument("--runs", type=int, default=300, help="mutated inputs (MLA_FUZZ_RUNS overrides)")
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("dirs", nargs="+")
    opts = ap.parse_args()
    count = int(os.environ.get("MLA_FUZZ_RUNS", opts.runs))

    chunks = load_chunks(opts.dirs)
    passes = list_passes(opts.mla_opt)
    rng = random.Random(opts.seed)
    inputs = [make_input(chunks, rng) for _ in range(count)]

    totals = {"runs": 0, "crash": 0, "timeout": 0, "nonreparsable": 0, "nodiag": 0}
    saved = 0
    with concurrent.futures.ThreadPoolExecutor(opts.jobs) as pool:
        futs = {pool.submit(check_input, opts.mla_opt, passes, text, opts.timeout): (i, path, kind, text)
                for i, (path, kind, text) in enumerate(inputs)}
        for done, fut in enumerate(concurrent.futures.as_completed(futs), 1):
            i, path, kind, text = futs[fut]
            runs, failures = fut.result()
            totals["runs"] += runs
            if done % 500 == 0:  # long runs report as they go, so a stopped run still has figures
                print(f"progress: {done} inputs, " + ", ".join(f"{k} {v}" for k, v in totals.items()), flush=True)
            for status, args, err in failures:
                totals[status] += 1
                saved += 1
                out = pathlib.Path(f"fuzz-{status}-{i}.mlir")
                out.write_text(f"// {status}: mla-opt {' '.join(args)}\n// {kind} of {path}\n{text}")
                print(f"{status.upper()} with mla-opt {' '.join(args)} on {kind} of {path} "
                      f"(input saved as {out})\n{err[-1500:]}")
    bad = totals["crash"] + totals["timeout"] + totals["nonreparsable"] + totals["nodiag"]
    print(f"fuzzed {count} inputs from {len(chunks)} chunks with {len(passes) + 1} configurations: "
          f"{totals['runs']} runs, {totals['crash']} crashes, {totals['timeout']} timeouts, "
          f"{totals['nonreparsable']} non-reparsable, {totals['nodiag']} failures without diagnostic")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
