//===- ChunkedPrefill.cpp - Host plan of a chunked prefill ----------------===//
//
// The chunk policy here and the IR that mla-chunk-prefill builds must agree
// (unittests/Contract/PrefillChunkPlanTest.cpp pins the policy's cases), so
// that a GPU prefill merges the same chunks as the CPU one.
//
//===----------------------------------------------------------------------===//

#include "mla/Contract/ChunkedPrefill.h"
#include "llvm/Support/MathExtras.h"
#include <algorithm>

using namespace mla;
using namespace mla::gpu;

int64_t mla::defaultPrefillWorkspaceRows(int64_t maxModelLen,
                                         int64_t maxNumSeqs, int64_t pageSize) {
  // vLLM's MLA backend asserts the one-page-per-request floor; here it wins
  // over the cap.
  int64_t budget = std::min(
      std::max(8 * maxModelLen, 4 * maxNumSeqs * pageSize), int64_t{64 * 1024});
  return std::max(budget, maxNumSeqs * pageSize);
}

int64_t mla::defaultPrefillWorkspaceRows(int64_t pageSize) {
  return defaultPrefillWorkspaceRows(/*maxModelLen=*/4096, /*maxNumSeqs=*/128,
                                     pageSize);
}

PrefillChunkPlan::PrefillChunkPlan(llvm::ArrayRef<int32_t> queryStartLoc,
                                   llvm::ArrayRef<int32_t> seqLens,
                                   int64_t rows, int64_t pageSize,
                                   int64_t tableCapacity) {
  int64_t batch = static_cast<int64_t>(seqLens.size());
  workspaceRows = std::max<int64_t>(std::min(rows, tableCapacity), 1);
  int64_t withContext = 0;
  for (int64_t b = 0; b < batch; ++b) {
    int64_t qLen = queryStartLoc[b + 1] - queryStartLoc[b];
    contextLens.push_back(std::max<int64_t>(seqLens[b] - qLen, 0));
    withContext += contextLens.back() > 0;
  }
  int64_t share = workspaceRows / std::max<int64_t>(withContext, 1);
  bool together = share >= pageSize;
  if (together)
    chunkSize = share - share % pageSize;
  else if (workspaceRows >= pageSize)
    chunkSize = workspaceRows - workspaceRows % pageSize;
  else
    chunkSize = workspaceRows;
  int64_t groupSize = together ? std::max<int64_t>(batch, 1) : 1;

  for (int64_t lo = 0; lo < batch; lo += groupSize) {
    int64_t hi = std::min(lo + groupSize, batch);
    int64_t longest =
        *std::max_element(contextLens.begin() + lo, contextLens.begin() + hi);
    for (int64_t k = 0, e = llvm::divideCeil(longest, chunkSize); k < e; ++k) {
      PrefillChunk chunk{lo, hi, k * chunkSize};
      int64_t total = 0;
      for (int64_t b = lo; b < hi; ++b)
        total +=
            std::clamp<int64_t>(contextLens[b] - chunk.start, 0, chunkSize);
      maxChunkRows = std::max(maxChunkRows, total);
      chunks.push_back(chunk);
    }
  }
}

int64_t
PrefillChunkPlan::fillTables(const PrefillChunk &c,
                             llvm::MutableArrayRef<int32_t> starts,
                             llvm::MutableArrayRef<int32_t> cuRows) const {
  int64_t total = 0;
  cuRows[0] = 0;
  for (int64_t b = 0, e = contextLens.size(); b < e; ++b) {
    starts[b] = static_cast<int32_t>(c.start);
    if (b >= c.firstRequest && b < c.endRequest)
      total += std::clamp<int64_t>(contextLens[b] - c.start, 0, chunkSize);
    cuRows[b + 1] = static_cast<int32_t>(total);
  }
  return total;
}

ChunkedPrefillSpecs
mla::gpu::getChunkedPrefillSpecs(Chip chip, const ChunkedPrefillShape &s) {
  ChunkedPrefillSpecs specs;
  specs.gather.chip = chip;
  specs.gather.shape.row.latentDim = s.latentDim;
  specs.gather.shape.row.ropeDim = s.ropeDim;
  specs.gather.shape.row.input = s.elem;
  specs.gather.shape.row.format = s.format;
  specs.gather.shape.pageSize = s.pageSize;

  specs.upProjKv.chip = chip;
  specs.upProjKv.shape.numHeads = s.numHeads;
  specs.upProjKv.shape.latentDim = s.latentDim;
  specs.upProjKv.shape.nopeDim = s.nopeDim;
  specs.upProjKv.shape.valueDim = s.valueDim;
  specs.upProjKv.shape.elem = s.elem;

  specs.causalMha.chip = chip;
  specs.causalMha.shape.numHeads = s.numHeads;
  specs.causalMha.shape.qkDim = s.nopeDim + s.ropeDim;
  specs.causalMha.shape.vDim = s.valueDim;
  specs.causalMha.shape.elem = s.elem;
  specs.causalMha.shape.scale = s.scale;
  specs.causalMha.shape.causal = true;
  specs.contextMha = specs.causalMha;
  specs.contextMha.shape.causal = false;

  specs.merge.chip = chip;
  specs.merge.shape.numHeads = s.numHeads;
  specs.merge.shape.headDim = s.valueDim;
  specs.merge.shape.elem = s.elem;
  return specs;
}

const char *mla::gpu::checkChunkedPrefillSpecs(const ChunkedPrefillSpecs &s) {
  for (const char *why :
       {checkGatherCacheShape(s.gather.shape),
        checkUpProjKvShape(s.upProjKv.shape), checkMhaShape(s.causalMha.shape),
        checkMergeStatesShape(s.merge.shape)})
    if (*why)
      return why;
  return "";
}

ChunkedPrefillWorkspace
mla::gpu::getChunkedPrefillWorkspace(const ChunkedPrefillShape &s,
                                     int64_t tokens, int64_t batch,
                                     int64_t maxChunkRows) {
  ChunkedPrefillWorkspace w;
  uint64_t e = actBytes(s.elem);
  uint64_t kvRows = std::max(tokens, maxChunkRows);
  uint64_t heads = s.numHeads, t = tokens;
  uint64_t offset = 0;
  auto take = [&](uint64_t &field, uint64_t bytes) {
    field = offset;
    offset = llvm::alignTo(offset + bytes, 256);
  };
  take(w.kNope, kvRows * heads * s.nopeDim * e);
  take(w.v, kvRows * heads * s.valueDim * e);
  take(w.k, kvRows * heads * (s.nopeDim + s.ropeDim) * e);
  take(w.lseNew, heads * t * 4);
  if (maxChunkRows > 0) {
    uint64_t chunk = maxChunkRows;
    take(w.gathered, chunk * (s.latentDim + s.ropeDim) * e);
    take(w.latent, chunk * s.latentDim * e);
    take(w.outCtx, t * heads * s.valueDim * e);
    take(w.lseCtx, heads * t * 4);
    take(w.outChunk, t * heads * s.valueDim * e);
    take(w.lseChunk, heads * t * 4);
    take(w.tables, (2 * batch + 1) * 4);
  }
  w.totalBytes = offset;
  return w;
}
