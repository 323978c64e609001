#!/usr/bin/env python3
"""Fails when an #include in mla's sources points up the layer stack.

The layers, bottom to top (docs/Design.md):

    Contract -> Dialect -> GPUCodegen -> Conversion -> Pipelines -> JIT -> CAPI -> tools, python
    Contract -> GpuRuntime (MLIR-free: Contract only) -> JIT / CAPI / tools

A file of a layer may include its own layer's headers and those of the layers
it stands on, nothing above. Contract and GpuRuntime include no MLIR header
at all. Run as `check_layers.py <source root>`; prints every violation.
"""
import os
import re
import sys

# Which mla header folders each layer may include (besides system/LLVM).
ALLOWED = {
    "Contract": {"Contract"},
    "GpuRuntime": {"Contract", "GpuRuntime"},
    "Dialect": {"Contract", "Dialect"},
    "GPUCodegen": {"Contract", "GPUCodegen"},
    "Conversion": {"Contract", "Dialect", "GPUCodegen", "Conversion"},
    "Pipelines": {"Contract", "Dialect", "GPUCodegen", "Conversion", "Pipelines"},
    "JIT": {"Contract", "GpuRuntime", "Dialect", "GPUCodegen", "Conversion", "Pipelines", "JIT"},
    "CAPI": {"Contract", "GpuRuntime", "Dialect", "GPUCodegen", "Conversion", "Pipelines", "JIT", "CAPI"},
}
# Layers that must build without MLIR.
MLIR_FREE = {"Contract", "GpuRuntime"}

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]')


def layer_of(rel):
    """The layer of a source file, from its folder (None: not layered)."""
    parts = rel.split(os.sep)
    if parts[:2] == ["include", "mla-c"] or parts[:2] == ["lib", "CAPI"]:
        return "CAPI"
    if parts[0] == "include" and len(parts) > 2 and parts[1] == "mla":
        return parts[2] if parts[2] in ALLOWED else None
    if parts[0] == "lib" and len(parts) > 1:
        return parts[1] if parts[1] in ALLOWED else None
    return None


def target_layer(header):
    """The layer an include names ("mla/JIT/X.h" -> JIT; "mla-c/..." -> CAPI)."""
    if header.startswith("mla-c/"):
        return "CAPI"
    m = re.match(r"mla/([^/]+)/", header)
    return m.group(1) if m else None


def check(root):
    problems = []
    for top in ("include", "lib"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith((".h", ".cpp", ".inc", ".def")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                layer = layer_of(rel)
                if layer is None:
                    continue
                with open(path, encoding="utf-8") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        header = m.group(1)
                        if layer in MLIR_FREE and header.startswith("mlir/"):
                            problems.append(f"{rel}:{lineno}: the {layer} layer has no MLIR, "
                                            f"but includes {header}")
                        target = target_layer(header)
                        if target is not None and target not in ALLOWED[layer]:
                            problems.append(f"{rel}:{lineno}: {layer} includes {header} "
                                            f"from the {target} layer above it")
    return problems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    problems = check(os.path.abspath(root))
    for p in problems:
        print(p)
    print(f"checked layering: {len(problems)} violation(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
