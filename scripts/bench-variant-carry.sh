#!/usr/bin/env bash
# A small carry of this build's decode benchmark for an A/B on the device
# machine: DIR/bin/mla-bench and DIR/kernel-cache holding only the decode
# kernels of `mla-bench --shapes default` and `--check` (bf16), and of the
# fp8 formats' `--check` and issue 13's shapes (N = 16 and 128, s_q = 1): a
# few MB, next to the ~28 MB of scripts/gpu-carry-with-kernels.sh, so that
# two or three builds fit one 64 MiB carry:
#   bash scripts/bench-variant-carry.sh gpu-carry/old      # in a checkout of the other build
#   gpu-carry/old/bin/mla-bench --cache-dir gpu-carry/old/kernel-cache --shapes default
# The kernel cache key covers the codegen sources (lib/, include/), so each
# build's mla-bench must use its own cache directory.
#   BF16_ONLY=1    only the bf16 specs (no fp8 formats): ~3.5 MB, seconds to build
#   TILES="T ..."  also tile T's specs of --shapes default and --check
#                  (e.g. 64x2x64x2b, the persistent build)
set -euo pipefail
OUT=${1:?output directory}
BUILD=${BUILD:-build}
ninja -C "$BUILD" mla-aot mla-bench
mkdir -p "$OUT/bin" "$OUT/kernel-cache"
cp "$BUILD/bin/mla-bench" "$OUT/bin/"
specs=$(mktemp)
trap 'rm -f "$specs"' EXIT
for extra in "" --check; do
  "$BUILD/bin/mla-bench" --list-specs --chip=sm_90a $extra | grep -E "^decode " >> "$specs"
done
for tile in ${TILES:-}; do
  for extra in "" --check; do
    "$BUILD/bin/mla-bench" --list-specs --chip=sm_90a --shapes default --tile "$tile" $extra |
      grep -E "^decode " >> "$specs"
  done
done
formats="fp8_e4m3 fp8_ds_mla"
[ "${BF16_ONLY:-0}" = 1 ] && formats=""
for format in $formats; do
  "$BUILD/bin/mla-bench" --list-specs --chip=sm_90a --check --kv-format $format |
    grep -E "^decode " >> "$specs"
  for n in 16 128; do
    "$BUILD/bin/mla-bench" --list-specs --chip=sm_90a --b 64 --n $n --seq 4096 --sq 1 \
      --kv-format $format | grep -E "^decode " >> "$specs"
  done
done
sort -u "$specs" -o "$specs"
"$BUILD/bin/mla-aot" --cache-dir "$OUT/kernel-cache" --spec-file "$specs"
echo "$OUT: $(wc -l < "$specs") specs, $(du -sh "$OUT" | cut -f1)"
