//===- MLADialect.cpp - the mla dialect -----------------------------------===//
//
// Registers the mla ops and attributes and verifies the discardable
// `mla.target` attribute.
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

LogicalResult MLADialect::verifyOperationAttribute(Operation *op,
                                                   NamedAttribute attr) {
  if (attr.getName() != getTargetAttrName())
    return op->emitError() << "unknown mla attribute '" << attr.getName().getValue()
                           << "'; the only one is '" << getTargetAttrName()
                           << "'";
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
