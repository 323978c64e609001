//===- Version.cpp - mla's release and the LLVM it was built with ---------===//

#include "mla/Contract/Version.h"
#include "Version.inc"
#include "llvm/Support/raw_ostream.h"

const char *mla::getVersion() { return MLA_VERSION_STRING; }

const char *mla::getLLVMVersion() { return MLA_LLVM_VERSION_STRING; }

void mla::printVersion(llvm::raw_ostream &os) {
  os << "mla version " << getVersion() << "\n  built with LLVM "
     << getLLVMVersion() << "\n";
}
