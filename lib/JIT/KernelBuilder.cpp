//===- KernelBuilder.cpp - mla IR for one API call ------------------------===//
//
// Validation is written out per argument rather than delegated to the op
// verifiers: the verifiers see types, not the tables' values, and their
// messages speak of operands where an API user needs argument names. The
// builders emit MLIR text because that text is also the key of the compile
// cache and can be replayed with `mla-opt` or `mla-run`.
//
//===----------------------------------------------------------------------===//

#include "mla/JIT/KernelBuilder.h"
#include "mla/Contract/Error.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"
#include <cmath>
#include <cstring>

using namespace mla;
using llvm::Twine;

namespace {

//===----------------------------------------------------------------------===//
// Argument checks
//===----------------------------------------------------------------------===//

/// A named argument, for messages.
struct Arg {
  const HostTensor &tensor;
  llvm::StringRef name;

  int64_t dim(unsigned i) const { return tensor.shape[i]; }
  std::string shape() const { return formatShape(tensor.shape); }
  llvm::StringRef dtype() const { return getDTypeName(tensor.dtype); }
};

llvm::Error checkRank(const Arg &a, int64_t rank, llvm::StringRef dims) {
  if (a.tensor.getRank() == rank)
    return llvm::Error::success();
  return makeInvalidArgumentError(a.name + " must have rank " + Twine(rank) +
                                  " (" + dims + "), got shape " + a.shape());
}

llvm::Error checkFloat(const Arg &a) {
  if (a.tensor.dtype == DType::f32 || a.tensor.dtype == DType::f16)
    return llvm::Error::success();
  return makeInvalidArgumentError(a.name + " must be float32 or float16, got " +
                                  a.dtype());
}

llvm::Error checkInt32(const Arg &a) {
  if (a.tensor.dtype == DType::i32)
    return llvm::Error::success();
  return makeInvalidArgumentError(a.name + " must be int32, got " + a.dtype());
}

llvm::Error checkDType(const Arg &a, DType dtype, const Twine &why) {
  if (a.tensor.dtype == dtype)
    return llvm::Error::success();
  return makeInvalidArgumentError(a.name + " must be " + getDTypeName(dtype) +
                                  " (" + why + "), got " + a.dtype());
}

llvm::Error checkSameDType(const Arg &a, const Arg &ref) {
  if (a.tensor.dtype == ref.tensor.dtype)
    return llvm::Error::success();
  return makeInvalidArgumentError(a.name + " is " + a.dtype() + " but " +
                                  ref.name + " is " + ref.dtype() +
                                  "; they must have the same dtype");
}

/// "<a> dim <i> is <x> but <what> is <expected>".
llvm::Error checkDim(const Arg &a, unsigned i, int64_t expected,
                     const Twine &what) {
  if (a.dim(i) == expected)
    return llvm::Error::success();
  return makeInvalidArgumentError(a.name + " dim " + Twine(i) + " is " +
                                  Twine(a.dim(i)) + " but " + what + " is " +
                                  Twine(expected));
}

llvm::Error checkPositive(int64_t value, const Twine &name) {
  if (value > 0)
    return llvm::Error::success();
  return makeInvalidArgumentError(name + " must be positive, got " +
                                  Twine(value));
}

/// The IR holds the scale as an f32 attribute, so that is what must be
/// positive and finite.
llvm::Error checkSoftmaxScale(double scale) {
  float value = static_cast<float>(scale);
  if (value > 0.0f && std::isfinite(value))
    return llvm::Error::success();
  return makeInvalidArgumentError(
      "softmax_scale must be positive and finite, got " +
      Twine(std::to_string(scale)));
}

/// Table entry `t[b, k]` of a row-major i32 matrix.
int32_t at(const HostTensor &t, int64_t b, int64_t k) {
  return t.getI32(b * t.shape[1] + k);
}

//===----------------------------------------------------------------------===//
// The paged cache
//===----------------------------------------------------------------------===//

/// A cache checked against its format and the row it must hold.
struct PagedCache {
  /// The `format` keyword of #mla.cache_layout.
  std::string layoutFormat;
  std::optional<float> scale;
  int64_t pages;
  int64_t pageSize;

  std::string layout() const {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << "#mla.cache_layout<format = " << layoutFormat
       << ", page_size = " << pageSize;
    if (scale)
      os << ", scale = " << llvm::format("%.8e", *scale) << " : f32";
    os << ">";
    return text;
  }
};

/// Checks `cache` against `format` for rows of latent width `latent` and
/// RoPE width `rope` written or read with the activations `act` (a float
/// cache holds their dtype).
llvm::Expected<PagedCache> checkCache(const Arg &cache,
                                      const CacheFormat &format,
                                      int64_t latent, int64_t rope,
                                      const Arg &act) {
  llvm::StringRef kvFormat = format.kvFormat;
  if (!llvm::is_contained({"auto", "fp8_e4m3", "fp8_e4m3_token", "fp8_ds_mla"},
                          kvFormat))
    return makeInvalidArgumentError(
        "kv_format '" + kvFormat +
        "' is unknown (expected auto, fp8_e4m3, fp8_e4m3_token, fp8_ds_mla)");
  if (llvm::Error err = checkRank(cache, 3, "[pages, page_size, row]"))
    return std::move(err);

  bool isFloat = kvFormat == "auto";
  if (isFloat && cache.tensor.dtype != act.tensor.dtype)
    return makeInvalidArgumentError(
        cache.name + " is " + cache.dtype() + " but kv_format 'auto' stores " +
        act.name + "'s dtype " + act.dtype() +
        (cache.tensor.dtype == DType::u8
             ? "; pass the fp8 kv_format this uint8 cache was written with"
             : ""));
  if (!isFloat && cache.tensor.dtype != DType::u8 &&
      cache.tensor.dtype != DType::i8)
    return makeInvalidArgumentError("kv_format '" + kvFormat +
                                    "' needs a uint8 " + cache.name +
                                    ", got " + cache.dtype());

  PagedCache result;
  if (kvFormat == "fp8_e4m3") {
    if (!format.kvScale)
      return makeInvalidArgumentError(
          "kv_format 'fp8_e4m3' needs kv_scale, the per-tensor scale its "
          "values were divided by");
    float scale = static_cast<float>(*format.kvScale);
    if (!(scale > 0.0f) || !std::isfinite(scale))
      return makeInvalidArgumentError(
          "kv_scale must be positive and finite, got " +
          Twine(std::to_string(*format.kvScale)));
    result.scale = scale;
  } else if (format.kvScale) {
    return makeInvalidArgumentError("kv_scale is only used by kv_format "
                                    "'fp8_e4m3', not '" +
                                    kvFormat + "'");
  }
  if (kvFormat == "fp8_ds_mla" && latent % 128 != 0)
    return makeInvalidArgumentError(
        "kv_format 'fp8_ds_mla' needs a latent width L that is a multiple of "
        "128, got L = " +
        Twine(latent));

  int64_t rowDim = latent + rope;
  int64_t expectedRow = rowDim;
  if (kvFormat == "fp8_e4m3_token")
    expectedRow = rowDim + 8;
  else if (kvFormat == "fp8_ds_mla")
    expectedRow = latent + 4 * (latent / 128) + 2 * rope;
  if (cache.dim(2) != expectedRow) {
    if (isFloat)
      return makeInvalidArgumentError(
          cache.name + " rows have " + Twine(cache.dim(2)) +
          " elements but L + R = " + Twine(latent) + " + " + Twine(rope) +
          " = " + Twine(rowDim));
    return makeInvalidArgumentError(
        cache.name + " rows have " + Twine(cache.dim(2)) +
        " bytes but kv_format '" + kvFormat + "' with L = " + Twine(latent) +
        ", R = " + Twine(rope) + " needs " + Twine(expectedRow));
  }
  if (cache.dim(1) <= 0 || cache.dim(1) % 16 != 0)
    return makeInvalidArgumentError(cache.name +
                                    " page size (dim 1) must be a positive "
                                    "multiple of 16, got " +
                                    Twine(cache.dim(1)));
  if (cache.dim(0) <= 0)
    return makeInvalidArgumentError(cache.name + " has no pages (shape " +
                                    cache.shape() + ")");

  result.layoutFormat = isFloat ? getDTypeIRName(act.tensor.dtype).str()
                                : kvFormat.str();
  result.pages = cache.dim(0);
  result.pageSize = cache.dim(1);
  return result;
}

/// block_table [B, maxPages] and seq_lens [B] (int32) against the cache:
/// every length within the table's capacity and every page a request's
/// first `readLens(b)` positions live in a page of the cache. Entries past
/// those pages are never read, so they are not checked.
llvm::Error checkPagedTables(const Arg &blockTable, const Arg &seqLens,
                             int64_t batch, const Twine &batchWhat,
                             const PagedCache &cache,
                             llvm::function_ref<int64_t(int64_t)> readLens) {
  if (llvm::Error err = checkRank(blockTable, 2, "[B, max_pages]"))
    return err;
  if (llvm::Error err = checkRank(seqLens, 1, "[B]"))
    return err;
  if (llvm::Error err = checkInt32(blockTable))
    return err;
  if (llvm::Error err = checkInt32(seqLens))
    return err;
  if (llvm::Error err = checkDim(blockTable, 0, batch, batchWhat))
    return err;
  if (llvm::Error err = checkDim(seqLens, 0, batch, batchWhat))
    return err;
  int64_t maxPages = blockTable.dim(1);
  if (maxPages <= 0)
    return makeInvalidArgumentError(blockTable.name +
                                    " must have at least one column, got "
                                    "shape " +
                                    blockTable.shape());
  int64_t capacity = maxPages * cache.pageSize;
  for (int64_t b = 0; b < batch; ++b) {
    int64_t len = seqLens.tensor.getI32(b);
    if (len < 0)
      return makeInvalidArgumentError(seqLens.name + "[" + Twine(b) +
                                      "] = " + Twine(len) + " is negative");
    if (len > capacity)
      return makeInvalidArgumentError(
          seqLens.name + "[" + Twine(b) + "] = " + Twine(len) +
          " exceeds " + blockTable.name + " capacity " + Twine(capacity) +
          " (" + Twine(maxPages) + " pages of " + Twine(cache.pageSize) + ")");
  }
  for (int64_t b = 0; b < batch; ++b) {
    int64_t usedPages = llvm::divideCeil(readLens(b), cache.pageSize);
    for (int64_t k = 0; k < usedPages; ++k) {
      int32_t page = at(blockTable.tensor, b, k);
      if (page < 0 || page >= cache.pages)
        return makeInvalidArgumentError(
            blockTable.name + "[" + Twine(b) + ", " + Twine(k) + "] = " +
            Twine(page) + " is not a page of kv_cache (" + Twine(cache.pages) +
            " pages)");
    }
  }
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// IR text
//===----------------------------------------------------------------------===//

std::string tensorType(llvm::ArrayRef<int64_t> shape, DType dtype) {
  std::string text = "tensor<";
  for (int64_t d : shape)
    text += std::to_string(d) + "x";
  return text + getDTypeIRName(dtype).str() + ">";
}

std::string tensorType(const HostTensor &t) {
  return tensorType(t.shape, t.dtype);
}

std::string formatF32(double value) {
  std::string text;
  llvm::raw_string_ostream(text)
      << llvm::format("%.8e", static_cast<float>(value));
  return text;
}

/// A module with one public function `@entry` whose body is `op` (which
/// defines the SSA names listed in `results`), returning those results.
struct KernelText {
  std::string entry;
  llvm::SmallVector<std::pair<std::string, std::string>> args; // name, type
  llvm::SmallVector<std::pair<std::string, std::string>> results;
  std::string op;

  std::string str() const {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << "func.func @" << entry << "(";
    llvm::interleaveComma(args, os, [&](const auto &arg) {
      os << "%" << arg.first << ": " << arg.second;
    });
    os << ")";
    if (!results.empty()) {
      os << " -> (";
      llvm::interleaveComma(results, os,
                            [&](const auto &r) { os << r.second; });
      os << ")";
    }
    os << " {\n  " << op << "\n  return";
    if (!results.empty()) {
      os << " ";
      llvm::interleaveComma(results, os,
                            [&](const auto &r) { os << "%" << r.first; });
      os << " : ";
      llvm::interleaveComma(results, os,
                            [&](const auto &r) { os << r.second; });
    }
    os << "\n}\n";
    return text;
  }
};

/// "(t0, t1, ...) -> (r0, r1)" for ops printed with functional-type.
std::string functionalType(const KernelText &k) {
  std::string text = "(";
  llvm::interleave(
      k.args, [&](const auto &a) { text += a.second; },
      [&] { text += ", "; });
  text += ") -> (";
  llvm::interleave(
      k.results, [&](const auto &r) { text += r.second; },
      [&] { text += ", "; });
  return text + ")";
}

Kernel makeKernel(
    const KernelText &text,
    llvm::SmallVector<std::pair<DType, llvm::SmallVector<int64_t, 4>>>
        results) {
  Kernel kernel;
  kernel.source = text.str();
  kernel.entry = text.entry;
  kernel.isEmpty = !results.empty() && llvm::all_of(results, [](auto &r) {
    return getNumElements(r.second) == 0;
  });
  kernel.results = std::move(results);
  return kernel;
}

/// k_pe [T, R] or [T, 1, R] with kv_c's token count and dtype; returns R.
llvm::Expected<int64_t> checkKPe(const Arg &kPe, const Arg &kvC) {
  int64_t rank = kPe.tensor.getRank();
  if ((rank != 2 && rank != 3) || (rank == 3 && kPe.dim(1) != 1))
    return makeInvalidArgumentError(kPe.name +
                                    " must be [T, R] or [T, 1, R], got shape " +
                                    kPe.shape());
  if (llvm::Error err = checkSameDType(kPe, kvC))
    return std::move(err);
  if (llvm::Error err =
          checkDim(kPe, 0, kvC.dim(0), kvC.name + "'s token count (dim 0)"))
    return std::move(err);
  int64_t rope = kPe.dim(rank - 1);
  if (llvm::Error err = checkPositive(rope, kPe.name + "'s width R"))
    return std::move(err);
  return rope;
}

/// kv_b_proj [N*(P+V), L] for `heads` heads of nope width `nope` and value
/// width `value`.
llvm::Error checkKvBProjRows(const Arg &w, int64_t heads, int64_t nope,
                             int64_t value) {
  std::optional<int64_t> perHead = llvm::checkedAdd(nope, value);
  std::optional<int64_t> rows =
      perHead ? llvm::checkedMul(heads, *perHead) : std::nullopt;
  if (rows && w.dim(0) == *rows)
    return llvm::Error::success();
  return makeInvalidArgumentError(
      w.name + " dim 0 is " + Twine(w.dim(0)) + " but N*(P+V) = " +
      Twine(heads) + "*(" + Twine(nope) + "+" + Twine(value) + ")" +
      (rows ? " = " + Twine(*rows) : Twine(" overflows")));
}

} // namespace

//===----------------------------------------------------------------------===//
// Decode
//===----------------------------------------------------------------------===//

llvm::Expected<Kernel> mla::buildDecode(const HostTensor &qT,
                                        const HostTensor &kvCacheT,
                                        const HostTensor &blockTableT,
                                        const HostTensor &seqLensT,
                                        const DecodeOptions &options) {
  Arg q{qT, "q"}, kvCache{kvCacheT, "kv_cache"},
      blockTable{blockTableT, "block_table"}, seqLens{seqLensT, "seq_lens"};
  if (llvm::Error err = checkRank(q, 4, "[b, s_q, h_q, d]"))
    return std::move(err);
  if (llvm::Error err = checkFloat(q))
    return std::move(err);
  int64_t batch = q.dim(0), sq = q.dim(1), heads = q.dim(2), d = q.dim(3);
  int64_t latent = options.headDimV;
  if (latent <= 0 || latent >= d)
    return makeInvalidArgumentError(
        "head_dim_v = " + Twine(latent) + " must be in [1, " + Twine(d - 1) +
        "]: it is the latent width L, and q's last dim " + Twine(d) +
        " is L + R with a positive RoPE width R");
  if (llvm::Error err = checkSoftmaxScale(options.softmaxScale))
    return std::move(err);
  if (options.numSplits)
    if (llvm::Error err = checkPositive(*options.numSplits, "num_splits"))
      return std::move(err);
  llvm::Expected<PagedCache> cache =
      checkCache(kvCache, options.cache, latent, d - latent, q);
  if (!cache)
    return cache.takeError();
  auto readLen = [&](int64_t b) -> int64_t { return seqLensT.getI32(b); };
  if (llvm::Error err = checkPagedTables(blockTable, seqLens, batch,
                                         "q's batch size (dim 0)", *cache,
                                         readLen))
    return std::move(err);
  // Causal query rows are the last s_q positions of their request; an empty
  // request (an idle batch slot) has no rows to place and yields zeros.
  if (options.causal)
    for (int64_t b = 0; b < batch; ++b) {
      int64_t len = seqLensT.getI32(b);
      if (len > 0 && len < sq)
        return makeInvalidArgumentError(
            "causal decode needs seq_lens[" + Twine(b) + "] = " + Twine(len) +
            " >= s_q = " + Twine(sq) +
            " (the query rows are the request's last s_q positions)");
    }

  llvm::SmallVector<int64_t, 4> outShape{batch, sq, heads, latent};
  llvm::SmallVector<int64_t, 4> lseShape{batch, heads, sq};
  KernelText k;
  k.entry = "decode";
  k.args = {{"q", tensorType(qT)},
            {"kv_cache", tensorType(kvCacheT)},
            {"block_table", tensorType(blockTableT)},
            {"seq_lens", tensorType(seqLensT)}};
  k.results = {{"out", tensorType(outShape, qT.dtype)},
               {"lse", tensorType(lseShape, DType::f32)}};
  std::string op;
  llvm::raw_string_ostream os(op);
  os << "%out, %lse = mla.decode %q, %kv_cache[%block_table, %seq_lens] "
     << "layout " << cache->layout() << " scale "
     << formatF32(options.softmaxScale);
  if (options.causal)
    os << " causal";
  if (options.numSplits)
    os << " num_splits " << *options.numSplits;
  os << " : " << functionalType(k);
  k.op = op;
  return makeKernel(k, {{qT.dtype, outShape},
                        {DType::f32, lseShape}});
}

//===----------------------------------------------------------------------===//
// Cache write
//===----------------------------------------------------------------------===//

llvm::Expected<Kernel> mla::buildCacheWrite(const HostTensor &kvCT,
                                            const HostTensor &kPeT,
                                            const HostTensor &kvCacheT,
                                            const HostTensor &slotMappingT,
                                            const CacheFormat &format) {
  Arg kvC{kvCT, "kv_c"}, kPe{kPeT, "k_pe"}, kvCache{kvCacheT, "kv_cache"},
      slots{slotMappingT, "slot_mapping"};
  if (llvm::Error err = checkRank(kvC, 2, "[T, L]"))
    return std::move(err);
  if (llvm::Error err = checkFloat(kvC))
    return std::move(err);
  llvm::Expected<int64_t> rope = checkKPe(kPe, kvC);
  if (!rope)
    return rope.takeError();
  int64_t tokens = kvC.dim(0), latent = kvC.dim(1);
  if (llvm::Error err = checkPositive(latent, "kv_c's width L"))
    return std::move(err);
  if (llvm::Error err = checkRank(slots, 1, "[T]"))
    return std::move(err);
  if (llvm::Error err = checkInt32(slots))
    return std::move(err);
  if (llvm::Error err =
          checkDim(slots, 0, tokens, "kv_c's token count (dim 0)"))
    return std::move(err);
  llvm::Expected<PagedCache> cache =
      checkCache(kvCache, format, latent, *rope, kvC);
  if (!cache)
    return cache.takeError();
  int64_t numSlots = cache->pages * cache->pageSize;
  bool writesAnything = false;
  for (int64_t t = 0; t < tokens; ++t) {
    int64_t slot = slotMappingT.getI32(t);
    if (slot >= numSlots)
      return makeInvalidArgumentError(
          "slot_mapping[" + Twine(t) + "] = " + Twine(slot) +
          " is beyond kv_cache's " + Twine(numSlots) + " slots (" +
          Twine(cache->pages) + " pages of " + Twine(cache->pageSize) + ")");
    writesAnything |= slot >= 0;
  }

  // The cache is a memref argument viewed as a tensor for the op; the op's
  // result is materialized back into it, which bufferizes to writing the
  // caller's buffer in place.
  std::string cacheTensor = tensorType(kvCacheT);
  std::string cacheMemref = "memref" + cacheTensor.substr(strlen("tensor"));
  KernelText k;
  k.entry = "cache_write";
  k.args = {{"kv_c", tensorType(kvCT)},
            {"k_pe", tensorType(kPeT)},
            {"slot_mapping", tensorType(slotMappingT)},
            {"kv_cache", cacheMemref}};
  std::string op;
  llvm::raw_string_ostream os(op);
  os << "%cache = bufferization.to_tensor %kv_cache restrict writable : "
     << cacheMemref << " to " << cacheTensor << "\n  "
     << "%written = mla.cache_write %kv_c, %k_pe, %slot_mapping layout "
     << cache->layout() << " into %cache : " << k.args[0].second << ", "
     << k.args[1].second << ", " << k.args[2].second << " into "
     << cacheTensor << "\n  "
     << "bufferization.materialize_in_destination %written in restrict "
     << "writable %kv_cache : (" << cacheTensor << ", " << cacheMemref
     << ") -> ()";
  k.op = op;
  Kernel kernel = makeKernel(k, {});
  kernel.isEmpty = !writesAnything;
  return kernel;
}

//===----------------------------------------------------------------------===//
// Weight preparation and projections
//===----------------------------------------------------------------------===//

llvm::Expected<Kernel> mla::buildSplitKvBProj(const HostTensor &kvBProjT,
                                              int64_t numHeads,
                                              int64_t qkNopeHeadDim,
                                              int64_t vHeadDim) {
  Arg w{kvBProjT, "kv_b_proj"};
  if (llvm::Error err = checkPositive(numHeads, "num_heads"))
    return std::move(err);
  if (llvm::Error err = checkPositive(qkNopeHeadDim, "qk_nope_head_dim"))
    return std::move(err);
  if (llvm::Error err = checkPositive(vHeadDim, "v_head_dim"))
    return std::move(err);
  if (llvm::Error err = checkRank(w, 2, "[N*(P+V), L]"))
    return std::move(err);
  if (llvm::Error err = checkFloat(w))
    return std::move(err);
  if (llvm::Error err =
          checkKvBProjRows(w, numHeads, qkNopeHeadDim, vHeadDim))
    return std::move(err);
  int64_t latent = w.dim(1);
  if (llvm::Error err = checkPositive(latent, "kv_b_proj's width L"))
    return std::move(err);

  llvm::SmallVector<int64_t, 4> ukShape{numHeads, qkNopeHeadDim, latent};
  llvm::SmallVector<int64_t, 4> uvShape{numHeads, latent, vHeadDim};
  KernelText k;
  k.entry = "split_kv_b_proj";
  k.args = {{"kv_b_proj", tensorType(kvBProjT)}};
  k.results = {{"w_uk_t", tensorType(ukShape, kvBProjT.dtype)},
               {"w_uv", tensorType(uvShape, kvBProjT.dtype)}};
  k.op = "%w_uk_t, %w_uv = mla.split_kv_b_proj %kv_b_proj : " +
         k.args[0].second + " -> " + k.results[0].second + ", " +
         k.results[1].second;
  return makeKernel(k, {{kvBProjT.dtype, ukShape},
                        {kvBProjT.dtype, uvShape}});
}

llvm::Expected<Kernel> mla::buildAbsorbQ(const HostTensor &qT,
                                         const HostTensor &wUkTT) {
  Arg q{qT, "q"}, w{wUkTT, "w_uk_t"};
  if (llvm::Error err = checkRank(q, 3, "[T, N, P+R]"))
    return std::move(err);
  if (llvm::Error err = checkRank(w, 3, "[N, P, L]"))
    return std::move(err);
  if (llvm::Error err = checkFloat(q))
    return std::move(err);
  if (llvm::Error err = checkSameDType(w, q))
    return std::move(err);
  if (llvm::Error err = checkDim(w, 0, q.dim(1), "q's head count (dim 1)"))
    return std::move(err);
  int64_t nope = w.dim(1), latent = w.dim(2);
  if (nope <= 0 || nope >= q.dim(2))
    return makeInvalidArgumentError(
        "w_uk_t's nope width P = " + Twine(nope) + " must be in [1, " +
        Twine(q.dim(2) - 1) + "]: q's last dim " + Twine(q.dim(2)) +
        " is P + R with a positive RoPE width R");
  if (llvm::Error err = checkPositive(latent, "w_uk_t's latent width L"))
    return std::move(err);

  llvm::SmallVector<int64_t, 4> outShape{q.dim(0), q.dim(1),
                                         latent + q.dim(2) - nope};
  KernelText k;
  k.entry = "absorb_q";
  k.args = {{"q", tensorType(qT)}, {"w_uk_t", tensorType(wUkTT)}};
  k.results = {{"q_absorbed", tensorType(outShape, qT.dtype)}};
  k.op = "%q_absorbed = mla.absorb_q %q, %w_uk_t : " + k.args[0].second +
         ", " + k.args[1].second + " -> " + k.results[0].second;
  return makeKernel(k, {{qT.dtype, outShape}});
}

llvm::Expected<Kernel> mla::buildUpProjOut(const HostTensor &oT,
                                           const HostTensor &wUvT) {
  Arg o{oT, "o"}, w{wUvT, "w_uv"};
  if (llvm::Error err = checkRank(o, 3, "[T, N, L]"))
    return std::move(err);
  if (llvm::Error err = checkRank(w, 3, "[N, L, V]"))
    return std::move(err);
  if (llvm::Error err = checkFloat(o))
    return std::move(err);
  if (llvm::Error err = checkSameDType(w, o))
    return std::move(err);
  if (llvm::Error err = checkDim(w, 0, o.dim(1), "o's head count (dim 1)"))
    return std::move(err);
  if (llvm::Error err = checkDim(w, 1, o.dim(2), "o's latent width (dim 2)"))
    return std::move(err);

  llvm::SmallVector<int64_t, 4> outShape{o.dim(0), o.dim(1) * w.dim(2)};
  KernelText k;
  k.entry = "up_proj_out";
  k.args = {{"o", tensorType(oT)}, {"w_uv", tensorType(wUvT)}};
  k.results = {{"out", tensorType(outShape, oT.dtype)}};
  k.op = "%out = mla.up_proj_out %o, %w_uv : " + k.args[0].second + ", " +
         k.args[1].second + " -> " + k.results[0].second;
  return makeKernel(k, {{oT.dtype, outShape}});
}

//===----------------------------------------------------------------------===//
// Merge
//===----------------------------------------------------------------------===//

llvm::Expected<Kernel> mla::buildMergeStates(const HostTensor &outAT,
                                             const HostTensor &lseAT,
                                             const HostTensor &outBT,
                                             const HostTensor &lseBT) {
  Arg outA{outAT, "out_a"}, lseA{lseAT, "lse_a"}, outB{outBT, "out_b"},
      lseB{lseBT, "lse_b"};
  if (llvm::Error err = checkRank(outA, 3, "[T, N, H]"))
    return std::move(err);
  if (llvm::Error err = checkFloat(outA))
    return std::move(err);
  if (llvm::Error err = checkSameDType(outB, outA))
    return std::move(err);
  for (const Arg *lse : {&lseA, &lseB}) {
    if (llvm::Error err = checkRank(*lse, 2, "[N, T]"))
      return std::move(err);
    if (llvm::Error err = checkDType(*lse, DType::f32, "log-sum-exp values"))
      return std::move(err);
  }
  if (outB.tensor.shape != outA.tensor.shape)
    return makeInvalidArgumentError("out_b has shape " + outB.shape() +
                                    " but out_a has shape " + outA.shape());
  llvm::SmallVector<int64_t, 4> lseShape{outA.dim(1), outA.dim(0)};
  for (const Arg *lse : {&lseA, &lseB})
    if (lse->tensor.shape != lseShape)
      return makeInvalidArgumentError(
          lse->name + " must be [N, T] = " + formatShape(lseShape) +
          " for out_a " + outA.shape() + ", got " + lse->shape());

  KernelText k;
  k.entry = "merge_states";
  k.args = {{"out_a", tensorType(outAT)},
            {"lse_a", tensorType(lseAT)},
            {"out_b", tensorType(outBT)},
            {"lse_b", tensorType(lseBT)}};
  k.results = {{"out", tensorType(outAT)}, {"lse", tensorType(lseAT)}};
  k.op = "%out, %lse = mla.merge_states %out_a, %lse_a, %out_b, %lse_b : " +
         functionalType(k);
  return makeKernel(k, {{outAT.dtype, outAT.shape},
                        {DType::f32, lseShape}});
}

//===----------------------------------------------------------------------===//
// Prefill
//===----------------------------------------------------------------------===//

llvm::Expected<Kernel>
mla::buildPrefill(const HostTensor &qT, const HostTensor &kvCT,
                  const HostTensor &kPeT, const HostTensor &kvBProjT,
                  const HostTensor &kvCacheT, const HostTensor &blockTableT,
                  const HostTensor &queryStartLocT, const HostTensor &seqLensT,
                  const PrefillOptions &options) {
  Arg q{qT, "q"}, kvC{kvCT, "kv_c"}, kPe{kPeT, "k_pe"},
      w{kvBProjT, "kv_b_proj"}, kvCache{kvCacheT, "kv_cache"},
      blockTable{blockTableT, "block_table"},
      qsl{queryStartLocT, "query_start_loc"}, seqLens{seqLensT, "seq_lens"};
  if (llvm::Error err = checkRank(q, 3, "[T, N, P+R]"))
    return std::move(err);
  if (llvm::Error err = checkFloat(q))
    return std::move(err);
  if (llvm::Error err = checkRank(kvC, 2, "[T, L]"))
    return std::move(err);
  if (llvm::Error err = checkSameDType(kvC, q))
    return std::move(err);
  if (llvm::Error err = checkDim(kvC, 0, q.dim(0), "q's token count (dim 0)"))
    return std::move(err);
  llvm::Expected<int64_t> rope = checkKPe(kPe, kvC);
  if (!rope)
    return rope.takeError();
  int64_t tokens = q.dim(0), heads = q.dim(1), latent = kvC.dim(1);
  int64_t nope = q.dim(2) - *rope, value = options.vHeadDim;
  if (llvm::Error err = checkPositive(latent, "kv_c's width L"))
    return std::move(err);
  if (nope <= 0)
    return makeInvalidArgumentError(
        "q's last dim " + Twine(q.dim(2)) +
        " must exceed k_pe's RoPE width R = " + Twine(*rope) +
        " (q is [T, N, P+R] with a positive nope width P)");
  if (llvm::Error err = checkPositive(value, "v_head_dim"))
    return std::move(err);
  if (llvm::Error err = checkSoftmaxScale(options.softmaxScale))
    return std::move(err);
  if (options.workspaceRows)
    if (llvm::Error err =
            checkPositive(*options.workspaceRows, "workspace_rows"))
      return std::move(err);
  if (llvm::Error err = checkRank(w, 2, "[N*(P+V), L]"))
    return std::move(err);
  if (llvm::Error err = checkSameDType(w, q))
    return std::move(err);
  if (llvm::Error err = checkKvBProjRows(w, heads, nope, value))
    return std::move(err);
  if (llvm::Error err = checkDim(w, 1, latent, "kv_c's width L"))
    return std::move(err);
  llvm::Expected<PagedCache> cache =
      checkCache(kvCache, options.cache, latent, *rope, q);
  if (!cache)
    return cache.takeError();

  if (llvm::Error err = checkRank(blockTable, 2, "[B, max_pages]"))
    return std::move(err);
  int64_t batch = blockTable.dim(0);
  if (llvm::Error err = checkRank(qsl, 1, "[B+1]"))
    return std::move(err);
  if (llvm::Error err = checkInt32(qsl))
    return std::move(err);
  if (llvm::Error err =
          checkDim(qsl, 0, batch + 1, "B + 1 (B = block_table dim 0)"))
    return std::move(err);
  for (int64_t i = 0; i <= batch; ++i) {
    int64_t start = queryStartLocT.getI32(i);
    int64_t prev = i ? queryStartLocT.getI32(i - 1) : 0;
    if ((i == 0 && start != 0) || start < prev)
      return makeInvalidArgumentError(
          "query_start_loc must start at 0 and never decrease, but "
          "query_start_loc[" +
          Twine(i) + "] = " + Twine(start));
  }
  if (queryStartLocT.getI32(batch) != tokens)
    return makeInvalidArgumentError(
        "query_start_loc[" + Twine(batch) + "] = " +
        Twine(queryStartLocT.getI32(batch)) +
        " must equal the token count T = " + Twine(tokens) + " (q dim 0)");
  // A request's new tokens take their K/V from kv_c/k_pe; only its context
  // (the positions before them) is read from the cache.
  auto newTokens = [&](int64_t b) -> int64_t {
    return queryStartLocT.getI32(b + 1) - queryStartLocT.getI32(b);
  };
  auto contextLen = [&](int64_t b) -> int64_t {
    return std::max<int64_t>(seqLensT.getI32(b) - newTokens(b), 0);
  };
  if (llvm::Error err = checkPagedTables(blockTable, seqLens, batch,
                                         "B (block_table dim 0)", *cache,
                                         contextLen))
    return std::move(err);
  for (int64_t b = 0; b < batch; ++b)
    if (seqLensT.getI32(b) < newTokens(b))
      return makeInvalidArgumentError(
          "seq_lens[" + Twine(b) + "] = " + Twine(seqLensT.getI32(b)) +
          " is shorter than request " + Twine(b) + "'s " +
          Twine(newTokens(b)) +
          " new tokens (seq_lens counts the context and the new tokens)");

  llvm::SmallVector<int64_t, 4> outShape{tokens, heads, value};
  KernelText k;
  k.entry = "prefill";
  k.args = {{"q", tensorType(qT)},
            {"kv_c", tensorType(kvCT)},
            {"k_pe", tensorType(kPeT)},
            {"kv_b_proj", tensorType(kvBProjT)},
            {"kv_cache", tensorType(kvCacheT)},
            {"block_table", tensorType(blockTableT)},
            {"query_start_loc", tensorType(queryStartLocT)},
            {"seq_lens", tensorType(seqLensT)}};
  k.results = {{"out", tensorType(outShape, qT.dtype)}};
  std::string op;
  llvm::raw_string_ostream os(op);
  os << "%out = mla.prefill %q, %kv_c, %k_pe, %kv_b_proj, "
     << "%kv_cache[%block_table, %query_start_loc, %seq_lens] layout "
     << cache->layout() << " scale " << formatF32(options.softmaxScale);
  if (options.workspaceRows)
    os << " workspace_rows " << *options.workspaceRows;
  os << " : " << functionalType(k);
  k.op = op;
  return makeKernel(k, {{qT.dtype, outShape}});
}
