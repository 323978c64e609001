//===- ArgRules.cpp - the argument rules of every API operation -----------===//
//
// Rules are written per argument rather than left to the op verifiers: the
// verifiers see types, not the tables' values, and speak of operands where
// an API user needs argument names. Each check returns on the first
// violation, so a message always names one argument.
//
//===----------------------------------------------------------------------===//

#include "mla/Contract/ArgRules.h"
#include "mla/Contract/Error.h"
#include "mla/Contract/KernelABI.h"
#include "mla/Contract/MixedBatch.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/MathExtras.h"
#include <algorithm>
#include <cmath>

using namespace mla;
using llvm::Twine;

/// The GPU decode grid's y extent (pieces per request).
static constexpr int64_t kMaxGpuSplits = 65535;

namespace {

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

/// The activations' element types on `device`: the CPU lowering computes in
/// f32 from f32 or f16; the GPU kernels of `op` take their own set.
llvm::Error checkFloat(const Arg &a, llvm::ArrayRef<DType> allowed) {
  if (llvm::is_contained(allowed, a.tensor.dtype))
    return llvm::Error::success();
  std::string names;
  for (auto [i, t] : llvm::enumerate(allowed))
    names += (i == 0                    ? ""
              : i + 1 == allowed.size() ? " or "
                                        : ", ") +
             getDTypeName(t).str();
  return makeInvalidArgumentError(a.name + " must be " + names + ", got " +
                                  a.dtype());
}

constexpr DType kCpuFloats[] = {DType::f32, DType::f16};
constexpr DType kGpuDecodeFloats[] = {DType::bf16, DType::f16};
constexpr DType kGpuFloats[] = {DType::bf16, DType::f16, DType::f32};

llvm::ArrayRef<DType> floatsOf(Device device) {
  return device == Device::CPU ? llvm::ArrayRef(kCpuFloats)
                               : llvm::ArrayRef(kGpuFloats);
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

/// The IR and the GPU specs hold the scale as an f32, so that is what must
/// be positive and finite.
llvm::Expected<float> checkSoftmaxScale(double scale) {
  float value = static_cast<float>(scale);
  if (value > 0.0f && std::isfinite(value))
    return value;
  return makeInvalidArgumentError(
      "softmax_scale must be positive and finite, got " +
      Twine(std::to_string(scale)));
}

/// Table entry `t[b, k]` of a row-major i32 matrix.
int32_t at(const HostTensor &t, int64_t b, int64_t k) {
  return t.getI32(b * t.shape[1] + k);
}

llvm::ArrayRef<int32_t> i32Values(const HostTensor &t) {
  return llvm::ArrayRef(static_cast<const int32_t *>(t.data),
                        static_cast<size_t>(t.getNumElements()));
}

//===----------------------------------------------------------------------===//
// The paged cache
//===----------------------------------------------------------------------===//

llvm::Error checkKvFormatName(llvm::StringRef kvFormat) {
  if (llvm::Error err = checkOptionString("kv_format", kvFormat))
    return err;
  if (llvm::is_contained({"auto", "fp8_e4m3", "fp8_e4m3_token", "fp8_ds_mla"},
                         kvFormat))
    return llvm::Error::success();
  return makeInvalidArgumentError(
      "kv_format '" + kvFormat +
      "' is unknown (expected auto, fp8_e4m3, fp8_e4m3_token, fp8_ds_mla)");
}

/// The cache's element type for `format`: `act`'s dtype for "auto"
/// (nothing converts it), or any GPU float where `converts` (the GPU cache
/// write stores rows in the cache's float type); bytes for fp8.
llvm::Error checkCacheDType(const Arg &cache, llvm::StringRef kvFormat,
                            const Arg &act, bool converts) {
  DType dtype = cache.tensor.dtype;
  if (kvFormat == "auto") {
    if (converts) {
      if (llvm::is_contained(kGpuFloats, dtype))
        return llvm::Error::success();
    } else if (dtype == act.tensor.dtype) {
      return llvm::Error::success();
    }
    return makeInvalidArgumentError(
        cache.name + " is " + cache.dtype() + " but kv_format 'auto' stores " +
        (converts ? Twine("floats (bfloat16, float16 or float32)")
                  : act.name + "'s dtype " + act.dtype()) +
        (dtype == DType::u8 || dtype == DType::i8
             ? "; pass the fp8 kv_format this uint8 cache was written with"
             : ""));
  }
  if (dtype == DType::u8 || dtype == DType::i8)
    return llvm::Error::success();
  return makeInvalidArgumentError("kv_format '" + kvFormat +
                                  "' needs a uint8 " + cache.name + ", got " +
                                  cache.dtype());
}

} // namespace

llvm::Error mla::checkKvScale(Device device, const CacheFormat &format,
                              CheckedCache &checked, bool scaleAtLaunch) {
  llvm::StringRef kvFormat = format.kvFormat;
  bool given = format.kvScale || format.kvScaleTensor;
  if (kvFormat != "fp8_e4m3") {
    if (given)
      return makeInvalidArgumentError("kv_scale is only used by kv_format "
                                      "'fp8_e4m3', not '" +
                                      kvFormat + "'");
    return llvm::Error::success();
  }
  if (scaleAtLaunch) {
    // The GPU decode takes the scale as a launch argument (a float32[1]
    // device pointer its launcher checks), so the options carry none.
    if (!given)
      return llvm::Error::success();
    return makeInvalidArgumentError(
        "the GPU decode reads fp8_e4m3's kv_scale from device memory (a "
        "float32[1] tensor passed at launch), not from the options");
  }
  if (!given)
    return makeInvalidArgumentError(
        "kv_format 'fp8_e4m3' needs kv_scale, the per-tensor scale its "
        "values were divided by");
  if (format.kvScale && format.kvScaleTensor)
    return makeInvalidArgumentError(
        "kv_scale is given twice: as a value and as a device tensor");
  float scale;
  if (const std::optional<HostTensor> &t = format.kvScaleTensor) {
    if (t->dtype != DType::f32 || t->getNumElements() != 1)
      return makeInvalidArgumentError(
          "a kv_scale tensor must hold one float32 element, got " +
          getDTypeName(t->dtype) + " " + formatShape(t->shape));
    if (device == Device::GPU) {
      checked.scaleOnDevice = true;
      return llvm::Error::success();
    }
    if (!t->data)
      return makeInvalidArgumentError(
          "the CPU path reads the kv_scale tensor's value, but it has no "
          "host data");
    scale = *static_cast<const float *>(t->data);
  } else {
    scale = static_cast<float>(*format.kvScale);
  }
  if (!(scale > 0.0f) || !std::isfinite(scale))
    return makeInvalidArgumentError(
        "kv_scale must be positive and finite, got " +
        Twine(std::to_string(scale)));
  checked.scale = scale;
  return llvm::Error::success();
}

namespace {

llvm::Error checkRowWidth(const Arg &cache, llvm::StringRef kvFormat,
                          int64_t latent, int64_t rope) {
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
    expectedRow = gpu::dsMlaRopeOffset(latent) + 2 * rope;
  if (cache.dim(2) == expectedRow)
    return llvm::Error::success();
  if (kvFormat == "auto")
    return makeInvalidArgumentError(
        cache.name + " rows have " + Twine(cache.dim(2)) +
        " elements but L + R = " + Twine(latent) + " + " + Twine(rope) + " = " +
        Twine(rowDim));
  return makeInvalidArgumentError(
      cache.name + " rows have " + Twine(cache.dim(2)) +
      " bytes but kv_format '" + kvFormat + "' with L = " + Twine(latent) +
      ", R = " + Twine(rope) + " needs " + Twine(expectedRow));
}

/// The CPU lowering tiles pages by 16 rows; the GPU kernels take any page
/// size their spec names.
llvm::Error checkPages(Device device, const Arg &cache) {
  int64_t multiple = device == Device::CPU ? 16 : 1;
  if (cache.dim(1) <= 0 || cache.dim(1) % multiple != 0)
    return makeInvalidArgumentError(
        cache.name + " page size (dim 1) must be a positive " +
        (multiple == 1 ? Twine("number") : "multiple of " + Twine(multiple)) +
        ", got " + Twine(cache.dim(1)));
  if (cache.dim(0) <= 0)
    return makeInvalidArgumentError(cache.name + " has no pages (shape " +
                                    cache.shape() + ")");
  return llvm::Error::success();
}

/// Checks `cache` against `format` for rows of latent width `latent` and
/// RoPE width `rope` written or read with the activations `act` (converted
/// to the cache's float type where `converts`). `scaleAtLaunch`: as in
/// checkKvScale.
llvm::Expected<CheckedCache> checkCache(Device device, const Arg &cache,
                                        const CacheFormat &format,
                                        int64_t latent, int64_t rope,
                                        const Arg &act, bool converts = false,
                                        bool scaleAtLaunch = false) {
  llvm::StringRef kvFormat = format.kvFormat;
  if (llvm::Error err = checkKvFormatName(kvFormat))
    return std::move(err);
  if (llvm::Error err = checkRank(cache, 3, "[pages, page_size, row]"))
    return std::move(err);
  if (llvm::Error err = checkCacheDType(cache, kvFormat, act, converts))
    return std::move(err);
  CheckedCache result;
  if (llvm::Error err = checkKvScale(device, format, result, scaleAtLaunch))
    return std::move(err);
  if (llvm::Error err = checkRowWidth(cache, kvFormat, latent, rope))
    return std::move(err);
  if (llvm::Error err = checkPages(device, cache))
    return std::move(err);
  result.layoutFormat = kvFormat == "auto"
                            ? getDTypeIRName(cache.tensor.dtype).str()
                            : kvFormat.str();
  result.pages = cache.dim(0);
  result.pageSize = cache.dim(1);
  return result;
}

/// block_table [B, maxPages] and seq_lens [B] (int32): shapes and types.
llvm::Error checkTableShapes(const Arg &blockTable, const Arg &seqLens,
                             int64_t batch, const Twine &batchWhat) {
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
  if (blockTable.dim(1) <= 0)
    return makeInvalidArgumentError(blockTable.name +
                                    " must have at least one column, got "
                                    "shape " +
                                    blockTable.shape());
  return llvm::Error::success();
}

/// Every page a request's first `readLen(b)` positions live in is a page of
/// the cache. Entries past those pages are never read, so they are not
/// checked.
llvm::Error checkUsedPages(const Arg &blockTable, const CheckedCache &cache,
                           llvm::function_ref<int64_t(int64_t)> readLen) {
  for (int64_t b = 0, e = blockTable.dim(0); b < e; ++b) {
    int64_t usedPages = llvm::divideCeil(readLen(b), cache.pageSize);
    for (int64_t k = 0; k < usedPages; ++k) {
      int32_t page = at(blockTable.tensor, b, k);
      if (page < 0 || page >= cache.pages)
        return makeInvalidArgumentError(blockTable.name + "[" + Twine(b) +
                                        ", " + Twine(k) + "] = " + Twine(page) +
                                        " is not a page of kv_cache (" +
                                        Twine(cache.pages) + " pages)");
    }
  }
  return llvm::Error::success();
}

/// k_pe [T, R] or [T, 1, R] with kv_c's token count and dtype; returns R.
llvm::Expected<int64_t> checkKPe(const Arg &kPe, const Arg &kvC) {
  int64_t rank = kPe.tensor.getRank();
  if ((rank != 2 && rank != 3) || (rank == 3 && kPe.dim(1) != 1))
    return makeInvalidArgumentError(
        kPe.name + " must be [T, R] or [T, 1, R], got shape " + kPe.shape());
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
      w.name + " dim 0 is " + Twine(w.dim(0)) +
      " but N*(P+V) = " + Twine(heads) + "*(" + Twine(nope) + "+" +
      Twine(value) + ")" + (rows ? " = " + Twine(*rows) : Twine(" overflows")));
}

llvm::Error checkNumSplits(Device device, std::optional<int64_t> numSplits,
                           int64_t capacity) {
  if (!numSplits)
    return llvm::Error::success();
  if (llvm::Error err = checkPositive(*numSplits, "num_splits"))
    return err;
  int64_t limit = getMaxNumSplits(device, capacity);
  if (*numSplits <= limit)
    return llvm::Error::success();
  return makeInvalidArgumentError(
      "num_splits = " + Twine(*numSplits) + " must be in [1, " + Twine(limit) +
      "]: " +
      (device == Device::GPU
           ? Twine("the decode grid has at most 65535 pieces per request")
           : "a piece holds at least one of the block table's " +
                 Twine(capacity) + " positions"));
}

} // namespace

//===----------------------------------------------------------------------===//
// Shared value rules
//===----------------------------------------------------------------------===//

llvm::Error mla::checkOptionString(llvm::StringRef name,
                                   llvm::StringRef value) {
  size_t nul = value.find('\0');
  if (nul == llvm::StringRef::npos)
    return llvm::Error::success();
  return makeInvalidArgumentError(name + " holds a NUL byte at offset " +
                                  Twine(nul) + "; options are plain text");
}

int64_t mla::getMaxNumSplits(Device device, int64_t capacity) {
  if (device == Device::GPU)
    return kMaxGpuSplits;
  return std::max<int64_t>(capacity, 1);
}

llvm::Error mla::checkSeqLenValues(llvm::ArrayRef<int32_t> seqLens,
                                   int64_t maxPages, int64_t pageSize,
                                   llvm::StringRef tableName,
                                   std::optional<int64_t> causalRows) {
  int64_t capacity = maxPages * pageSize;
  for (auto [b, len] : llvm::enumerate(seqLens)) {
    if (len < 0)
      return makeInvalidArgumentError("seq_lens[" + Twine(b) +
                                      "] = " + Twine(len) + " is negative");
    if (len > capacity)
      return makeInvalidArgumentError(
          "seq_lens[" + Twine(b) + "] = " + Twine(len) + " exceeds " +
          tableName + " capacity " + Twine(capacity) + " (" + Twine(maxPages) +
          " pages of " + Twine(pageSize) + ")");
    // Causal query rows are the last s_q positions of their request; an
    // empty request (an idle batch slot) has no rows to place.
    if (causalRows && len > 0 && len < *causalRows)
      return makeInvalidArgumentError(
          "causal decode needs seq_lens[" + Twine(b) + "] = " + Twine(len) +
          " >= s_q = " + Twine(*causalRows) +
          " (the query rows are the request's last s_q positions)");
  }
  return llvm::Error::success();
}

llvm::Expected<bool> mla::checkSlotValues(llvm::ArrayRef<int32_t> slotMapping,
                                          int64_t pages, int64_t pageSize) {
  int64_t numSlots = pages * pageSize;
  bool writesAnything = false;
  for (auto [t, slot] : llvm::enumerate(slotMapping)) {
    if (slot >= numSlots)
      return makeInvalidArgumentError(
          "slot_mapping[" + Twine(t) + "] = " + Twine(slot) +
          " is beyond kv_cache's " + Twine(numSlots) + " slots (" +
          Twine(pages) + " pages of " + Twine(pageSize) + ")");
    writesAnything |= slot >= 0;
  }
  return writesAnything;
}

//===----------------------------------------------------------------------===//
// Decode
//===----------------------------------------------------------------------===//

/// q [B, Sq, N, L+R] and head_dim_v = L.
/// q [b, s_q, h_q, d], or packed [T, h_q, d] for a varlen decode (batch and
/// s_q then come from query_start_loc).
static llvm::Expected<DecodeCall> checkDecodeQuery(Device device, const Arg &q,
                                                   const DecodeOptions &opts,
                                                   bool varlen) {
  if (llvm::Error err = varlen ? checkRank(q, 3, "[T, h_q, d]")
                               : checkRank(q, 4, "[b, s_q, h_q, d]"))
    return std::move(err);
  if (llvm::Error err = checkFloat(q, device == Device::CPU
                                          ? llvm::ArrayRef(kCpuFloats)
                                          : llvm::ArrayRef(kGpuDecodeFloats)))
    return std::move(err);
  DecodeCall call;
  call.dtype = q.tensor.dtype;
  call.varlen = varlen;
  if (varlen) {
    call.tokens = q.dim(0);
  } else {
    call.batch = q.dim(0);
    call.queryRows = q.dim(1);
  }
  call.numHeads = q.dim(varlen ? 1 : 2);
  int64_t d = q.dim(varlen ? 2 : 3);
  call.latentDim = opts.headDimV;
  if (call.latentDim <= 0 || call.latentDim >= d)
    return makeInvalidArgumentError(
        "head_dim_v = " + Twine(call.latentDim) + " must be in [1, " +
        Twine(d - 1) + "]: it is the latent width L, and q's last dim " +
        Twine(d) + " is L + R with a positive RoPE width R");
  call.ropeDim = d - call.latentDim;
  llvm::Expected<float> scale = checkSoftmaxScale(opts.softmaxScale);
  if (!scale)
    return scale.takeError();
  call.softmaxScale = *scale;
  call.causal = opts.causal;
  call.numSplits = opts.numSplits;
  return call;
}

/// query_start_loc [B+1]: starts at 0, never decreases, ends at T.
static llvm::Error checkQueryStartLoc(const Arg &qsl, int64_t batch,
                                      int64_t tokens);

llvm::Error mla::checkVarlenQueryValues(llvm::ArrayRef<int32_t> queryStartLoc,
                                        llvm::ArrayRef<int32_t> seqLens,
                                        int64_t maxQueryRows) {
  for (size_t b = 0; b + 1 < queryStartLoc.size(); ++b) {
    int64_t rows = int64_t(queryStartLoc[b + 1]) - queryStartLoc[b];
    if (rows > maxQueryRows)
      return makeInvalidArgumentError(
          "request " + Twine(b) + " has " + Twine(rows) +
          " query tokens (query_start_loc[" + Twine(b + 1) +
          "] - query_start_loc[" + Twine(b) + "]), more than the " +
          Twine(maxQueryRows) + " a varlen decode takes");
    if (b < seqLens.size() && rows > seqLens[b])
      return makeInvalidArgumentError(
          "request " + Twine(b) + " has " + Twine(rows) +
          " query tokens but seq_lens[" + Twine(b) +
          "] = " + Twine(seqLens[b]) +
          " (seq_lens counts the query tokens: q_len > seq_len is an input "
          "error)");
  }
  return llvm::Error::success();
}

/// The rules both decode forms share once q is checked: the cache, the
/// tables' shapes and values and the split count.
static llvm::Error checkDecodeTables(Device device, const Arg &q,
                                     const Arg &kvCache, const Arg &blockTable,
                                     const Arg &seqLens,
                                     const DecodeOptions &options,
                                     DecodeCall &call,
                                     std::optional<int64_t> causalRows) {
  // The GPU decode reads every format but f32 (which checkCache refuses for
  // q's bf16/f16 dtype), fp8_e4m3's scale from device memory.
  bool gpu = device == Device::GPU;
  llvm::Expected<CheckedCache> cache =
      checkCache(device, kvCache, options.cache, call.latentDim, call.ropeDim,
                 q, /*converts=*/false, /*scaleAtLaunch=*/gpu);
  if (!cache)
    return cache.takeError();
  call.cache = std::move(*cache);
  if (llvm::Error err =
          checkTableShapes(blockTable, seqLens, call.batch,
                           call.varlen ? "B (query_start_loc dim 0 - 1)"
                                       : "q's batch size (dim 0)"))
    return err;
  call.maxPages = blockTable.dim(1);
  int64_t pageSize = call.cache.pageSize;
  if (llvm::Error err =
          checkNumSplits(device, options.numSplits, call.maxPages * pageSize))
    return err;
  if (!seqLens.tensor.data)
    return llvm::Error::success();
  if (llvm::Error err =
          checkSeqLenValues(i32Values(seqLens.tensor), call.maxPages, pageSize,
                            blockTable.name, causalRows))
    return err;
  if (blockTable.tensor.data)
    return checkUsedPages(blockTable, call.cache, [&](int64_t b) {
      return int64_t(seqLens.tensor.getI32(b));
    });
  return llvm::Error::success();
}

llvm::Expected<DecodeCall> mla::checkDecode(Device device, const HostTensor &qT,
                                            const HostTensor &kvCacheT,
                                            const HostTensor &blockTableT,
                                            const HostTensor &seqLensT,
                                            const DecodeOptions &options) {
  Arg q{qT, "q"}, kvCache{kvCacheT, "kv_cache"},
      blockTable{blockTableT, "block_table"}, seqLens{seqLensT, "seq_lens"};
  llvm::Expected<DecodeCall> call =
      checkDecodeQuery(device, q, options, /*varlen=*/false);
  if (!call)
    return call.takeError();
  std::optional<int64_t> causalRows;
  if (options.causal)
    causalRows = call->queryRows;
  if (llvm::Error err = checkDecodeTables(device, q, kvCache, blockTable,
                                          seqLens, options, *call, causalRows))
    return std::move(err);
  return call;
}

llvm::Expected<DecodeCall> mla::checkVarlenDecode(
    Device device, const HostTensor &qT, const HostTensor &kvCacheT,
    const HostTensor &blockTableT, const HostTensor &seqLensT,
    const HostTensor &queryStartLocT, const DecodeOptions &options) {
  Arg q{qT, "q"}, kvCache{kvCacheT, "kv_cache"},
      blockTable{blockTableT, "block_table"}, seqLens{seqLensT, "seq_lens"},
      qsl{queryStartLocT, "query_start_loc"};
  llvm::Expected<DecodeCall> call =
      checkDecodeQuery(device, q, options, /*varlen=*/true);
  if (!call)
    return call.takeError();
  if (llvm::Error err = checkRank(qsl, 1, "[B+1]"))
    return std::move(err);
  if (llvm::Error err = checkInt32(qsl))
    return std::move(err);
  if (qsl.dim(0) < 2)
    return makeInvalidArgumentError(
        "query_start_loc has " + Twine(qsl.dim(0)) +
        " entries; a varlen decode of B requests needs B + 1 >= 2");
  call->batch = qsl.dim(0) - 1;
  // Without host values the largest query length is the limit itself.
  call->queryRows = gpu::kMaxVarlenQueryRows;
  if (llvm::Error err = checkDecodeTables(device, q, kvCache, blockTable,
                                          seqLens, options, *call, {}))
    return std::move(err);
  if (!queryStartLocT.data)
    return call;
  if (llvm::Error err = checkQueryStartLoc(qsl, call->batch, call->tokens))
    return std::move(err);
  llvm::ArrayRef<int32_t> starts = i32Values(queryStartLocT);
  if (llvm::Error err = checkVarlenQueryValues(
          starts,
          seqLensT.data ? i32Values(seqLensT) : llvm::ArrayRef<int32_t>(),
          gpu::kMaxVarlenQueryRows))
    return std::move(err);
  call->queryRows = 1;
  for (int64_t b = 0; b < call->batch; ++b)
    call->queryRows =
        std::max<int64_t>(call->queryRows, starts[b + 1] - starts[b]);
  return call;
}

//===----------------------------------------------------------------------===//
// Cache write
//===----------------------------------------------------------------------===//

llvm::Expected<CacheWriteCall>
mla::checkCacheWrite(Device device, const HostTensor &kvCT,
                     const HostTensor &kPeT, const HostTensor &kvCacheT,
                     const HostTensor &slotMappingT,
                     const CacheFormat &format) {
  Arg kvC{kvCT, "kv_c"}, kPe{kPeT, "k_pe"}, kvCache{kvCacheT, "kv_cache"},
      slots{slotMappingT, "slot_mapping"};
  if (llvm::Error err = checkRank(kvC, 2, "[T, L]"))
    return std::move(err);
  if (llvm::Error err = checkFloat(kvC, floatsOf(device)))
    return std::move(err);
  llvm::Expected<int64_t> rope = checkKPe(kPe, kvC);
  if (!rope)
    return rope.takeError();
  CacheWriteCall call;
  call.dtype = kvCT.dtype;
  call.tokens = kvC.dim(0);
  call.latentDim = kvC.dim(1);
  call.ropeDim = *rope;
  if (llvm::Error err = checkPositive(call.latentDim, "kv_c's width L"))
    return std::move(err);
  if (llvm::Error err = checkRank(slots, 1, "[T]"))
    return std::move(err);
  if (llvm::Error err = checkInt32(slots))
    return std::move(err);
  if (llvm::Error err =
          checkDim(slots, 0, call.tokens, "kv_c's token count (dim 0)"))
    return std::move(err);
  llvm::Expected<CheckedCache> cache =
      checkCache(device, kvCache, format, call.latentDim, *rope, kvC,
                 /*converts=*/device == Device::GPU);
  if (!cache)
    return cache.takeError();
  call.cache = std::move(*cache);
  // The GPU kernel addresses slots with int32.
  if (device == Device::GPU &&
      call.cache.pages * call.cache.pageSize > INT32_MAX)
    return makeInvalidArgumentError(
        "kv_cache has " + Twine(call.cache.pages * call.cache.pageSize) +
        " slots; at most " + Twine(INT32_MAX) + " are addressable");
  call.writesAnything = call.tokens > 0;
  if (!slotMappingT.data)
    return call;
  llvm::Expected<bool> writes = checkSlotValues(
      i32Values(slotMappingT), call.cache.pages, call.cache.pageSize);
  if (!writes)
    return writes.takeError();
  call.writesAnything = *writes;
  return call;
}

//===----------------------------------------------------------------------===//
// Weight preparation and projections
//===----------------------------------------------------------------------===//

llvm::Expected<SplitKvBProjCall>
mla::checkSplitKvBProj(const HostTensor &kvBProjT, int64_t numHeads,
                       int64_t qkNopeHeadDim, int64_t vHeadDim) {
  Arg w{kvBProjT, "kv_b_proj"};
  if (llvm::Error err = checkPositive(numHeads, "num_heads"))
    return std::move(err);
  if (llvm::Error err = checkPositive(qkNopeHeadDim, "qk_nope_head_dim"))
    return std::move(err);
  if (llvm::Error err = checkPositive(vHeadDim, "v_head_dim"))
    return std::move(err);
  if (llvm::Error err = checkRank(w, 2, "[N*(P+V), L]"))
    return std::move(err);
  if (llvm::Error err = checkFloat(w, kCpuFloats))
    return std::move(err);
  if (llvm::Error err = checkKvBProjRows(w, numHeads, qkNopeHeadDim, vHeadDim))
    return std::move(err);
  if (llvm::Error err = checkPositive(w.dim(1), "kv_b_proj's width L"))
    return std::move(err);
  return SplitKvBProjCall{kvBProjT.dtype, numHeads, qkNopeHeadDim, vHeadDim,
                          w.dim(1)};
}

/// x [T, N, K(+R)] and w [N, K, out] of one dtype and head count.
static llvm::Expected<ProjectionCall>
checkProjection(Device device, const Arg &x, const Arg &w,
                llvm::StringRef xDims, llvm::StringRef wDims) {
  if (llvm::Error err = checkRank(x, 3, xDims))
    return std::move(err);
  if (llvm::Error err = checkRank(w, 3, wDims))
    return std::move(err);
  if (llvm::Error err = checkFloat(x, floatsOf(device)))
    return std::move(err);
  if (llvm::Error err = checkSameDType(w, x))
    return std::move(err);
  if (llvm::Error err =
          checkDim(w, 0, x.dim(1), x.name + "'s head count (dim 1)"))
    return std::move(err);
  return ProjectionCall{x.tensor.dtype, x.dim(0), x.dim(1),
                        w.dim(1),       w.dim(2), 0};
}

llvm::Expected<ProjectionCall>
mla::checkAbsorbQ(Device device, const HostTensor &qT, const HostTensor &wT) {
  Arg q{qT, "q"}, w{wT, "w_uk_t"};
  llvm::Expected<ProjectionCall> call =
      checkProjection(device, q, w, "[T, N, P+R]", "[N, P, L]");
  if (!call)
    return call.takeError();
  int64_t nope = call->inDim;
  if (nope <= 0 || nope >= q.dim(2))
    return makeInvalidArgumentError("w_uk_t's nope width P = " + Twine(nope) +
                                    " must be in [1, " + Twine(q.dim(2) - 1) +
                                    "]: q's last dim " + Twine(q.dim(2)) +
                                    " is P + R with a positive RoPE width R");
  if (llvm::Error err = checkPositive(call->outDim, "w_uk_t's latent width L"))
    return std::move(err);
  call->ropeDim = q.dim(2) - nope;
  return call;
}

llvm::Expected<ProjectionCall>
mla::checkUpProjOut(Device device, const HostTensor &oT, const HostTensor &wT) {
  Arg o{oT, "o"}, w{wT, "w_uv"};
  llvm::Expected<ProjectionCall> call =
      checkProjection(device, o, w, "[T, N, L]", "[N, L, V]");
  if (!call)
    return call.takeError();
  if (llvm::Error err = checkDim(w, 1, o.dim(2), "o's latent width (dim 2)"))
    return std::move(err);
  return call;
}

//===----------------------------------------------------------------------===//
// Merge
//===----------------------------------------------------------------------===//

llvm::Expected<MergeStatesCall> mla::checkMergeStates(Device device,
                                                      const HostTensor &outAT,
                                                      const HostTensor &lseAT,
                                                      const HostTensor &outBT,
                                                      const HostTensor &lseBT) {
  Arg outA{outAT, "out_a"}, lseA{lseAT, "lse_a"}, outB{outBT, "out_b"},
      lseB{lseBT, "lse_b"};
  if (llvm::Error err = checkRank(outA, 3, "[T, N, H]"))
    return std::move(err);
  if (llvm::Error err = checkFloat(outA, floatsOf(device)))
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
  return MergeStatesCall{outAT.dtype, outA.dim(0), outA.dim(1), outA.dim(2)};
}

//===----------------------------------------------------------------------===//
// Chunked-prefill pieces: gather_cache, up_proj_kv and mha
//===----------------------------------------------------------------------===//

/// starts and cu_rows by value against block_table and the cache: every
/// position a row below `wsRows` gathers is in a page of the table that is
/// a page of the cache.
static llvm::Error checkGatherValues(const Arg &blockTable, const Arg &starts,
                                     const Arg &cuRows, int64_t wsRows,
                                     const CheckedCache &cache) {
  int64_t batch = blockTable.dim(0), maxPages = blockTable.dim(1);
  if (cuRows.tensor.getI32(0) < 0)
    return makeInvalidArgumentError(
        "cu_rows[0] = " + Twine(cuRows.tensor.getI32(0)) + " is negative");
  for (int64_t b = 0; b < batch; ++b) {
    int64_t first = cuRows.tensor.getI32(b), next = cuRows.tensor.getI32(b + 1);
    int64_t start = starts.tensor.getI32(b);
    if (next < first)
      return makeInvalidArgumentError(
          "cu_rows must be non-decreasing, but cu_rows[" + Twine(b + 1) +
          "] = " + Twine(next) + " < cu_rows[" + Twine(b) +
          "] = " + Twine(first));
    if (start < 0)
      return makeInvalidArgumentError("starts[" + Twine(b) +
                                      "] = " + Twine(start) + " is negative");
    int64_t rows = std::min(next, wsRows) - std::min(first, wsRows);
    if (rows <= 0)
      continue;
    int64_t lastPage = (start + rows - 1) / cache.pageSize;
    if (lastPage >= maxPages)
      return makeInvalidArgumentError(
          "request " + Twine(b) + " gathers position " +
          Twine(start + rows - 1) + ", past its " + Twine(maxPages) +
          " block_table pages of " + Twine(cache.pageSize));
    for (int64_t k = start / cache.pageSize; k <= lastPage; ++k) {
      int32_t page = at(blockTable.tensor, b, k);
      if (page < 0 || page >= cache.pages)
        return makeInvalidArgumentError(
            "block_table[" + Twine(b) + ", " + Twine(k) + "] = " + Twine(page) +
            " is not a page of kv_cache's " + Twine(cache.pages));
    }
  }
  return llvm::Error::success();
}

/// block_table [B, max_pages], starts [B] and cu_rows [B+1], all int32.
static llvm::Error checkGatherTableShapes(const Arg &blockTable,
                                          const Arg &starts,
                                          const Arg &cuRows) {
  if (llvm::Error err = checkRank(blockTable, 2, "[B, max_pages]"))
    return err;
  if (llvm::Error err = checkRank(starts, 1, "[B]"))
    return err;
  if (llvm::Error err = checkRank(cuRows, 1, "[B+1]"))
    return err;
  for (const Arg *a : {&blockTable, &starts, &cuRows})
    if (llvm::Error err = checkInt32(*a))
      return err;
  int64_t batch = blockTable.dim(0);
  if (llvm::Error err =
          checkDim(starts, 0, batch, "block_table's batch size (dim 0)"))
    return err;
  return checkDim(cuRows, 0, batch + 1, "block_table's batch size + 1");
}

llvm::Expected<GatherCacheCall>
mla::checkGatherCache(Device device, const HostTensor &kvCacheT,
                      const HostTensor &blockTableT, const HostTensor &startsT,
                      const HostTensor &cuRowsT, const HostTensor &workspaceT,
                      int64_t latentDim, const CacheFormat &format) {
  Arg kvCache{kvCacheT, "kv_cache"}, blockTable{blockTableT, "block_table"},
      starts{startsT, "starts"}, cuRows{cuRowsT, "cu_rows"},
      ws{workspaceT, "workspace"};
  if (llvm::Error err = checkRank(ws, 2, "[W, L+R]"))
    return std::move(err);
  if (llvm::Error err = checkFloat(ws, floatsOf(device)))
    return std::move(err);
  int64_t rope = ws.dim(1) - latentDim;
  if (latentDim < 1 || rope < 1)
    return makeInvalidArgumentError(
        "latent_dim = " + Twine(latentDim) + " must be in [1, " +
        Twine(ws.dim(1) - 1) + "]: workspace rows are L + R wide with R >= 1");
  llvm::Expected<CheckedCache> cache =
      checkCache(device, kvCache, format, latentDim, rope, ws,
                 /*converts=*/device == Device::GPU);
  if (!cache)
    return cache.takeError();
  if (llvm::Error err = checkGatherTableShapes(blockTable, starts, cuRows))
    return std::move(err);
  GatherCacheCall call;
  call.dtype = workspaceT.dtype;
  call.batch = blockTable.dim(0);
  call.maxPages = blockTable.dim(1);
  call.workspaceRows = ws.dim(0);
  call.latentDim = latentDim;
  call.ropeDim = rope;
  call.cache = std::move(*cache);
  int hostTables = (blockTableT.data != nullptr) + (startsT.data != nullptr) +
                   (cuRowsT.data != nullptr);
  if (hostTables == 0) {
    call.gathersAnything = call.batch > 0 && call.workspaceRows > 0;
    return call;
  }
  if (hostTables != 3)
    return makeInvalidArgumentError("pass the host copies of block_table, "
                                    "starts and cu_rows together, or none");
  if (llvm::Error err = checkGatherValues(blockTable, starts, cuRows,
                                          call.workspaceRows, call.cache))
    return std::move(err);
  call.gathersAnything =
      call.batch > 0 &&
      cuRowsT.getI32(0) <
          std::min<int64_t>(cuRowsT.getI32(call.batch), call.workspaceRows);
  return call;
}

llvm::Expected<UpProjKvCall>
mla::checkUpProjKv(Device device, const HostTensor &latentT,
                   const HostTensor &kvBProjT, int64_t numHeads,
                   int64_t qkNopeHeadDim, int64_t vHeadDim) {
  Arg latent{latentT, "latent"}, w{kvBProjT, "kv_b_proj"};
  if (llvm::Error err = checkPositive(numHeads, "num_heads"))
    return std::move(err);
  if (llvm::Error err = checkPositive(qkNopeHeadDim, "qk_nope_head_dim"))
    return std::move(err);
  if (llvm::Error err = checkPositive(vHeadDim, "v_head_dim"))
    return std::move(err);
  if (llvm::Error err = checkRank(latent, 2, "[S, L]"))
    return std::move(err);
  if (llvm::Error err = checkRank(w, 2, "[N*(P+V), L]"))
    return std::move(err);
  // The GPU kernel runs on tensor cores: bf16 or f16.
  if (llvm::Error err = checkFloat(
          latent, device == Device::CPU ? llvm::ArrayRef(kCpuFloats)
                                        : llvm::ArrayRef(kGpuDecodeFloats)))
    return std::move(err);
  if (llvm::Error err = checkSameDType(w, latent))
    return std::move(err);
  if (llvm::Error err = checkKvBProjRows(w, numHeads, qkNopeHeadDim, vHeadDim))
    return std::move(err);
  if (llvm::Error err = checkDim(w, 1, latent.dim(1), "latent's width L"))
    return std::move(err);
  if (llvm::Error err = checkPositive(latent.dim(1), "latent's width L"))
    return std::move(err);
  return UpProjKvCall{latentT.dtype, latent.dim(0), numHeads,
                      latent.dim(1), qkNopeHeadDim, vHeadDim};
}

/// cu_seqlens values: from 0, non-decreasing, ending within `rows`.
static llvm::Error checkSeqlenValues(const Arg &cu, int64_t rows,
                                     const Twine &rowsWhat) {
  int64_t batch = cu.dim(0) - 1;
  if (cu.tensor.getI32(0) != 0)
    return makeInvalidArgumentError(
        cu.name + "[0] = " + Twine(cu.tensor.getI32(0)) + " must be 0");
  for (int64_t b = 1; b <= batch; ++b)
    if (cu.tensor.getI32(b) < cu.tensor.getI32(b - 1))
      return makeInvalidArgumentError(
          cu.name + " must be non-decreasing, but entry " + Twine(b) + " is " +
          Twine(cu.tensor.getI32(b)) + " after " +
          Twine(cu.tensor.getI32(b - 1)));
  if (cu.tensor.getI32(batch) > rows)
    return makeInvalidArgumentError(
        cu.name + " ends at " + Twine(cu.tensor.getI32(batch)) + ", past the " +
        Twine(rows) + " " + rowsWhat);
  return llvm::Error::success();
}

/// q [T, N, D], k [S, N, D] and v [S, N, V] of one dtype, N, D, V > 0.
static llvm::Error checkMhaActivations(Device device, const Arg &q,
                                       const Arg &k, const Arg &v) {
  if (llvm::Error err = checkRank(q, 3, "[T, N, D]"))
    return err;
  if (llvm::Error err = checkRank(k, 3, "[S, N, D]"))
    return err;
  if (llvm::Error err = checkRank(v, 3, "[S, N, V]"))
    return err;
  if (llvm::Error err = checkFloat(q, floatsOf(device)))
    return err;
  for (const Arg *a : {&k, &v})
    if (llvm::Error err = checkSameDType(*a, q))
      return err;
  if (llvm::Error err = checkDim(k, 1, q.dim(1), "q's head count (dim 1)"))
    return err;
  if (llvm::Error err = checkDim(k, 2, q.dim(2), "q's width D (dim 2)"))
    return err;
  if (llvm::Error err = checkDim(v, 0, k.dim(0), "k's key count (dim 0)"))
    return err;
  if (llvm::Error err = checkDim(v, 1, q.dim(1), "q's head count (dim 1)"))
    return err;
  for (auto [value, what] : {std::pair<int64_t, const char *>{q.dim(1), "N"},
                             {q.dim(2), "D"},
                             {v.dim(2), "V"}})
    if (llvm::Error err = checkPositive(value, what))
      return err;
  return llvm::Error::success();
}

llvm::Expected<MhaCall>
mla::checkMha(Device device, const HostTensor &qT, const HostTensor &kT,
              const HostTensor &vT, const HostTensor &cuQT,
              const HostTensor &cuKT, double softmaxScale, bool causal) {
  Arg q{qT, "q"}, k{kT, "k"}, v{vT, "v"}, cuQ{cuQT, "cu_seqlens_q"},
      cuK{cuKT, "cu_seqlens_k"};
  if (llvm::Error err = checkMhaActivations(device, q, k, v))
    return std::move(err);
  llvm::Expected<float> scale = checkSoftmaxScale(softmaxScale);
  if (!scale)
    return scale.takeError();
  for (const Arg *cu : {&cuQ, &cuK}) {
    if (llvm::Error err = checkRank(*cu, 1, "[B+1]"))
      return std::move(err);
    if (llvm::Error err = checkInt32(*cu))
      return std::move(err);
  }
  if (cuQ.dim(0) == 0)
    return makeInvalidArgumentError("cu_seqlens_q must have B+1 >= 1 entries");
  if (llvm::Error err = checkDim(cuK, 0, cuQ.dim(0), "cu_seqlens_q's length"))
    return std::move(err);
  if (cuQT.data)
    if (llvm::Error err = checkSeqlenValues(cuQ, q.dim(0), "rows of q"))
      return std::move(err);
  if (cuKT.data)
    if (llvm::Error err = checkSeqlenValues(cuK, k.dim(0), "rows of k"))
      return std::move(err);
  MhaCall call;
  call.dtype = qT.dtype;
  call.tokens = q.dim(0);
  call.keys = k.dim(0);
  call.numHeads = q.dim(1);
  call.qkDim = q.dim(2);
  call.valueDim = v.dim(2);
  call.batch = cuQ.dim(0) - 1;
  call.softmaxScale = *scale;
  call.causal = causal;
  return call;
}

//===----------------------------------------------------------------------===//
// Prefill
//===----------------------------------------------------------------------===//

/// q, kv_c, k_pe, kv_b_proj and the options: everything but the cache and
/// the tables.
static llvm::Expected<PrefillCall>
checkPrefillActivations(Device device, const Arg &q, const Arg &kvC,
                        const Arg &kPe, const Arg &w,
                        const PrefillOptions &options) {
  if (llvm::Error err = checkRank(q, 3, "[T, N, P+R]"))
    return std::move(err);
  // The GPU up-projection runs on tensor cores: bf16 or f16.
  if (llvm::Error err = checkFloat(q, device == Device::CPU
                                          ? llvm::ArrayRef(kCpuFloats)
                                          : llvm::ArrayRef(kGpuDecodeFloats)))
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
  PrefillCall call;
  call.dtype = q.tensor.dtype;
  call.tokens = q.dim(0);
  call.numHeads = q.dim(1);
  call.latentDim = kvC.dim(1);
  call.ropeDim = *rope;
  call.nopeDim = q.dim(2) - *rope;
  call.valueDim = options.vHeadDim;
  if (llvm::Error err = checkPositive(call.latentDim, "kv_c's width L"))
    return std::move(err);
  if (call.nopeDim <= 0)
    return makeInvalidArgumentError(
        "q's last dim " + Twine(q.dim(2)) +
        " must exceed k_pe's RoPE width R = " + Twine(*rope) +
        " (q is [T, N, P+R] with a positive nope width P)");
  if (llvm::Error err = checkPositive(call.valueDim, "v_head_dim"))
    return std::move(err);
  llvm::Expected<float> scale = checkSoftmaxScale(options.softmaxScale);
  if (!scale)
    return scale.takeError();
  call.softmaxScale = *scale;
  call.workspaceRows = options.workspaceRows;
  if (options.workspaceRows)
    if (llvm::Error err =
            checkPositive(*options.workspaceRows, "workspace_rows"))
      return std::move(err);
  if (llvm::Error err = checkRank(w, 2, "[N*(P+V), L]"))
    return std::move(err);
  if (llvm::Error err = checkSameDType(w, q))
    return std::move(err);
  if (llvm::Error err =
          checkKvBProjRows(w, call.numHeads, call.nopeDim, call.valueDim))
    return std::move(err);
  if (llvm::Error err = checkDim(w, 1, call.latentDim, "kv_c's width L"))
    return std::move(err);
  return call;
}

/// query_start_loc [B+1]: starts at 0, never decreases, ends at T.
static llvm::Error checkQueryStartLoc(const Arg &qsl, int64_t batch,
                                      int64_t tokens) {
  if (llvm::Error err = checkRank(qsl, 1, "[B+1]"))
    return err;
  if (llvm::Error err = checkInt32(qsl))
    return err;
  if (llvm::Error err =
          checkDim(qsl, 0, batch + 1, "B + 1 (B = block_table dim 0)"))
    return err;
  for (int64_t i = 0; i <= batch; ++i) {
    int64_t start = qsl.tensor.getI32(i);
    int64_t prev = i ? qsl.tensor.getI32(i - 1) : 0;
    if ((i == 0 && start != 0) || start < prev)
      return makeInvalidArgumentError(
          "query_start_loc must start at 0 and never decrease, but "
          "query_start_loc[" +
          Twine(i) + "] = " + Twine(start));
  }
  if (qsl.tensor.getI32(batch) != tokens)
    return makeInvalidArgumentError(
        "query_start_loc[" + Twine(batch) +
        "] = " + Twine(qsl.tensor.getI32(batch)) +
        " must equal the token count T = " + Twine(tokens) + " (q dim 0)");
  return llvm::Error::success();
}

llvm::Expected<PrefillCall>
mla::checkPrefill(Device device, const HostTensor &qT, const HostTensor &kvCT,
                  const HostTensor &kPeT, const HostTensor &kvBProjT,
                  const HostTensor &kvCacheT, const HostTensor &blockTableT,
                  const HostTensor &queryStartLocT, const HostTensor &seqLensT,
                  const PrefillOptions &options) {
  Arg q{qT, "q"}, kvC{kvCT, "kv_c"}, kPe{kPeT, "k_pe"},
      w{kvBProjT, "kv_b_proj"}, kvCache{kvCacheT, "kv_cache"},
      blockTable{blockTableT, "block_table"},
      qsl{queryStartLocT, "query_start_loc"}, seqLens{seqLensT, "seq_lens"};
  llvm::Expected<PrefillCall> call =
      checkPrefillActivations(device, q, kvC, kPe, w, options);
  if (!call)
    return call.takeError();
  // The GPU gather converts any float cache to the activations' type.
  llvm::Expected<CheckedCache> cache =
      checkCache(device, kvCache, options.cache, call->latentDim, call->ropeDim,
                 q, /*converts=*/device == Device::GPU);
  if (!cache)
    return cache.takeError();
  call->cache = std::move(*cache);
  if (llvm::Error err = checkRank(blockTable, 2, "[B, max_pages]"))
    return std::move(err);
  call->batch = blockTable.dim(0);
  // Both runtimes plan the context chunks from the tables' values.
  for (const Arg *table : {&blockTable, &qsl, &seqLens})
    if (!table->tensor.data)
      return makeInvalidArgumentError(
          "prefill needs the host copy of " + table->name +
          " (the context chunks are planned on the host)");
  if (llvm::Error err = checkQueryStartLoc(qsl, call->batch, call->tokens))
    return std::move(err);
  if (llvm::Error err = checkTableShapes(blockTable, seqLens, call->batch,
                                         "B (block_table dim 0)"))
    return std::move(err);
  if (llvm::Error err =
          checkSeqLenValues(i32Values(seqLensT), blockTable.dim(1),
                            call->cache.pageSize, blockTable.name, {}))
    return std::move(err);
  // A request's new tokens take their K/V from kv_c/k_pe; only its context
  // (the positions before them) is read from the cache.
  auto newTokens = [&](int64_t b) -> int64_t {
    return queryStartLocT.getI32(b + 1) - queryStartLocT.getI32(b);
  };
  if (llvm::Error err = checkUsedPages(blockTable, call->cache, [&](int64_t b) {
        return std::max<int64_t>(seqLensT.getI32(b) - newTokens(b), 0);
      }))
    return std::move(err);
  for (int64_t b = 0; b < call->batch; ++b)
    if (seqLensT.getI32(b) < newTokens(b))
      return makeInvalidArgumentError(
          "seq_lens[" + Twine(b) + "] = " + Twine(seqLensT.getI32(b)) +
          " is shorter than request " + Twine(b) + "'s " + Twine(newTokens(b)) +
          " new tokens (seq_lens counts the context and the new tokens)");
  return call;
}

llvm::Expected<AttentionCall>
mla::checkAttention(Device device, const HostTensor &q, const HostTensor &kvC,
                    const HostTensor &kPe, const HostTensor &kvBProj,
                    const HostTensor &kvCacheT, const HostTensor &blockTableT,
                    const HostTensor &queryStartLoc, const HostTensor &seqLensT,
                    const AttentionOptions &options) {
  if (llvm::Error err = checkRuntimeDecodeThreshold(options.decodeThreshold))
    return std::move(err);
  llvm::Expected<PrefillCall> prefill =
      checkPrefill(device, q, kvC, kPe, kvBProj, kvCacheT, blockTableT,
                   queryStartLoc, seqLensT, options.prefill);
  if (!prefill)
    return prefill.takeError();
  Arg blockTable{blockTableT, "block_table"};
  if (llvm::Error err =
          checkUsedPages(blockTable, prefill->cache,
                         [&](int64_t b) { return seqLensT.getI32(b); }))
    return std::move(err);
  AttentionCall call;
  call.prefill = std::move(*prefill);
  call.decodeThreshold = options.decodeThreshold;
  call.numDecodes =
      countLeadingDecodes(i32Values(queryStartLoc), options.decodeThreshold);
  return call;
}

llvm::Error mla::checkAttentionWeights(Device device, const AttentionCall &call,
                                       const HostTensor &q,
                                       const HostTensor &wUkT,
                                       const HostTensor &wUv) {
  const PrefillCall &c = call.prefill;
  llvm::Expected<ProjectionCall> absorb = checkAbsorbQ(device, q, wUkT);
  if (!absorb)
    return absorb.takeError();
  if (absorb->inDim != c.nopeDim || absorb->outDim != c.latentDim)
    return makeInvalidArgumentError(
        "w_uk_t must be [N, P, L] = " +
        Twine(formatShape({c.numHeads, c.nopeDim, c.latentDim})) + ", got " +
        formatShape(wUkT.shape));
  // up_proj_out's input is the decode's latent output [T, N, L].
  HostTensor latentOut;
  latentOut.dtype = q.dtype;
  latentOut.shape = {c.tokens, c.numHeads, c.latentDim};
  llvm::Expected<ProjectionCall> up = checkUpProjOut(device, latentOut, wUv);
  if (!up)
    return up.takeError();
  if (up->outDim != c.valueDim)
    return makeInvalidArgumentError("w_uv's last dim " + Twine(up->outDim) +
                                    " must equal v_head_dim " +
                                    Twine(c.valueDim));
  return llvm::Error::success();
}
