//===- MLAAttrs.cpp - mla attributes --------------------------------------===//
//
// Cache layouts (row widths, element types) and targets, with their
// verifiers.
//
//===----------------------------------------------------------------------===//

#include "mla/Dialect/MLA/IR/MLAAttrs.h"
#include "mla/Contract/CacheProjectionABI.h"
#include "mla/Contract/KernelABI.h"
#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"
#include <cmath>

using namespace mlir;
using namespace mla;

#include "mla/Dialect/MLA/IR/MLAEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "mla/Dialect/MLA/IR/MLAAttrs.cpp.inc"

void MLADialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "mla/Dialect/MLA/IR/MLAAttrs.cpp.inc"
      >();
}

/// Page sizes are multiples of this (every kernel tiles KV in 16-row steps).
static constexpr int64_t kPageGranule = 16;

LogicalResult
CacheLayoutAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                        RowFormat format, std::optional<int64_t> pageSize,
                        FloatAttr scale) {
  if (pageSize && (*pageSize <= 0 || *pageSize % kPageGranule != 0))
    return emitError() << "page size " << *pageSize
                       << " is not a positive multiple of " << kPageGranule;
  if (format == RowFormat::fp8_e4m3) {
    if (!scale)
      return emitError() << "format fp8_e4m3 needs a per-tensor 'scale'";
    double s = scale.getValueAsDouble();
    if (!(s > 0.0) || !std::isfinite(s))
      return emitError() << "fp8 scale " << s << " must be positive and finite";
  } else if (scale) {
    return emitError() << "'scale' is only meaningful for format fp8_e4m3, not "
                       << stringifyRowFormat(format)
                       << " (its scales are stored in the rows)";
  }
  return success();
}

bool CacheLayoutAttr::isFp8() const {
  switch (getFormat()) {
  case RowFormat::fp8_e4m3:
  case RowFormat::fp8_e4m3_token:
  case RowFormat::fp8_ds_mla:
    return true;
  default:
    return false;
  }
}

Type CacheLayoutAttr::getCacheElementType(MLIRContext *ctx) const {
  Builder b(ctx);
  switch (getFormat()) {
  case RowFormat::bf16:
    return b.getBF16Type();
  case RowFormat::f16:
    return b.getF16Type();
  case RowFormat::f32:
    return b.getF32Type();
  default:
    return b.getI8Type();
  }
}

int64_t CacheLayoutAttr::getRowWidth(int64_t latentDim, int64_t ropeDim) const {
  switch (getFormat()) {
  case RowFormat::fp8_e4m3_token:
    // Two f32 scales (latent part, RoPE part) after the e4m3 row.
    return latentDim + ropeDim + 8;
  case RowFormat::fp8_ds_mla:
    // e4m3 latent, one f32 scale per 128 latent entries, bf16 RoPE.
    return mla::gpu::dsMlaRopeOffset(latentDim) + 2 * ropeDim;
  default:
    return latentDim + ropeDim;
  }
}

LogicalResult
SplitPlanAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      SplitPolicy policy, int64_t numSmParts,
                      DenseI32ArrayAttr bounds) {
  if (numSmParts <= 0)
    return emitError() << "num_sm_parts " << numSmParts << " must be positive";
  if (bounds)
    for (auto [i, v] : llvm::enumerate(bounds.asArrayRef()))
      if (v < 0)
        return emitError() << "split bound " << i << " is negative (" << v
                           << ")";
  return success();
}

LogicalResult DcpShardAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   int64_t worldSize, int64_t rank,
                                   int64_t interleave) {
  if (worldSize <= 0)
    return emitError() << "world_size " << worldSize << " must be positive";
  if (rank < 0 || rank >= worldSize)
    return emitError() << "rank " << rank
                       << " must be in [0, world_size = " << worldSize << ")";
  if (interleave <= 0)
    return emitError() << "interleave " << interleave
                       << " must be positive (tokens per run; vLLM's "
                          "default is 1)";
  return success();
}

LogicalResult TargetAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 Chip chip, std::optional<int64_t> numSms) {
  if (numSms && *numSms <= 0)
    return emitError() << "num_sms " << *numSms << " must be positive";
  return success();
}

LogicalResult
GpuTilingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      int64_t rowsPerCta, int64_t warpsN, int64_t kvBlock,
                      int64_t stages, bool wgmma, bool pipelined, bool seesaw,
                      bool persistent, bool multicast) {
  if (rowsPerCta <= 0 || rowsPerCta % 16 != 0 || rowsPerCta > 128)
    return emitError() << "rows_per_cta " << rowsPerCta
                       << " must be a positive multiple of 16, at most 128";
  if (warpsN <= 0 || (rowsPerCta / 16) * warpsN > 16)
    return emitError() << "warps_n " << warpsN << " must be positive with at "
                       << "most 16 warps per CTA ((rows_per_cta/16) * warps_n)";
  if (kvBlock <= 0 || kvBlock % 16 != 0)
    return emitError() << "kv_block " << kvBlock
                       << " must be a positive multiple of 16";
  if (stages < 1 || stages > 8)
    return emitError() << "stages " << stages << " must be in [1, 8]";
  if (pipelined && !wgmma)
    return emitError() << "pipelined needs wgmma";
  if (seesaw && !pipelined)
    return emitError() << "seesaw needs pipelined";
  if (persistent && !seesaw)
    return emitError() << "persistent needs seesaw";
  if (multicast && (!seesaw || persistent))
    return emitError() << "multicast needs seesaw and not persistent";
  return success();
}

gpu::DecodeTiling GpuTilingAttr::getTiling() const {
  gpu::DecodeTiling t;
  t.rowsPerCta = getRowsPerCta(), t.warpsN = getWarpsN(),
  t.kvBlock = getKvBlock(), t.stages = getStages();
  t.wgmma = getWgmma(), t.pipelined = getPipelined(), t.seesaw = getSeesaw(),
  t.persistent = getPersistent(), t.multicast = getMulticast();
  return t;
}

GpuTilingAttr GpuTilingAttr::get(MLIRContext *context,
                                 const gpu::DecodeTiling &t) {
  return get(context, t.rowsPerCta, t.warpsN, t.kvBlock, t.stages, t.wgmma,
             t.pipelined, t.seesaw, t.persistent, t.multicast);
}
