//===- Passes.h - mla conversion passes -------------------------*- C++ -*-===//
#ifndef MLA_CONVERSION_PASSES_H
#define MLA_CONVERSION_PASSES_H

#include "mla/Conversion/MLAToLinalg/MLAToLinalg.h"
#include "mlir/Pass/Pass.h"

namespace mla {

#define GEN_PASS_DECL
#include "mla/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "mla/Conversion/Passes.h.inc"

} // namespace mla

#endif // MLA_CONVERSION_PASSES_H
