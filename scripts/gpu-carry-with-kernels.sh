#!/usr/bin/env bash
# Makes gpu-carry/ (or $1) for a GPU machine without MLIR: the MLIR-free
# runtime (the build's mla-gpu-carry target), a kernel cache holding every
# kernel `mla-bench --check`, its timing shapes and `mla-aot --shapes deepseek`
# use (compiled here with mla-aot), and FlashMLA's peer benchmark from
# ../shared/tools when present. Then run scripts/gpu-verify.sh there.
set -euo pipefail
OUT=${1:-gpu-carry}
BUILD=${BUILD:-build}
bash "$(dirname "$0")/build-gpu-carry.sh" "$OUT"
specs=$(mktemp)
trap 'rm -f "$specs"' EXIT
for extra in "" --check; do
  "$BUILD/bin/mla-bench" --list-specs --chip=sm_90a $extra |
    grep -E "^(decode|cache_write|absorb_q|up_proj_out) " >> "$specs"
done
"$BUILD/bin/mla-aot" --cache-dir "$OUT/kernel-cache" --shapes deepseek --spec-file "$specs"
peer=$(dirname "$0")/../../shared/tools/flashmla_bench
if [ -x "$peer" ]; then mkdir -p "$OUT/peers" && cp "$peer" "$OUT/peers/"; fi
du -sh "$OUT"
