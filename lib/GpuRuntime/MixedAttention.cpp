//===- MixedAttention.cpp - A mixed decode/prefill batch on a stream ------===//
//
// See MixedAttention.h. The decode requests own tokens [0, D) and requests
// [0, D), so the decode path reads q, block_table, seq_lens and writes out
// from their starts, and the prefill reads and writes them from token and
// request D on; only its query_start_loc differs (rebased to 0) and comes
// from the workspace.
//
//===----------------------------------------------------------------------===//

#include "mla/GpuRuntime/MixedAttention.h"
#include "mla/Contract/MixedBatch.h"
#include "mla/GpuRuntime/CacheProjectionLaunch.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

#include <system_error>

using namespace mla;
using namespace mla::gpu;
using llvm::Error;
using llvm::Twine;

namespace {

Error invalid(const Twine &msg) {
  return llvm::createStringError(
      std::make_error_code(std::errc::invalid_argument), msg);
}

MixedAttentionWorkspace layOut(const ChunkedPrefillShape &s, int64_t numDecodes,
                               uint64_t decodeBytes, int64_t prefillBatch,
                               uint64_t prefillBytes) {
  MixedAttentionWorkspace w;
  uint64_t e = actBytes(s.elem), d = numDecodes, n = s.numHeads;
  uint64_t offset = 0;
  auto take = [&](uint64_t &field, uint64_t bytes) {
    field = offset;
    offset = llvm::alignTo(offset + bytes, 256);
  };
  take(w.absorbed, d * n * (s.latentDim + s.ropeDim) * e);
  take(w.latentOut, d * n * s.latentDim * e);
  take(w.lse, d * n * 4);
  take(w.decode, decodeBytes);
  w.decodeBytes = decodeBytes;
  take(w.queryStartLoc, (prefillBatch + 1) * 4);
  take(w.prefill, prefillBytes);
  w.prefillBytes = prefillBytes;
  w.totalBytes = offset;
  return w;
}

/// The launches of the decode path.
struct DecodeLaunches {
  ProjectionArgs absorbQ, upProjOut;
  DecodeArgs decode;
};

DecodeLaunches planDecodeLaunches(const MixedAttentionSpecs &specs,
                                  const ChunkedPrefillShape &s,
                                  const MixedAttentionArgs &a,
                                  const MixedAttentionPlan &plan) {
  const MixedAttentionWorkspace &w = plan.workspace;
  DecodeLaunches l;
  l.absorbQ = {specs.absorbQ.shape, a.q, a.wUkT, a.workspace + w.absorbed,
               plan.numDecodes};
  l.upProjOut = {specs.upProjOut.shape, a.workspace + w.latentOut, a.wUv, a.out,
                 plan.numDecodes};
  DecodeArgs &d = l.decode;
  d.q = a.workspace + w.absorbed;
  d.cache = a.cache;
  d.blockTable = a.blockTable;
  d.seqLens = a.seqLens;
  d.out = a.workspace + w.latentOut;
  d.lse = a.workspace + w.lse;
  d.workspace = a.workspace + w.decode;
  d.workspaceBytes = w.decodeBytes;
  d.batch = plan.numDecodes;
  d.maxPages = a.maxPages;
  d.numPages = a.numPages;
  d.numSplits = plan.decodeBounds.numSplits;
  d.softmaxScale = s.scale;
  return l;
}

ChunkedPrefillArgs planPrefillArgs(const ChunkedPrefillShape &s,
                                   const MixedAttentionArgs &a,
                                   const MixedAttentionPlan &plan) {
  uint64_t e = actBytes(s.elem), d = plan.numDecodes;
  ChunkedPrefillArgs p;
  p.q = a.q + d * s.numHeads * (s.nopeDim + s.ropeDim) * e;
  p.kvC = a.kvC + d * s.latentDim * e;
  p.kPe = a.kPe + d * s.ropeDim * e;
  p.kvBProj = a.kvBProj;
  p.cache = a.cache;
  p.blockTable = a.blockTable + d * a.maxPages * sizeof(int32_t);
  p.queryStartLoc = a.workspace + plan.workspace.queryStartLoc;
  p.out = a.out + d * s.numHeads * s.valueDim * e;
  p.workspace = a.workspace + plan.workspace.prefill;
  p.workspaceBytes = plan.workspace.prefillBytes;
  p.tokens = a.tokens - plan.numDecodes;
  p.batch = a.batch - plan.numDecodes;
  p.maxPages = a.maxPages;
  p.numPages = a.numPages;
  p.kvScale = a.kvScale;
  return p;
}

} // namespace

MixedAttentionSpecs
mla::gpu::getMixedAttentionSpecs(Chip chip, const ChunkedPrefillShape &s) {
  MixedAttentionSpecs specs;
  specs.prefill = getChunkedPrefillSpecs(chip, s);
  specs.absorbQ.kind = ProjectionKind::AbsorbQ;
  specs.absorbQ.chip = chip;
  specs.absorbQ.shape = {s.numHeads, s.nopeDim, s.latentDim, s.ropeDim, s.elem};
  specs.upProjOut.kind = ProjectionKind::UpProjOut;
  specs.upProjOut.chip = chip;
  specs.upProjOut.shape = {s.numHeads, s.latentDim, s.valueDim, 0, s.elem};
  DecodeShape &d = specs.decode.shape;
  specs.decode.chip = chip;
  d.numHeads = s.numHeads;
  d.queryRows = kRuntimeDecodeQueryLen;
  d.latentDim = s.latentDim;
  d.ropeDim = s.ropeDim;
  d.pageSize = s.pageSize;
  d.elem = s.elem == ActType::F16 ? ElemType::F16 : ElemType::BF16;
  // One query row sees its whole sequence either way; the non-causal image
  // is the one plain decodes use.
  d.causal = false;
  specs.decode.tiling = chooseDecodeTiling(chip, d);
  return specs;
}

std::string mla::gpu::checkMixedDecodePath(const MixedAttentionSpecs &specs,
                                           const ChunkedPrefillShape &s) {
  CacheFormat own = s.elem == ActType::BF16  ? CacheFormat::BF16
                    : s.elem == ActType::F16 ? CacheFormat::F16
                                             : CacheFormat::F32;
  if (s.elem == ActType::F32 || s.format != own)
    return "the GPU decode kernels read bf16/f16 caches of the activations' "
           "type only (kv_format \"auto\")";
  for (const char *why : {checkProjectionShape(specs.absorbQ.shape),
                          checkProjectionShape(specs.upProjOut.shape)})
    if (*why)
      return why;
  return checkDecodeTiling(specs.decode.chip, specs.decode.shape,
                           specs.decode.tiling);
}

llvm::Expected<MixedAttentionPlan>
mla::gpu::planMixedAttention(const MixedAttentionSpecs &specs,
                             const ChunkedPrefillShape &shape,
                             const MixedAttentionBatch &b) {
  int64_t batch = b.seqLens.size();
  if (b.queryStartLoc.size() != static_cast<size_t>(batch + 1))
    return invalid("query_start_loc has " + Twine(b.queryStartLoc.size()) +
                   " entries for " + Twine(batch) + " requests");
  MixedAttentionPlan plan;
  plan.numDecodes = countLeadingDecodes(b.queryStartLoc, b.decodeThreshold);
  int64_t d = plan.numDecodes;
  uint64_t decodeBytes = 0;
  if (d > 0) {
    std::string why = checkMixedDecodePath(specs, shape);
    if (!why.empty())
      return invalid("no GPU decode path for this batch's " + Twine(d) +
                     " decode requests: " + why +
                     " (decode_threshold 0 runs every request as a prefill)");
    if (Error err = checkDecodeSizes(specs.decode, d, b.maxPages, b.numPages,
                                     /*numSplits=*/1))
      return std::move(err);
    llvm::ArrayRef<int32_t> lens = b.seqLens.take_front(d);
    int64_t splits =
        chooseGridSplits(specs.decode, d, *llvm::max_element(lens), b.numSms);
    llvm::Expected<SplitBounds> bounds =
        planUniformBounds(lens, splits, shape.pageSize);
    if (!bounds)
      return bounds.takeError();
    plan.decodeBounds = std::move(*bounds);
    decodeBytes = decodeWorkspaceLayout(specs.decode, d, splits).totalBytes;
  }

  int64_t rest = batch - d;
  int32_t base = b.queryStartLoc[d];
  for (int32_t offset : b.queryStartLoc.drop_front(d))
    plan.prefillQueryStartLoc.push_back(offset - base);
  int64_t restTokens = plan.prefillQueryStartLoc.back();
  uint64_t prefillBytes = 0;
  if (restTokens > 0) {
    plan.prefillChunks.emplace(
        plan.prefillQueryStartLoc, b.seqLens.drop_front(d), b.workspaceRows,
        shape.pageSize, rest * b.maxPages * shape.pageSize);
    prefillBytes =
        getChunkedPrefillWorkspace(shape, restTokens, rest,
                                   plan.prefillChunks->getMaxChunkRows())
            .totalBytes;
  }
  plan.workspace = layOut(shape, d, decodeBytes, rest, prefillBytes);
  return plan;
}

Error mla::gpu::checkMixedAttention(const MixedAttentionSpecs &specs,
                                    const ChunkedPrefillShape &shape,
                                    const MixedAttentionArgs &args,
                                    const MixedAttentionPlan &plan) {
  if (!args.workspace || args.workspaceBytes < plan.workspace.totalBytes)
    return invalid("the attention workspace holds " +
                   Twine(args.workspaceBytes) + " bytes at 0x" +
                   Twine::utohexstr(args.workspace) + "; this call needs " +
                   Twine(plan.workspace.totalBytes));
  if (plan.numDecodes > 0) {
    DecodeLaunches dl = planDecodeLaunches(specs, shape, args, plan);
    if (Error err = checkAbsorbQArgs(dl.absorbQ))
      return err;
    if (Error err = checkDecodeArgs(specs.decode, dl.decode))
      return err;
    if (Error err = checkUpProjOutArgs(dl.upProjOut))
      return err;
  }
  if (!plan.prefillChunks)
    return Error::success();
  return ChunkedPrefill::check(specs.prefill, shape,
                               planPrefillArgs(shape, args, plan),
                               *plan.prefillChunks);
}

Error mla::gpu::runMixedAttention(CUstream stream,
                                  const MixedAttentionKernels &kernels,
                                  const MixedAttentionSpecs &specs,
                                  const ChunkedPrefillShape &shape,
                                  const MixedAttentionArgs &args,
                                  const MixedAttentionPlan &plan) {
  if (Error err = checkMixedAttention(specs, shape, args, plan))
    return err;
  bool decodes = plan.numDecodes > 0, prefills = plan.prefillChunks.has_value();
  if ((decodes &&
       (!kernels.absorbQ || !kernels.upProjOut || !kernels.decoder ||
        toString(kernels.decoder->getSpec()) != toString(specs.decode))) ||
      (prefills && !kernels.prefill))
    return invalid("runMixedAttention: a kernel the plan needs is not loaded");

  DecodeLaunches dl = planDecodeLaunches(specs, shape, args, plan);
  ChunkedPrefillArgs pa = planPrefillArgs(shape, args, plan);
  if (decodes) {
    if (Error err = launchAbsorbQ(*kernels.absorbQ, stream, dl.absorbQ))
      return err;
    if (Error err = kernels.decoder->uploadBounds(
            stream, dl.decode.workspace, dl.decode.workspaceBytes,
            dl.decode.batch, plan.decodeBounds))
      return err;
    if (Error err = kernels.decoder->run(stream, dl.decode))
      return err;
    if (Error err = launchUpProjOut(*kernels.upProjOut, stream, dl.upProjOut))
      return err;
  }
  if (!prefills)
    return Error::success();
  llvm::Expected<const CudaDriver &> driver = CudaRuntime::get();
  if (!driver)
    return driver.takeError();
  // Pageable memory is staged by the driver before the call returns.
  if (Error err = driver->check(
          driver->api().memcpyHtoDAsync(
              pa.queryStartLoc, plan.prefillQueryStartLoc.data(),
              plan.prefillQueryStartLoc.size() * sizeof(int32_t), stream),
          "cuMemcpyHtoDAsync(prefill query_start_loc)"))
    return err;
  return kernels.prefill->run(stream, shape, pa, *plan.prefillChunks);
}
