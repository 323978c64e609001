"""Feeds mla-opt mutated copies of the suite's own .mlir files.

Every mutation (a truncation, byte flips, a deleted or duplicated span) must
end with a diagnostic or with success, never with a signal (crash, assertion,
stack overflow). Deterministic: the seed fixes the mutations.
"""
import argparse
import concurrent.futures
import pathlib
import random
import subprocess
import sys


def mutations(data: bytes, rng: random.Random, count: int):
    for _ in range(count):
        kind = rng.randrange(4)
        buf = bytearray(data)
        if kind == 0:  # truncate
            yield "truncate", bytes(buf[: rng.randrange(len(buf))])
        elif kind == 1:  # flip a few bytes to random printable or special ones
            for _ in range(rng.randint(1, 4)):
                pos = rng.randrange(len(buf))
                buf[pos] = rng.choice(b"0123456789xX?-<>[](){}:,=%#@!\"\x00\xff ") 
            yield "flip", bytes(buf)
        elif kind == 2:  # delete a span
            a = rng.randrange(len(buf))
            b = min(len(buf), a + rng.randint(1, 40))
            yield "delete", bytes(buf[:a] + buf[b:])
        else:  # duplicate a span somewhere else
            a = rng.randrange(len(buf))
            b = min(len(buf), a + rng.randint(1, 60))
            c = rng.randrange(len(buf))
            yield "duplicate", bytes(buf[:c] + buf[a:b] + buf[c:])


def run_one(mla_opt: str, payload: bytes, split: bool):
    args = [mla_opt, "-"]
    if split:
        args.append("-split-input-file")
    proc = subprocess.run(args, input=payload, capture_output=True, timeout=60)
    return proc.returncode, proc.stderr.decode(errors="replace")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mla-opt", required=True)
    ap.add_argument("--per-file", type=int, default=25)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("dirs", nargs="+")
    opts = ap.parse_args()

    files = sorted(p for d in opts.dirs for p in pathlib.Path(d).rglob("*.mlir"))
    rng = random.Random(opts.seed)
    cases = []
    for f in files:
        data = f.read_bytes()
        if not data:
            continue
        for kind, payload in mutations(data, rng, opts.per_file):
            cases.append((f, kind, payload))

    crashes = 0
    with concurrent.futures.ThreadPoolExecutor(opts.jobs) as pool:
        futs = {pool.submit(run_one, opts.mla_opt, p, "split-input-file" in f.read_text()): (f, k, p)
                for f, k, p in cases}
        for fut in concurrent.futures.as_completed(futs):
            f, kind, payload = futs[fut]
            code, err = fut.result()
            if code < 0:
                crashes += 1
                out = pathlib.Path(f"crash-{crashes}.mlir")
                out.write_bytes(payload)
                print(f"CRASH signal {-code} on {kind} of {f} (input saved as {out})\n{err[-2000:]}")
            elif code != 0 and "error" not in err:
                crashes += 1
                print(f"FAILURE WITHOUT DIAGNOSTIC (exit {code}) on {kind} of {f}\n{err[-2000:]}")
    print(f"{len(cases)} mutated inputs from {len(files)} files, {crashes} crashes")
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
