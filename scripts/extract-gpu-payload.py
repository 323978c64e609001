#!/usr/bin/env python3
"""Writes the payload of every gpu.binary object in printed MLIR to files.

Usage: extract-gpu-payload.py INPUT.mlir OUTPUT [--all]
The payload (PTX for format=isa, cubin for format=bin) is the `assembly = "..."`
or `bin = "..."` string of the `#gpu.object`; MLIR prints non-printable bytes as
two-digit hex escapes (\\0A), which are decoded here. With one object the output
is OUTPUT itself; with several (--all) OUTPUT.0, OUTPUT.1, ...
"""
import re
import sys


def decode(escaped: str) -> bytes:
    out = bytearray()
    i = 0
    while i < len(escaped):
        ch = escaped[i]
        if ch == "\\":
            out.append(int(escaped[i + 1:i + 3], 16))
            i += 3
        else:
            out.extend(ch.encode("latin-1"))
            i += 1
    return bytes(out)


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    text = open(sys.argv[1], encoding="latin-1").read()
    payloads = [decode(m.group(2)) for m in
                re.finditer(r'(assembly|bin) = "((?:[^"\\]|\\[0-9A-Fa-f]{2})*)"', text)]
    if not payloads:
        print("error: no gpu.object payload in " + sys.argv[1], file=sys.stderr)
        return 1
    if len(payloads) == 1 or "--all" not in sys.argv:
        open(sys.argv[2], "wb").write(payloads[0])
    else:
        for i, p in enumerate(payloads):
            open("%s.%d" % (sys.argv[2], i), "wb").write(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
