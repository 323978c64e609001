//===- KernelSpec.cpp - canonical text and cache key of a kernel spec -----===//
//
// The spec text is the part of the cache key a user can read: it must print
// every field that changes the image, print it one way only, and parse back
// to the same spec (the scale as its f32 bit pattern, so no decimal rounding
// can make two processes disagree).
//
//===----------------------------------------------------------------------===//

#include "mla/Runtime/Gpu/KernelSpec.h"
#include "mla/Runtime/Gpu/KernelCache.h"

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>

// Written at configure time (see CMakeLists.txt): the MLIR release and the
// ptxas version, as `mlir-<version>;cuda-<version>`.
#include "ToolchainVersion.inc"

namespace mla::gpu {

namespace {

uint32_t floatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

float bitsToFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

/// A whole decimal integer, no sign, no trailing characters.
bool parseCount(const std::string &text, int64_t &value) {
  if (text.empty() || text.size() > 12)
    return false;
  value = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return false;
    value = value * 10 + (c - '0');
  }
  return true;
}

/// `0x` and eight hex digits (the f32 bit pattern toString prints), or a
/// decimal float for hand-written specs.
bool parseScale(const std::string &text, float &scale) {
  if (text.size() == 10 && text[0] == '0' &&
      (text[1] == 'x' || text[1] == 'X')) {
    uint32_t bits = 0;
    for (size_t i = 2; i < text.size(); ++i) {
      char c = text[i];
      int digit;
      if (c >= '0' && c <= '9')
        digit = c - '0';
      else if (c >= 'a' && c <= 'f')
        digit = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        digit = c - 'A' + 10;
      else
        return false;
      bits = bits << 4 | static_cast<uint32_t>(digit);
    }
    scale = bitsToFloat(bits);
    return true;
  }
  bool otherHex =
      text.size() > 1 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
  if (text.empty() || otherHex)
    return false;
  errno = 0;
  char *end = nullptr;
  scale = std::strtof(text.c_str(), &end);
  return errno == 0 && end == text.c_str() + text.size();
}

/// `RxWxKxS`: rows_per_cta x warps_n x kv_block x stages.
bool parseTile(const std::string &text, DecodeTiling &tiling) {
  int64_t *fields[] = {&tiling.rowsPerCta, &tiling.warpsN, &tiling.kvBlock,
                       &tiling.stages};
  size_t start = 0;
  for (size_t i = 0; i < 4; ++i) {
    size_t end = i == 3 ? text.size() : text.find('x', start);
    if (end == std::string::npos ||
        !parseCount(text.substr(start, end - start), *fields[i]) ||
        *fields[i] <= 0)
      return false;
    start = end + 1;
  }
  return true;
}

} // namespace

std::string toString(const DecodeKernelSpec &spec) {
  const DecodeShape &s = spec.shape;
  const DecodeTiling &t = spec.tiling;
  char scale[16];
  std::snprintf(scale, sizeof(scale), "0x%08x",
                static_cast<unsigned>(floatBits(s.scale)));
  std::ostringstream os;
  os << "decode chip=" << chipName(spec.chip) << " N=" << s.numHeads
     << " Sq=" << s.queryRows << " L=" << s.latentDim << " R=" << s.ropeDim
     << " page=" << s.pageSize
     << " dtype=" << (s.elem == ElemType::BF16 ? "bf16" : "f16")
     << " causal=" << (s.causal ? 1 : 0) << " scale=" << scale
     << " tile=" << t.rowsPerCta << 'x' << t.warpsN << 'x' << t.kvBlock << 'x'
     << t.stages;
  return os.str();
}

bool parseDecodeKernelSpec(const std::string &text, DecodeKernelSpec &spec,
                           std::string &error) {
  std::istringstream words(text);
  std::string word;
  if (!(words >> word) || word != "decode") {
    error = "a kernel spec starts with its family 'decode', got '" + word + "'";
    return false;
  }
  std::map<std::string, std::string> fields;
  while (words >> word) {
    size_t eq = word.find('=');
    if (eq == std::string::npos || eq == 0) {
      error = "expected key=value, got '" + word + "'";
      return false;
    }
    std::string key = word.substr(0, eq);
    if (!fields.emplace(key, word.substr(eq + 1)).second) {
      error = "key '" + key + "' given twice";
      return false;
    }
  }

  static const char *const required[] = {"chip", "N",     "Sq",     "L",    "R",
                                         "page", "dtype", "causal", "scale"};
  std::string missing;
  for (const char *key : required)
    if (!fields.count(key))
      missing += std::string(missing.empty() ? "" : ", ") + key;
  if (!missing.empty()) {
    error = "missing " + missing +
            " (a spec names chip, N, Sq, L, R, page, "
            "dtype, causal and scale; tile is optional)";
    return false;
  }

  DecodeKernelSpec result;
  DecodeShape &shape = result.shape;
  auto count = [&](const char *key, int64_t &value, int64_t min) {
    if (parseCount(fields.at(key), value) && value >= min)
      return true;
    error = std::string(key) + " must be an integer >= " + std::to_string(min) +
            ", got '" + fields.at(key) + "'";
    return false;
  };
  for (const auto &[key, value] : fields) {
    bool ok = true;
    if (key == "chip") {
      if (!parseChip(value, result.chip)) {
        error = "unknown chip '" + value + "' (expected sm_90a or sm_100a)";
        ok = false;
      }
    } else if (key == "N") {
      ok = count("N", shape.numHeads, 1);
    } else if (key == "Sq") {
      ok = count("Sq", shape.queryRows, 1);
    } else if (key == "L") {
      ok = count("L", shape.latentDim, 1);
    } else if (key == "R") {
      ok = count("R", shape.ropeDim, 0);
    } else if (key == "page") {
      ok = count("page", shape.pageSize, 1);
    } else if (key == "dtype") {
      if (value == "bf16") {
        shape.elem = ElemType::BF16;
      } else if (value == "f16") {
        shape.elem = ElemType::F16;
      } else {
        error = "dtype must be bf16 or f16, got '" + value + "'";
        ok = false;
      }
    } else if (key == "causal") {
      if (value != "0" && value != "1") {
        error = "causal must be 0 or 1, got '" + value + "'";
        ok = false;
      }
      shape.causal = value == "1";
    } else if (key == "scale") {
      if (!parseScale(value, shape.scale) || !std::isfinite(shape.scale) ||
          shape.scale <= 0) {
        error = "scale must be a positive finite f32 (0x followed by its 8 "
                "hex digit bit pattern, or a decimal), got '" +
                value + "'";
        ok = false;
      }
    } else if (key == "tile") {
      if (!parseTile(value, result.tiling)) {
        error = "tile must be rows_per_cta x warps_n x kv_block x stages, "
                "four positive integers such as 64x2x32x2, got '" +
                value + "'";
        ok = false;
      }
    } else {
      error = "unknown key '" + key +
              "' (expected chip, N, Sq, L, R, page, dtype, causal, scale "
              "or tile)";
      ok = false;
    }
    if (!ok)
      return false;
  }

  bool given = fields.count("tile");
  if (!given)
    result.tiling = chooseDecodeTiling(result.chip, shape);
  std::string why = checkDecodeTiling(result.chip, shape, result.tiling);
  if (!why.empty()) {
    error = std::string(given ? "the given tile" : "the default tile") +
            " cannot run this shape on " + chipName(result.chip) + ": " + why;
    return false;
  }
  spec = result;
  return true;
}

std::string pipelineFor(const DecodeKernelSpec &spec) {
  return std::string("mla-to-nvvm{chip=") + chipName(spec.chip) +
         " format=bin}";
}

const char *toolchainVersion() { return MLA_TOOLCHAIN_VERSION; }

std::string cacheKeyFor(const DecodeKernelSpec &spec) {
  return computeKernelCacheKey(toString(spec), pipelineFor(spec),
                               toolchainVersion(), chipName(spec.chip));
}

} // namespace mla::gpu
