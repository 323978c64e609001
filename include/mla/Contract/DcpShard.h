//===- DcpShard.h - which cache tokens a DCP rank owns ----------*- C++ -*-===//
//
// Decode context parallelism (DCP) shards every request's latent cache over
// `world` ranks in runs of `interleave` tokens, as vLLM lays it out: global
// token t lives on rank (t / interleave) % world, at local position
// (t / (world * interleave)) * interleave + t % interleave. vLLM's default
// interleave is 1 (token t on rank t % world); a whole page
// (interleave = page_size) keeps global pages whole, so rank r's pages are
// the block table's columns r, r + world, ...
//
// This is the one place the rule is written for C++: the dialect's verifier
// and CPU lowering, and mla-run's input checks, call it or build IR that
// computes the same expression. python/mla/dcp.py mirrors it for the
// Python runtime.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_CONTRACT_DCPSHARD_H
#define MLA_CONTRACT_DCPSHARD_H

#include <algorithm>
#include <cstdint>

namespace mla::dcp {

/// How many of the global positions [0, n) rank `rank` of `world` owns with
/// runs of `interleave` tokens: its local sequence length when n is the
/// global one, and the local positions a causal query row may see when n is
/// the number of global positions the row sees. n < 0 counts as 0.
inline int64_t ownedTokens(int64_t n, int64_t world, int64_t rank,
                           int64_t interleave) {
  if (n <= 0)
    return 0;
  int64_t cycle = world * interleave;
  int64_t rest = n % cycle - rank * interleave;
  return n / cycle * interleave + std::clamp<int64_t>(rest, 0, interleave);
}

/// The global position of rank `rank`'s local position `local`.
inline int64_t globalPosition(int64_t local, int64_t world, int64_t rank,
                              int64_t interleave) {
  return local / interleave * world * interleave + rank * interleave +
         local % interleave;
}

} // namespace mla::dcp

#endif // MLA_CONTRACT_DCPSHARD_H
