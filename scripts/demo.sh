#!/usr/bin/env bash
# The main job: compile the DeepSeek-V3-shaped examples with mla-opt (plan +
# CPU lowering), then run a DeepSeek-V3 decode and a chunked prefill end to
# end on the CPU through the compiler, checked against the numpy reference.
set -euo pipefail
BUILD_DIR=${1:-build}
PYTHON=${PYTHON:-/usr/bin/python3}

for f in examples/*.mlir; do
  echo "=== $f: planned for the CPU by mla-opt --mla-plan ==="
  "$BUILD_DIR/bin/mla-opt" "$f" --mla-plan="target=cpu"
  echo "=== $f: lowered by mla-to-llvm-cpu ($("$BUILD_DIR/bin/mla-opt" "$f" --mla-to-llvm-cpu | wc -l) lines of LLVM dialect) ==="
done
echo
echo "=== Running on the CPU (JIT through mla-to-llvm-cpu) ==="
PYTHONPATH="$BUILD_DIR/python_packages:test/python" "$PYTHON" examples/demo.py

# The GPU half: compile the decode for sm_90a (PTX shown by instruction
# count), and where an sm_90 GPU is present run it against the float64
# reference.
echo
echo "=== examples/deepseek_v3_decode_gpu.mlir lowered by mla-to-nvvm{chip=sm_90a} ==="
ptx=$("$BUILD_DIR/bin/mla-opt" examples/deepseek_v3_decode_gpu.mlir --mla-to-nvvm="chip=sm_90a format=isa")
echo "wgmma.mma_async instructions in the PTX: $(grep -o 'wgmma.mma_async' <<<"$ptx" | wc -l)"
if [[ -x "$BUILD_DIR/bin/mla-bench" ]] && command -v nvidia-smi >/dev/null 2>&1 \
    && nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | grep -q '^9\.0'; then
  echo "=== Running on the GPU (kernels from mla-aot, checked by mla-bench) ==="
  "$BUILD_DIR/bin/mla-aot" --cache-dir "$BUILD_DIR/kernel-cache" --shapes deepseek
  "$BUILD_DIR/bin/mla-bench" --cache-dir "$BUILD_DIR/kernel-cache" --check
else
  echo "(no sm_90 GPU here: the decode ran on the CPU above)"
fi
