#!/usr/bin/env bash
# Makes gpu-carry/ (or $1) for a GPU machine without MLIR: the MLIR-free
# runtime (the build's mla-gpu-carry target), a kernel cache holding every
# kernel `mla-bench --check`, its timing shapes, every mode of
# mla-prefill-bench and `mla-aot --shapes deepseek` use (compiled here with
# mla-aot), and the peer benchmarks of ../shared/tools (FlashMLA's decode,
# PyTorch SDPA's prefill) when present. Then run scripts/gpu-verify.sh or
# scripts/bench-prefill.sh there.
set -euo pipefail
OUT=${1:-gpu-carry}
BUILD=${BUILD:-build}
bash "$(dirname "$0")/build-gpu-carry.sh" "$OUT"
# The compiler and the spec listers must be this build's too: a stale mla-aot
# stamps its kernels with an older codegen fingerprint than the carried
# runtime looks up, and every lookup there misses.
ninja -C "$BUILD" mla-aot mla-bench mla-prefill-bench
specs=$(mktemp)
trap 'rm -f "$specs"' EXIT
# The sm_90a decode variants the GPU tests and mla-bench --tile force
# (test/python/conftest.py SM90_DECODE_TILES), besides the default tiling.
tiles="64x2x64x2w 64x2x64x2p 64x2x64x2s"
for extra in "" --check; do
  "$BUILD/bin/mla-bench" --list-specs --chip=sm_90a $extra |
    grep -E "^(decode|cache_write|absorb_q|up_proj_out) " >> "$specs"
  for tile in $tiles; do
    "$BUILD/bin/mla-bench" --list-specs --chip=sm_90a --tile=$tile $extra |
      grep -E "^decode " >> "$specs"
  done
done
"$BUILD/bin/mla-prefill-bench" --list-specs --chip=sm_90a >> "$specs"
# The f16 decode of test_gpu_decode.py::test_float16 (the deepseek set is bf16).
echo "decode chip=sm_90a N=16 Sq=1 L=512 R=64 page=64 dtype=f16 causal=0 tile=64x2x64x2w" >> "$specs"
# mla.dcp's combine (test_gpu_dcp.py, scripts/bench-dcp.py): float32 merges of the ranks' latent outputs.
for n in 16 128; do echo "merge_states chip=sm_90a N=$n H=512 dtype=f32" >> "$specs"; done
# Each variant at the deepseek decode shapes test_gpu_decode.py and
# test_gpu_graphs.py use (mla-aot --shapes deepseek builds the default's).
for tile in $tiles; do
  for n in 16 32 64 128; do
    for mode in "Sq=1 L=512 R=64 page=64 dtype=bf16 causal=0" "Sq=2 L=512 R=64 page=64 dtype=bf16 causal=1"; do
      echo "decode chip=sm_90a N=$n $mode tile=$tile" >> "$specs"
    done
  done
  echo "decode chip=sm_90a N=16 Sq=1 L=512 R=64 page=64 dtype=f16 causal=0 tile=$tile" >> "$specs"
done
# The multicast build (tile 64x2x64x2m, N a multiple of 128):
# test_gpu_decode.py's test_multicast_matches_reference, and mla-bench --tile
# at its default shapes and --check (the cases it can run).
for mode in "Sq=1 L=512 R=64 page=64 dtype=bf16 causal=0" "Sq=2 L=512 R=64 page=64 dtype=bf16 causal=1"; do
  echo "decode chip=sm_90a N=128 $mode tile=64x2x64x2m" >> "$specs"
done
for extra in "" --check; do
  "$BUILD/bin/mla-bench" --list-specs --chip=sm_90a --tile=64x2x64x2m $extra |
    grep -E "^decode " >> "$specs"
done
# The fp8 decode at N = 16 with each tile the tiling may choose there
# (test_gpu_fp8_decode.py FP8_N16_TILES; also `mla-bench --kv-format F
# --tile T` at N = 16; 16x8x64x3 and 16x4x64x3 for timing only): fp8_ds_mla
# does not fit the wgmma tile.
for format in fp8_e4m3 fp8_e4m3_token fp8_ds_mla; do
  for tile in 16x4x64x2 16x8x64x2 16x8x64x3 16x4x64x3 16x4x32x2 16x4x32x3 16x2x32x2 16x2x32x3 16x2x16x2 16x2x16x3 16x1x32x3 16x1x16x4 32x2x32x2 64x2x64x2w; do
    if [ "$format" = fp8_ds_mla ] && [ "$tile" = 64x2x64x2w ]; then continue; fi
    for mode in "Sq=1 L=512 R=64 page=64 dtype=bf16 causal=0" "Sq=2 L=512 R=64 page=64 dtype=bf16 causal=1"; do
      echo "decode chip=sm_90a N=16 $mode format=$format tile=$tile" >> "$specs"
    done
  done
done
# The seesaw build over fp8_e4m3 and fp8_ds_mla (opt-in tile 64x2x64x2s;
# test_gpu_fp8_decode.py's test_seesaw_* and test_ds_mla_scales_far_apart,
# and mla-bench --tile).
for format in fp8_e4m3 fp8_ds_mla; do
  for n in 16 128; do
    for mode in "Sq=1 L=512 R=64 page=64 dtype=bf16 causal=0" "Sq=2 L=512 R=64 page=64 dtype=bf16 causal=0" \
                "Sq=4 L=512 R=64 page=64 dtype=bf16 causal=0" "Sq=2 L=512 R=64 page=64 dtype=bf16 causal=1"; do
      echo "decode chip=sm_90a N=$n $mode format=$format tile=64x2x64x2s" >> "$specs"
    done
  done
done
# The 16-row raw-ring fp8 kernels with causal rows: 8 heads x 2 query tokens
# (test_gpu_fp8_decode.py's test_causal_rows_of_the_16_row_raw_kernel).
for format in fp8_e4m3 fp8_ds_mla; do
  echo "decode chip=sm_90a N=8 Sq=2 L=512 R=64 page=64 dtype=bf16 causal=1 format=$format" >> "$specs"
done
# Varlen decodes (query_start_loc): test_gpu_varlen_decode.py's (largest draft
# 8 and 3, causal and not, N = 16 and 128) and `mla-bench --varlen` with
# drafts up to 2 (against the uniform Sq=2 kernel), 4 or 8 at N = 128.
for spec in "N=16 Sq=8 causal=1" "N=16 Sq=8 causal=0" "N=16 Sq=3 causal=1" \
            "N=128 Sq=8 causal=1" "N=128 Sq=4 causal=1" "N=128 Sq=2 causal=1"; do
  echo "decode chip=sm_90a $spec L=512 R=64 page=64 dtype=bf16 varlen=1" >> "$specs"
done
# Varlen decodes over fp8 caches (test_gpu_fp8_decode.py's varlen tests: largest
# draft 8, N = 16 causal and not, N = 128 causal).
for format in fp8_e4m3 fp8_e4m3_token fp8_ds_mla; do
  for spec in "N=16 Sq=8 causal=1" "N=16 Sq=8 causal=0" "N=128 Sq=8 causal=1"; do
    echo "decode chip=sm_90a $spec L=512 R=64 page=64 dtype=bf16 format=$format varlen=1" >> "$specs"
  done
done
sort -u -o "$specs" "$specs"
"$BUILD/bin/mla-aot" --cache-dir "$OUT/kernel-cache" --shapes deepseek --spec-file "$specs"
tools=$(dirname "$0")/../../shared/tools
for peer in flashmla_bench bench_prefill_sdpa.py; do
  if [ -f "$tools/$peer" ]; then mkdir -p "$OUT/peers" && cp "$tools/$peer" "$OUT/peers/"; fi
done
du -sh "$OUT"
