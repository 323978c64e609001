//===- ChunkedPrefillBench.cpp - --e2e: one layer's chunked prefill -------===//
//
// Times the decomposition of primer section 7 (mla-chunk-prefill's) for one
// DeepSeek-V3 layer, launched piece by piece on one stream: up_proj_kv of
// the new tokens, their causal mha, then per context chunk gather_cache ->
// up_proj_kv -> non-causal mha of every new token against the chunk ->
// merge_states into the running context state, and a last merge of context
// and new-token states. Events between the launches split the time by
// kernel kind; the chunks follow the CPU pass's policy over a workspace of
// vLLM's default size.
//
// What it does not time: forming K = [k_nope | k_pe broadcast over heads]
// and handing the workspace's latent columns to up_proj_kv as a dense
// [rows, L] tensor. The launchers take dense tensors and no kernel does
// either step yet, so mha reads a K buffer of the right shape and
// up_proj_kv a dense latent buffer, both filled once with random values. The
// chunked-prefill runtime will own those steps; this mode is to be switched
// to its entry point when it lands.
//
//===----------------------------------------------------------------------===//

#include "PrefillBench.h"
#include "mla/GpuRuntime/PrefillLaunch.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

using namespace mla;
using namespace mla::bench;
using namespace mla::gpu;

namespace {

/// The kernel kinds the time is split into.
enum Kind { Gather, UpProjKv, MhaCausal, MhaContext, Merge, NumKinds };
constexpr const char *kKindNames[NumKinds] = {
    "gather", "up_proj_kv", "mha_causal", "mha_context", "merge"};

/// One context chunk: request b's rows [starts[b], starts[b] + count_b) land
/// in workspace rows [cuRows[b], cuRows[b+1]).
struct ChunkRows {
  std::vector<int32_t> starts, cuRows;
  int64_t rows() const { return cuRows.back(); }
};

/// vLLM's MLA workspace (as mla::defaultPrefillWorkspaceRows, which lives
/// with the MLIR pass): room for 8 full-length requests or 4 pages per
/// request, capped at 64K rows, never below one page per request.
int64_t defaultWorkspaceRows(int64_t maxModelLen, int64_t requests) {
  int64_t budget = std::min(std::max(8 * maxModelLen, 4 * requests * kPage),
                            int64_t{64 * 1024});
  return std::max(budget, requests * kPage);
}

/// The chunks of mla-chunk-prefill's policy (ChunkPrefill.cpp): with n
/// requests that have context and s = W / n >= page, every request advances
/// by s rounded down to a page per chunk; otherwise requests take turns, one
/// per chunk, by W rounded down to a page (or W when no page fits).
std::vector<ChunkRows> planChunks(llvm::ArrayRef<int64_t> context,
                                  int64_t workspaceRows) {
  int64_t batch = context.size();
  int64_t withContext =
      llvm::count_if(context, [](int64_t c) { return c > 0; });
  std::vector<ChunkRows> chunks;
  if (withContext == 0)
    return chunks;
  auto addChunk = [&](auto rowsOf) {
    ChunkRows chunk{std::vector<int32_t>(batch),
                    std::vector<int32_t>(batch + 1)};
    for (int64_t b = 0; b < batch; ++b) {
      auto [start, count] = rowsOf(b);
      chunk.starts[b] = int32_t(start);
      chunk.cuRows[b + 1] = int32_t(chunk.cuRows[b] + count);
    }
    chunks.push_back(std::move(chunk));
  };
  int64_t share = workspaceRows / withContext;
  if (share >= kPage) {
    int64_t step = share / kPage * kPage;
    int64_t longest = *std::max_element(context.begin(), context.end());
    for (int64_t start = 0; start < longest; start += step)
      addChunk([&](int64_t b) {
        return std::pair<int64_t, int64_t>(
            start, std::clamp<int64_t>(context[b] - start, 0, step));
      });
    return chunks;
  }
  int64_t step =
      workspaceRows >= kPage ? workspaceRows / kPage * kPage : workspaceRows;
  for (int64_t r = 0; r < batch; ++r)
    for (int64_t start = 0; start < context[r]; start += step)
      addChunk([&](int64_t b) {
        return std::pair<int64_t, int64_t>(
            b == r ? start : 0,
            b == r ? std::min(step, context[r] - start) : 0);
      });
  return chunks;
}

/// A valid cache of `rows` rows of `format`: random bf16 entries in
/// [-1, 1), or for fp8_ds_mla non-NaN e4m3 codes, scales in [1e-3, 1e-2]
/// and bf16 RoPE entries; a random block of rows repeated.
llvm::Error fillCache(const CudaDriver &driver, CUdeviceptr cache,
                      const CacheWriteShape &row, int64_t rows,
                      std::mt19937 &rng) {
  if (row.format == CacheFormat::BF16)
    return fillRandomBf16(driver, cache, rows * (kLatent + kRope), rng);
  int64_t rowBytes = cacheRowBytes(row),
          patternRows = std::min<int64_t>(rows, 4096);
  std::vector<uint8_t> pattern(patternRows * rowBytes);
  std::uniform_real_distribution<float> scaleDist(1e-3f, 1e-2f);
  for (int64_t r = 0; r < patternRows; ++r) {
    uint8_t *p = &pattern[r * rowBytes];
    for (int64_t c = 0; c < kLatent; ++c) {
      p[c] = uint8_t(rng());
      if ((p[c] & 0x7f) == 0x7f) // e4m3fn's NaN codes
        p[c] ^= 1;
    }
    for (int64_t t = 0; t < kLatent / kDsMlaTile; ++t) {
      float scale = scaleDist(rng);
      std::memcpy(p + kLatent + 4 * t, &scale, 4);
    }
    std::vector<uint16_t> rope = randomBf16(kRope, rng);
    std::memcpy(p + dsMlaRopeOffset(kLatent), rope.data(), kRope * 2);
  }
  for (int64_t done = 0; done < rows; done += patternRows) {
    int64_t n = std::min(patternRows, rows - done);
    if (llvm::Error error = upload(driver, cache + done * rowBytes,
                                   pattern.data(), n * rowBytes))
      return error;
  }
  return llvm::Error::success();
}

/// The loaded kernels of one cache format.
struct Kernels {
  CudaKernel gather, upProjKv, mhaCausal, mhaContext, merge;
};

llvm::Expected<Kernels> loadKernels(const BenchEnv &env, CacheFormat format) {
  llvm::Expected<CudaKernel> gather =
      loadGatherCacheKernel(gatherSpec(env.chip, format), env.cache);
  if (!gather)
    return gather.takeError();
  llvm::Expected<CudaKernel> up =
      loadUpProjKvKernel(upProjKvSpec(env.chip), env.cache);
  if (!up)
    return up.takeError();
  llvm::Expected<CudaKernel> causal =
      loadMhaKernel(mhaSpec(env.chip, true), env.cache);
  if (!causal)
    return causal.takeError();
  llvm::Expected<CudaKernel> context =
      loadMhaKernel(mhaSpec(env.chip, false), env.cache);
  if (!context)
    return context.takeError();
  llvm::Expected<CudaKernel> merge =
      loadMergeStatesKernel(mergeSpec(env.chip), env.cache);
  if (!merge)
    return merge.takeError();
  return Kernels{std::move(*gather), std::move(*up), std::move(*causal),
                 std::move(*context), std::move(*merge)};
}

} // namespace

namespace {

/// The device buffers of one prefill, in allocation order.
enum Buf {
  Q,           // [T, N, P+R] new tokens' queries
  LatentNew,   // [T, L]
  KvBProj,     // [N*(P+V), L]
  KNew,        // [T, N, P+R]
  KNopeNew,    // [T, N, P]
  VNew,        // [T, N, V]
  OutNew,      // [T, N, V]
  LseNew,      // [N, T] f32
  CuNew,       // [B+1] i32
  Cache,       // [numPages, page, row bytes]
  BlockTable,  // [B, maxPages] i32
  ChunkTables, // per chunk: starts [B], cu_rows [B+1] i32
  Workspace,   // [W, L+R] bf16
  LatentCtx,   // [W, L]
  KCtx,        // [W, N, P+R]
  KNopeCtx,    // [W, N, P]
  VCtx,        // [W, N, V]
  OutCtx,      // [T, N, V] running context state
  LseCtx,      // [N, T]
  OutChunk,    // [T, N, V] one chunk's state
  LseChunk,    // [N, T]
  Out,         // [T, N, V] the result
  Lse,         // [N, T]
};

/// One prefill problem: its sizes, chunks and buffers.
struct Problem {
  int64_t requests, newTokens, context, workspaceRows, tokens, maxPages,
      numPages;
  std::vector<ChunkRows> chunks;
  std::vector<DeviceBuffer> bufs;
  CUdeviceptr at(Buf b) const { return bufs[b].get(); }
  /// Where chunk c's starts / cu_rows are on the device.
  CUdeviceptr starts(size_t c) const {
    return at(ChunkTables) + c * (2 * requests + 1) * 4;
  }
  CUdeviceptr cuRows(size_t c) const { return starts(c) + requests * 4; }
};

llvm::Expected<Problem> makeProblem(const BenchEnv &env, int64_t requests,
                                    int64_t newTokens, int64_t context,
                                    int64_t workspaceRows) {
  Problem p{requests,
            newTokens,
            context,
            workspaceRows,
            requests * newTokens,
            (context + newTokens + kPage - 1) / kPage,
            0,
            {},
            {}};
  p.numPages = requests * p.maxPages;
  p.chunks = planChunks(std::vector<int64_t>(requests, context), workspaceRows);
  size_t w = 1;
  for (const ChunkRows &chunk : p.chunks)
    w = std::max(w, size_t(chunk.rows()));
  int64_t rowBytes = 0;
  for (NamedFormat f : kE2EFormats)
    rowBytes = std::max(
        rowBytes, cacheRowBytes({kLatent, kRope, ActType::BF16, f.format}));
  size_t t = p.tokens, n = kHeads;
  size_t stateBytes = t * n * kValue * 2, lseBytes = n * t * 4;
  if (llvm::Error error = allocAll(
          env.driver,
          {t * n * kQk * 2,
           t * kLatent * 2,
           n * (kNope + kValue) * kLatent * 2,
           t * n * kQk * 2,
           t * n * kNope * 2,
           stateBytes,
           stateBytes,
           lseBytes,
           size_t(requests + 1) * 4,
           size_t(p.numPages * kPage * rowBytes),
           size_t(p.numPages) * 4,
           std::max<size_t>(1, p.chunks.size()) * (2 * requests + 1) * 4,
           w * (kLatent + kRope) * 2,
           w * kLatent * 2,
           w * n * kQk * 2,
           w * n * kNope * 2,
           w * n * kValue * 2,
           stateBytes,
           lseBytes,
           stateBytes,
           lseBytes,
           stateBytes,
           lseBytes},
          p.bufs))
    return std::move(error);
  std::mt19937 rng(2024);
  const std::pair<Buf, size_t> randomBufs[] = {
      {Q, t * n * kQk},
      {LatentNew, t * kLatent},
      {KvBProj, n * (kNope + kValue) * kLatent},
      {KNew, t * n * kQk},
      {LatentCtx, w * kLatent},
      {KCtx, w * n * kQk}};
  for (auto [buf, count] : randomBufs)
    if (llvm::Error error = fillRandomBf16(env.driver, p.at(buf), count, rng))
      return std::move(error);
  std::vector<int32_t> cuNew = uniformOffsets(requests, newTokens);
  std::vector<int32_t> table(p.numPages);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  std::vector<int32_t> chunkTables;
  for (const ChunkRows &chunk : p.chunks) {
    llvm::append_range(chunkTables, chunk.starts);
    llvm::append_range(chunkTables, chunk.cuRows);
  }
  for (auto [buf, values] :
       {std::pair<Buf, const std::vector<int32_t> *>{CuNew, &cuNew},
        {BlockTable, &table},
        {ChunkTables, &chunkTables}})
    if (llvm::Error error =
            upload(env.driver, p.at(buf), values->data(), values->size() * 4))
      return std::move(error);
  return std::move(p);
}

/// Enqueues one prefill, marking the timeline after every launch and
/// appending each launch's kind to `kinds`.
llvm::Error enqueuePrefill(const BenchEnv &env, const Problem &p,
                           const Kernels &k, CacheFormat format,
                           LaunchTimeline &timeline, std::vector<Kind> &kinds) {
  CUstream stream = timeline.stream();
  auto step = [&](Kind kind, llvm::Error launched) -> llvm::Error {
    if (launched)
      return launched;
    kinds.push_back(kind);
    return timeline.mark();
  };
  auto upProj = [&](Buf latent, Buf kNope, Buf v, int64_t rows) {
    UpProjKvArgs args;
    args.shape = upProjKvSpec(env.chip).shape;
    args.latent = p.at(latent);
    args.kvBProj = p.at(KvBProj);
    args.kNope = p.at(kNope);
    args.v = p.at(v);
    args.rows = rows;
    return step(UpProjKv, launchUpProjKv(k.upProjKv, stream, args));
  };
  auto mha = [&](bool causal, Buf key, Buf value, CUdeviceptr cuK, Buf out,
                 Buf lse) {
    MhaArgs args;
    args.shape = mhaSpec(env.chip, causal).shape;
    args.chip = env.chip;
    args.keys = key == KNew ? p.tokens : p.workspaceRows;
    args.q = p.at(Q);
    args.k = p.at(key);
    args.v = p.at(value);
    args.cuSeqlensQ = p.at(CuNew);
    args.cuSeqlensK = cuK;
    args.out = p.at(out);
    args.lse = p.at(lse);
    args.batch = p.requests;
    args.tokens = p.tokens;
    return step(causal ? MhaCausal : MhaContext,
                launchMha(causal ? k.mhaCausal : k.mhaContext, stream, args));
  };
  auto merge = [&](Buf outA, Buf lseA, Buf outB, Buf lseB, Buf out, Buf lse) {
    MergeStatesArgs args;
    args.shape = mergeSpec(env.chip).shape;
    args.outA = p.at(outA);
    args.lseA = p.at(lseA);
    args.outB = p.at(outB);
    args.lseB = p.at(lseB);
    args.out = p.at(out);
    args.lse = p.at(lse);
    args.tokens = p.tokens;
    return step(Merge, launchMergeStates(k.merge, stream, args));
  };

  timeline.clear();
  kinds.clear();
  if (llvm::Error error = timeline.mark())
    return error;
  if (llvm::Error error = upProj(LatentNew, KNopeNew, VNew, p.tokens))
    return error;
  if (llvm::Error error = mha(true, KNew, VNew, p.at(CuNew), OutNew, LseNew))
    return error;
  for (auto [c, chunk] : llvm::enumerate(p.chunks)) {
    GatherCacheArgs gather;
    gather.shape = gatherSpec(env.chip, format).shape;
    gather.cache = p.at(Cache);
    gather.blockTable = p.at(BlockTable);
    gather.starts = p.starts(c);
    gather.cuRows = p.cuRows(c);
    gather.workspace = p.at(Workspace);
    gather.batch = p.requests;
    gather.maxPages = p.maxPages;
    gather.numPages = p.numPages;
    gather.workspaceRows = chunk.rows();
    if (llvm::Error error =
            step(Gather, launchGatherCache(k.gather, stream, gather)))
      return error;
    if (llvm::Error error = upProj(LatentCtx, KNopeCtx, VCtx, chunk.rows()))
      return error;
    // The first chunk's state is the running state: nothing to merge yet.
    bool first = c == 0;
    if (llvm::Error error =
            mha(false, KCtx, VCtx, p.cuRows(c), first ? OutCtx : OutChunk,
                first ? LseCtx : LseChunk))
      return error;
    if (!first)
      if (llvm::Error error =
              merge(OutCtx, LseCtx, OutChunk, LseChunk, OutCtx, LseCtx))
        return error;
  }
  if (p.chunks.empty())
    return llvm::Error::success();
  return merge(OutCtx, LseCtx, OutNew, LseNew, Out, Lse);
}

llvm::Error timeFormat(const BenchEnv &env, const Problem &p, NamedFormat f,
                       LaunchTimeline &timeline) {
  llvm::Expected<Kernels> kernels = loadKernels(env, f.format);
  if (!kernels)
    return kernels.takeError();
  std::mt19937 rng(7);
  CacheWriteShape row{kLatent, kRope, ActType::BF16, f.format};
  if (llvm::Error error =
          fillCache(env.driver, p.at(Cache), row, p.numPages * kPage, rng))
    return error;
  if (llvm::Error error = finishUploads(env.driver))
    return error;
  std::vector<Kind> kinds;
  for (int i = 0; i < env.warmup; ++i)
    if (llvm::Error error =
            enqueuePrefill(env, p, *kernels, f.format, timeline, kinds))
      return error;
  std::vector<double> perKind[NumKinds], totals;
  for (int i = 0; i < env.iters; ++i) {
    if (llvm::Error error =
            enqueuePrefill(env, p, *kernels, f.format, timeline, kinds))
      return error;
    llvm::Expected<std::vector<float>> ms = timeline.intervals();
    if (!ms)
      return ms.takeError();
    double sums[NumKinds] = {};
    for (auto [kind, t] : llvm::zip_equal(kinds, *ms))
      sums[kind] += t;
    for (int kind = 0; kind < NumKinds; ++kind)
      perKind[kind].push_back(sums[kind]);
    totals.push_back(std::accumulate(ms->begin(), ms->end(), 0.0));
  }
  double total = median(totals);
  double newPairs =
      double(p.newTokens) * p.newTokens / 2 + double(p.newTokens) * p.context;
  double flops = 2.0 * p.requests * newPairs * kHeads * (kQk + kValue) +
                 2.0 * (p.tokens + double(p.requests) * p.context) * kLatent *
                     kHeads * (kNope + kValue);
  llvm::outs() << llvm::format(
      "{\"mode\": \"e2e\", \"format\": \"%s\", \"requests\": %lld, "
      "\"new_tokens\": %lld, \"context\": %lld, \"workspace_rows\": %lld, "
      "\"chunks\": %zu, \"ms\": {",
      f.name, (long long)p.requests, (long long)p.newTokens,
      (long long)p.context, (long long)p.workspaceRows, p.chunks.size());
  for (int kind = 0; kind < NumKinds; ++kind)
    llvm::outs() << llvm::format("%s\"%s\": %.4f", kind ? ", " : "",
                                 kKindNames[kind], median(perKind[kind]));
  llvm::outs() << llvm::format("}, \"total_ms\": %.4f, \"tflops\": %.1f}\n",
                               total, flops / (total * 1e-3) / 1e12);
  llvm::outs().flush();
  return llvm::Error::success();
}

} // namespace

llvm::Error mla::bench::runE2ETiming(const BenchEnv &env, int64_t requests,
                                     int64_t newTokens, int64_t context,
                                     int64_t workspaceRows) {
  if (workspaceRows == 0)
    workspaceRows = defaultWorkspaceRows(context + newTokens, requests);
  llvm::Expected<Problem> problem =
      makeProblem(env, requests, newTokens, context, workspaceRows);
  if (!problem)
    return problem.takeError();
  llvm::Expected<std::unique_ptr<LaunchTimeline>> timeline =
      LaunchTimeline::create(env.driver);
  if (!timeline)
    return timeline.takeError();
  for (NamedFormat f : kE2EFormats)
    if (llvm::Error error = timeFormat(env, *problem, f, **timeline))
      return error;
  return llvm::Error::success();
}
