#!/usr/bin/env bash
# Gathers the MLIR-free GPU runtime (mla-bench, mla-gpu-smoke, the Python
# package with libMLAGpuCAPI.so) for a GPU machine without LLVM/MLIR into
# gpu-carry/ (or $1). The binaries are ordinary targets of the CMake build
# (LLVM Support linked statically); this only builds the `mla-gpu-carry`
# target of $BUILD (default build/) and copies its result. Kernel images come
# from `mla-aot --cache-dir <out>/kernel-cache ...`, run here (it needs MLIR).
set -euo pipefail
OUT=${1:-gpu-carry}
BUILD=${BUILD:-build}
ninja -C "$BUILD" mla-gpu-carry
mkdir -p "$OUT"
cp -r "$BUILD/gpu-carry/." "$OUT/"
echo "gpu-carry: $(du -sh "$OUT" | cut -f1) in $OUT (limit 64 MiB); kernels go to $OUT/kernel-cache"
