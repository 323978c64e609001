//===- Runtime.cpp - C API of the mla CPU runtime -------------------------===//
//
// Translates C arguments to host tensors, builds the call's kernel, and runs
// it on a process-wide executor; every llvm::Error becomes a return code and
// a message.
//
//===----------------------------------------------------------------------===//

#include "mla-c/Runtime.h"
#include "mla/Contract/Error.h"
#include "mla/Contract/Version.h"
#include "mla/JIT/CpuExecutor.h"
#include "mla/JIT/KernelBuilder.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>
#include <array>
#include <cstring>
#include <limits>

using namespace mla;
using llvm::Twine;

namespace {

CpuExecutor &getExecutor() {
  // Leaked on purpose: tearing down JIT'd code and an MLIRContext from a
  // static destructor at exit would race LLVM's own static teardown, and the
  // process is ending anyway.
  static CpuExecutor *executor = new CpuExecutor();
  return *executor;
}

int report(llvm::Error error, char *buffer, size_t size) {
  int code = MLA_ERROR_RUNTIME;
  std::string message;
  llvm::handleAllErrors(
      std::move(error),
      [&](const RuntimeError &e) {
        switch (e.getKind()) {
        case RuntimeErrorKind::InvalidArgument:
          code = MLA_ERROR_INVALID_ARGUMENT;
          break;
        case RuntimeErrorKind::Compile:
          code = MLA_ERROR_COMPILE;
          break;
        case RuntimeErrorKind::Execution:
          code = MLA_ERROR_RUNTIME;
          break;
        }
        message = e.getMessage();
      },
      [&](const llvm::ErrorInfoBase &e) { message = e.message(); });
  if (buffer && size > 0) {
    size_t n = std::min(message.size(), size - 1);
    std::memcpy(buffer, message.data(), n);
    buffer[n] = '\0';
  }
  return code;
}

llvm::Expected<HostTensor> unwrap(const mlaTensor *t, llvm::StringRef name) {
  if (!t)
    return makeInvalidArgumentError(name + " is NULL");
  HostTensor result;
  switch (t->dtype) {
  case MLA_DTYPE_FLOAT32:
    result.dtype = DType::f32;
    break;
  case MLA_DTYPE_FLOAT16:
    result.dtype = DType::f16;
    break;
  case MLA_DTYPE_INT32:
    result.dtype = DType::i32;
    break;
  case MLA_DTYPE_UINT8:
    result.dtype = DType::u8;
    break;
  default:
    return makeInvalidArgumentError(name + " has unknown dtype code " +
                                    Twine(t->dtype));
  }
  if (t->rank < 0 || t->rank > MLA_MAX_RANK)
    return makeInvalidArgumentError(name + " has rank " + Twine(t->rank) +
                                    "; ranks 0 to " + Twine(MLA_MAX_RANK) +
                                    " are supported");
  result.shape.assign(t->shape, t->shape + t->rank);
  if (llvm::any_of(result.shape, [](int64_t d) { return d < 0; }))
    return makeInvalidArgumentError(name + " has a negative dimension " +
                                    formatShape(result.shape));
  // Sizes past int64 would wrap in every later element or byte count.
  if (!llvm::is_contained(result.shape, 0)) {
    int64_t bytes = getDTypeSize(result.dtype);
    for (int64_t d : result.shape) {
      if (bytes > std::numeric_limits<int64_t>::max() / d)
        return makeInvalidArgumentError(name + " of shape " +
                                        formatShape(result.shape) +
                                        " holds more than 2^63 bytes");
      bytes *= d;
    }
  }
  if (!t->data && result.getNumElements() > 0)
    return makeInvalidArgumentError(name + " has no data");
  result.data = t->data;
  return result;
}

int32_t wrapDType(DType dtype) {
  switch (dtype) {
  case DType::f32:
    return MLA_DTYPE_FLOAT32;
  case DType::f16:
    return MLA_DTYPE_FLOAT16;
  case DType::i32:
    return MLA_DTYPE_INT32;
  case DType::i8:
  case DType::u8:
    return MLA_DTYPE_UINT8;
  case DType::bf16:
    break;
  }
  llvm_unreachable("kernels built from C API arrays never produce bfloat16");
}

/// The caller's output arrays, named for messages.
using Outputs = llvm::ArrayRef<std::pair<mlaTensor *, llvm::StringRef>>;

/// Runs `kernel` on `args`, copying its results into `outputs`. With every
/// output's data NULL, only reports their dtypes and shapes.
llvm::Error run(llvm::Expected<Kernel> kernel, llvm::ArrayRef<HostTensor> args,
                Outputs outputs) {
  if (!kernel)
    return kernel.takeError();
  assert(kernel->results.size() == outputs.size() && "one output per result");
  for (auto [out, name] : outputs)
    if (!out)
      return makeInvalidArgumentError(Twine("output ") + name + " is NULL");

  bool query = !outputs.empty() &&
               llvm::all_of(outputs, [](auto o) { return !o.first->data; });
  if (query) {
    for (auto [result, out] : llvm::zip(kernel->results, outputs)) {
      out.first->dtype = wrapDType(result.first);
      out.first->rank = result.second.size();
      llvm::copy(result.second, out.first->shape);
    }
    return llvm::Error::success();
  }
  for (auto [result, out] : llvm::zip(kernel->results, outputs)) {
    llvm::Expected<HostTensor> t = unwrap(out.first, out.second);
    if (!t)
      return t.takeError();
    if (!isCompatibleDType(t->dtype, result.first) || t->shape != result.second)
      return makeInvalidArgumentError(
          Twine("output ") + out.second + " must be " +
          getDTypeName(result.first) + " " + formatShape(result.second) +
          ", got " + getDTypeName(t->dtype) + " " + formatShape(t->shape));
  }
  if (kernel->isEmpty)
    return llvm::Error::success();

  CpuPipelineOptions options;
  options.decodeThreshold = kernel->decodeThreshold;
  llvm::Expected<std::shared_ptr<const CompiledFunction>> fn =
      getExecutor().getOrCompile(*kernel->module, kernel->entry, options);
  if (!fn)
    return fn.takeError();
  llvm::Expected<llvm::SmallVector<ResultBuffer>> buffers = (*fn)->call(args);
  if (!buffers)
    return buffers.takeError();
  for (auto [buffer, out] : llvm::zip(*buffers, outputs)) {
    if (buffer.getSizeInBytes() !=
        getNumElements(llvm::ArrayRef(out.first->shape, out.first->rank)) *
            getDTypeSize(buffer.getDType()))
      return makeExecutionError("@" + kernel->entry + " returned " +
                                formatShape(buffer.getShape()) + " for " +
                                out.second);
    std::memcpy(out.first->data, buffer.getData(), buffer.getSizeInBytes());
  }
  return llvm::Error::success();
}

llvm::Expected<CacheFormat> unwrap(const mlaCacheFormat *format) {
  if (!format)
    return makeInvalidArgumentError("the cache format is NULL");
  CacheFormat result;
  result.kvFormat = format->kvFormat ? format->kvFormat : "auto";
  if (format->hasKvScale)
    result.kvScale = format->kvScale;
  if (format->kvScaleTensor) {
    llvm::Expected<HostTensor> t =
        unwrap(format->kvScaleTensor, "the kv_scale tensor");
    if (!t)
      return t.takeError();
    result.kvScaleTensor = std::move(*t);
  }
  return result;
}

/// Unwraps every tensor argument or returns the first error.
template <size_t N>
llvm::Expected<std::array<HostTensor, N>>
unwrapAll(std::array<std::pair<const mlaTensor *, llvm::StringRef>, N> in) {
  std::array<HostTensor, N> out;
  for (size_t i = 0; i < N; ++i) {
    llvm::Expected<HostTensor> t = unwrap(in[i].first, in[i].second);
    if (!t)
      return t.takeError();
    out[i] = std::move(*t);
  }
  return out;
}

/// A prefill's (and a mixed batch's) eight tensors, in mlaPrefill's order.
llvm::Expected<std::array<HostTensor, 8>>
unwrapPrefillTensors(const mlaTensor *q, const mlaTensor *kvC,
                     const mlaTensor *kPe, const mlaTensor *kvBProj,
                     const mlaTensor *kvCache, const mlaTensor *blockTable,
                     const mlaTensor *queryStartLoc, const mlaTensor *seqLens) {
  return unwrapAll<8>({{{q, "q"},
                        {kvC, "kv_c"},
                        {kPe, "k_pe"},
                        {kvBProj, "kv_b_proj"},
                        {kvCache, "kv_cache"},
                        {blockTable, "block_table"},
                        {queryStartLoc, "query_start_loc"},
                        {seqLens, "seq_lens"}}});
}

llvm::Expected<PrefillOptions> unwrap(const mlaPrefillOptions &options) {
  llvm::Expected<CacheFormat> cache = unwrap(&options.cache);
  if (!cache)
    return cache.takeError();
  PrefillOptions opts;
  opts.softmaxScale = options.softmaxScale;
  opts.vHeadDim = options.vHeadDim;
  if (options.hasWorkspaceRows)
    opts.workspaceRows = options.workspaceRows;
  opts.cache = std::move(*cache);
  return opts;
}

llvm::Expected<DecodeOptions>
unwrapDecodeOptions(const mlaDecodeOptions *options) {
  if (!options)
    return makeInvalidArgumentError("options is NULL");
  llvm::Expected<CacheFormat> cache = unwrap(&options->cache);
  if (!cache)
    return cache.takeError();
  DecodeOptions opts;
  opts.headDimV = options->headDimV;
  opts.softmaxScale = options->softmaxScale;
  opts.causal = options->causal != 0;
  if (options->hasNumSplits)
    opts.numSplits = options->numSplits;
  opts.cache = std::move(*cache);
  return opts;
}

/// The context kernels are built in: the executor's.
mlir::MLIRContext &getContext() { return getExecutor().getContext(); }

} // namespace

int mlaDecode(const mlaTensor *q, const mlaTensor *kvCache,
              const mlaTensor *blockTable, const mlaTensor *seqLens,
              const mlaDecodeOptions *options, mlaTensor *out, mlaTensor *lse,
              char *err, size_t errLen) {
  auto args = unwrapAll<4>({{{q, "q"},
                             {kvCache, "kv_cache"},
                             {blockTable, "block_table"},
                             {seqLens, "seq_lens"}}});
  if (!args)
    return report(args.takeError(), err, errLen);
  llvm::Expected<DecodeOptions> opts = unwrapDecodeOptions(options);
  if (!opts)
    return report(opts.takeError(), err, errLen);
  auto &[tq, tc, tb, ts] = *args;
  std::pair<mlaTensor *, llvm::StringRef> outs[] = {{out, "out"}, {lse, "lse"}};
  if (llvm::Error e =
          run(buildDecode(getContext(), tq, tc, tb, ts, *opts), *args, outs))
    return report(std::move(e), err, errLen);
  return MLA_SUCCESS;
}

int mlaDecodeVarlen(const mlaTensor *q, const mlaTensor *kvCache,
                    const mlaTensor *blockTable, const mlaTensor *seqLens,
                    const mlaTensor *queryStartLoc,
                    const mlaDecodeOptions *options, mlaTensor *out,
                    mlaTensor *lse, char *err, size_t errLen) {
  auto args = unwrapAll<5>({{{q, "q"},
                             {kvCache, "kv_cache"},
                             {blockTable, "block_table"},
                             {seqLens, "seq_lens"},
                             {queryStartLoc, "query_start_loc"}}});
  if (!args)
    return report(args.takeError(), err, errLen);
  llvm::Expected<DecodeOptions> opts = unwrapDecodeOptions(options);
  if (!opts)
    return report(opts.takeError(), err, errLen);
  auto &[tq, tc, tb, ts, tl] = *args;
  std::pair<mlaTensor *, llvm::StringRef> outs[] = {{out, "out"}, {lse, "lse"}};
  if (llvm::Error e =
          run(buildVarlenDecode(getContext(), tq, tc, tb, ts, tl, *opts), *args,
              outs))
    return report(std::move(e), err, errLen);
  return MLA_SUCCESS;
}

int mlaCacheWrite(const mlaTensor *kvC, const mlaTensor *kPe,
                  mlaTensor *kvCache, const mlaTensor *slotMapping,
                  const mlaCacheFormat *format, char *err, size_t errLen) {
  auto args = unwrapAll<4>({{{kvC, "kv_c"},
                             {kPe, "k_pe"},
                             {slotMapping, "slot_mapping"},
                             {kvCache, "kv_cache"}}});
  if (!args)
    return report(args.takeError(), err, errLen);
  llvm::Expected<CacheFormat> cache = unwrap(format);
  if (!cache)
    return report(cache.takeError(), err, errLen);
  auto &[tkv, tpe, tslots, tcache] = *args;
  if (llvm::Error e =
          run(buildCacheWrite(getContext(), tkv, tpe, tcache, tslots, *cache),
              *args, {}))
    return report(std::move(e), err, errLen);
  return MLA_SUCCESS;
}

int mlaSplitKvBProj(const mlaTensor *kvBProj, int64_t numHeads,
                    int64_t qkNopeHeadDim, int64_t vHeadDim, mlaTensor *wUkT,
                    mlaTensor *wUv, char *err, size_t errLen) {
  auto args = unwrapAll<1>({{{kvBProj, "kv_b_proj"}}});
  if (!args)
    return report(args.takeError(), err, errLen);
  std::pair<mlaTensor *, llvm::StringRef> outs[] = {{wUkT, "w_uk_t"},
                                                    {wUv, "w_uv"}};
  if (llvm::Error e = run(buildSplitKvBProj(getContext(), (*args)[0], numHeads,
                                            qkNopeHeadDim, vHeadDim),
                          *args, outs))
    return report(std::move(e), err, errLen);
  return MLA_SUCCESS;
}

int mlaAbsorbQ(const mlaTensor *q, const mlaTensor *wUkT, mlaTensor *out,
               char *err, size_t errLen) {
  auto args = unwrapAll<2>({{{q, "q"}, {wUkT, "w_uk_t"}}});
  if (!args)
    return report(args.takeError(), err, errLen);
  std::pair<mlaTensor *, llvm::StringRef> outs[] = {{out, "out"}};
  if (llvm::Error e =
          run(buildAbsorbQ(getContext(), (*args)[0], (*args)[1]), *args, outs))
    return report(std::move(e), err, errLen);
  return MLA_SUCCESS;
}

int mlaUpProjOut(const mlaTensor *o, const mlaTensor *wUv, mlaTensor *out,
                 char *err, size_t errLen) {
  auto args = unwrapAll<2>({{{o, "o"}, {wUv, "w_uv"}}});
  if (!args)
    return report(args.takeError(), err, errLen);
  std::pair<mlaTensor *, llvm::StringRef> outs[] = {{out, "out"}};
  if (llvm::Error e = run(buildUpProjOut(getContext(), (*args)[0], (*args)[1]),
                          *args, outs))
    return report(std::move(e), err, errLen);
  return MLA_SUCCESS;
}

int mlaMergeStates(const mlaTensor *outA, const mlaTensor *lseA,
                   const mlaTensor *outB, const mlaTensor *lseB, mlaTensor *out,
                   mlaTensor *lse, char *err, size_t errLen) {
  auto args = unwrapAll<4>(
      {{{outA, "out_a"}, {lseA, "lse_a"}, {outB, "out_b"}, {lseB, "lse_b"}}});
  if (!args)
    return report(args.takeError(), err, errLen);
  auto &[ta, tla, tb, tlb] = *args;
  std::pair<mlaTensor *, llvm::StringRef> outs[] = {{out, "out"}, {lse, "lse"}};
  if (llvm::Error e =
          run(buildMergeStates(getContext(), ta, tla, tb, tlb), *args, outs))
    return report(std::move(e), err, errLen);
  return MLA_SUCCESS;
}

int mlaGatherCache(const mlaTensor *kvCache, const mlaTensor *blockTable,
                   const mlaTensor *starts, const mlaTensor *cuRows,
                   mlaTensor *workspace, int64_t latentDim,
                   const mlaCacheFormat *format, char *err, size_t errLen) {
  auto args = unwrapAll<5>({{{kvCache, "kv_cache"},
                             {blockTable, "block_table"},
                             {starts, "starts"},
                             {cuRows, "cu_rows"},
                             {workspace, "workspace"}}});
  if (!args)
    return report(args.takeError(), err, errLen);
  llvm::Expected<CacheFormat> cache = unwrap(format);
  if (!cache)
    return report(cache.takeError(), err, errLen);
  auto &[tc, tb, ts, tcu, tws] = *args;
  if (llvm::Error e = run(buildGatherCache(getContext(), tc, tb, ts, tcu, tws,
                                           latentDim, *cache),
                          *args, {}))
    return report(std::move(e), err, errLen);
  return MLA_SUCCESS;
}

int mlaUpProjKv(const mlaTensor *latent, const mlaTensor *kvBProj,
                int64_t numHeads, int64_t qkNopeHeadDim, int64_t vHeadDim,
                mlaTensor *kNope, mlaTensor *v, char *err, size_t errLen) {
  auto args = unwrapAll<2>({{{latent, "latent"}, {kvBProj, "kv_b_proj"}}});
  if (!args)
    return report(args.takeError(), err, errLen);
  std::pair<mlaTensor *, llvm::StringRef> outs[] = {{kNope, "k_nope"},
                                                    {v, "v"}};
  if (llvm::Error e = run(buildUpProjKv(getContext(), (*args)[0], (*args)[1],
                                        numHeads, qkNopeHeadDim, vHeadDim),
                          *args, outs))
    return report(std::move(e), err, errLen);
  return MLA_SUCCESS;
}

int mlaMha(const mlaTensor *q, const mlaTensor *k, const mlaTensor *v,
           const mlaTensor *cuSeqlensQ, const mlaTensor *cuSeqlensK,
           double softmaxScale, int32_t causal, mlaTensor *out, mlaTensor *lse,
           char *err, size_t errLen) {
  auto args = unwrapAll<5>({{{q, "q"},
                             {k, "k"},
                             {v, "v"},
                             {cuSeqlensQ, "cu_seqlens_q"},
                             {cuSeqlensK, "cu_seqlens_k"}}});
  if (!args)
    return report(args.takeError(), err, errLen);
  auto &[tq, tk, tv, tcq, tck] = *args;
  std::pair<mlaTensor *, llvm::StringRef> outs[] = {{out, "out"}, {lse, "lse"}};
  if (llvm::Error e = run(buildMha(getContext(), tq, tk, tv, tcq, tck,
                                   softmaxScale, causal != 0),
                          *args, outs))
    return report(std::move(e), err, errLen);
  return MLA_SUCCESS;
}

int mlaPrefill(const mlaTensor *q, const mlaTensor *kvC, const mlaTensor *kPe,
               const mlaTensor *kvBProj, const mlaTensor *kvCache,
               const mlaTensor *blockTable, const mlaTensor *queryStartLoc,
               const mlaTensor *seqLens, const mlaPrefillOptions *options,
               mlaTensor *out, char *err, size_t errLen) {
  auto args = unwrapPrefillTensors(q, kvC, kPe, kvBProj, kvCache, blockTable,
                                   queryStartLoc, seqLens);
  if (!args)
    return report(args.takeError(), err, errLen);
  if (!options)
    return report(makeInvalidArgumentError("options is NULL"), err, errLen);
  llvm::Expected<PrefillOptions> opts = unwrap(*options);
  if (!opts)
    return report(opts.takeError(), err, errLen);
  auto &a = *args;
  std::pair<mlaTensor *, llvm::StringRef> outs[] = {{out, "out"}};
  if (llvm::Error e = run(buildPrefill(getContext(), a[0], a[1], a[2], a[3],
                                       a[4], a[5], a[6], a[7], *opts),
                          a, outs))
    return report(std::move(e), err, errLen);
  return MLA_SUCCESS;
}

int mlaAttention(const mlaTensor *q, const mlaTensor *kvC, const mlaTensor *kPe,
                 const mlaTensor *kvBProj, const mlaTensor *kvCache,
                 const mlaTensor *blockTable, const mlaTensor *queryStartLoc,
                 const mlaTensor *seqLens, const mlaAttentionOptions *options,
                 mlaTensor *out, char *err, size_t errLen) {
  auto args = unwrapPrefillTensors(q, kvC, kPe, kvBProj, kvCache, blockTable,
                                   queryStartLoc, seqLens);
  if (!args)
    return report(args.takeError(), err, errLen);
  if (!options)
    return report(makeInvalidArgumentError("options is NULL"), err, errLen);
  llvm::Expected<PrefillOptions> prefill = unwrap(options->prefill);
  if (!prefill)
    return report(prefill.takeError(), err, errLen);
  AttentionOptions opts;
  opts.prefill = std::move(*prefill);
  opts.decodeThreshold = options->decodeThreshold;
  auto &a = *args;
  std::pair<mlaTensor *, llvm::StringRef> outs[] = {{out, "out"}};
  if (llvm::Error e = run(buildAttention(getContext(), a[0], a[1], a[2], a[3],
                                         a[4], a[5], a[6], a[7], opts),
                          a, outs))
    return report(std::move(e), err, errLen);
  return MLA_SUCCESS;
}

void mlaGetRuntimeStats(mlaRuntimeStats *stats) {
  if (!stats)
    return;
  CpuExecutor::Stats s = getExecutor().getStats();
  stats->cacheHits = s.hits;
  stats->compiles = s.compiles;
  stats->compileSeconds = s.compileSeconds;
  stats->cachedKernels = s.cached;
}

void mlaClearKernelCache(void) { getExecutor().clearCache(); }

const char *mlaGetVersion(void) { return mla::getVersion(); }
