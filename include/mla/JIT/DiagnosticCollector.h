//===- DiagnosticCollector.h - Diagnostics of a compile as text -*- C++ -*-===//
//
// Header-only, shared by the CPU executor (MLARuntimeCpu) and the GPU JIT
// (MLAGpuJit).
//
//===----------------------------------------------------------------------===//
#ifndef MLA_JIT_DIAGNOSTICCOLLECTOR_H
#define MLA_JIT_DIAGNOSTICCOLLECTOR_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"
#include <string>

namespace mla {

/// Collects the diagnostics emitted while it is alive, so that a failed
/// compile returns the compiler's own messages to callers without a terminal.
class DiagnosticCollector {
public:
  explicit DiagnosticCollector(mlir::MLIRContext &context)
      : os(text), handler(&context, [this](mlir::Diagnostic &diag) {
          append(diag);
          return mlir::success();
        }) {}

  std::string take() { return std::move(text); }

private:
  void append(mlir::Diagnostic &diag) {
    os << diag.getLocation() << ": ";
    switch (diag.getSeverity()) {
    case mlir::DiagnosticSeverity::Error:
      os << "error: ";
      break;
    case mlir::DiagnosticSeverity::Warning:
      os << "warning: ";
      break;
    case mlir::DiagnosticSeverity::Note:
      os << "note: ";
      break;
    case mlir::DiagnosticSeverity::Remark:
      os << "remark: ";
      break;
    }
    os << diag << "\n";
    for (mlir::Diagnostic &note : diag.getNotes())
      os << note.getLocation() << ": note: " << note << "\n";
  }

  std::string text;
  llvm::raw_string_ostream os;
  mlir::ScopedDiagnosticHandler handler;
};

} // namespace mla

#endif // MLA_JIT_DIAGNOSTICCOLLECTOR_H
