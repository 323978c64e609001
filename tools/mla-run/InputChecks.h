//===- InputChecks.h - mla-run's checks of integer tables -------*- C++ -*-===//
//
// Compiled code trusts its index tables (block tables, seq_lens, slots,
// query offsets): a page past the cache or a length past the block table
// reads or writes out of bounds. The verifiers check such tables only when
// they are constants; mla-run reads them from files, so it checks their
// values against the function's other arguments before anything runs.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TOOLS_MLARUN_INPUTCHECKS_H
#define MLA_TOOLS_MLARUN_INPUTCHECKS_H

#include "HostArray.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include <string>
#include <vector>

namespace mla {

/// Checks every integer table the mla ops of `func` index with against the
/// shapes and values it indexes: block_table pages in [0, num_pages) for
/// every page a request reads, seq_lens in [0, max_pages * page_size] (and
/// at least the query rows where the op needs it), query offsets starting
/// at 0 and never decreasing, slot_mapping in the cache or negative
/// (padding), gather starts and row counts inside the block table.
/// `inputs[i]` is the value of argument i and `names[i]` says where it came
/// from; an error names the argument, the element and the limit.
llvm::Error checkInputTables(mlir::func::FuncOp func,
                             llvm::ArrayRef<HostArray> inputs,
                             llvm::ArrayRef<std::string> names);

} // namespace mla

#endif // MLA_TOOLS_MLARUN_INPUTCHECKS_H
