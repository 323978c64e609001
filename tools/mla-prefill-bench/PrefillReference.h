//===- PrefillReference.h - float64 prefill pieces on the host, for --check
//===//
//
// The simplest correct `mla.mha` and `mla.up_proj_kv` (primer section 7):
// whole-row scores, softmax and weighted sums, and plain dot products, in
// double precision over the same bf16 inputs, so that they share no
// structure (tiling, online softmax, staging) with the kernels they check.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TOOLS_MLAPREFILLBENCH_PREFILLREFERENCE_H
#define MLA_TOOLS_MLAPREFILLBENCH_PREFILLREFERENCE_H

#include "mla/Contract/PrefillABI.h"
#include <cstdint>
#include <vector>

namespace mla::bench {

/// Host copies of one varlen attention's inputs, as bf16 bit patterns.
struct MhaInputs {
  int64_t tokens = 0, keys = 0;
  std::vector<uint16_t> q, k, v; // [tokens|keys, N, qkDim|vDim]
  std::vector<int32_t> cuQ, cuK; // [B + 1]
};

/// out [tokens, N, V] and lse [N, tokens] (natural log). Request b's query i
/// of q_len sees keys [0, k_len), or [0, k_len - q_len + i] when causal; a
/// row that sees no key, or lies past cuQ[B], has out 0 and lse -inf.
void referenceMha(const gpu::MhaShape &shape, const MhaInputs &in,
                  std::vector<double> &out, std::vector<double> &lse);

/// kNope [rows, N, P] and v [rows, N, V] of latent [rows, L] times
/// kvBProj [N*(P+V), L] transposed (bf16 bit patterns in, double out).
void referenceUpProjKv(const gpu::UpProjKvShape &shape, int64_t rows,
                       const std::vector<uint16_t> &latent,
                       const std::vector<uint16_t> &kvBProj,
                       std::vector<double> &kNope, std::vector<double> &v);

} // namespace mla::bench

#endif // MLA_TOOLS_MLAPREFILLBENCH_PREFILLREFERENCE_H
