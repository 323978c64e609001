//===- CacheKey.h - keys of the on-disk GPU kernel cache --------*- C++ -*-===//
//
// The key of a compiled kernel image, shared by the compiler side (the JIT,
// mla-aot) and the MLIR-free runtime that looks images up. LLVM Support only.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_CONTRACT_CACHEKEY_H
#define MLA_CONTRACT_CACHEKEY_H

#include "llvm/ADT/StringRef.h"
#include <string>

namespace mla::gpu {

/// Returns the cache key of a kernel image: 32 lowercase hex digits of a
/// 128-bit FNV-1a hash over the four inputs. The key is stable across runs,
/// processes and machines, and changes when any input changes (inputs are
/// length-prefixed, so moving text from one field to the next changes it too).
std::string computeKernelCacheKey(llvm::StringRef kernelSpec,
                                  llvm::StringRef pipeline,
                                  llvm::StringRef toolchainVersion,
                                  llvm::StringRef chip);

} // namespace mla::gpu

#endif // MLA_CONTRACT_CACHEKEY_H
