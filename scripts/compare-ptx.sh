#!/usr/bin/env bash
# Compares the PTX of every GPU kernel two mla-opt binaries generate for the
# suite's GPU inputs (decode shapes, both sm_90a decode tilings, cache writes,
# projections, the sm_100a decode, the DeepSeek-V3 example):
#   bash scripts/compare-ptx.sh OLD_MLA_OPT NEW_MLA_OPT
# Prints one line per kernel image and exits 1 when any differs. A refactor of
# the emitters that claims "no kernel changed" is checked with this.
set -uo pipefail
OLD=${1:?old mla-opt}; NEW=${2:?new mla-opt}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
status=0
run() {  # run NAME CHIP INPUT
  local name=$1 chip=$2 input=$3 which
  for which in old new; do
    local bin=$OLD; [ $which = new ] && bin=$NEW
    "$bin" "$input" --split-input-file --mla-to-nvvm="chip=$chip format=isa" \
      -o "$T/$which.mlir" || { echo "$name: $which mla-opt failed"; status=1; return; }
    python3 "$ROOT/scripts/extract-gpu-payload.py" "$T/$which.mlir" "$T/$which.ptx" --all > /dev/null
  done
  for f in "$T"/old.ptx "$T"/old.ptx.*; do
    [ -f "$f" ] || continue
    local g=$T/new${f#$T/old}
    if cmp -s "$f" "$g"; then echo "$name${f#$T/old.ptx}: identical"
    else echo "$name${f#$T/old.ptx}: DIFFERENT"; status=1; fi
  done
  rm -f "$T"/old.ptx* "$T"/new.ptx*
}
I=$ROOT/test/Gpu/Inputs; C=$ROOT/test/Conversion/MLAToGPU
run decode-shapes sm_90a "$I/decode-shapes.mlir"
run decode-sm90 sm_90a "$C/decode-sm90.mlir"
run decode-sm90-wgmma sm_90a "$C/decode-sm90-wgmma.mlir"
run cache-write sm_90a "$C/cache-write.mlir"
run projections sm_90a "$C/projections.mlir"
run deepseek-v3-example sm_90a "$ROOT/examples/deepseek_v3_decode_gpu.mlir"
run decode-shapes-sm100 sm_100a "$I/decode-shapes-sm100.mlir"
run decode-sm100 sm_100a "$C/decode-sm100.mlir"
run projections-sm100 sm_100a "$C/projections.mlir"
exit $status
