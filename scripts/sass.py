#!/usr/bin/env python3
"""SASS of the GPU kernels of an mla input, and its instruction mix, here.

  sass.py [--mla-opt BIN] [--chip sm_90a] [--kernel NAME] [--out DIR]
          [--nvdisasm BIN] INPUT.mlir|INPUT.ptx|PROGRAM [INPUT ...]

An .mlir input goes through `mla-opt --split-input-file --mla-to-nvvm="chip=..
format=isa"`; every PTX image is assembled by CUDA's ptxas (-v: registers,
spills) and disassembled by nvdisasm. Any other input is a host program
(e.g. ../shared/tools/flashmla_bench) whose `.nv_fatbin` section holds
uncompressed sm_90 cubins: those are disassembled as they are (registers and
spills unknown), so a peer's kernels can be set beside ours. Per kernel it
prints the instruction count, the opcode histogram (first mnemonic
component, e.g. HGMMA, R2UR) and writes DIR/<input>.<n>.<kernel>.sass when
--out is given.

CUDA 13 ships no disassembler here; scripts/install-nvdisasm.sh fetches CUDA
11.8's (Debian non-free). That nvdisasm reads only ELF ABI version 7 headers,
so a copy of each cubin gets a version-7 header naming sm_90 (the instruction
encoding of sm_90a is sm_90's); the cubin that runs is never changed. sm_100a
images are not decodable by CUDA 11.8.
"""
import argparse
import collections
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def find(explicit, name, candidates):
    for c in [explicit] + candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    found = shutil.which(name)
    if found:
        return found
    sys.exit(f"sass.py: no {name} (tried {', '.join(filter(None, candidates))});"
             " see scripts/install-nvdisasm.sh")


def ptx_images(path, mla_opt, chip, tmp):
    if path.endswith(".ptx"):
        return [open(path, "rb").read()]
    out = os.path.join(tmp, "out.mlir")
    subprocess.run([mla_opt, path, "--split-input-file",
                    f"--mla-to-nvvm=chip={chip} format=isa", "-o", out],
                   check=True)
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "payload", os.path.join(ROOT, "scripts", "extract-gpu-payload.py"))
    payload = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(payload)
    text = open(out, encoding="latin-1").read()
    return [payload.decode(m) for m in
            re.findall(r'assembly = "((?:[^"\\]|\\.)*)"', text)]


def section(elf, wanted):
    """The bytes of section `wanted` of a 64-bit little-endian ELF file."""
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    def header(i):
        # name, type, flags, addr, offset, size
        return struct.unpack_from("<IIQQQQ", elf, shoff + i * shentsize)
    names = header(shstrndx)
    for i in range(shnum):
        h = header(i)
        end = elf.index(b"\0", names[4] + h[0])
        if elf[names[4] + h[0]:end].decode() == wanted:
            return elf[h[4]:h[4] + h[5]]
    return None


FATBIN_MAGIC = 0xBA55ED50


def fatbin_cubins(path):
    """The uncompressed ELF images in a host program's .nv_fatbin section."""
    data = section(open(path, "rb").read(), ".nv_fatbin")
    if data is None:
        sys.exit(f"sass.py: {path} is neither .mlir, .ptx nor a program with"
                 " a .nv_fatbin section")
    images, off = [], 0
    while off + 16 <= len(data):
        magic, _, header, size = struct.unpack_from("<IHHQ", data, off)
        if magic != FATBIN_MAGIC:
            break
        entry, end = off + header, off + header + size
        while entry + 16 <= end:
            _, _, entry_header, payload = struct.unpack_from("<HHIQ", data, entry)
            image = data[entry + entry_header:entry + entry_header + payload]
            if image[:4] == b"\x7fELF":
                images.append(image)
            entry += entry_header + payload
        off = end
    return images


def as_abi7_sm90(cubin):
    data = bytearray(cubin)
    if data[:4] != b"\x7fELF":
        raise ValueError("not an ELF cubin")
    data[8] = 7  # EI_ABIVERSION
    # e_flags: SM 90, virtual SM 90, 64-bit addresses (the ABI-7 encoding).
    struct.pack_into("<I", data, 0x30, 0x005A055A)
    return bytes(data)


INSN = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)")
FUNC = re.compile(r"^\s*\.text\.(\S+):")
LABEL = re.compile(r"^\s*\.L_x_\d+:")


def split_kernels(sass):
    """{kernel: [instruction and branch-label lines]} of nvdisasm's output."""
    kernels, current = collections.OrderedDict(), None
    for line in sass.splitlines():
        m = FUNC.match(line)
        if m:
            current = kernels.setdefault(m.group(1), [])
            continue
        if current is not None and (INSN.search(line) or LABEL.match(line)):
            current.append(line)
    return kernels


def histogram(lines):
    counts = collections.Counter()
    for line in lines:
        m = INSN.search(line)
        if not m:
            continue
        op = m.group(1)
        if op == "NOP":
            continue
        counts[op] += 1
    return counts


BRANCH = re.compile(r"BRA\s+(?:\S+\s+)?`\((\.L_x_\d+)\)")


def loops(lines):
    """(label, first, last) line ranges of the backward branches' bodies."""
    at = {}
    for i, line in enumerate(lines):
        m = LABEL.match(line)
        if m:
            at[line.strip().rstrip(":")] = i
    found, block = [], 0
    for i, line in enumerate(lines):
        if LABEL.match(line):
            block = i
        m = BRANCH.search(line)
        if not (m and m.group(1) in at and at[m.group(1)] < i):
            continue
        # ptxas puts an mbarrier wait's retry (try_wait, a sleep, a branch
        # back into the code that waited) out of line at the end: a short
        # block that branches back is that, not a loop.
        stub = "\n".join(lines[block:i + 1])
        if i - block <= 8 and ("SYNCS" in stub or "NANOSLEEP" in stub):
            continue
        found.append((m.group(1), at[m.group(1)], i))
    return found


def ptxas_usage(info):
    """{kernel: {"regs", "spill"}} from `ptxas -v`'s report."""
    usage, fn = {}, None
    for line in info.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            fn = m.group(1)
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and fn:
            usage.setdefault(fn, {})["spill"] = f"{m.group(1)}/{m.group(2)}"
        m = re.search(r"Used (\d+) registers", line)
        if m and fn:
            usage.setdefault(fn, {})["regs"] = m.group(1)
    return usage


def cubins(path, args, ptxas, tmp):
    """(cubin bytes, ptxas_usage or None for a host program's image) per
    image of `path`."""
    if not path.endswith((".mlir", ".ptx")):
        for image in fatbin_cubins(path):
            yield image, None
        return
    for i, ptx in enumerate(ptx_images(path, args.mla_opt, args.chip, tmp)):
        ptx_file = os.path.join(tmp, f"{i}.ptx")
        open(ptx_file, "wb").write(ptx)
        cubin = os.path.join(tmp, f"{i}.cubin")
        info = subprocess.run(
            [ptxas, f"-arch={args.chip}", "-v", ptx_file, "-o", cubin],
            check=True, capture_output=True, text=True).stderr
        yield open(cubin, "rb").read(), ptxas_usage(info)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--mla-opt", default=os.path.join(ROOT, "build/bin/mla-opt"))
    ap.add_argument("--chip", default="sm_90a")
    ap.add_argument("--kernel", help="only kernels whose name contains this")
    ap.add_argument("--out", help="write each kernel's SASS here")
    ap.add_argument("--nvdisasm")
    ap.add_argument("--loops", action="store_true",
                    help="also the mix of every loop body (backward branch)")
    ap.add_argument("--top", type=int, default=25,
                    help="opcodes shown per kernel (0: all)")
    args = ap.parse_args()
    ptxas = find(None, "ptxas", ["/usr/local/cuda/bin/ptxas"])
    nvdisasm = find(args.nvdisasm, "nvdisasm",
                    [os.path.join(ROOT, "tools/cuda-11.8/bin/nvdisasm")])
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for path in args.inputs:
            stem = os.path.basename(path).rsplit(".", 1)[0]
            for i, (cubin, usage) in enumerate(
                    cubins(path, args, ptxas, tmp)):
                patched = os.path.join(tmp, f"{i}.abi7.cubin")
                open(patched, "wb").write(as_abi7_sm90(cubin))
                # A host program may also carry images of other chips
                # (sm_100): those are named and skipped; ours must decode.
                run = subprocess.run([nvdisasm, "-c", patched],
                                     capture_output=True, text=True,
                                     check=usage is not None)
                if run.returncode:
                    print(f"{stem}.{i}: not decodable by this nvdisasm"
                          " (not sm_90?)")
                    continue
                sass = run.stdout
                usage = usage or {}
                for name, lines in split_kernels(sass).items():
                    if args.kernel and args.kernel not in name:
                        continue
                    counts = histogram(lines)
                    u = usage.get(name, {})
                    print(f"{stem}.{i} {name}: {sum(counts.values())} instructions,"
                          f" {u.get('regs', '?')} registers,"
                          f" spill st/ld {u.get('spill', '?')} bytes")
                    top = counts.most_common(args.top or None)
                    print("  " + " ".join(f"{op}={n}" for op, n in top))
                    for label, first, last in loops(lines) if args.loops else []:
                        body = histogram(lines[first:last + 1])
                        print(f"  loop {label} (lines {first}-{last}):"
                              f" {sum(body.values())} instructions")
                        print("    " + " ".join(
                            f"{op}={n}" for op, n in body.most_common(args.top or None)))
                    if args.out:
                        with open(os.path.join(args.out, f"{stem}.{i}.{name}.sass"),
                                  "w") as f:
                            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
