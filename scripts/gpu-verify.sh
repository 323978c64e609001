#!/usr/bin/env bash
# Runs on a GPU machine without LLVM/MLIR (the H200 of docs/gpu-runs.md), over
# a gpu-carry folder made here by `bash scripts/gpu-carry-with-kernels.sh`:
#   bash scripts/gpu-verify.sh CARRY MODE [OUT]
# MODE check: mla-bench --check (mixed batches and the benchmark shapes) and
#             the GPU pytest files;
#      bench: three rounds of the default decode shapes, each round mla-bench
#             then FlashMLA's own kernels (CARRY/peers/flashmla_bench), both L2
#             flushed (ratios: docs/benchmarks.md), then the host time of a
#             Python decode call with and without a plan (bench-host-cost.py);
#      sanitize: compute-sanitizer memcheck, racecheck and synccheck over
#             mla-bench --check, and memcheck over the GPU pytest files;
#      fp8: mla-bench --check over each fp8 cache format, the fp8 decode
#             pytest file, then three rounds of the issue-13 bar shapes
#             (128,16,8192) and (132,128,8192), Sq=1, bf16 and each fp8
#             format (GB/s counts the bytes each format reads).
# Logs go to OUT (default $OUT, else .) as <step>.log; a failing step makes
# the script exit non-zero after every step has run.
set -uo pipefail
CARRY=${1:?carry folder}; MODE=${2:?mode}; LOGS=${3:-${OUT:-.}}
B=$CARRY/bin/mla-bench; K=$CARRY/kernel-cache
export MLA_KERNEL_CACHE_DIR=$PWD/$K PYTHONPATH=$CARRY/python
status=0
step() {  # step NAME TIMEOUT CMD...
  local name=$1 limit=$2; shift 2
  echo "== $name: $*" | tee -a "$LOGS/summary.log"
  local t0=$SECONDS
  timeout "$limit" "$@" > "$LOGS/$name.log" 2>&1
  local rc=$?
  echo "   rc=$rc in $((SECONDS - t0)) s; $(tail -n 2 "$LOGS/$name.log" | tr '\n' ' ' | cut -c1-300)" | tee -a "$LOGS/summary.log"
  [ $rc -eq 0 ] || status=1
}
# Every GPU test file (test_gpu_*.py) plus the files whose GPU cases sit among CPU ones.
PYTESTS="$(ls test/python/test_gpu_*.py | tr '\n' ' ')
  test/python/test_hostile_args.py::test_hostile_argument_gpu test/python/test_prefill_pieces.py
  test/python/test_compat.py"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$LOGS/gpu.log" 2>&1
case $MODE in
  check)
    step check 240 "$B" --cache-dir "$K" --check
    step check-bench 240 "$B" --cache-dir "$K" --check --check-bench
    step pytest 300 python3 -m pytest -q -rs $PYTESTS ;;
  bench)
    for r in 1 2 3; do
      step "mla-r$r" 120 "$B" --cache-dir "$K" --shapes default
      step "flashmla-r$r" 120 "$CARRY/peers/flashmla_bench" "$LOGS/flashmla-r$r.csv" --no-check --rounds 1
    done
    step host-cost 120 python3 scripts/bench-host-cost.py ;;
  sanitize)
    for tool in memcheck racecheck synccheck; do
      step "sanitizer-$tool" 400 compute-sanitizer --tool $tool --error-exitcode 9 "$B" --cache-dir "$K" --check
    done
    step sanitizer-pytest 400 compute-sanitizer --tool memcheck --error-exitcode 9 \
      python3 -m pytest -q -x $PYTESTS ;;
  fp8)
    for f in fp8_e4m3 fp8_e4m3_token fp8_ds_mla; do
      step "check-$f" 240 "$B" --cache-dir "$K" --check --kv-format $f
      step "check-bench-$f" 240 "$B" --cache-dir "$K" --check --check-bench --kv-format $f
    done
    step pytest-fp8 600 python3 -m pytest -q -rs test/python/test_gpu_fp8_decode.py
    for r in 1 2 3; do
      for f in auto fp8_e4m3 fp8_e4m3_token fp8_ds_mla; do
        step "bar16-$f-r$r" 120 "$B" --cache-dir "$K" --b 128 --n 16 --seq 8192 --sq 1 --kv-format $f
        step "bar128-$f-r$r" 120 "$B" --cache-dir "$K" --b 132 --n 128 --seq 8192 --sq 1 --kv-format $f
      done
    done ;;
  *) echo "unknown mode $MODE" >&2; exit 2 ;;
esac
exit $status
