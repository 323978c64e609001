//===- DecodeReference.h - float64 MLA decode on the host, for --check ----===//
//
// The simplest correct decode (primer sections 5 and 6): for every query row,
// whole-sequence scores, softmax and weighted sum in double precision, with
// no paging tricks, tiling or online softmax, so that it shares no structure
// with the GPU kernels it checks.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TOOLS_MLABENCH_DECODEREFERENCE_H
#define MLA_TOOLS_MLABENCH_DECODEREFERENCE_H

#include "Bf16.h"
#include "mla/Contract/KernelABI.h"
#include <cstdint>
#include <vector>

namespace mla::bench {

/// Host copies of one decode's inputs: q as bf16 bit patterns, the cache as
/// the values its rows stand for (bf16 rows decoded, fp8 rows dequantised).
struct DecodeInputs {
  int64_t batch = 0, maxPages = 0, numPages = 0;
  std::vector<uint16_t> q;         // [B, Sq, N, L+R]
  std::vector<float> cache;        // [numPages, page, L+R]
  std::vector<int32_t> blockTable; // [B, maxPages]
  std::vector<int32_t> seqLens;    // [B]
  double softmaxScale = 0;
};

/// out [B, Sq, N, L] and lse [B, N, Sq] in double; a row that sees no
/// position has out 0 and lse -inf. Causal row i of request b sees positions
/// [0, seq_lens[b] - Sq + i]. Runs on `threads` host threads.
void referenceDecode(const gpu::DecodeShape &shape, const DecodeInputs &in,
                     std::vector<double> &out, std::vector<double> &lse,
                     unsigned threads);

} // namespace mla::bench

#endif // MLA_TOOLS_MLABENCH_DECODEREFERENCE_H
