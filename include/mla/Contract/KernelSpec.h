//===- KernelSpec.h - What identifies one compiled GPU kernel image -------===//
//
// A kernel spec names everything a compiled image depends on besides the
// toolchain: the op family (decode, cache_write, absorb_q, up_proj_out,
// gather_cache, merge_states, up_proj_kv, mha), the
// baked dimensions, dtypes, page size, tiling and chip. Its canonical text is
// hashed (with the pipeline name and the toolchain version) into the
// kernel-cache key, so the JIT (which links MLIR) and a serving process without
// MLIR find the same entry.
//
// No MLIR or LLVM dependency.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_CONTRACT_KERNELSPEC_H
#define MLA_CONTRACT_KERNELSPEC_H

#include "mla/Contract/CacheProjectionABI.h"
#include "mla/Contract/KernelABI.h"
#include "mla/Contract/PrefillABI.h"

#include <string>
#include <variant>
#include <vector>

namespace mla::gpu {

/// A decode image holds two kernels: mla_decode_partial and mla_combine.
struct DecodeKernelSpec {
  Chip chip = Chip::SM90a;
  DecodeShape shape;
  DecodeTiling tiling; // chooseDecodeTiling(chip, shape) unless overridden
};

/// Canonical one-line text, e.g.
/// "decode chip=sm_90a N=128 Sq=1 L=512 R=64 page=64 dtype=bf16 causal=0
///  tile=64x2x32x2". An fp8 cache adds its row format before the tile
/// ("format=fp8_ds_mla"); a cache of dtype prints none. The softmax scale
/// (and fp8_e4m3's kv_scale) are launch arguments, not part of the image,
/// so one key serves every scale.
std::string toString(const DecodeKernelSpec &spec);

/// Parses what toString prints (keys in any order; `tile` optional: when
/// absent the tiling is chooseDecodeTiling's). A `scale=` field, which texts
/// printed before the scale became a launch argument carry, is accepted when
/// well formed and ignored, so such texts name today's kernel. Returns false
/// with `error` set on malformed text or an unusable tiling.
bool parseDecodeKernelSpec(const std::string &text, DecodeKernelSpec &spec,
                           std::string &error);

/// An `mla.cache_write` image: kernel mla_cache_write (CacheProjectionABI.h).
/// The page size does not change the code but is part of the op's cache
/// type, so it is part of the spec as well.
struct CacheWriteKernelSpec {
  Chip chip = Chip::SM90a;
  CacheWriteShape shape;
  int64_t pageSize = 64;
};

/// Canonical text, e.g. "cache_write chip=sm_90a L=512 R=64 page=64
/// dtype=bf16 format=fp8_e4m3". `dtype` is the input's (kv_c and k_pe: bf16,
/// f16 or f32); `format` is the cache row format (bf16, f16, f32, fp8_e4m3,
/// fp8_e4m3_token or fp8_ds_mla). fp8_e4m3's per-tensor scale is a kernel
/// parameter (CacheProjectionABI.h), not part of the image, so one key serves
/// every scale.
std::string toString(const CacheWriteKernelSpec &spec);

/// Parses what toString prints (keys in any order). A `scale=` field, which
/// fp8_e4m3 texts printed before the scale became a kernel parameter carry,
/// is accepted with that format when well formed and ignored, so such texts
/// name today's kernel; other formats refuse it.
bool parseCacheWriteKernelSpec(const std::string &text,
                               CacheWriteKernelSpec &spec, std::string &error);

/// The two per-head projections of absorbed MLA.
enum class ProjectionKind { AbsorbQ, UpProjOut };

/// An `mla.absorb_q` image (kernel mla_absorb_q: shape.inDim = P,
/// shape.outDim = L, shape.ropeDim = R) or an `mla.up_proj_out` image
/// (kernel mla_up_proj_out: inDim = L, outDim = V, ropeDim = 0).
struct ProjectionKernelSpec {
  ProjectionKind kind = ProjectionKind::AbsorbQ;
  Chip chip = Chip::SM90a;
  ProjectionShape shape;
};

/// Canonical text, "absorb_q chip=sm_90a N=128 P=128 L=512 R=64 dtype=bf16"
/// or "up_proj_out chip=sm_90a N=128 L=512 V=128 dtype=bf16" (dtype bf16,
/// f16 or f32).
std::string toString(const ProjectionKernelSpec &spec);

/// Parses what toString prints (either family; keys in any order). Rejects
/// shapes checkProjectionShape refuses.
bool parseProjectionKernelSpec(const std::string &text,
                               ProjectionKernelSpec &spec, std::string &error);

/// An `mla.gather_cache` image (kernel mla_gather_cache, PrefillABI.h).
/// `shape.row.input` is the workspace's element type.
struct GatherCacheKernelSpec {
  Chip chip = Chip::SM90a;
  GatherCacheShape shape;
};

/// Canonical text, e.g. "gather_cache chip=sm_90a L=512 R=64 page=64
/// dtype=bf16 format=fp8_ds_mla"; parsed as cache_write's (an old `scale=`
/// of fp8_e4m3 is ignored).
std::string toString(const GatherCacheKernelSpec &spec);
bool parseGatherCacheKernelSpec(const std::string &text,
                                GatherCacheKernelSpec &spec,
                                std::string &error);

/// An `mla.merge_states` image (kernel mla_merge_states).
struct MergeStatesKernelSpec {
  Chip chip = Chip::SM90a;
  MergeStatesShape shape;
};

/// Canonical text, e.g. "merge_states chip=sm_90a N=128 H=128 dtype=bf16".
std::string toString(const MergeStatesKernelSpec &spec);
bool parseMergeStatesKernelSpec(const std::string &text,
                                MergeStatesKernelSpec &spec,
                                std::string &error);

/// An `mla.up_proj_kv` image (kernel mla_up_proj_kv).
struct UpProjKvKernelSpec {
  Chip chip = Chip::SM90a;
  UpProjKvShape shape;
};

/// Canonical text, e.g. "up_proj_kv chip=sm_90a N=128 L=512 P=128 V=128
/// dtype=bf16". Rejects shapes checkUpProjKvShape refuses.
std::string toString(const UpProjKvKernelSpec &spec);
bool parseUpProjKvKernelSpec(const std::string &text, UpProjKvKernelSpec &spec,
                             std::string &error);

/// An `mla.mha` image (kernel mla_mha, the first CUDA-core version).
struct MhaKernelSpec {
  Chip chip = Chip::SM90a;
  MhaShape shape;
};

/// Canonical text, e.g. "mha chip=sm_90a N=128 D=192 V=128 dtype=bf16
/// causal=1 scale=0x3d93cd3a" (D = P+R, the scale as its f32 bit pattern).
std::string toString(const MhaKernelSpec &spec);
bool parseMhaKernelSpec(const std::string &text, MhaKernelSpec &spec,
                        std::string &error);

/// A spec of any family.
using KernelSpec =
    std::variant<DecodeKernelSpec, CacheWriteKernelSpec, ProjectionKernelSpec,
                 GatherCacheKernelSpec, MergeStatesKernelSpec,
                 UpProjKvKernelSpec, MhaKernelSpec>;

/// Parses a spec of any family, dispatching on its first word ("decode",
/// "cache_write", "absorb_q", "up_proj_out", "gather_cache",
/// "merge_states", "up_proj_kv" or "mha").
bool parseKernelSpec(const std::string &text, KernelSpec &spec,
                     std::string &error);
std::string toString(const KernelSpec &spec);

/// The name of the pass pipeline that compiles a spec, with options, as
/// hashed into the key (e.g. "mla-to-nvvm{chip=sm_90a format=bin}").
std::string pipelineFor(const DecodeKernelSpec &spec);
std::string pipelineFor(const CacheWriteKernelSpec &spec);
std::string pipelineFor(const ProjectionKernelSpec &spec);
std::string pipelineFor(const GatherCacheKernelSpec &spec);
std::string pipelineFor(const MergeStatesKernelSpec &spec);
std::string pipelineFor(const UpProjKvKernelSpec &spec);
std::string pipelineFor(const MhaKernelSpec &spec);
std::string pipelineFor(const KernelSpec &spec);

/// The toolchain identity baked in at build time (MLIR/LLVM version, CUDA
/// toolkit version and a fingerprint of mla's code-generating sources),
/// identical in the JIT and in the MLIR-free runtime of one build.
const char *toolchainVersion();

/// The kernel-cache key of `spec` (computeKernelCacheKey over toString,
/// pipelineFor, toolchainVersion and chipName). Every family's text starts
/// with its name, so keys of different families never collide.
std::string cacheKeyFor(const DecodeKernelSpec &spec);
std::string cacheKeyFor(const CacheWriteKernelSpec &spec);
std::string cacheKeyFor(const ProjectionKernelSpec &spec);
std::string cacheKeyFor(const GatherCacheKernelSpec &spec);
std::string cacheKeyFor(const MergeStatesKernelSpec &spec);
std::string cacheKeyFor(const UpProjKvKernelSpec &spec);
std::string cacheKeyFor(const MhaKernelSpec &spec);
std::string cacheKeyFor(const KernelSpec &spec);

} // namespace mla::gpu

#endif // MLA_CONTRACT_KERNELSPEC_H
