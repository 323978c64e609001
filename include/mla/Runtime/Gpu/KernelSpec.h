//===- KernelSpec.h - What identifies one compiled GPU kernel image -------===//
//
// A kernel spec names everything a compiled image depends on besides the
// toolchain: the op family, the baked dimensions, dtypes, page size, tiling
// and chip. Its canonical text is hashed (with the pipeline name and the
// toolchain version) into the kernel-cache key, so the JIT (which links
// MLIR) and a serving process without MLIR find the same entry.
//
// No MLIR or LLVM dependency.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_GPU_KERNELSPEC_H
#define MLA_RUNTIME_GPU_KERNELSPEC_H

#include "mla/Runtime/Gpu/KernelABI.h"

#include <string>
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
///  scale=0x3d93cd3a tile=64x2x32x2" (the scale as its f32 bit pattern, so
/// the text round-trips exactly).
std::string toString(const DecodeKernelSpec &spec);

/// Parses what toString prints (keys in any order; `tile` optional: when
/// absent the tiling is chooseDecodeTiling's). Returns false with `error`
/// set on malformed text or an unusable tiling.
bool parseDecodeKernelSpec(const std::string &text, DecodeKernelSpec &spec,
                           std::string &error);

/// The name of the pass pipeline that compiles a spec, with options, as
/// hashed into the key (e.g. "mla-to-nvvm{chip=sm_90a format=bin}").
std::string pipelineFor(const DecodeKernelSpec &spec);

/// The toolchain identity baked in at build time (MLIR/LLVM version and
/// CUDA toolkit version), identical in the JIT and in the MLIR-free
/// runtime of one build.
const char *toolchainVersion();

/// The kernel-cache key of `spec` (computeKernelCacheKey over toString,
/// pipelineFor, toolchainVersion and chipName).
std::string cacheKeyFor(const DecodeKernelSpec &spec);

} // namespace mla::gpu

#endif // MLA_RUNTIME_GPU_KERNELSPEC_H
