//===- MixedBatch.h - Which requests of a batch take decode -----*- C++ -*-===//
//
// The rule `mla-select-algorithm` splits an mla.attention batch by, written
// once for the pass and the runtimes (primer section 8). A request with
// 1 <= q_len <= threshold takes the absorbed MQA path (absorb_q, decode,
// up_proj_out), every other one the up-projected prefill path. The pass
// applies it per request when query_start_loc is a constant; for a batch
// known only at run time, mla.decode's static Sq limits the decode path to
// the leading run of single-row requests, so only thresholds below 1
// (prefill only) and 1 are meaningful there, and a runtime that reads the
// batch on the host splits it the same way.
//
// Contract layer: the C++ standard library and LLVM Support only.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_CONTRACT_MIXEDBATCH_H
#define MLA_CONTRACT_MIXEDBATCH_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"
#include <cstdint>

namespace mla {

/// The query rows of every decode request of a batch split at run time.
inline constexpr int64_t kRuntimeDecodeQueryLen = 1;

/// Whether a request of `queryLen` new tokens takes the decode path under
/// `threshold` (a request without tokens takes no path).
inline bool takesDecodePath(int64_t queryLen, int64_t threshold) {
  return queryLen >= 1 && queryLen <= threshold;
}

/// Success when a batch known only at run time can be split with
/// `threshold` (at most kRuntimeDecodeQueryLen), else the reason.
llvm::Error checkRuntimeDecodeThreshold(int64_t threshold);

/// The leading requests of a batch known at run time that take the decode
/// path: the run of requests with q_len = kRuntimeDecodeQueryLen from
/// request 0 on, none when `threshold` is below it. `queryStartLoc` has
/// B+1 entries. Request i of the run owns token i.
int64_t countLeadingDecodes(llvm::ArrayRef<int32_t> queryStartLoc,
                            int64_t threshold);

} // namespace mla

#endif // MLA_CONTRACT_MIXEDBATCH_H
