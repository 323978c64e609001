//===- MLADialect.cpp - the mla dialect -----------------------------------===//
//
// Registers the mla ops and attributes and verifies the discardable
// `mla.target` and `mla.padded_heads` attributes.
//
//===----------------------------------------------------------------------===//

#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Dialect/MLA/IR/MLAAttrs.h"
#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mlir/IR/BuiltinOps.h"

using namespace mlir;
using namespace mla;

#include "mla/Dialect/MLA/IR/MLAOpsDialect.cpp.inc"

void MLADialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "mla/Dialect/MLA/IR/MLAOps.cpp.inc"
      >();
  registerAttributes();
}

/// `mla.padded_heads`: the head count a decode kernel pads q to, so at
/// least the op's N (q dim 2 of a decode, dim 1 of an attention).
static LogicalResult verifyPaddedHeads(Operation *op, Attribute value) {
  StringLiteral name = MLADialect::getPaddedHeadsAttrName();
  Value q;
  unsigned headDim = 2;
  if (auto decode = dyn_cast<DecodeOp>(op)) {
    q = decode.getQ();
    headDim = decode.isVarlen() ? 1 : 2;
  } else if (auto partial = dyn_cast<DecodePartialOp>(op)) {
    q = partial.getQ();
    headDim = partial.isVarlen() ? 1 : 2;
  } else if (auto attention = dyn_cast<AttentionOp>(op)) {
    q = attention.getQ();
    headDim = 1;
  } else {
    return op->emitError() << "'" << name
                           << "' belongs on mla.decode, mla.decode_partial or "
                              "mla.attention, not on '"
                           << op->getName() << "'";
  }
  auto padded = dyn_cast<IntegerAttr>(value);
  if (!padded || !padded.getType().isSignlessInteger(64))
    return op->emitError() << "'" << name << "' must be an i64, got " << value;
  auto qTy = cast<RankedTensorType>(q.getType());
  int64_t heads =
      qTy.getRank() > headDim ? qTy.getDimSize(headDim) : ShapedType::kDynamic;
  if (padded.getInt() <= 0 ||
      (!ShapedType::isDynamic(heads) && padded.getInt() < heads))
    return op->emitError() << "'" << name << "' " << padded.getInt()
                           << " must be at least the query head count N = "
                           << heads;
  return success();
}

LogicalResult MLADialect::verifyOperationAttribute(Operation *op,
                                                   NamedAttribute attr) {
  if (attr.getName() == getPaddedHeadsAttrName())
    return verifyPaddedHeads(op, attr.getValue());
  if (attr.getName() == getGpuTilingAttrName()) {
    if (!isa<GpuTilingAttr>(attr.getValue()))
      return op->emitError() << "'" << getGpuTilingAttrName()
                             << "' must be a #mla.gpu_tiling attribute, got "
                             << attr.getValue();
    if (!isa<DecodeOp, DecodePartialOp>(op))
      return op->emitError()
             << "'" << getGpuTilingAttrName()
             << "' belongs on mla.decode or mla.decode_partial, "
             << "not on '" << op->getName() << "'";
    return success();
  }
  if (attr.getName() != getTargetAttrName())
    return op->emitError() << "unknown mla attribute '"
                           << attr.getName().getValue()
                           << "'; the known ones are '" << getTargetAttrName()
                           << "', '" << getPaddedHeadsAttrName() << "' and '"
                           << getGpuTilingAttrName() << "'";
  if (!isa<TargetAttr>(attr.getValue()))
    return op->emitError() << "'" << getTargetAttrName()
                           << "' must be a #mla.target attribute, got "
                           << attr.getValue();
  if (!isa<ModuleOp>(op))
    return op->emitError() << "'" << getTargetAttrName()
                           << "' belongs on a builtin.module, not on '"
                           << op->getName() << "'";
  return success();
}
