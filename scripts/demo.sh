#!/usr/bin/env bash
# The main job: compile the DeepSeek-V3-shaped examples with mla-opt and show
# the verified IR.
set -euo pipefail
BUILD_DIR=${1:-build}
for f in examples/*.mlir; do
  echo "=== $f: verified by mla-opt ==="
  "$BUILD_DIR/bin/mla-opt" "$f"
done
