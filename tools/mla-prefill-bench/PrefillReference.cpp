//===- PrefillReference.cpp - float64 prefill pieces on the host ----------===//

#include "PrefillReference.h"
#include "Bf16.h"
#include <algorithm>
#include <cmath>
#include <limits>

using namespace mla::bench;

static std::vector<double> widen(const std::vector<uint16_t> &values) {
  std::vector<double> result(values.size());
  std::transform(values.begin(), values.end(), result.begin(),
                 [](uint16_t v) { return double(bf16ToFloat(v)); });
  return result;
}

void mla::bench::referenceMha(const gpu::MhaShape &shape, const MhaInputs &in,
                              std::vector<double> &out,
                              std::vector<double> &lse) {
  int64_t heads = shape.numHeads, d = shape.qkDim, dv = shape.vDim;
  std::vector<double> q = widen(in.q), k = widen(in.k), v = widen(in.v);
  out.assign(in.tokens * heads * dv, 0.0);
  lse.assign(heads * in.tokens, -std::numeric_limits<double>::infinity());
  std::vector<double> scores;
  for (size_t b = 0; b + 1 < in.cuQ.size(); ++b) {
    int64_t q0 = in.cuQ[b], qLen = in.cuQ[b + 1] - q0;
    int64_t k0 = in.cuK[b], kLen = in.cuK[b + 1] - k0;
    for (int64_t i = 0; i < qLen; ++i) {
      int64_t visible =
          shape.causal ? std::min(kLen, kLen - qLen + i + 1) : kLen;
      if (visible <= 0)
        continue;
      int64_t t = q0 + i;
      for (int64_t n = 0; n < heads; ++n) {
        const double *qRow = &q[(t * heads + n) * d];
        scores.assign(visible, 0.0);
        for (int64_t j = 0; j < visible; ++j) {
          const double *kRow = &k[((k0 + j) * heads + n) * d];
          double dot = 0;
          for (int64_t c = 0; c < d; ++c)
            dot += qRow[c] * kRow[c];
          scores[j] = dot * shape.scale;
        }
        double top = *std::max_element(scores.begin(), scores.end());
        double sum = 0;
        for (double &s : scores)
          sum += (s = std::exp(s - top));
        double *o = &out[(t * heads + n) * dv];
        for (int64_t j = 0; j < visible; ++j) {
          const double *vRow = &v[((k0 + j) * heads + n) * dv];
          for (int64_t c = 0; c < dv; ++c)
            o[c] += scores[j] / sum * vRow[c];
        }
        lse[n * in.tokens + t] = top + std::log(sum);
      }
    }
  }
}

void mla::bench::referenceUpProjKv(const gpu::UpProjKvShape &shape,
                                   int64_t rows,
                                   const std::vector<uint16_t> &latent,
                                   const std::vector<uint16_t> &kvBProj,
                                   std::vector<double> &kNope,
                                   std::vector<double> &v) {
  int64_t heads = shape.numHeads, l = shape.latentDim, p = shape.nopeDim,
          dv = shape.valueDim;
  std::vector<double> x = widen(latent), w = widen(kvBProj);
  kNope.assign(rows * heads * p, 0.0);
  v.assign(rows * heads * dv, 0.0);
  for (int64_t s = 0; s < rows; ++s)
    for (int64_t n = 0; n < heads; ++n)
      for (int64_t c = 0; c < p + dv; ++c) {
        // Weight row n*(P+V) + c: head n's P key columns, then its V.
        const double *wRow = &w[(n * (p + dv) + c) * l];
        double dot = 0;
        for (int64_t e = 0; e < l; ++e)
          dot += x[s * l + e] * wRow[e];
        if (c < p)
          kNope[(s * heads + n) * p + c] = dot;
        else
          v[(s * heads + n) * dv + c - p] = dot;
      }
}
