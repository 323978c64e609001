//===- DecodeReference.cpp - float64 MLA decode on the host ---------------===//

#include "DecodeReference.h"
#include <algorithm>
#include <cmath>
#include <limits>
#include <thread>

using namespace mla::bench;

/// One query row (request b, query token i, head n).
static void referenceRow(const mla::gpu::DecodeShape &shape,
                         const DecodeInputs &in, int64_t b, int64_t i,
                         int64_t n, double *out, double &lse) {
  int64_t d = shape.rowDim(), l = shape.latentDim, sq = shape.queryRows;
  int64_t len = in.seqLens[b];
  int64_t visible = shape.causal && len > 0 ? len - (sq - 1 - i) : len;
  std::fill(out, out + l, 0.0);
  if (visible <= 0) {
    lse = -std::numeric_limits<double>::infinity();
    return;
  }
  const uint16_t *q = &in.q[((b * sq + i) * shape.numHeads + n) * d];
  auto row = [&](int64_t j) {
    int64_t page = in.blockTable[b * in.maxPages + j / shape.pageSize];
    return &in.cache[(page * shape.pageSize + j % shape.pageSize) * d];
  };
  std::vector<double> scores(visible);
  for (int64_t j = 0; j < visible; ++j) {
    const float *k = row(j);
    double dot = 0;
    for (int64_t c = 0; c < d; ++c)
      dot += static_cast<double>(bf16ToFloat(q[c])) * k[c];
    scores[j] = in.softmaxScale * dot;
  }
  double m = *std::max_element(scores.begin(), scores.end());
  double sum = 0;
  for (int64_t j = 0; j < visible; ++j) {
    double p = std::exp(scores[j] - m);
    sum += p;
    const float *v = row(j);
    for (int64_t c = 0; c < l; ++c)
      out[c] += p * v[c];
  }
  for (int64_t c = 0; c < l; ++c)
    out[c] /= sum;
  lse = m + std::log(sum);
}

void mla::bench::referenceDecode(const gpu::DecodeShape &shape,
                                 const DecodeInputs &in,
                                 std::vector<double> &out,
                                 std::vector<double> &lse, unsigned threads) {
  int64_t sq = shape.queryRows, heads = shape.numHeads, l = shape.latentDim;
  int64_t rows = in.batch * sq * heads;
  threads = std::max(threads, 1u);
  out.assign(rows * l, 0.0);
  lse.assign(rows, 0.0);
  auto work = [&](unsigned t) {
    // Row r is (b, i, n) in out's order; lse is laid out [B, N, Sq].
    for (int64_t r = t; r < rows; r += threads) {
      int64_t b = r / (sq * heads), i = r / heads % sq, n = r % heads;
      referenceRow(shape, in, b, i, n, &out[r * l],
                   lse[(b * heads + n) * sq + i]);
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back(work, t);
  for (std::thread &thread : pool)
    thread.join();
}
