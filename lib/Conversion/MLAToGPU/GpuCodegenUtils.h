//===- GpuCodegenUtils.h - moved to mla/GPUCodegen/DeviceBuilder.h --------===//
//
// Kept only for DecodeSM100.cpp, which is being rewritten on top of
// mla/GPUCodegen in parallel; delete this file when that lands.
//
//===----------------------------------------------------------------------===//
#include "mla/GPUCodegen/DeviceBuilder.h"
