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
