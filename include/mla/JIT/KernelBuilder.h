//===- KernelBuilder.h - mla IR for one API call ----------------*- C++ -*-===//
//
// Each API operation (decode, cache_write, prefill, ...) is run by building a
// one-op mla module for the call's exact shapes, element types and options,
// then compiling it (cached by its text) and calling it. The builders here
// also validate the call completely, including the integer tables' values,
// so that a bad call fails with a message naming the argument before
// anything is compiled, run or written.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_JIT_KERNELBUILDER_H
#define MLA_JIT_KERNELBUILDER_H

#include "mla/Contract/HostTensor.h"
#include "llvm/Support/Error.h"
#include <optional>
#include <string>

namespace mla {

/// A module ready for CpuExecutor::getOrCompile and the element types and
/// shapes of what its entry returns.
struct Kernel {
  std::string source;
  std::string entry;
  llvm::SmallVector<std::pair<DType, llvm::SmallVector<int64_t, 4>>> results;
  /// True when the call has nothing to compute (every result is empty and
  /// nothing is written in place), so callers may skip compiling it.
  bool isEmpty = false;
};

/// How the cache's rows are stored: `kvFormat` is "auto" (a float cache),
/// "fp8_e4m3" (per-tensor scale `kvScale`), "fp8_e4m3_token" or
/// "fp8_ds_mla".
struct CacheFormat {
  std::string kvFormat = "auto";
  std::optional<double> kvScale;
};

struct DecodeOptions {
  int64_t headDimV = 0;
  double softmaxScale = 0.0;
  bool causal = false;
  /// Split-KV pieces per request; none lets the compiler choose.
  std::optional<int64_t> numSplits;
  CacheFormat cache;
};

/// decode(q [b, s_q, h_q, d], kv_cache, block_table [b, max_pages],
/// seq_lens [b]) -> out [b, s_q, h_q, head_dim_v], lse [b, h_q, s_q] (f32).
llvm::Expected<Kernel> buildDecode(const HostTensor &q,
                                   const HostTensor &kvCache,
                                   const HostTensor &blockTable,
                                   const HostTensor &seqLens,
                                   const DecodeOptions &options);

/// cache_write(kv_c [T, L], k_pe [T, R] or [T, 1, R], kv_cache,
/// slot_mapping [T]): writes kv_cache in place, returns nothing. The entry
/// takes the cache as a memref, so its update is the function's effect on
/// the caller's buffer rather than a returned copy.
llvm::Expected<Kernel> buildCacheWrite(const HostTensor &kvC,
                                       const HostTensor &kPe,
                                       const HostTensor &kvCache,
                                       const HostTensor &slotMapping,
                                       const CacheFormat &format);

/// split_kv_b_proj(kv_b_proj [N*(P+V), L]) -> w_uk_t [N, P, L],
/// w_uv [N, L, V].
llvm::Expected<Kernel> buildSplitKvBProj(const HostTensor &kvBProj,
                                         int64_t numHeads,
                                         int64_t qkNopeHeadDim,
                                         int64_t vHeadDim);

/// absorb_q(q [T, N, P+R], w_uk_t [N, P, L]) -> [T, N, L+R].
llvm::Expected<Kernel> buildAbsorbQ(const HostTensor &q,
                                    const HostTensor &wUkT);

/// up_proj_out(o [T, N, L], w_uv [N, L, V]) -> [T, N*V].
llvm::Expected<Kernel> buildUpProjOut(const HostTensor &o,
                                      const HostTensor &wUv);

/// merge_states(out_a [T, N, H], lse_a [N, T], out_b, lse_b)
/// -> out [T, N, H], lse [N, T].
llvm::Expected<Kernel> buildMergeStates(const HostTensor &outA,
                                        const HostTensor &lseA,
                                        const HostTensor &outB,
                                        const HostTensor &lseB);

struct PrefillOptions {
  double softmaxScale = 0.0;
  int64_t vHeadDim = 0;
  /// Context rows up-projected at once; none lets the compiler choose.
  std::optional<int64_t> workspaceRows;
  CacheFormat cache;
};

/// prefill(q [T, N, P+R], kv_c [T, L], k_pe [T, R] or [T, 1, R],
/// kv_b_proj [N*(P+V), L], kv_cache, block_table [B, max_pages],
/// query_start_loc [B+1], seq_lens [B]) -> out [T, N, V].
llvm::Expected<Kernel>
buildPrefill(const HostTensor &q, const HostTensor &kvC, const HostTensor &kPe,
             const HostTensor &kvBProj, const HostTensor &kvCache,
             const HostTensor &blockTable, const HostTensor &queryStartLoc,
             const HostTensor &seqLens, const PrefillOptions &options);

} // namespace mla

#endif // MLA_JIT_KERNELBUILDER_H
