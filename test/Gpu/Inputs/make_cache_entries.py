"""Writes kernel cache entry files by hand, in the entry format of
lib/GpuRuntime/KernelCache.cpp (32-byte header: magic, version, spec length,
image length, FNV-1a-64 of the image; then the spec text and the image):
    make_cache_entries.py DIR KEY_CHAR:IMAGE_BYTES[:SPEC TEXT] ...
An entry without a spec is written as bare image bytes (no header), as a
damaged or foreign file would be."""
import struct
import sys


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


directory = sys.argv[1]
for arg in sys.argv[2:]:
    key, size, *spec = arg.split(":", 2)
    image = b"x" * int(size)
    with open(f"{directory}/{key * 32}.cubin", "wb") as f:
        if spec:
            text = spec[0].encode()
            f.write(b"MLAKERNL" + struct.pack("<IIQQ", 2, len(text), len(image), fnv1a64(image)) + text)
        f.write(image)
