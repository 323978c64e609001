//===- KernelBuilder.h - mla IR for one API call ----------------*- C++ -*-===//
//
// Each API operation (decode, cache_write, prefill, ...) is run by building a
// one-op mla module for the call's exact shapes, element types and options,
// then compiling it (CpuExecutor caches it by its printed form) and calling
// it. Every builder first runs the operation's argument rules
// (mla/Contract/ArgRules.h), so a bad call fails with a message naming the
// argument before anything is built, compiled, run or written.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_JIT_KERNELBUILDER_H
#define MLA_JIT_KERNELBUILDER_H

#include "mla/Contract/ArgRules.h"
#include "mla/Contract/HostTensor.h"
#include "mla/JIT/HostTypes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"
#include <string>

namespace mla {

/// A module ready for CpuExecutor::getOrCompile and the element types and
/// shapes of what its entry returns.
struct Kernel {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::string entry;
  llvm::SmallVector<std::pair<DType, llvm::SmallVector<int64_t, 4>>> results;
  /// True when the call has nothing to compute (every result is empty and
  /// nothing is written in place), so callers may skip compiling it.
  bool isEmpty = false;
  /// The pipeline's decode-threshold the module must be compiled with
  /// (mla.attention's split; part of the compile cache key).
  int64_t decodeThreshold = 1;
};

/// decode(q [b, s_q, h_q, d], kv_cache, block_table [b, max_pages],
/// seq_lens [b]) -> out [b, s_q, h_q, head_dim_v], lse [b, h_q, s_q] (f32).
llvm::Expected<Kernel>
buildDecode(mlir::MLIRContext &context, const HostTensor &q,
            const HostTensor &kvCache, const HostTensor &blockTable,
            const HostTensor &seqLens, const DecodeOptions &options);

/// Varlen decode(q [T, h_q, d], kv_cache, block_table [b, max_pages],
/// seq_lens [b], query_start_loc [b+1]) -> out [T, h_q, head_dim_v],
/// lse [T, h_q] (f32); see checkVarlenDecode.
llvm::Expected<Kernel>
buildVarlenDecode(mlir::MLIRContext &context, const HostTensor &q,
                  const HostTensor &kvCache, const HostTensor &blockTable,
                  const HostTensor &seqLens, const HostTensor &queryStartLoc,
                  const DecodeOptions &options);

/// cache_write(kv_c [T, L], k_pe [T, R] or [T, 1, R], kv_cache,
/// slot_mapping [T]): writes kv_cache in place, returns nothing. The entry
/// takes the cache as a memref, so its update is the function's effect on
/// the caller's buffer rather than a returned copy.
llvm::Expected<Kernel>
buildCacheWrite(mlir::MLIRContext &context, const HostTensor &kvC,
                const HostTensor &kPe, const HostTensor &kvCache,
                const HostTensor &slotMapping, const CacheFormat &format);

/// split_kv_b_proj(kv_b_proj [N*(P+V), L]) -> w_uk_t [N, P, L],
/// w_uv [N, L, V].
llvm::Expected<Kernel>
buildSplitKvBProj(mlir::MLIRContext &context, const HostTensor &kvBProj,
                  int64_t numHeads, int64_t qkNopeHeadDim, int64_t vHeadDim);

/// absorb_q(q [T, N, P+R], w_uk_t [N, P, L]) -> [T, N, L+R].
llvm::Expected<Kernel> buildAbsorbQ(mlir::MLIRContext &context,
                                    const HostTensor &q,
                                    const HostTensor &wUkT);

/// up_proj_out(o [T, N, L], w_uv [N, L, V]) -> [T, N*V].
llvm::Expected<Kernel> buildUpProjOut(mlir::MLIRContext &context,
                                      const HostTensor &o,
                                      const HostTensor &wUv);

/// merge_states(out_a [T, N, H], lse_a [N, T], out_b, lse_b)
/// -> out [T, N, H], lse [N, T].
llvm::Expected<Kernel> buildMergeStates(mlir::MLIRContext &context,
                                        const HostTensor &outA,
                                        const HostTensor &lseA,
                                        const HostTensor &outB,
                                        const HostTensor &lseB);

/// gather_cache(kv_cache, block_table [B, max_pages], starts [B],
/// cu_rows [B+1], workspace [W, L+R]): the workspace is written in place
/// (no results); `latentDim` is L. The entry takes the workspace as a
/// memref, as cache_write takes its cache.
llvm::Expected<Kernel>
buildGatherCache(mlir::MLIRContext &context, const HostTensor &kvCache,
                 const HostTensor &blockTable, const HostTensor &starts,
                 const HostTensor &cuRows, const HostTensor &workspace,
                 int64_t latentDim, const CacheFormat &format);

/// up_proj_kv(latent [S, L], kv_b_proj [N*(P+V), L]) -> k_nope [S, N, P],
/// v [S, N, V].
llvm::Expected<Kernel> buildUpProjKv(mlir::MLIRContext &context,
                                     const HostTensor &latent,
                                     const HostTensor &kvBProj,
                                     int64_t numHeads, int64_t qkNopeHeadDim,
                                     int64_t vHeadDim);

/// mha(q [T, N, D], k [S, N, D], v [S, N, V], cu_seqlens_q [B+1],
/// cu_seqlens_k [B+1]) -> out [T, N, V], lse [N, T] (f32).
llvm::Expected<Kernel> buildMha(mlir::MLIRContext &context, const HostTensor &q,
                                const HostTensor &k, const HostTensor &v,
                                const HostTensor &cuSeqlensQ,
                                const HostTensor &cuSeqlensK,
                                double softmaxScale, bool causal);

/// prefill(q [T, N, P+R], kv_c [T, L], k_pe [T, R] or [T, 1, R],
/// kv_b_proj [N*(P+V), L], kv_cache, block_table [B, max_pages],
/// query_start_loc [B+1], seq_lens [B]) -> out [T, N, V].
llvm::Expected<Kernel>
buildPrefill(mlir::MLIRContext &context, const HostTensor &q,
             const HostTensor &kvC, const HostTensor &kPe,
             const HostTensor &kvBProj, const HostTensor &kvCache,
             const HostTensor &blockTable, const HostTensor &queryStartLoc,
             const HostTensor &seqLens, const PrefillOptions &options);

/// attention(q [T, N, P+R], kv_c [T, L], k_pe [T, R] or [T, 1, R],
/// kv_b_proj [N*(P+V), L], kv_cache, block_table [B, max_pages],
/// query_start_loc [B+1], seq_lens [B]) -> out [T, N, V]: a mixed batch,
/// split by mla-select-algorithm with the options' decode threshold (the
/// Kernel's decodeThreshold). The cache already holds the new tokens.
llvm::Expected<Kernel>
buildAttention(mlir::MLIRContext &context, const HostTensor &q,
               const HostTensor &kvC, const HostTensor &kPe,
               const HostTensor &kvBProj, const HostTensor &kvCache,
               const HostTensor &blockTable, const HostTensor &queryStartLoc,
               const HostTensor &seqLens, const AttentionOptions &options);

} // namespace mla

#endif // MLA_JIT_KERNELBUILDER_H
