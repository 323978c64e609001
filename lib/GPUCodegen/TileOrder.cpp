//===- TileOrder.cpp - grouped raster order of output tiles ---------------===//

#include "mla/GPUCodegen/TileOrder.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mla::gpu_codegen;

std::pair<Value, Value> mla::gpu_codegen::groupedTile(DeviceBuilder &d,
                                                      int64_t groupRows) {
  ImplicitLocOpBuilder &b = d.b;
  Value cols = NVVM::GridDimXOp::create(b, d.i32);
  Value rows = NVVM::GridDimYOp::create(b, d.i32);
  Value id = d.add(d.mul(d.blockIdY(), cols), d.blockIdX());
  Value perGroup = d.mul(d.c32(groupRows), cols);
  Value firstRow = d.mul(d.divu(id, perGroup), d.c32(groupRows));
  Value inGroup = d.remu(id, perGroup);
  // The last group may hold fewer rows.
  Value groupHeight = d.minsi(d.c32(groupRows), d.sub(rows, firstRow));
  Value row = d.add(firstRow, d.remu(inGroup, groupHeight));
  Value col = d.divu(inGroup, groupHeight);
  return {row, col};
}
