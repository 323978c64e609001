#!/usr/bin/env bash
# Runs on the H200 (no LLVM/MLIR), over a gpu-carry folder made here by
# `bash scripts/gpu-carry-with-kernels.sh`:
#   bash scripts/bench-prefill.sh CARRY [RAW_DIR [TOOL_ARGS...]]
# In one invocation, so both sides see the same clocks: mla-prefill-bench
# --mha next to PyTorch's SDPA backends (CARRY/peers/bench_prefill_sdpa.py),
# --up-proj-kv next to cuBLAS (scripts/bench-gemm-peer.py), then --e2e.
# Raw JSON lines go to RAW_DIR (default $OUT/prefill-bench, else
# ./prefill-bench) as mla-mha.jsonl, sdpa.jsonl, mla-up-proj-kv.jsonl,
# cublas.jsonl and mla-e2e.jsonl, stderr to <name>.err; the ratio tables
# (scripts/prefill-bench-table.py) are printed and saved as tables.md.
# TOOL_ARGS go to every mla-prefill-bench run (e.g. --iters 3 --warmup 1). A
# failing step makes the script exit non-zero after every step has run; the
# step limits add up to under 10 minutes (one `device` call).
set -uo pipefail
CARRY=${1:?carry folder}; RAW=${2:-${OUT:-.}/prefill-bench}
shift $(( $# < 2 ? $# : 2 ))
HERE=$(dirname "$0")
B=$CARRY/bin/mla-prefill-bench; K=$CARRY/kernel-cache
mkdir -p "$RAW"
status=0
step() {  # step NAME TIMEOUT CMD...
  local name=$1 limit=$2; shift 2
  echo "== $name: $*"
  local t0=$SECONDS
  timeout "$limit" "$@" > "$RAW/$name.jsonl" 2> "$RAW/$name.err"
  local rc=$?
  echo "   rc=$rc in $((SECONDS - t0)) s"
  [ $rc -eq 0 ] || { status=1; tail -n 3 "$RAW/$name.err"; }
}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$RAW/gpu.log" 2>&1
step mla-mha 200 "$B" --cache-dir "$K" --mha "$@"
step sdpa 120 python3 "$CARRY/peers/bench_prefill_sdpa.py"
step mla-up-proj-kv 60 "$B" --cache-dir "$K" --up-proj-kv "$@"
step cublas 60 python3 "$HERE/bench-gemm-peer.py"
step mla-e2e 150 "$B" --cache-dir "$K" --e2e "$@"
python3 "$HERE/prefill-bench-table.py" "$RAW" | tee "$RAW/tables.md"
exit $status
