//===- Check.cpp - --check: mha and up_proj_kv against float64 ------------===//
//
// Small varlen shapes the timing modes never reach: empty query ranges, keys
// without queries, q_len > k_len (causal rows that see no key), rows past
// cu_seqlens_q[B] and an up-projection whose rows end inside a tile. Outputs
// are poisoned with NaN first, so a row the kernel never writes fails.
//
//===----------------------------------------------------------------------===//

#include "Bf16.h"
#include "PrefillBench.h"
#include "PrefillReference.h"
#include "mla/GpuRuntime/PrefillLaunch.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"
#include <cmath>
#include <numeric>

using namespace mla;
using namespace mla::bench;
using namespace mla::gpu;

namespace {

/// Inputs uniform in [-1, 1): |out| <= 1, rounded once to bf16 (2^-9) after
/// f32 accumulation; the kernels may also hold probabilities in bf16.
constexpr double kMhaOutTol = 1e-2;
constexpr double kMhaLseTol = 1e-3;
/// up_proj_kv sums 512 products (|v| up to ~30): f32 accumulation, then one
/// bf16 rounding, 2^-9 relative.
constexpr double kUpAbsTol = 1e-2;
constexpr double kUpRelTol = 8e-3;

/// Per request: more keys than queries, equal, an empty query range, nothing,
/// q_len > k_len, a full 64-row block and a long context.
constexpr int32_t kQLens[] = {7, 5, 0, 0, 6, 64, 33};
constexpr int32_t kKLens[] = {19, 5, 4, 0, 3, 64, 200};
/// Rows past cu_seqlens_q[B] that must come back as out 0, lse -inf.
constexpr int64_t kTrailingRows = 2;

std::vector<int32_t> offsets(llvm::ArrayRef<int32_t> lens) {
  std::vector<int32_t> result(lens.size() + 1, 0);
  std::partial_sum(lens.begin(), lens.end(), result.begin() + 1);
  return result;
}

llvm::Expected<bool> checkMha(const BenchEnv &env, bool causal) {
  MhaKernelSpec spec = mhaSpec(env.chip, causal);
  llvm::Expected<CudaKernel> kernel = loadMhaKernel(spec, env.cache);
  if (!kernel)
    return kernel.takeError();
  MhaInputs in;
  in.cuQ = offsets(kQLens);
  in.cuK = offsets(kKLens);
  in.tokens = in.cuQ.back() + kTrailingRows;
  in.keys = in.cuK.back();
  std::mt19937 rng(causal ? 11 : 12);
  in.q = randomBf16(in.tokens * kHeads * kQk, rng);
  in.k = randomBf16(in.keys * kHeads * kQk, rng);
  in.v = randomBf16(in.keys * kHeads * kValue, rng);
  std::vector<uint16_t> out(in.tokens * kHeads * kValue, 0x7fc0);
  std::vector<float> lse(kHeads * in.tokens, NAN);

  std::vector<DeviceBuffer> bufs;
  if (llvm::Error error = allocAll(
          env.driver,
          {in.q.size() * 2, in.k.size() * 2, in.v.size() * 2, in.cuQ.size() * 4,
           in.cuK.size() * 4, out.size() * 2, lse.size() * 4},
          bufs))
    return std::move(error);
  const std::pair<const void *, size_t> hostData[] = {
      {in.q.data(), in.q.size() * 2},     {in.k.data(), in.k.size() * 2},
      {in.v.data(), in.v.size() * 2},     {in.cuQ.data(), in.cuQ.size() * 4},
      {in.cuK.data(), in.cuK.size() * 4}, {out.data(), out.size() * 2},
      {lse.data(), lse.size() * 4}};
  for (auto [i, data] : llvm::enumerate(hostData))
    if (llvm::Error error =
            upload(env.driver, bufs[i].get(), data.first, data.second))
      return std::move(error);
  MhaArgs args;
  args.shape = spec.shape;
  args.q = bufs[0].get();
  args.k = bufs[1].get();
  args.v = bufs[2].get();
  args.cuSeqlensQ = bufs[3].get();
  args.cuSeqlensK = bufs[4].get();
  args.out = bufs[5].get();
  args.lse = bufs[6].get();
  args.batch = std::size(kQLens);
  args.chip = spec.chip;
  args.tokens = in.tokens;
  args.keys = in.keys;
  if (llvm::Error error = launchMha(*kernel, nullptr, args))
    return std::move(error);
  if (llvm::Error error = env.driver.check(
          env.driver.api().streamSynchronize(nullptr), "cuStreamSynchronize"))
    return std::move(error);
  if (llvm::Error error =
          download(env.driver, out.data(), args.out, out.size() * 2))
    return std::move(error);
  if (llvm::Error error =
          download(env.driver, lse.data(), args.lse, lse.size() * 4))
    return std::move(error);

  std::vector<double> refOut, refLse;
  referenceMha(spec.shape, in, refOut, refLse);
  double outErr = 0, lseErr = 0;
  int64_t bad = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    double e = std::fabs(bf16ToFloat(out[i]) - refOut[i]);
    bad += !(e <= kMhaOutTol);
    outErr = std::isnan(e) ? NAN : std::max(outErr, e);
  }
  for (size_t i = 0; i < lse.size(); ++i) {
    double e = std::isinf(refLse[i]) ? (lse[i] == refLse[i] ? 0 : INFINITY)
                                     : std::fabs(lse[i] - refLse[i]);
    bad += !(e <= kMhaLseTol);
    lseErr = std::isnan(e) ? NAN : std::max(lseErr, e);
  }
  llvm::outs() << llvm::format("mha N=%lld causal=%d tokens=%lld keys=%lld "
                               "max|out err|=%.3e max|lse err|=%.3e %s\n",
                               (long long)kHeads, causal ? 1 : 0,
                               (long long)in.tokens, (long long)in.keys, outErr,
                               lseErr, bad ? "FAIL" : "PASS");
  if (bad)
    llvm::outs() << "  " << bad << " values outside tolerance\n";
  return bad == 0;
}

llvm::Expected<bool> checkUpProjKv(const BenchEnv &env) {
  UpProjKvKernelSpec spec = upProjKvSpec(env.chip);
  llvm::Expected<CudaKernel> kernel = loadUpProjKvKernel(spec, env.cache);
  if (!kernel)
    return kernel.takeError();
  // Ends inside the second 64-row tile.
  const int64_t rows = 100;
  const UpProjKvShape &s = spec.shape;
  std::mt19937 rng(13);
  std::vector<uint16_t> latent = randomBf16(rows * s.latentDim, rng);
  std::vector<uint16_t> weight = randomBf16(s.columns() * s.latentDim, rng);
  std::vector<uint16_t> kNopeOut(rows * s.numHeads * s.nopeDim, 0x7fc0);
  std::vector<uint16_t> vOut(rows * s.numHeads * s.valueDim, 0x7fc0);
  std::vector<DeviceBuffer> bufs;
  if (llvm::Error error = allocAll(env.driver,
                                   {latent.size() * 2, weight.size() * 2,
                                    kNopeOut.size() * 2, vOut.size() * 2},
                                   bufs))
    return std::move(error);
  const std::pair<const void *, size_t> hostData[] = {
      {latent.data(), latent.size() * 2},
      {weight.data(), weight.size() * 2},
      {kNopeOut.data(), kNopeOut.size() * 2},
      {vOut.data(), vOut.size() * 2}};
  for (auto [i, data] : llvm::enumerate(hostData))
    if (llvm::Error error =
            upload(env.driver, bufs[i].get(), data.first, data.second))
      return std::move(error);
  UpProjKvArgs args;
  args.shape = s;
  args.latent = bufs[0].get();
  args.kvBProj = bufs[1].get();
  args.kNope = bufs[2].get();
  args.v = bufs[3].get();
  args.rows = rows;
  if (llvm::Error error = launchUpProjKv(*kernel, nullptr, args))
    return std::move(error);
  if (llvm::Error error = env.driver.check(
          env.driver.api().streamSynchronize(nullptr), "cuStreamSynchronize"))
    return std::move(error);
  if (llvm::Error error = download(env.driver, kNopeOut.data(), args.kNope,
                                   kNopeOut.size() * 2))
    return std::move(error);
  if (llvm::Error error =
          download(env.driver, vOut.data(), args.v, vOut.size() * 2))
    return std::move(error);

  std::vector<double> refKNope, refV;
  referenceUpProjKv(s, rows, latent, weight, refKNope, refV);
  double maxErr = 0;
  int64_t bad = 0;
  auto compare = [&](const std::vector<uint16_t> &got,
                     const std::vector<double> &want) {
    for (size_t i = 0; i < got.size(); ++i) {
      double e = std::fabs(bf16ToFloat(got[i]) - want[i]);
      bad += !(e <= kUpAbsTol + kUpRelTol * std::fabs(want[i]));
      maxErr = std::isnan(e) ? NAN : std::max(maxErr, e);
    }
  };
  compare(kNopeOut, refKNope);
  compare(vOut, refV);
  llvm::outs() << llvm::format(
      "up_proj_kv N=%lld L=%lld P=%lld V=%lld rows=%lld max|err|=%.3e %s\n",
      (long long)s.numHeads, (long long)s.latentDim, (long long)s.nopeDim,
      (long long)s.valueDim, (long long)rows, maxErr, bad ? "FAIL" : "PASS");
  if (bad)
    llvm::outs() << "  " << bad << " values outside tolerance\n";
  return bad == 0;
}

} // namespace

llvm::Expected<bool> mla::bench::runCheck(const BenchEnv &env) {
  llvm::outs() << "# GPU vs float64 host reference; inputs uniform in "
                  "[-1, 1); tolerance mha |out| "
               << kMhaOutTol << ", |lse| " << kMhaLseTol << "; up_proj_kv "
               << kUpAbsTol << " + " << kUpRelTol << " * |ref|\n";
  bool passed = true;
  for (bool causal : {true, false}) {
    llvm::Expected<bool> ok = checkMha(env, causal);
    if (!ok)
      return ok.takeError();
    passed &= *ok;
  }
  llvm::Expected<bool> ok = checkUpProjKv(env);
  if (!ok)
    return ok.takeError();
  return passed && *ok;
}
