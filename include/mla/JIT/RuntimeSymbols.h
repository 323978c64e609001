//===- RuntimeSymbols.h - host functions JIT code calls ---------*- C++ -*-===//
//
// Functions that lowered mla IR calls on the host (through C interfaces),
// and the symbol map the CPU executor registers them with.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_JIT_RUNTIMESYMBOLS_H
#define MLA_JIT_RUNTIMESYMBOLS_H

#include "mla/Contract/HostCalls.h"
#include "llvm/ExecutionEngine/Orc/Mangling.h"
#include "llvm/ExecutionEngine/Orc/Shared/ExecutorSymbolDef.h"

namespace mla {

/// Symbols for ExecutionEngine::registerSymbols.
llvm::orc::SymbolMap runtimeSymbols(llvm::orc::MangleAndInterner interner);

} // namespace mla

#endif // MLA_JIT_RUNTIMESYMBOLS_H
