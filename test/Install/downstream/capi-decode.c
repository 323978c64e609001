/* Prints mla's version and runs a one-token decode through the installed C
 * API: one request, one head, a cache of one 16-row page with L = 2, R = 1
 * (rows of width 3), seq_len 2. Row 0 scores higher than row 1, so the
 * output is a softmax-weighted mix of their first L entries. */
#include "mla-c/Runtime.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  printf("mla %s\n", mlaGetVersion());

  float q[3] = {1.0f, 0.0f, 0.0f};
  float cache[16 * 3];
  memset(cache, 0, sizeof(cache));
  const float row0[3] = {2.0f, 1.0f, 0.0f}, row1[3] = {0.0f, 3.0f, 0.0f};
  memcpy(cache, row0, sizeof(row0));
  memcpy(cache + 3, row1, sizeof(row1));
  int32_t blockTable[1] = {0}, seqLens[1] = {2};
  float out[2], lse[1];

  mlaTensor tq = {q, MLA_DTYPE_FLOAT32, 4, {1, 1, 1, 3}};
  mlaTensor tcache = {cache, MLA_DTYPE_FLOAT32, 3, {1, 16, 3}};
  mlaTensor ttable = {blockTable, MLA_DTYPE_INT32, 2, {1, 1}};
  mlaTensor tlens = {seqLens, MLA_DTYPE_INT32, 1, {1}};
  mlaTensor tout = {out, MLA_DTYPE_FLOAT32, 4, {1, 1, 1, 2}};
  mlaTensor tlse = {lse, MLA_DTYPE_FLOAT32, 3, {1, 1, 1}};
  mlaDecodeOptions options;
  memset(&options, 0, sizeof(options));
  options.headDimV = 2;
  options.softmaxScale = 1.0;

  char err[512];
  if (mlaDecode(&tq, &tcache, &ttable, &tlens, &options, &tout, &tlse, err,
                sizeof(err)) != MLA_SUCCESS) {
    fprintf(stderr, "mlaDecode: %s\n", err);
    return 1;
  }
  /* Scores 2 and 0: weights e^2 and 1 over their sum. */
  double w0 = exp(2.0) / (exp(2.0) + 1.0), w1 = 1.0 - w0;
  double expected[2] = {2.0 * w0, 1.0 * w0 + 3.0 * w1};
  double expectedLse = log(exp(2.0) + 1.0);
  printf("out %.5f %.5f lse %.5f\n", out[0], out[1], lse[0]);
  if (fabs(out[0] - expected[0]) > 1e-5 || fabs(out[1] - expected[1]) > 1e-5 ||
      fabs(lse[0] - expectedLse) > 1e-5) {
    fprintf(stderr, "expected out %.5f %.5f lse %.5f\n", expected[0],
            expected[1], expectedLse);
    return 1;
  }
  return 0;
}
