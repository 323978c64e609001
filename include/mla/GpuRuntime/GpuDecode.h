//===- GpuDecode.h - MLA decode on the GPU from a cached image --*- C++ -*-===//
//
// The MLIR-free half of GPU decode: a GpuDecoder holds one compiled image
// (kernels mla_decode_partial and mla_combine, KernelABI.h) and launches it on
// buffers its caller owns. The image comes from the kernel cache, filled ahead
// of time by `mla-aot` (or, in a process that links the compiler, by a
// fallback that compiles on a miss).
//
// A decode is split in two so it can be captured in a CUDA graph:
//   1. plan: split bounds into the workspace's split_bounds section, either
//      on the host (planUniformBounds or planBounds, then uploadBounds, before
//      any capture begins) or on the device from device seq_lens (plan(),
//      the image's mla_decode_plan kernel: no host copy, capturable);
//   2. run(), which validates its arguments and enqueues the two decode
//      kernels; it never allocates, copies from the host or synchronises.
//
// Depends on LLVM Support, the split planner and <cuda.h> (types only).
//
//===----------------------------------------------------------------------===//

#ifndef MLA_GPURUNTIME_GPUDECODE_H
#define MLA_GPURUNTIME_GPUDECODE_H

#include "mla/Contract/KernelSpec.h"
#include "mla/Contract/SplitPlanner.h"
#include "mla/GpuRuntime/CudaDriver.h"
#include "mla/GpuRuntime/KernelCache.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace mla::gpu {

/// Byte offsets of the workspace sections of one decode: partial_out f32
/// [S, B, Sq, N, L], partial_lse f32 [S, B, N, Sq], split_bounds i32
/// [B, S+1], and right behind the bounds (one contiguous upload) the
/// combine counters i32 [B, decodeRowBlocks] of a decode that may merge its
/// S > 1 pieces in the partial kernel (decodeCombinesInKernel, KernelABI.h),
/// which every run leaves at zero. Each of the first three sections starts
/// on a 256-byte boundary.
struct DecodeWorkspaceLayout {
  size_t partialOut = 0;
  size_t partialLse = 0;
  size_t splitBounds = 0;
  size_t counters = 0;
  /// The persistent build's cu_splits [B + 1] and schedule
  /// [kMaxDecodeParts, kScheduleRowSize] i32, right after the counters
  /// (0 for other builds).
  size_t cuSplits = 0;
  size_t schedule = 0;
  /// Counter words (0 unless the spec's kernel merges its pieces itself).
  int64_t numCounters = 0;
  size_t totalBytes = 0;
};

/// The workspace of a batch of `batch` requests cut into `numSplits` pieces
/// each. Both counts must be positive.
DecodeWorkspaceLayout decodeWorkspaceLayout(const DecodeKernelSpec &spec,
                                            int64_t batch, int64_t numSplits);

/// Host-planned split bounds: piece s of request b is
/// [bounds[b*(S+1)+s], bounds[b*(S+1)+s+1]), clamped to seq_lens[b] by the
/// kernel.
struct SplitBounds {
  int64_t numSplits = 1; // S
  std::vector<int32_t> bounds;
  /// A balanced plan's (planBounds): the SM parts, their schedule rows
  /// [numSmParts, kScheduleRowSize] and the cumulative piece counts [B + 1],
  /// which the persistent build (DecodeTiling::persistent) walks; empty
  /// otherwise.
  int64_t numSmParts = 0;
  std::vector<int32_t> schedule, cuSplits;
};

/// The most SM parts a persistent decode's schedule may have.
inline constexpr int64_t kMaxDecodeParts = 1024;

/// Cuts every request into exactly `numSplits` pieces of
/// ceil(seq_len / numSplits) tokens rounded up to a multiple of
/// `alignTokens` (trailing pieces may be empty). Fails on a negative length
/// or count, or a numSplits outside [1, 65535] (the grid's y extent).
llvm::Expected<SplitBounds> planUniformBounds(llvm::ArrayRef<int32_t> seqLens,
                                              int64_t numSplits,
                                              int64_t alignTokens);

/// Bounds for a batch of which only the shape is known on the host: every
/// request is cut as if it were `capacity` tokens long (the block table's
/// pages x page size); the kernel clamps each piece to the real length.
llvm::Expected<SplitBounds> planCapacityBounds(int64_t batch, int64_t capacity,
                                               int64_t numSplits,
                                               int64_t alignTokens);

/// The split planner's options for `spec` on a GPU with `numSms`
/// multiprocessors (rows per CTA from the spec's tiling).
plan::SplitPlanOptions decodePlanOptions(const DecodeKernelSpec &spec,
                                         plan::SplitPolicy policy,
                                         int64_t numSms);

/// Pieces per request for the decode grid (ceil(Sq*N/rows) x S x B CTAs,
/// not persistent): the S in [1, maxSplits] that minimises the estimated
/// time `waves(S) * blocks(S) * t_block + combine(S)`, where
/// waves(S) = ceil(row_blocks * S * B / (numSms * ctasPerSm)), blocks(S) the
/// KV blocks of the longest piece and t_block the larger of the block's
/// HBM time and its MMA time at one CTA's share of the GPU; combine(S)
/// charges the partial-state traffic. One piece when the requests alone fill
/// the SMs, more when they leave SMs idle. `ctasPerSm` comes from the
/// kernel's shared memory and registers (decodeCtasPerSm).
int64_t chooseGridSplits(const DecodeKernelSpec &spec, int64_t batch,
                         int64_t maxSeqLen, int64_t numSms,
                         int64_t maxSplits = 64);

/// Decode CTAs that fit on one SM at once (shared memory and a 255-register
/// budget per thread), at least 1.
int64_t decodeCtasPerSm(const DecodeKernelSpec &spec);

/// Plans the batch with mla::plan::planSplits and keeps its bounds. Fails
/// when the plan needs more than 65535 pieces per request.
llvm::Expected<SplitBounds> planBounds(llvm::ArrayRef<int32_t> seqLens,
                                       const plan::SplitPlanOptions &options);

/// Host-side checks of run-time lengths against a spec: every seq_len in
/// [0, capacity] and, for a causal spec, 0 or at least Sq (the query rows
/// are the request's last Sq positions). The rule is checkSeqLenValues
/// (mla/Contract/ArgRules.h), which the C API runs as well.
llvm::Error checkSeqLens(const DecodeKernelSpec &spec,
                         llvm::ArrayRef<int32_t> seqLens, int64_t maxPages);

/// Device buffers and sizes of one decode. Tensors are dense, row-major and
/// laid out as KernelABI.h says; the workspace holds
/// decodeWorkspaceLayout(spec, batch, numSplits) and its split_bounds
/// section must already hold the bounds (uploadBounds).
struct DecodeArgs {
  CUdeviceptr q = 0; // [B, Sq, N, L+R] elem
  /// [numPages, page, L+R] elem, or rows of the spec's fp8 format
  /// ([numPages, page, cacheRowBytes] u8).
  CUdeviceptr cache = 0;
  CUdeviceptr blockTable = 0; // [B, maxPages] i32
  CUdeviceptr seqLens = 0;    // [B] i32
  CUdeviceptr out = 0;        // [B, Sq, N, L] elem
  CUdeviceptr lse = 0;        // [B, N, Sq] f32
  CUdeviceptr workspace = 0;
  size_t workspaceBytes = 0;
  int64_t batch = 0;      // B
  int64_t maxPages = 0;   // block_table columns
  int64_t numPages = 0;   // pages in the cache
  int64_t numSplits = 1;  // S
  float softmaxScale = 0; // positive and finite
  /// The persistent build only: the uploaded schedule's SM parts (the
  /// grid's y extent), in [1, kMaxDecodeParts]; 0 for every other build.
  int64_t numSmParts = 0;
  /// fp8_e4m3 caches: the per-tensor scale, f32 [1] in device memory (read
  /// by the kernel, so it may change between launches of a captured graph);
  /// 0 for every other format.
  CUdeviceptr kvScale = 0;
  /// The batch the workspace's sections are laid out for: a device plan's
  /// maximum batch (at least `batch`), or 0 for `batch` itself.
  int64_t layoutBatch = 0;
  /// Varlen specs only: query_start_loc [B+1] i32 and the token count T
  /// (q [T, N, L+R], out [T, N, L], lse [T, N]); T <= B * Sq.
  CUdeviceptr queryStartLoc = 0;
  int64_t numTokens = 0;
};

/// The TMA maps of q and the cache that a pipelined spec's kernel takes, and
/// the arguments they were encoded from. A device plan keeps one across its
/// runs, so that runs over the same buffers (an engine's layers and steps)
/// encode nothing on the host.
struct DecodeTmaMaps {
  CUdeviceptr q = 0, cache = 0;
  int64_t batch = 0, numPages = 0;
  CUtensorMap qMap = {}, cacheMap = {};
  /// The seesaw build over fp8_ds_mla's third map: the rows' scales
  /// (decodeSeesawScaleTiles).
  CUtensorMap scaleMap = {};

  bool encodedFor(const DecodeArgs &args) const {
    return q && q == args.q && cache == args.cache && batch == args.batch &&
           numPages == args.numPages;
  }
};

/// Validates the sizes of a decode: batch and split counts within the
/// grid's extents, a block table of at least one column whose capacity fits
/// in int32, and at least one cache page.
llvm::Error checkDecodeSizes(const DecodeKernelSpec &spec, int64_t batch,
                             int64_t maxPages, int64_t numPages,
                             int64_t numSplits);

/// Validates everything about `args` the host can see: non-null and aligned
/// pointers (kv_scale exactly for an fp8_e4m3 spec), sizes in the ranges the
/// kernels' i32 parameters and grid allow, a positive finite softmax scale and
/// a large enough workspace. Needs no GPU.
llvm::Error checkDecodeArgs(const DecodeKernelSpec &spec,
                            const DecodeArgs &args);

/// What a device plan (GpuDecoder::plan) reads and writes: the tables of
/// one batch step and a workspace laid out for `maxBatch` requests in
/// `numSplits` pieces, whose split_bounds section it fills, and a status
/// word it ORs with kDecodePlanBad* bits (mla/Contract/KernelABI.h).
struct DecodePlanArgs {
  CUdeviceptr seqLens = 0;    // [B] i32
  CUdeviceptr blockTable = 0; // [B, maxPages] i32
  CUdeviceptr workspace = 0;
  size_t workspaceBytes = 0;
  CUdeviceptr status = 0; // [1] i32
  int64_t batch = 0;      // B, at most maxBatch
  int64_t maxBatch = 0;
  int64_t maxPages = 0;
  int64_t numPages = 0;
  int64_t numSplits = 1;
  /// Varlen specs only, as in DecodeArgs.
  CUdeviceptr queryStartLoc = 0;
  int64_t numTokens = 0;
};

/// Validates `args` as checkDecodeArgs does a decode's. Needs no GPU.
llvm::Error checkDecodePlanArgs(const DecodeKernelSpec &spec,
                                const DecodePlanArgs &args);

/// Success for a status word of 0, else the error the bits in it stand
/// for (the message names the rule a request broke; a plan does not know
/// which request).
llvm::Error decodePlanStatusError(int32_t status);

/// A loaded decode image, ready to launch in the context that was current
/// when it was created.
class GpuDecoder {
public:
  /// Compiles a spec into an image (cubin) on a cache miss.
  using Compiler = std::function<llvm::Expected<std::vector<char>>(
      const DecodeKernelSpec &)>;

  /// Loads the three kernels from `image` into the current context (the
  /// primary context of device 0 if none is current) and allows the partial
  /// kernel
  /// its dynamic shared memory. Fails when the spec's tiling cannot run its
  /// shape, or on any driver error.
  static llvm::Expected<GpuDecoder> create(const DecodeKernelSpec &spec,
                                           const std::vector<char> &image);

  /// Loads the image cached under cacheKeyFor(spec). On a miss, compiles it
  /// with `fallback` and stores it (best effort: an unwritable cache does not
  /// fail the load); without a fallback a miss is an error that names the
  /// `mla-aot` command producing the entry.
  static llvm::Expected<GpuDecoder> fromCache(const DecodeKernelSpec &spec,
                                              const KernelCache &cache,
                                              const Compiler &fallback = {});

  const DecodeKernelSpec &getSpec() const { return spec; }

  /// Workspace bytes a run over `batch` requests in `numSplits` pieces needs.
  size_t workspaceBytes(int64_t batch, int64_t numSplits) const {
    return decodeWorkspaceLayout(spec, batch, numSplits).totalBytes;
  }

  /// Enqueues the copy of `bounds` into the split_bounds section of a
  /// workspace of `workspaceBytes` bytes, zeroing the combine counters behind
  /// it in the same copy. `bounds` may be released on return
  /// (the driver stages pageable memory), but the copy is not capturable in a
  /// CUDA graph: upload before capture.
  llvm::Error uploadBounds(CUstream stream, CUdeviceptr workspace,
                           size_t workspaceBytes, int64_t batch,
                           const SplitBounds &bounds) const;

  /// Validates `args` (checkDecodePlanArgs), then enqueues mla_decode_plan on
  /// `stream`: the split bounds of planUniformBounds(seq_lens, numSplits,
  /// page size) computed on the device, and zeroes the workspace's combine
  /// counters, if it has them (cuMemsetD32Async). Allocates nothing and copies
  /// nothing from the host, so it may be captured in a CUDA graph.
  llvm::Error plan(CUstream stream, const DecodePlanArgs &args) const;

  /// Validates `args` (checkDecodeArgs), then enqueues mla_decode_partial and
  /// mla_combine on `stream`; no mla_combine with one piece
  /// (decodeWritesFinalRows), nor when the partial kernel merges the pieces
  /// itself (decodeCombinesInKernel: as the last piece of each row block, in
  /// an ordinary launch of any grid). Allocates nothing and
  /// copies nothing, so it may be captured in a CUDA graph. Nothing is launched
  /// when validation fails. `maps`: a pipelined spec's TMA maps kept between
  /// runs, re-encoded only when `args` differ from what they were encoded for;
  /// null encodes them for this run alone.
  llvm::Error run(CUstream stream, const DecodeArgs &args,
                  DecodeTmaMaps *maps = nullptr) const;

private:
  /// The TMA maps of q and the cache that a pipelined spec's kernel takes.
  llvm::Error encodePipelinedMaps(const DecodeArgs &args,
                                  DecodeTmaMaps &maps) const;
  GpuDecoder(const DecodeKernelSpec &spec, CudaKernel partial,
             CudaKernel combine, CudaKernel planner)
      : spec(spec), partial(std::move(partial)), combine(std::move(combine)),
        planner(std::move(planner)) {}

  DecodeKernelSpec spec;
  CudaKernel partial;
  CudaKernel combine;
  CudaKernel planner;
};

} // namespace mla::gpu

#endif // MLA_GPURUNTIME_GPUDECODE_H
