#!/usr/bin/env bash
# Builds the MLIR-free GPU runtime (decode, cache write, projections) for
# machines that have a CUDA driver but no LLVM/MLIR (the H200), into
# gpu-carry/ (or $1):
#   bin/mla-bench              timing and --check, LLVM Support linked statically
#   python/mla/                the Python package, with _lib/libMLAGpuCAPI.so
#                              (LLVM Support linked statically, its symbols
#                              hidden; only mlaGpu* is exported)
# The kernel images come from `mla-aot --cache-dir <out>/kernel-cache ...`,
# run here (it needs MLIR). Needs the configured build directory $BUILD
# (default build/) for ToolchainVersion.inc: the runtime must hash cache keys
# with the same toolchain identity as the mla-aot that filled the cache.
set -euo pipefail
OUT=${1:-gpu-carry}
BUILD=${BUILD:-build}
LLVM=/usr/lib/llvm-22
CUDA_INCLUDE=/usr/local/cuda/include
VERSION_INC_DIR="$BUILD/lib/Runtime/Gpu"
if [[ ! -f "$VERSION_INC_DIR/ToolchainVersion.inc" ]]; then
  echo "error: $VERSION_INC_DIR/ToolchainVersion.inc is missing; configure $BUILD first" >&2
  exit 1
fi

RUNTIME_SOURCES=(
  lib/Contract/ArgRules.cpp
  lib/Runtime/Error.cpp
  lib/Runtime/HostTensor.cpp
  lib/Runtime/KernelABI.cpp
  lib/Runtime/SplitPlanner.cpp
  lib/Runtime/Gpu/CacheProjectionLaunch.cpp
  lib/Runtime/Gpu/CudaDriver.cpp
  lib/Runtime/Gpu/GpuDecode.cpp
  lib/Runtime/Gpu/KernelCache.cpp
  lib/Runtime/Gpu/KernelSpec.cpp
)
CXXFLAGS=(-O2 -DNDEBUG -std=c++17 -fPIC -I include -I "$LLVM/include"
  -isystem "$CUDA_INCLUDE" -I "$VERSION_INC_DIR")
# libz and libzstd (used by LLVM Support's compression) stay dynamic: every
# system the tools run on has them.
LIBS=("$LLVM/lib/libLLVMSupport.a" "$LLVM/lib/libLLVMDemangle.a" -lz -lzstd
  -ldl -lpthread)

mkdir -p "$OUT/bin" "$OUT/python/mla/_lib" "$OUT/kernel-cache"
OBJ=$(mktemp -d)
trap 'rm -rf "$OBJ"' EXIT

# Compile the runtime once (two jobs at a time), link it twice.
objects=()
for src in "${RUNTIME_SOURCES[@]}" lib/CAPI/Gpu.cpp \
    tools/mla-bench/DecodeReference.cpp tools/mla-bench/mla-bench.cpp; do
  obj="$OBJ/$(echo "$src" | tr / _).o"
  objects+=("$obj")
  g++ "${CXXFLAGS[@]}" -c "$src" -o "$obj" &
  if (( $(jobs -rp | wc -l) >= 2 )); then wait -n; fi
done
wait
runtime_objects=("${objects[@]:0:${#RUNTIME_SOURCES[@]}}")
capi_object=${objects[${#RUNTIME_SOURCES[@]}]}
bench_objects=("${objects[@]:$((${#RUNTIME_SOURCES[@]} + 1))}")

g++ "${bench_objects[@]}" "${runtime_objects[@]}" "${LIBS[@]}" \
  -o "$OUT/bin/mla-bench"

cat > "$OBJ/exports.map" <<'EOF'
{ global: mlaGpu*; local: *; };
EOF
g++ -shared "$capi_object" "${runtime_objects[@]}" "${LIBS[@]}" \
  -Wl,--version-script="$OBJ/exports.map" -Wl,--exclude-libs,ALL \
  -o "$OUT/python/mla/_lib/libMLAGpuCAPI.so"

cp python/mla/__init__.py python/mla/_capi.py python/mla/gpu.py "$OUT/python/mla/"

if ldd "$OUT/bin/mla-bench" "$OUT/python/mla/_lib/libMLAGpuCAPI.so" | grep -Ei 'llvm|mlir'; then
  echo "error: the carried binaries must not load LLVM or MLIR at run time" >&2
  exit 1
fi
echo "gpu-carry: $(du -sh "$OUT" | cut -f1) in $OUT (limit 64 MiB); kernels go to $OUT/kernel-cache"
