#!/usr/bin/env bash
# Builds a copy of mla-gpu-smoke with LLVM Support linked statically, plus the
# sm_90a cubin of its test kernel, into gpu-carry/: GPU machines without
# LLVM/MLIR (the H200) can run them. The normal build links libLLVM.so.
set -euo pipefail
OUT=${1:-gpu-carry}
LLVM=/usr/lib/llvm-22
mkdir -p "$OUT"
g++ -O2 -std=c++17 -I include -I "$LLVM/include" -I /usr/local/cuda/include \
  tools/mla-gpu-smoke/mla-gpu-smoke.cpp lib/Runtime/Gpu/CudaDriver.cpp \
  lib/Runtime/Gpu/KernelCache.cpp "$LLVM/lib/libLLVMSupport.a" \
  "$LLVM/lib/libLLVMDemangle.a" -lz -lzstd -ldl -lpthread \
  -o "$OUT/mla-gpu-smoke"
/usr/local/cuda/bin/ptxas -arch=sm_90a test/Gpu/Inputs/iota2.ptx -o "$OUT/iota2.cubin"
