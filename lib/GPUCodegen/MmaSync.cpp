//===- MmaSync.cpp - warp-level mma.sync m16n8k16 with ldmatrix -----------===//

#include "mla/GPUCodegen/MmaSync.h"

using namespace mlir;
using namespace mla::gpu_codegen;

MmaFragA mla::gpu_codegen::loadFragA(DeviceBuilder &d, Value sharedPtr) {
  return {d.ldmatrixX4(sharedPtr, /*trans=*/false)};
}

std::array<MmaFragB, 2>
mla::gpu_codegen::loadFragBPair(DeviceBuilder &d, Value sharedPtr, bool trans) {
  std::array<Value, 4> r = d.ldmatrixX4(sharedPtr, trans);
  return {MmaFragB{{r[0], r[1]}}, MmaFragB{{r[2], r[3]}}};
}

MmaAccum mla::gpu_codegen::mmaSync(DeviceBuilder &d, const MmaFragA &a,
                                   const MmaFragB &b, const MmaAccum &c,
                                   bool bf16) {
  return {d.mma16816(a.regs, b.regs, c.regs, bf16)};
}
