//===- RandomInputs.h - valid random arguments for mla-run ------*- C++ -*-===//
//
// Random arguments for a function of mla ops, valid for the ops that use
// them: an argument's role comes from the mla operand it feeds (a paged
// cache, a block table, seq_lens, slot_mapping, query offsets, ...), so
// tables index real pages, lengths fit their tables, slots are distinct
// and fp8 caches hold properly encoded rows. Other float arguments are
// standard normal.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TOOLS_MLARUN_RANDOMINPUTS_H
#define MLA_TOOLS_MLARUN_RANDOMINPUTS_H

#include "HostArray.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include <optional>

namespace mla {

struct RandomInputOptions {
  uint64_t seed = 0;
  /// Every request's seq_len, instead of random lengths (for benchmarks).
  std::optional<int64_t> seqLen;
};

/// One array per argument of `func`, whose types must be static tensors.
llvm::Expected<std::vector<HostArray>>
makeRandomInputs(mlir::func::FuncOp func, const RandomInputOptions &options);

} // namespace mla

#endif // MLA_TOOLS_MLARUN_RANDOMINPUTS_H
