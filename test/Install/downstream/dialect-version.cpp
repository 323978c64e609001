// Loads the mla dialect from the installed MLA::MLAIR and prints an op of it,
// so that a C++ user's link against the installed library is exercised.
#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

int main() {
  mlir::MLIRContext context;
  context.getOrLoadDialect<mla::MLADialect>();
  llvm::outs() << "loaded dialect '" << mla::MLADialect::getDialectNamespace()
               << "'\n";
  return 0;
}
