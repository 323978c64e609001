//===- ChunkedPrefill.cpp - The whole chunked prefill on one stream -------===//
//
// See ChunkedPrefill.h for the decomposition. The running context state
// starts as the first chunk's attention (merging it into (0, -inf) would
// return it unchanged), and the final merge writes the caller's `out`,
// which the new tokens' attention wrote first (merge_states may alias
// either side).
//
//===----------------------------------------------------------------------===//

#include "mla/GpuRuntime/ChunkedPrefill.h"
#include "mla/GpuRuntime/PrefillLaunch.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <system_error>
#include <vector>

using namespace mla;
using namespace mla::gpu;
using llvm::Error;
using llvm::Twine;

namespace {

Error invalid(const Twine &msg) {
  return llvm::createStringError(
      std::make_error_code(std::errc::invalid_argument), msg);
}

/// `rows` rows of `width` bytes from `src` (rows `srcPitch` bytes apart) to
/// `dst` (rows `dstPitch` bytes apart), both in device memory.
struct Copy2D {
  CUdeviceptr src;
  uint64_t srcPitch;
  CUdeviceptr dst;
  uint64_t dstPitch;
  uint64_t width;
  uint64_t rows;
};

Error copy2D(const CudaDriver &driver, CUstream stream, const Copy2D &c) {
  if (c.rows == 0 || c.width == 0)
    return Error::success();
  CUDA_MEMCPY2D m = {};
  m.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  m.srcDevice = c.src;
  m.srcPitch = c.srcPitch;
  m.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  m.dstDevice = c.dst;
  m.dstPitch = c.dstPitch;
  m.WidthInBytes = c.width;
  m.Height = c.rows;
  return driver.check(driver.api().memcpy2DAsync(&m, stream),
                      "cuMemcpy2DAsync");
}

/// K [rows, N, P+R] from k_nope [rows, N, P] and the RoPE rows `rope`
/// ([rows, R] entries `ropePitch` bytes apart), broadcast over the heads.
/// RoPE goes to head 0, is doubled across heads (each copy takes heads
/// [0, m) with the nope slots between them, which the last copy
/// overwrites), then k_nope fills the nope slots: 2 + ceil(log2 N) copies
/// instead of one per head.
Error assembleKeys(const CudaDriver &driver, CUstream stream,
                   const ChunkedPrefillShape &s, CUdeviceptr kNope,
                   CUdeviceptr rope, uint64_t ropePitch, CUdeviceptr k,
                   int64_t rows) {
  uint64_t e = actBytes(s.elem);
  uint64_t nope = s.nopeDim * e, head = (s.nopeDim + s.ropeDim) * e;
  uint64_t row = s.numHeads * head, n = rows;
  if (Error err = copy2D(driver, stream,
                         {rope, ropePitch, k + nope, row, s.ropeDim * e, n}))
    return err;
  for (int64_t h = 1; h < s.numHeads; h *= 2) {
    uint64_t m = std::min(h, s.numHeads - h);
    if (Error err = copy2D(
            driver, stream,
            {k + nope, row, k + h * head + nope, row, m * head - nope, n}))
      return err;
  }
  return copy2D(driver, stream, {kNope, nope, k, head, nope, n * s.numHeads});
}

/// The launches of one run, with their workspace pointers; `ctx*` only when
/// the plan has chunks.
struct Launches {
  UpProjKvArgs upNew, upCtx;
  MhaArgs mhaNew, mhaCtx;
  GatherCacheArgs gather;
  MergeStatesArgs mergeChunk, mergeFinal;
};

Launches planLaunches(const ChunkedPrefillSpecs &specs,
                      const ChunkedPrefillArgs &a,
                      const ChunkedPrefillWorkspace &w, int64_t maxChunkRows) {
  CUdeviceptr base = a.workspace;
  Launches l;
  l.upNew = {specs.upProjKv.shape, a.kvC,      a.kvBProj,
             base + w.kNope,       base + w.v, a.tokens};
  l.mhaNew.shape = specs.causalMha.shape;
  l.mhaNew.q = a.q;
  l.mhaNew.k = base + w.k;
  l.mhaNew.v = base + w.v;
  l.mhaNew.cuSeqlensQ = l.mhaNew.cuSeqlensK = a.queryStartLoc;
  l.mhaNew.out = a.out;
  l.mhaNew.lse = base + w.lseNew;
  l.mhaNew.batch = a.batch;
  l.mhaNew.tokens = a.tokens;
  l.mhaNew.keys = a.tokens;
  l.mhaNew.chip = specs.causalMha.chip;
  l.upNew.chip = specs.upProjKv.chip;
  if (maxChunkRows == 0)
    return l;
  CUdeviceptr starts = base + w.tables, cuRows = starts + 4 * a.batch;
  l.gather = {
      specs.gather.shape, a.cache, a.blockTable, starts,     cuRows,
      base + w.gathered,  a.batch, a.maxPages,   a.numPages, maxChunkRows};
  l.gather.kvScale = a.kvScale;
  l.upCtx = {specs.upProjKv.shape, base + w.latent, a.kvBProj,
             base + w.kNope,       base + w.v,      maxChunkRows};
  l.upCtx.chip = specs.upProjKv.chip;
  l.mhaCtx = l.mhaNew;
  l.mhaCtx.shape = specs.contextMha.shape;
  l.mhaCtx.chip = specs.contextMha.chip;
  l.mhaCtx.keys = maxChunkRows;
  l.mhaCtx.cuSeqlensK = cuRows;
  l.mhaCtx.out = base + w.outCtx;
  l.mhaCtx.lse = base + w.lseCtx;
  l.mergeChunk = {specs.merge.shape, base + w.outCtx,   base + w.lseCtx,
                  base + w.outChunk, base + w.lseChunk, base + w.outCtx,
                  base + w.lseCtx,   a.tokens};
  l.mergeFinal = {
      specs.merge.shape, base + w.outCtx, base + w.lseCtx, a.out,
      base + w.lseNew,   a.out,           base + w.lseNew, a.tokens};
  return l;
}

Error checkLaunches(const Launches &l, bool chunked) {
  if (Error err = checkUpProjKvArgs(l.upNew))
    return err;
  if (Error err = checkMhaArgs(l.mhaNew))
    return err;
  if (!chunked)
    return Error::success();
  if (Error err = checkGatherCacheArgs(l.gather))
    return err;
  if (Error err = checkUpProjKvArgs(l.upCtx))
    return err;
  if (Error err = checkMhaArgs(l.mhaCtx))
    return err;
  if (Error err = checkMergeStatesArgs(l.mergeChunk))
    return err;
  return checkMergeStatesArgs(l.mergeFinal);
}

} // namespace

llvm::Expected<ChunkedPrefill>
ChunkedPrefill::fromCache(const ChunkedPrefillSpecs &specs,
                          const KernelCache &cache) {
  if (const char *why = checkChunkedPrefillSpecs(specs); *why)
    return invalid(Twine("no chunked-prefill kernels for this shape: ") + why);
  llvm::Expected<CudaKernel> gather =
      loadGatherCacheKernel(specs.gather, cache);
  if (!gather)
    return gather.takeError();
  llvm::Expected<CudaKernel> up = loadUpProjKvKernel(specs.upProjKv, cache);
  if (!up)
    return up.takeError();
  llvm::Expected<CudaKernel> causal = loadMhaKernel(specs.causalMha, cache);
  if (!causal)
    return causal.takeError();
  llvm::Expected<CudaKernel> context = loadMhaKernel(specs.contextMha, cache);
  if (!context)
    return context.takeError();
  llvm::Expected<CudaKernel> merge = loadMergeStatesKernel(specs.merge, cache);
  if (!merge)
    return merge.takeError();
  return ChunkedPrefill(specs, std::move(*gather), std::move(*up),
                        std::move(*causal), std::move(*context),
                        std::move(*merge));
}

Error ChunkedPrefill::check(const ChunkedPrefillSpecs &specs,
                            const ChunkedPrefillShape &shape,
                            const ChunkedPrefillArgs &args,
                            const PrefillChunkPlan &plan) {
  if (plan.getContextLens().size() != static_cast<size_t>(args.batch))
    return invalid("the chunk plan has " + Twine(plan.getContextLens().size()) +
                   " requests but the call " + Twine(args.batch));
  if (args.tokens == 0)
    return Error::success();
  int64_t maxRows = plan.getMaxChunkRows();
  ChunkedPrefillWorkspace w =
      getChunkedPrefillWorkspace(shape, args.tokens, args.batch, maxRows);
  if (!args.workspace || args.workspaceBytes < w.totalBytes)
    return invalid("the prefill workspace holds " + Twine(args.workspaceBytes) +
                   " bytes at 0x" + Twine::utohexstr(args.workspace) +
                   "; this call needs " + Twine(w.totalBytes));
  if (!args.kPe)
    return invalid("prefill: k_pe is null");
  return checkLaunches(planLaunches(specs, args, w, maxRows), maxRows > 0);
}

Error ChunkedPrefill::run(CUstream stream, const ChunkedPrefillShape &shape,
                          const ChunkedPrefillArgs &args,
                          const PrefillChunkPlan &plan) const {
  if (Error err = check(specs, shape, args, plan))
    return err;
  if (args.tokens == 0)
    return Error::success();
  int64_t maxRows = plan.getMaxChunkRows();
  Launches l = planLaunches(
      specs, args,
      getChunkedPrefillWorkspace(shape, args.tokens, args.batch, maxRows),
      maxRows);
  llvm::Expected<const CudaDriver &> driver = CudaRuntime::get();
  if (!driver)
    return driver.takeError();

  uint64_t e = actBytes(shape.elem);
  if (Error err = launchUpProjKv(upProjKv, stream, l.upNew))
    return err;
  if (Error err = assembleKeys(*driver, stream, shape, l.upNew.kNope, args.kPe,
                               shape.ropeDim * e, l.mhaNew.k, args.tokens))
    return err;
  if (Error err = launchMha(causalMha, stream, l.mhaNew))
    return err;
  if (maxRows == 0)
    return Error::success();

  uint64_t wsRow = (shape.latentDim + shape.ropeDim) * e;
  std::vector<int32_t> tables(2 * args.batch + 1);
  llvm::MutableArrayRef<int32_t> starts(tables.data(), args.batch);
  llvm::MutableArrayRef<int32_t> cuRows(tables.data() + args.batch,
                                        args.batch + 1);
  for (auto [i, chunk] : llvm::enumerate(plan.getChunks())) {
    int64_t rows = plan.fillTables(chunk, starts, cuRows);
    // Pageable memory is staged by the driver, so `tables` may be refilled
    // as soon as the call returns; the copy runs after the previous chunk's
    // kernels, in stream order.
    if (Error err = driver->check(driver->api().memcpyHtoDAsync(
                                      l.gather.starts, tables.data(),
                                      tables.size() * sizeof(int32_t), stream),
                                  "cuMemcpyHtoDAsync(prefill chunk tables)"))
      return err;
    GatherCacheArgs gatherArgs = l.gather;
    gatherArgs.workspaceRows = rows;
    if (Error err = launchGatherCache(gather, stream, gatherArgs))
      return err;
    if (Error err = copy2D(*driver, stream,
                           {l.gather.workspace, wsRow, l.upCtx.latent,
                            shape.latentDim * e, shape.latentDim * e,
                            static_cast<uint64_t>(rows)}))
      return err;
    UpProjKvArgs upArgs = l.upCtx;
    upArgs.rows = rows;
    if (Error err = launchUpProjKv(upProjKv, stream, upArgs))
      return err;
    if (Error err = assembleKeys(*driver, stream, shape, upArgs.kNope,
                                 l.gather.workspace + shape.latentDim * e,
                                 wsRow, l.mhaCtx.k, rows))
      return err;
    MhaArgs mhaArgs = l.mhaCtx;
    mhaArgs.keys = rows;
    if (i > 0) {
      mhaArgs.out = l.mergeChunk.outB;
      mhaArgs.lse = l.mergeChunk.lseB;
    }
    if (Error err = launchMha(contextMha, stream, mhaArgs))
      return err;
    if (i > 0)
      if (Error err = launchMergeStates(merge, stream, l.mergeChunk))
        return err;
  }
  return launchMergeStates(merge, stream, l.mergeFinal);
}
