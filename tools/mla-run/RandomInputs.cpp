//===- RandomInputs.cpp - valid random arguments for mla-run --------------===//
//
// Ops are visited in order and each fills the arguments it uses that have
// no value yet, reading the values of those that do (a block table shared
// by two ops is drawn once). Caches are filled before their tables so every
// visit sees the page geometry.
//
//===----------------------------------------------------------------------===//

#include "RandomInputs.h"
#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mla/JIT/KernelBuilder.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

using namespace mla;
using namespace mlir;
using llvm::Twine;

namespace {

/// float8 E4M3FN code of `x`: round to nearest even, saturated at +-448
/// (the format has no infinity), as the cache writers store it.
uint8_t floatToE4M3(float x) {
  static const std::array<float, 127> positive = [] {
    std::array<float, 127> values;
    for (int code = 0; code < 127; ++code) {
      int exp = code >> 3, man = code & 7;
      values[code] = exp == 0 ? std::ldexp(man / 8.0f, -6)
                              : std::ldexp(1.0f + man / 8.0f, exp - 7);
    }
    return values;
  }();
  uint8_t sign = std::signbit(x) ? 0x80 : 0;
  if (std::isnan(x))
    return sign | 0x7f;
  float mag = std::min(std::fabs(x), 448.0f);
  int hi = std::lower_bound(positive.begin(), positive.end(), mag) -
           positive.begin();
  hi = std::min(hi, 126);
  int lo = std::max(hi - 1, 0);
  float dlo = mag - positive[lo], dhi = positive[hi] - mag;
  bool up = dhi < dlo || (dhi == dlo && hi % 2 == 0);
  return sign | static_cast<uint8_t>(up ? hi : lo);
}

/// The fp8 formats' per-token and per-tile scale: amax / 448, floored so an
/// all-zero group still gets a usable scale.
float fp8Scale(llvm::ArrayRef<float> values) {
  float amax = 1e-4f;
  for (float v : values)
    amax = std::max(amax, std::fabs(v));
  return amax / 448.0f;
}

int64_t dim(Value v, unsigned i) {
  return cast<RankedTensorType>(v.getType()).getDimSize(i);
}

class Generator {
public:
  Generator(func::FuncOp func, const RandomInputOptions &options)
      : func(func), options(options), rng(options.seed),
        values(func.getNumArguments()) {}

  llvm::Expected<std::vector<HostArray>> run();

private:
  llvm::Error visit(Operation *op);
  llvm::Error visitDecode(Value q, Value cache, Value blockTable, Value seqLens,
                          CacheLayoutAttr layout, bool causal, int64_t latent);
  llvm::Error visitPrefill(PrefillOp op);
  llvm::Error visitGather(GatherCacheOp op);
  llvm::Error visitCacheWrite(CacheWriteOp op);
  llvm::Error visitMha(MhaOp op);

  /// The argument `v` is, directly or as the tensor view of a memref
  /// argument (how a kernel takes a cache it updates in place).
  std::optional<unsigned> argOf(Value v) const {
    if (auto view = v.getDefiningOp<bufferization::ToTensorOp>())
      v = view.getBuffer();
    auto arg = dyn_cast<BlockArgument>(v);
    if (!arg || arg.getOwner()->getParentOp() != func)
      return std::nullopt;
    return arg.getArgNumber();
  }

  /// The argument index of `v` if it is an argument with no value yet.
  std::optional<unsigned> pending(Value v) const {
    std::optional<unsigned> arg = argOf(v);
    if (!arg || values[*arg])
      return std::nullopt;
    return arg;
  }

  /// A zero-filled array for argument `arg`, now its value.
  HostArray &create(unsigned arg) {
    auto type = cast<ShapedType>(func.getArgumentTypes()[arg]);
    values[arg].emplace(*getDTypeOf(type.getElementType()), type.getShape());
    return *values[arg];
  }

  /// The values of an integer vector that is an argument with a value or a
  /// constant, if known.
  std::optional<llvm::SmallVector<int64_t>> known(Value v) const {
    llvm::SmallVector<int64_t> result;
    if (std::optional<unsigned> arg = argOf(v); arg && values[*arg]) {
      const HostArray &a = *values[*arg];
      for (int64_t i = 0; i < a.getNumElements(); ++i)
        result.push_back(static_cast<int64_t>(a.get(i)));
      return result;
    }
    DenseIntElementsAttr attr;
    if (!matchPattern(v, m_Constant(&attr)))
      return std::nullopt;
    for (const llvm::APInt &x : attr.getValues<llvm::APInt>())
      result.push_back(x.getSExtValue());
    return result;
  }

  int64_t uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  }
  float normal() { return static_cast<float>(gaussian(rng)); }

  /// `total` split into `parts` non-negative sizes of at most `maxPart`
  /// each: random cuts, or an even split if the cuts exceed `maxPart`.
  std::optional<llvm::SmallVector<int64_t>> split(int64_t total, int64_t parts,
                                                  int64_t maxPart);

  /// Fills an argument with i32 `values`.
  void fillInts(unsigned arg, llvm::ArrayRef<int64_t> ints) {
    HostArray &a = create(arg);
    for (auto [i, v] : llvm::enumerate(ints))
      a.set(i, static_cast<double>(v));
  }

  void fillCache(Value cache, CacheLayoutAttr layout, int64_t latent,
                 int64_t rope);
  void fillBlockTable(Value table, int64_t pages);
  llvm::Error fillSeqLens(Value lens, llvm::ArrayRef<int64_t> minLens,
                          int64_t capacity);

  func::FuncOp func;
  const RandomInputOptions &options;
  std::mt19937_64 rng;
  std::normal_distribution<double> gaussian;
  std::vector<std::optional<HostArray>> values;
};

std::optional<llvm::SmallVector<int64_t>>
Generator::split(int64_t total, int64_t parts, int64_t maxPart) {
  if (parts == 0)
    return total == 0 ? std::optional(llvm::SmallVector<int64_t>())
                      : std::nullopt;
  llvm::SmallVector<int64_t> cuts{0, total};
  for (int64_t i = 1; i < parts; ++i)
    cuts.push_back(uniform(0, total));
  llvm::sort(cuts);
  llvm::SmallVector<int64_t> sizes;
  for (int64_t i = 0; i < parts; ++i)
    sizes.push_back(cuts[i + 1] - cuts[i]);
  if (llvm::all_of(sizes, [&](int64_t s) { return s <= maxPart; }))
    return sizes;
  for (int64_t i = 0; i < parts; ++i)
    sizes[i] = total / parts + (i < total % parts ? 1 : 0);
  if (sizes.front() > maxPart)
    return std::nullopt;
  return sizes;
}

void Generator::fillCache(Value cache, CacheLayoutAttr layout, int64_t latent,
                          int64_t rope) {
  std::optional<unsigned> arg = pending(cache);
  if (!arg)
    return;
  HostArray &a = create(*arg);
  int64_t rowWidth = dim(cache, 2), rows = a.getNumElements() / rowWidth;
  if (!layout.isFp8()) {
    for (int64_t i = 0; i < a.getNumElements(); ++i)
      a.set(i, normal());
    return;
  }
  // fp8 caches hold encoded rows of standard normal values.
  int64_t rowDim = latent + rope;
  auto *bytes = reinterpret_cast<uint8_t *>(a.getData());
  llvm::SmallVector<float> row(rowDim);
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t *out = bytes + r * rowWidth;
    for (float &v : row)
      v = normal();
    auto encode = [&](int64_t begin, int64_t end, float scale) {
      for (int64_t i = begin; i < end; ++i)
        out[i] = floatToE4M3(row[i] / scale);
    };
    switch (layout.getFormat()) {
    case RowFormat::fp8_e4m3:
      encode(0, rowDim, layout.getScale().getValueAsDouble());
      break;
    case RowFormat::fp8_e4m3_token: {
      float scales[2] = {fp8Scale(llvm::ArrayRef(row).take_front(latent)),
                         fp8Scale(llvm::ArrayRef(row).drop_front(latent))};
      encode(0, latent, scales[0]);
      encode(latent, rowDim, scales[1]);
      std::memcpy(out + rowDim, scales, sizeof(scales));
      break;
    }
    case RowFormat::fp8_ds_mla: {
      int64_t tiles = latent / 128;
      for (int64_t t = 0; t < tiles; ++t) {
        float scale = fp8Scale(llvm::ArrayRef(row).slice(t * 128, 128));
        encode(t * 128, (t + 1) * 128, scale);
        std::memcpy(out + latent + 4 * t, &scale, 4);
      }
      for (int64_t i = 0; i < rope; ++i) {
        uint16_t bits = floatToBF16(row[latent + i]);
        std::memcpy(out + latent + 4 * tiles + 2 * i, &bits, 2);
      }
      break;
    }
    default:
      llvm_unreachable("not an fp8 format");
    }
  }
}

void Generator::fillBlockTable(Value table, int64_t pages) {
  std::optional<unsigned> arg = pending(table);
  if (!arg)
    return;
  // Requests take pages in the order of a random permutation, wrapping
  // around (sharing pages) when the table has more entries than the cache.
  llvm::SmallVector<int64_t> perm(pages);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  int64_t entries = dim(table, 0) * dim(table, 1);
  llvm::SmallVector<int64_t> ints;
  for (int64_t i = 0; i < entries; ++i)
    ints.push_back(perm[i % pages]);
  fillInts(*arg, ints);
}

llvm::Error Generator::fillSeqLens(Value lens, llvm::ArrayRef<int64_t> minLens,
                                   int64_t capacity) {
  std::optional<unsigned> arg = pending(lens);
  if (!arg)
    return llvm::Error::success();
  llvm::SmallVector<int64_t> ints;
  for (auto [b, lo] : llvm::enumerate(minLens)) {
    if (lo > capacity)
      return llvm::createStringError(
          "request " + Twine(b) + " needs at least " + Twine(lo) +
          " positions but the block table holds " + Twine(capacity));
    if (options.seqLen && (*options.seqLen < lo || *options.seqLen > capacity))
      return llvm::createStringError(
          "--seq-len=" + Twine(*options.seqLen) + " must be in [" + Twine(lo) +
          ", " + Twine(capacity) + "] for request " + Twine(b));
    ints.push_back(options.seqLen ? *options.seqLen : uniform(lo, capacity));
  }
  fillInts(*arg, ints);
  return llvm::Error::success();
}

llvm::Error Generator::visitDecode(Value q, Value cache, Value blockTable,
                                   Value seqLens, CacheLayoutAttr layout,
                                   bool causal, int64_t latent) {
  fillCache(cache, layout, latent, dim(q, 3) - latent);
  fillBlockTable(blockTable, dim(cache, 0));
  // Causal query rows are the last Sq positions of their request.
  llvm::SmallVector<int64_t> minLens(dim(q, 0), causal ? dim(q, 1) : 0);
  return fillSeqLens(seqLens, minLens, dim(blockTable, 1) * dim(cache, 1));
}

llvm::Error Generator::visitCacheWrite(CacheWriteOp op) {
  int64_t latent = dim(op.getKvC(), 1);
  auto kPe = cast<RankedTensorType>(op.getKPe().getType());
  fillCache(op.getCache(), op.getLayout(), latent,
            kPe.getDimSize(kPe.getRank() - 1));
  std::optional<unsigned> arg = pending(op.getSlotMapping());
  if (!arg)
    return llvm::Error::success();
  // Distinct slots, so that the result does not depend on write order.
  int64_t slots = dim(op.getCache(), 0) * dim(op.getCache(), 1);
  int64_t tokens = dim(op.getKvC(), 0);
  if (tokens > slots)
    return llvm::createStringError(Twine(tokens) +
                                   " tokens do not fit in a cache of " +
                                   Twine(slots) + " slots");
  llvm::SmallVector<int64_t> all(slots);
  std::iota(all.begin(), all.end(), 0);
  for (int64_t i = 0; i < tokens; ++i)
    std::swap(all[i], all[uniform(i, slots - 1)]);
  fillInts(*arg, llvm::ArrayRef(all).take_front(tokens));
  return llvm::Error::success();
}

llvm::Error Generator::visitGather(GatherCacheOp op) {
  CacheLayoutAttr layout = op.getLayout();
  int64_t rowDim = dim(op.getWorkspace(), 1), row = dim(op.getCache(), 2);
  // Only fp8_ds_mla's row reveals the latent width (row = 2D - L + L/32);
  // the other formats encode the whole row alike.
  int64_t latent = layout.getFormat() == RowFormat::fp8_ds_mla
                       ? 32 * (2 * rowDim - row) / 31
                       : rowDim;
  fillCache(op.getCache(), layout, latent, rowDim - latent);
  fillBlockTable(op.getBlockTable(), dim(op.getCache(), 0));
  int64_t batch = dim(op.getBlockTable(), 0);
  int64_t capacity = dim(op.getBlockTable(), 1) * dim(op.getCache(), 1);
  std::optional<llvm::SmallVector<int64_t>> rows = split(
      std::min(dim(op.getWorkspace(), 0), batch * capacity), batch, capacity);
  if (std::optional<unsigned> arg = pending(op.getCuRows())) {
    llvm::SmallVector<int64_t> cu{0};
    for (int64_t r : *rows)
      cu.push_back(cu.back() + r);
    fillInts(*arg, cu);
  }
  if (std::optional<unsigned> arg = pending(op.getStarts())) {
    llvm::SmallVector<int64_t> starts;
    for (int64_t r : *rows)
      starts.push_back(uniform(0, capacity - r));
    fillInts(*arg, starts);
  }
  return llvm::Error::success();
}

llvm::Error Generator::visitPrefill(PrefillOp op) {
  int64_t latent = dim(op.getKvC(), 1);
  auto kPe = cast<RankedTensorType>(op.getKPe().getType());
  fillCache(op.getCache(), op.getLayout(), latent,
            kPe.getDimSize(kPe.getRank() - 1));
  fillBlockTable(op.getBlockTable(), dim(op.getCache(), 0));
  int64_t batch = dim(op.getBlockTable(), 0), tokens = dim(op.getQ(), 0);
  int64_t capacity = dim(op.getBlockTable(), 1) * dim(op.getCache(), 1);
  if (std::optional<unsigned> arg = pending(op.getQueryStartLoc())) {
    std::optional<llvm::SmallVector<int64_t>> qLens =
        split(tokens, batch, capacity);
    if (!qLens)
      return llvm::createStringError(Twine(tokens) + " tokens do not fit in " +
                                     Twine(batch) + " requests of at most " +
                                     Twine(capacity) + " positions");
    llvm::SmallVector<int64_t> qsl{0};
    for (int64_t n : *qLens)
      qsl.push_back(qsl.back() + n);
    fillInts(*arg, qsl);
  }
  std::optional<llvm::SmallVector<int64_t>> qsl = known(op.getQueryStartLoc());
  if (!qsl)
    return llvm::createStringError(
        "cannot draw seq_lens: query_start_loc is neither an argument nor a "
        "constant");
  // A request's seq_len counts its context and its new tokens.
  llvm::SmallVector<int64_t> minLens;
  for (int64_t b = 0; b < batch; ++b)
    minLens.push_back((*qsl)[b + 1] - (*qsl)[b]);
  return fillSeqLens(op.getSeqLens(), minLens, capacity);
}

llvm::Error Generator::visitMha(MhaOp op) {
  int64_t batch = dim(op.getCuSeqlensQ(), 0) - 1;
  for (auto [offsets, rows] :
       {std::pair(op.getCuSeqlensQ(), dim(op.getQ(), 0)),
        std::pair(op.getCuSeqlensK(), dim(op.getK(), 0))}) {
    std::optional<unsigned> arg = pending(offsets);
    if (!arg)
      continue;
    std::optional<llvm::SmallVector<int64_t>> sizes = split(rows, batch, rows);
    if (!sizes)
      return llvm::createStringError("cannot split " + Twine(rows) +
                                     " rows among no requests");
    llvm::SmallVector<int64_t> cu{0};
    for (int64_t n : *sizes)
      cu.push_back(cu.back() + n);
    fillInts(*arg, cu);
  }
  return llvm::Error::success();
}

llvm::Error Generator::visit(Operation *op) {
  return llvm::TypeSwitch<Operation *, llvm::Error>(op)
      .Case([&](DecodeOp d) {
        return visitDecode(d.getQ(), d.getCache(), d.getBlockTable(),
                           d.getSeqLens(), d.getLayout(), d.getCausal(),
                           dim(d.getOut(), 3));
      })
      .Case([&](DecodePartialOp d) {
        return visitDecode(d.getQ(), d.getCache(), d.getBlockTable(),
                           d.getSeqLens(), d.getLayout(), d.getCausal(),
                           dim(d.getPartialOut(), 4));
      })
      .Case([&](CacheWriteOp w) { return visitCacheWrite(w); })
      .Case([&](GatherCacheOp g) { return visitGather(g); })
      .Case([&](PrefillOp p) { return visitPrefill(p); })
      .Case([&](MhaOp m) { return visitMha(m); })
      .Default([](Operation *) { return llvm::Error::success(); });
}

llvm::Expected<std::vector<HostArray>> Generator::run() {
  for (auto [i, type] : llvm::enumerate(func.getArgumentTypes())) {
    auto shaped = dyn_cast<ShapedType>(type);
    if (!shaped || !shaped.hasStaticShape() ||
        !getDTypeOf(shaped.getElementType())) {
      std::string text;
      llvm::raw_string_ostream(text) << type;
      return llvm::createStringError(
          "cannot draw argument " + Twine(i) + " of type " + text +
          " at random (static f32, f16, bf16, i32 or i8 tensors and memrefs "
          "only); give it with --input");
    }
  }
  llvm::Error error = llvm::Error::success();
  func.walk([&](Operation *op) {
    if (op->getDialect() && isa<MLADialect>(op->getDialect()))
      error = visit(op);
    return error ? WalkResult::interrupt() : WalkResult::advance();
  });
  if (error)
    return std::move(error);

  std::vector<HostArray> result;
  for (auto [i, type] : llvm::enumerate(func.getArgumentTypes())) {
    if (!values[i]) {
      if (!isa<FloatType>(cast<ShapedType>(type).getElementType()))
        return llvm::createStringError(
            "argument " + Twine(i) +
            " is an integer tensor that feeds no mla table operand, so "
            "there is no valid random value for it; give it with --input");
      HostArray &a = create(i);
      for (int64_t k = 0; k < a.getNumElements(); ++k)
        a.set(k, normal());
    }
    result.push_back(std::move(*values[i]));
  }
  return result;
}

} // namespace

llvm::Expected<std::vector<HostArray>>
mla::makeRandomInputs(func::FuncOp func, const RandomInputOptions &options) {
  return Generator(func, options).run();
}
