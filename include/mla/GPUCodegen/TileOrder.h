//===- TileOrder.h - which output tile a CTA of a 2-D grid owns -*- C++ -*-===//
//
// A GEMM-like kernel launched on a (column tiles x row tiles) grid reads one
// A row tile and one B column tile per CTA. The hardware starts CTAs in
// linear block order (x fastest), so the plain mapping sweeps every column
// tile of B for each row tile: a wave of CTAs reads nearly all of B, and a
// large output stream evicts it from L2 before the next wave. Grouping
// `groupRows` row tiles makes consecutive CTAs walk down a few rows within
// each column first, so a wave touches groupRows A tiles and about
// wave/groupRows B tiles (the swizzle CUTLASS calls "grouped raster").
//
//===----------------------------------------------------------------------===//
#ifndef MLA_GPUCODEGEN_TILEORDER_H
#define MLA_GPUCODEGEN_TILEORDER_H

#include "mla/GPUCodegen/DeviceBuilder.h"

namespace mla::gpu_codegen {

/// The (row tile, column tile) of this CTA: gridDim.y row tiles by
/// gridDim.x column tiles, visited in groups of `groupRows` row tiles, each
/// group column by column. A bijection of the grid for any grid shape.
std::pair<mlir::Value, mlir::Value> groupedTile(DeviceBuilder &d,
                                                int64_t groupRows);

} // namespace mla::gpu_codegen

#endif // MLA_GPUCODEGEN_TILEORDER_H
