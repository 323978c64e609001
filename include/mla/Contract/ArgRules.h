//===- ArgRules.h - the argument rules of every API operation ---*- C++ -*-===//
//
// One implementation of what a call of decode, cache_write, split_kv_b_proj,
// absorb_q, up_proj_out, merge_states, gather_cache, up_proj_kv, mha or
// prefill must satisfy, shared by the
// kernel builder (CPU), the C APIs and the MLIR-free GPU runtime. A rule
// takes the arguments as host tensor descriptions (the integer tables that
// are read on the host with their data) and either returns the checked call
// (the dimensions and options that IR and GPU specs are made from) or an
// InvalidArgument RuntimeError whose message names the argument, the
// dimension and the limit.
//
// Contract layer: the C++ standard library and LLVM Support only, no MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_CONTRACT_ARGRULES_H
#define MLA_CONTRACT_ARGRULES_H

#include "mla/Contract/HostTensor.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <cstdint>
#include <optional>
#include <string>

namespace mla {

/// How the cache's rows are stored: `kvFormat` is "auto" (a float cache),
/// "fp8_e4m3" (with a per-tensor scale), "fp8_e4m3_token" or "fp8_ds_mla".
/// fp8_e4m3's scale is a host value `kvScale` or a one-element tensor
/// `kvScaleTensor` (vLLM's `k_scale`): on the GPU a device tensor described
/// only (the kernels read it when they run), on the CPU a host array.
struct CacheFormat {
  std::string kvFormat = "auto";
  std::optional<double> kvScale;
  std::optional<HostTensor> kvScaleTensor;
};

struct DecodeOptions {
  int64_t headDimV = 0;
  double softmaxScale = 0.0;
  bool causal = false;
  /// Split-KV pieces per request; none lets the compiler choose.
  std::optional<int64_t> numSplits;
  CacheFormat cache;
};

struct PrefillOptions {
  double softmaxScale = 0.0;
  int64_t vHeadDim = 0;
  /// Context rows up-projected at once; none lets the compiler choose.
  std::optional<int64_t> workspaceRows;
  CacheFormat cache;
};

/// Where a call runs: the kernels' limits differ (element types, row
/// formats, split counts).
enum class Device { CPU, GPU };

/// A paged cache checked against its format.
struct CheckedCache {
  /// The `format` keyword of #mla.cache_layout ("bf16", "f16", "f32",
  /// "fp8_e4m3", "fp8_e4m3_token", "fp8_ds_mla").
  std::string layoutFormat;
  /// fp8_e4m3's per-tensor scale, rounded to the f32 the IR holds, when the
  /// call gave it on the host.
  std::optional<float> scale;
  /// True when the call gave fp8_e4m3's scale as a device tensor instead.
  bool scaleOnDevice = false;
  int64_t pages = 0;
  int64_t pageSize = 0;
};

/// fp8_e4m3's per-tensor scale, the rule every call that reads or writes a
/// cache applies: kv_format 'fp8_e4m3' needs exactly one of a positive finite
/// `kvScale` and a `kvScaleTensor` of one float32 element (on the GPU a
/// device tensor the kernels read; on the CPU a host array whose value is
/// read here and checked as `kvScale` is); the other formats store their
/// scales in the rows and take neither. Sets the checked cache's `scale`
/// (host values) or `scaleOnDevice`. `scaleAtLaunch` (the GPU decode): the
/// scale is a launch argument its launcher checks, so `format` carries none.
llvm::Error checkKvScale(Device device, const CacheFormat &format,
                         CheckedCache &checked, bool scaleAtLaunch = false);

/// decode(q [B, Sq, N, L+R], kv_cache, block_table [B, max_pages],
/// seq_lens [B]).
struct DecodeCall {
  DType dtype = DType::f32;
  int64_t batch = 0, queryRows = 0, numHeads = 0, latentDim = 0, ropeDim = 0;
  /// A varlen decode (checkVarlenDecode): q is [T, N, L+R] packed by
  /// request, and queryRows is the largest per-request query length
  /// (kMaxVarlenQueryRows when query_start_loc has no host data).
  bool varlen = false;
  int64_t tokens = 0;
  int64_t maxPages = 0;
  float softmaxScale = 0.0f;
  bool causal = false;
  std::optional<int64_t> numSplits;
  CheckedCache cache;
};

/// The decode rules. `seqLens` and `blockTable` are checked by value when
/// they carry host data (always on the CPU; on the GPU when the caller gives
/// host copies, as mla.gpu.decode does): lengths against the block table's
/// capacity, and every page a request reads against the cache.
llvm::Expected<DecodeCall> checkDecode(Device device, const HostTensor &q,
                                       const HostTensor &kvCache,
                                       const HostTensor &blockTable,
                                       const HostTensor &seqLens,
                                       const DecodeOptions &options);

/// The varlen decode rules (speculative decoding with mixed draft lengths):
/// q [T, N, L+R], query_start_loc int32 [B+1] (from 0, non-decreasing,
/// ending at T), each request's q_b = query_start_loc[b+1] -
/// query_start_loc[b] in [0, kMaxVarlenQueryRows] and q_b <= seq_lens[b]
/// (checked by value when the tables carry host data), plus checkDecode's
/// rules on the cache and tables. Out is [T, N, L], lse [T, N].
llvm::Expected<DecodeCall> checkVarlenDecode(Device device, const HostTensor &q,
                                             const HostTensor &kvCache,
                                             const HostTensor &blockTable,
                                             const HostTensor &seqLens,
                                             const HostTensor &queryStartLoc,
                                             const DecodeOptions &options);

/// Per-request query lengths of a well-formed query_start_loc: each at most
/// `maxQueryRows` and at most its seq_len (`seqLens` may be empty: lengths
/// unknown).
llvm::Error checkVarlenQueryValues(llvm::ArrayRef<int32_t> queryStartLoc,
                                   llvm::ArrayRef<int32_t> seqLens,
                                   int64_t maxQueryRows);

/// Largest num_splits a decode on `device` accepts for a block table of
/// `capacity` positions: the GPU grid's y extent, or on the CPU the
/// capacity itself, since every piece beyond it is empty yet still costs a
/// slice of the partial-state workspace [S, B, Sq, N, L] (f32) that the
/// compiled code allocates without a failure path.
int64_t getMaxNumSplits(Device device, int64_t capacity);

/// cache_write(kv_c [T, L], k_pe [T, R] or [T, 1, R], kv_cache,
/// slot_mapping [T]).
struct CacheWriteCall {
  DType dtype = DType::f32;
  int64_t tokens = 0, latentDim = 0, ropeDim = 0;
  CheckedCache cache;
  /// False when every slot is padding: nothing is to be written.
  bool writesAnything = false;
};

/// The cache_write rules; slot values are checked when `slotMapping` has
/// host data.
llvm::Expected<CacheWriteCall>
checkCacheWrite(Device device, const HostTensor &kvC, const HostTensor &kPe,
                const HostTensor &kvCache, const HostTensor &slotMapping,
                const CacheFormat &format);

/// split_kv_b_proj(kv_b_proj [N*(P+V), L]) -> [N, P, L], [N, L, V].
struct SplitKvBProjCall {
  DType dtype = DType::f32;
  int64_t numHeads = 0, nopeDim = 0, valueDim = 0, latentDim = 0;
};
llvm::Expected<SplitKvBProjCall> checkSplitKvBProj(const HostTensor &kvBProj,
                                                   int64_t numHeads,
                                                   int64_t qkNopeHeadDim,
                                                   int64_t vHeadDim);

/// absorb_q(q [T, N, P+R], w_uk_t [N, P, L]) -> [T, N, L+R] and
/// up_proj_out(o [T, N, L], w_uv [N, L, V]) -> [T, N*V]: `inDim` is P or L,
/// `outDim` L or V, `ropeDim` R or 0.
struct ProjectionCall {
  DType dtype = DType::f32;
  int64_t tokens = 0, numHeads = 0, inDim = 0, outDim = 0, ropeDim = 0;
};
llvm::Expected<ProjectionCall> checkAbsorbQ(Device device, const HostTensor &q,
                                            const HostTensor &wUkT);
llvm::Expected<ProjectionCall>
checkUpProjOut(Device device, const HostTensor &o, const HostTensor &wUv);

/// merge_states(out_a [T, N, H], lse_a [N, T], out_b, lse_b).
struct MergeStatesCall {
  DType dtype = DType::f32;
  int64_t tokens = 0, numHeads = 0, headDim = 0;
};
llvm::Expected<MergeStatesCall>
checkMergeStates(Device device, const HostTensor &outA, const HostTensor &lseA,
                 const HostTensor &outB, const HostTensor &lseB);

/// gather_cache(kv_cache, block_table [B, max_pages], starts [B],
/// cu_rows [B+1], workspace [W, L+R]) with L = `latentDim`; `dtype` is the
/// workspace's.
struct GatherCacheCall {
  DType dtype = DType::f32;
  int64_t batch = 0, maxPages = 0, workspaceRows = 0, latentDim = 0,
          ropeDim = 0;
  CheckedCache cache;
  /// False when no workspace row is gathered; true when the tables are not
  /// on the host (the kernel decides).
  bool gathersAnything = false;
};

/// The gather_cache rules. The three tables are checked by value when they
/// all carry host data (always on the CPU; on the GPU when the caller gives
/// host copies): cu_rows non-decreasing from >= 0, starts >= 0, and every
/// position a workspace row gathers in a block_table page that is a page of
/// the cache. On the GPU the tables' host data must be given for all three
/// or none.
llvm::Expected<GatherCacheCall>
checkGatherCache(Device device, const HostTensor &kvCache,
                 const HostTensor &blockTable, const HostTensor &starts,
                 const HostTensor &cuRows, const HostTensor &workspace,
                 int64_t latentDim, const CacheFormat &format);

/// up_proj_kv(latent [S, L], kv_b_proj [N*(P+V), L]) -> k_nope [S, N, P],
/// v [S, N, V].
struct UpProjKvCall {
  DType dtype = DType::f32;
  int64_t rows = 0, numHeads = 0, latentDim = 0, nopeDim = 0, valueDim = 0;
};
llvm::Expected<UpProjKvCall>
checkUpProjKv(Device device, const HostTensor &latent,
              const HostTensor &kvBProj, int64_t numHeads,
              int64_t qkNopeHeadDim, int64_t vHeadDim);

/// mha(q [T, N, D], k [S, N, D], v [S, N, V], cu_seqlens_q [B+1],
/// cu_seqlens_k [B+1]) -> out [T, N, V], lse [N, T].
struct MhaCall {
  DType dtype = DType::f32;
  int64_t tokens = 0, keys = 0, numHeads = 0, qkDim = 0, valueDim = 0,
          batch = 0;
  float softmaxScale = 0.0f;
  bool causal = false;
};

/// The mha rules; cu_seqlens_q/k are checked by value (from 0,
/// non-decreasing, ending within q's and k's rows) when they carry host
/// data (always on the CPU; on the GPU when the caller gives host copies).
llvm::Expected<MhaCall> checkMha(Device device, const HostTensor &q,
                                 const HostTensor &k, const HostTensor &v,
                                 const HostTensor &cuSeqlensQ,
                                 const HostTensor &cuSeqlensK,
                                 double softmaxScale, bool causal);

/// prefill(q [T, N, P+R], kv_c [T, L], k_pe [T, R] or [T, 1, R],
/// kv_b_proj [N*(P+V), L], kv_cache, block_table [B, max_pages],
/// query_start_loc [B+1], seq_lens [B]), every table on the host (on the
/// GPU too: the runtime plans the context chunks from them). On the GPU the
/// activations are bf16 or f16 and a float cache ("auto") may be of any
/// float type (the gather converts it).
struct PrefillCall {
  DType dtype = DType::f32;
  int64_t tokens = 0, numHeads = 0, nopeDim = 0, ropeDim = 0, latentDim = 0,
          valueDim = 0, batch = 0;
  float softmaxScale = 0.0f;
  std::optional<int64_t> workspaceRows;
  CheckedCache cache;
};
llvm::Expected<PrefillCall>
checkPrefill(Device device, const HostTensor &q, const HostTensor &kvC,
             const HostTensor &kPe, const HostTensor &kvBProj,
             const HostTensor &kvCache, const HostTensor &blockTable,
             const HostTensor &queryStartLoc, const HostTensor &seqLens,
             const PrefillOptions &options);

/// attention(...) takes prefill's operands and options plus the decode
/// threshold of mla-select-algorithm (mla/Contract/MixedBatch.h).
struct AttentionOptions {
  PrefillOptions prefill;
  /// Requests with 1 <= q_len <= this take the absorbed decode path. A call
  /// is split at run time, so at most 1 (below 1: prefill only).
  int64_t decodeThreshold = 1;
};

/// A checked attention call: the prefill's facts, the threshold, and how
/// many leading requests (and tokens: one each) take the decode path.
struct AttentionCall {
  PrefillCall prefill;
  int64_t decodeThreshold = 1;
  int64_t numDecodes = 0;
};

/// The attention rules: prefill's, except that the cache already holds
/// every request's new tokens and the decode requests read them from it,
/// so every page under seq_lens is checked against the cache; and the
/// threshold is one a run-time batch supports. The host tables are
/// required (the batch is split on the host).
llvm::Expected<AttentionCall>
checkAttention(Device device, const HostTensor &q, const HostTensor &kvC,
               const HostTensor &kPe, const HostTensor &kvBProj,
               const HostTensor &kvCache, const HostTensor &blockTable,
               const HostTensor &queryStartLoc, const HostTensor &seqLens,
               const AttentionOptions &options);

/// The decode path's weights of a checked attention call, for a runtime
/// that takes them split (the GPU's: split_kv_b_proj of kv_b_proj, which
/// engines compute once): w_uk_t [N, P, L] and w_uv [N, L, V] of q's dtype.
llvm::Error checkAttentionWeights(Device device, const AttentionCall &call,
                                  const HostTensor &q, const HostTensor &wUkT,
                                  const HostTensor &wUv);

/// seq_lens values against a block table of `maxPages` pages of `pageSize`
/// positions: each in [0, capacity] and, for causal decode with
/// `queryRows` rows, 0 or at least `queryRows` (the rows are the request's
/// last positions). `tableName` names the table in messages.
llvm::Error checkSeqLenValues(llvm::ArrayRef<int32_t> seqLens, int64_t maxPages,
                              int64_t pageSize, llvm::StringRef tableName,
                              std::optional<int64_t> causalRows);

/// slot_mapping values against a cache of `pages` pages of `pageSize`
/// slots: negative (padding) or below pages * pageSize. Returns whether any
/// slot writes.
llvm::Expected<bool> checkSlotValues(llvm::ArrayRef<int32_t> slotMapping,
                                     int64_t pages, int64_t pageSize);

/// A string option (kv_format, split_policy, ...) as a C string: one
/// holding a NUL byte would be cut there and run as its prefix.
llvm::Error checkOptionString(llvm::StringRef name, llvm::StringRef value);

} // namespace mla

#endif // MLA_CONTRACT_ARGRULES_H
