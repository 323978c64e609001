//===- HostCalls.h - host functions lowered mla code calls ------*- C++ -*-===//
//
// Names shared by the lowerings that emit calls to host functions and the
// runtime that provides them (see RuntimeSymbols.h); no dependencies, so the
// compiler libraries can include it.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_CONTRACT_HOSTCALLS_H
#define MLA_CONTRACT_HOSTCALLS_H

namespace mla {

/// `mla.plan_splits` lowers to a call of this function's C interface
/// (`_mlir_ciface_mla_plan_split_bounds(seq_lens, bounds, policy,
/// num_sm_parts, num_heads, query_rows)` on memref descriptors).
inline constexpr const char *kPlanSplitBoundsFn = "mla_plan_split_bounds";

} // namespace mla

#endif // MLA_CONTRACT_HOSTCALLS_H
