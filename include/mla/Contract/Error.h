//===- Error.h - errors reported by the mla runtime -------------*- C++ -*-===//
//
// The runtime never aborts on user input: every failure is an llvm::Error of
// this class, whose kind tells a binding which exception to raise (Python
// raises ValueError for invalid arguments, RuntimeError otherwise).
//
//===----------------------------------------------------------------------===//

#ifndef MLA_CONTRACT_ERROR_H
#define MLA_CONTRACT_ERROR_H

#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

namespace mla {

enum class RuntimeErrorKind {
  /// The caller's arrays or options are wrong; nothing was compiled or run.
  InvalidArgument,
  /// Parsing, the pass pipeline or LLVM code generation failed.
  Compile,
  /// The compiled code could not be looked up or run.
  Execution,
};

class RuntimeError : public llvm::ErrorInfo<RuntimeError> {
public:
  static char ID;

  RuntimeError(RuntimeErrorKind kind, std::string message)
      : kind(kind), message(std::move(message)) {}

  RuntimeErrorKind getKind() const { return kind; }
  const std::string &getMessage() const { return message; }

  void log(llvm::raw_ostream &os) const override { os << message; }
  std::error_code convertToErrorCode() const override {
    return llvm::inconvertibleErrorCode();
  }

private:
  RuntimeErrorKind kind;
  std::string message;
};

inline llvm::Error makeInvalidArgumentError(const llvm::Twine &message) {
  return llvm::make_error<RuntimeError>(RuntimeErrorKind::InvalidArgument,
                                        message.str());
}
inline llvm::Error makeCompileError(const llvm::Twine &message) {
  return llvm::make_error<RuntimeError>(RuntimeErrorKind::Compile,
                                        message.str());
}
inline llvm::Error makeExecutionError(const llvm::Twine &message) {
  return llvm::make_error<RuntimeError>(RuntimeErrorKind::Execution,
                                        message.str());
}

} // namespace mla

#endif // MLA_CONTRACT_ERROR_H
