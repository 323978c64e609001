//===- Version.h - mla's release and the LLVM it was built with -*- C++ -*-===//
//
// One version for every artifact (tools, C APIs, the Python package, the
// CMake package), set by MLA_VERSION in the top-level CMakeLists.txt.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_CONTRACT_VERSION_H
#define MLA_CONTRACT_VERSION_H

namespace llvm {
class raw_ostream;
} // namespace llvm

namespace mla {

/// mla's release, e.g. "0.1.0".
const char *getVersion();

/// The LLVM/MLIR release mla was built against, e.g. "22.1.8".
const char *getLLVMVersion();

/// Prints "mla version <v>" and the LLVM it was built with; tools pass it to
/// llvm::cl::AddExtraVersionPrinter so that --version names both.
void printVersion(llvm::raw_ostream &os);

} // namespace mla

#endif // MLA_CONTRACT_VERSION_H
