//===- KernelSpec.cpp - canonical text and cache key of a kernel spec -----===//
//
// The spec text is the part of the cache key a user can read: it must print
// every field that changes the image, print it one way only, and parse back
// to the same spec (the scale as its f32 bit pattern, so no decimal rounding
// can make two processes disagree).
//
//===----------------------------------------------------------------------===//

#include "mla/Contract/KernelSpec.h"
#include "mla/Contract/CacheKey.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <map>
#include <sstream>
#include <vector>

// Generated (see CMakeLists.txt): at configure time the MLIR release and the
// ptxas version, as `mlir-<version>;cuda-<version>`; at build time the
// fingerprint of the code generator's sources.
#include "CodegenFingerprint.inc"
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

/// parseScale, and the value is a positive finite f32 (a softmax scale).
bool parsePositiveScale(const std::string &text, float &scale) {
  return parseScale(text, scale) && std::isfinite(scale) && scale > 0;
}

/// `RxWxKxS[w|p|s|m|b]`: rows_per_cta x warps_n x kv_block x stages; a
/// trailing `w` selects the wgmma kernel, `p` its warp-specialised TMA build,
/// `s` that build's seesaw schedule, `m` the seesaw build in clusters of two
/// sharing the KV boxes (multicast) and `b` the seesaw build walking a
/// balanced plan (persistent).
bool parseTile(const std::string &tileText, DecodeTiling &tiling) {
  std::string text = tileText;
  tiling.persistent = !text.empty() && text.back() == 'b';
  tiling.multicast = !text.empty() && text.back() == 'm';
  tiling.seesaw = tiling.persistent || tiling.multicast ||
                  (!text.empty() && text.back() == 's');
  tiling.pipelined = tiling.seesaw || (!text.empty() && text.back() == 'p');
  tiling.wgmma = tiling.pipelined || (!text.empty() && text.back() == 'w');
  if (tiling.wgmma)
    text.pop_back();
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

/// A spec text split into its family (the first word) and its key=value
/// fields.
struct Fields {
  std::string family;
  std::map<std::string, std::string> values;
};

/// Fails on a word that is not key=value and on a key given twice.
bool splitFields(const std::string &text, Fields &fields, std::string &error) {
  std::istringstream words(text);
  std::string word;
  words >> fields.family;
  while (words >> word) {
    size_t eq = word.find('=');
    if (eq == std::string::npos || eq == 0) {
      error = "expected key=value, got '" + word + "'";
      return false;
    }
    std::string key = word.substr(0, eq);
    if (!fields.values.emplace(key, word.substr(eq + 1)).second) {
      error = "key '" + key + "' given twice";
      return false;
    }
  }
  return true;
}

/// Fails naming every missing key of `required`; `names` lists what a spec
/// of the family holds, for the message.
bool checkRequired(const Fields &fields,
                   std::initializer_list<const char *> required,
                   const char *names, std::string &error) {
  std::string missing;
  for (const char *key : required)
    if (!fields.values.count(key))
      missing += std::string(missing.empty() ? "" : ", ") + key;
  if (missing.empty())
    return true;
  error = "missing " + missing + " (a spec names " + names + ")";
  return false;
}

/// Splits `text` (splitFields), then checks that its first word is `family`
/// (else the error is `what` + " 'family', got '...'") and that it names
/// every key of `required` (checkRequired).
bool startSpec(const std::string &text, const char *family, const char *what,
               std::initializer_list<const char *> required, const char *names,
               Fields &fields, std::string &error) {
  if (!splitFields(text, fields, error))
    return false;
  if (fields.family != family) {
    error =
        std::string(what) + " '" + family + "', got '" + fields.family + "'";
    return false;
  }
  return checkRequired(fields, required, names, error);
}

/// "a, b or c".
std::string oneOf(const std::vector<std::string> &names) {
  std::string text;
  for (size_t i = 0; i < names.size(); ++i)
    text += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return text;
}

/// How a spec family reads one key: `parse` stores the value into the spec
/// being built, or sets the error and fails.
struct KeyRule {
  const char *key;
  std::function<bool(const std::string &value, std::string &error)> parse;
};

/// Reads every field by the rule of its key; fails on the first bad value
/// and on a key no rule names (the message lists the rules' keys in order).
bool applyRules(const Fields &fields, const std::vector<KeyRule> &rules,
                std::string &error) {
  for (const auto &[key, value] : fields.values) {
    auto rule = std::find_if(rules.begin(), rules.end(),
                             [&](const KeyRule &r) { return key == r.key; });
    if (rule == rules.end()) {
      std::vector<std::string> keys;
      for (const KeyRule &r : rules)
        keys.push_back(r.key);
      error = "unknown key '" + key + "' (expected " + oneOf(keys) + ")";
      return false;
    }
    if (!rule->parse(value, error))
      return false;
  }
  return true;
}

/// `key`: an integer >= `min` (parseCount).
KeyRule countRule(const char *key, int64_t &value, int64_t min) {
  return {key, [key, &value, min](const std::string &text, std::string &error) {
            if (parseCount(text, value) && value >= min)
              return true;
            error = std::string(key) +
                    " must be an integer >= " + std::to_string(min) +
                    ", got '" + text + "'";
            return false;
          }};
}

/// `chip`: sm_90a or sm_100a.
KeyRule chipRule(Chip &chip) {
  return {"chip", [&chip](const std::string &value, std::string &error) {
            if (parseChip(value, chip))
              return true;
            error = "unknown chip '" + value + "' (expected sm_90a or sm_100a)";
            return false;
          }};
}

/// `dtype`: bf16, f16 or f32.
KeyRule actTypeRule(ActType &type) {
  return {"dtype", [&type](const std::string &value, std::string &error) {
            for (ActType t : {ActType::BF16, ActType::F16, ActType::F32})
              if (value == actTypeName(t)) {
                type = t;
                return true;
              }
            error = "dtype must be bf16, f16 or f32, got '" + value + "'";
            return false;
          }};
}

/// `key`: 0 or 1.
KeyRule flagRule(const char *key, bool &flag) {
  return {key, [key, &flag](const std::string &value, std::string &error) {
            if (value != "0" && value != "1") {
              error = std::string(key) + " must be 0 or 1, got '" + value + "'";
              return false;
            }
            flag = value == "1";
            return true;
          }};
}

/// `scale` in texts from before the value became a launch or kernel
/// argument (`why`): they still name their kernel, so the value is ignored,
/// but a malformed one is still an error.
KeyRule ignoredScaleRule(const char *why) {
  return {"scale", [why](const std::string &value, std::string &error) {
            float ignored;
            if (parsePositiveScale(value, ignored))
              return true;
            error = std::string("scale (ignored: ") + why +
                    ") must be a positive finite f32 when given, got '" +
                    value + "'";
            return false;
          }};
}

constexpr CacheFormat kCacheFormats[] = {
    CacheFormat::BF16,    CacheFormat::F16,          CacheFormat::F32,
    CacheFormat::FP8E4M3, CacheFormat::FP8E4M3Token, CacheFormat::FP8DsMla};

/// The #mla.cache_layout format names.
const char *cacheFormatName(CacheFormat format) {
  switch (format) {
  case CacheFormat::BF16:
    return "bf16";
  case CacheFormat::F16:
    return "f16";
  case CacheFormat::F32:
    return "f32";
  case CacheFormat::FP8E4M3:
    return "fp8_e4m3";
  case CacheFormat::FP8E4M3Token:
    return "fp8_e4m3_token";
  case CacheFormat::FP8DsMla:
    return "fp8_ds_mla";
  }
  return "";
}

/// `format`: the row format's name, one of the fp8 formats only when
/// `fp8Only`; `what` names the key in the message.
KeyRule formatRule(CacheFormat &format, bool fp8Only, const char *what) {
  return {"format", [&format, fp8Only, what](const std::string &value,
                                             std::string &error) {
            std::vector<std::string> names;
            for (CacheFormat f : kCacheFormats) {
              if (fp8Only && !isFp8(f))
                continue;
              if (value == cacheFormatName(f)) {
                format = f;
                return true;
              }
              names.push_back(cacheFormatName(f));
            }
            error = std::string(what) + " must be " + oneOf(names) + ", got '" +
                    value + "'";
            return false;
          }};
}

std::string scaleText(float scale) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08x",
                static_cast<unsigned>(floatBits(scale)));
  return text;
}

/// Parses `text` with `parse` into a `Spec` held by `spec`.
template <typename Spec>
bool parseInto(const std::string &text, KernelSpec &spec, std::string &error,
               bool (*parse)(const std::string &, Spec &, std::string &)) {
  Spec parsed;
  if (!parse(text, parsed, error))
    return false;
  spec = parsed;
  return true;
}

std::string mlaToNvvm(Chip chip) {
  return std::string("mla-to-nvvm{chip=") + chipName(chip) + " format=bin}";
}

} // namespace

std::string toString(const DecodeKernelSpec &spec) {
  const DecodeShape &s = spec.shape;
  const DecodeTiling &t = spec.tiling;
  std::ostringstream os;
  os << "decode chip=" << chipName(spec.chip) << " N=" << s.numHeads
     << " Sq=" << s.queryRows << " L=" << s.latentDim << " R=" << s.ropeDim
     << " page=" << s.pageSize
     << " dtype=" << (s.elem == ElemType::BF16 ? "bf16" : "f16")
     << " causal=" << (s.causal ? 1 : 0);
  // bf16/f16 caches keep the text (and key) they had before fp8 decode.
  if (s.fp8())
    os << " format=" << cacheFormatName(s.kvFormat);
  os << " tile=" << decodeTileText(t);
  // Written only when set, so every uniform spec keeps its text and key.
  if (s.varlen)
    os << " varlen=1";
  return os.str();
}

bool parseDecodeKernelSpec(const std::string &text, DecodeKernelSpec &spec,
                           std::string &error) {
  Fields fields;
  if (!startSpec(text, "decode", "a kernel spec starts with its family",
                 {"chip", "N", "Sq", "L", "R", "page", "dtype", "causal"},
                 "chip, N, Sq, L, R, page, dtype and causal; format and tile "
                 "are optional",
                 fields, error))
    return false;
  DecodeKernelSpec result;
  DecodeShape &shape = result.shape;
  KeyRule dtype{"dtype", [&](const std::string &value, std::string &message) {
                  if (value != "bf16" && value != "f16") {
                    message = "dtype must be bf16 or f16, got '" + value + "'";
                    return false;
                  }
                  shape.elem = value == "bf16" ? ElemType::BF16 : ElemType::F16;
                  return true;
                }};
  KeyRule tile{"tile", [&](const std::string &value, std::string &message) {
                 if (parseTile(value, result.tiling))
                   return true;
                 message = "tile must be rows_per_cta x warps_n x kv_block x "
                           "stages, four positive integers such as 64x2x32x2, "
                           "and optionally the build's suffix (w, p, s, m or "
                           "b), got '" +
                           value + "'";
                 return false;
               }};
  if (!applyRules(
          fields,
          {chipRule(result.chip), countRule("N", shape.numHeads, 1),
           countRule("Sq", shape.queryRows, 1),
           countRule("L", shape.latentDim, 1), countRule("R", shape.ropeDim, 0),
           countRule("page", shape.pageSize, 1), dtype,
           flagRule("causal", shape.causal),
           formatRule(shape.kvFormat, /*fp8Only=*/true,
                      "format (the cache's row format; omitted for a cache "
                      "of dtype)"),
           flagRule("varlen", shape.varlen),
           ignoredScaleRule("the softmax scale is a launch argument"), tile},
          error))
    return false;

  bool given = fields.values.count("tile");
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

std::string toString(const CacheWriteKernelSpec &spec) {
  const CacheWriteShape &s = spec.shape;
  std::ostringstream os;
  os << "cache_write chip=" << chipName(spec.chip) << " L=" << s.latentDim
     << " R=" << s.ropeDim << " page=" << spec.pageSize
     << " dtype=" << actTypeName(s.input)
     << " format=" << cacheFormatName(s.format);
  return os.str();
}

bool parseCacheWriteKernelSpec(const std::string &text,
                               CacheWriteKernelSpec &spec, std::string &error) {
  Fields fields;
  if (!startSpec(text, "cache_write", "a cache write kernel spec starts with",
                 {"chip", "L", "R", "page", "dtype", "format"},
                 "chip, L, R, page, dtype and format", fields, error))
    return false;
  CacheWriteKernelSpec result;
  CacheWriteShape &shape = result.shape;
  if (!applyRules(fields,
                  {chipRule(result.chip), countRule("L", shape.latentDim, 1),
                   countRule("R", shape.ropeDim, 1),
                   countRule("page", result.pageSize, 1),
                   actTypeRule(shape.input),
                   formatRule(shape.format, /*fp8Only=*/false, "format"),
                   ignoredScaleRule("fp8_e4m3's kv_scale is a kernel "
                                    "parameter")},
                  error))
    return false;

  if (fields.values.count("scale") && shape.format != CacheFormat::FP8E4M3) {
    error = std::string("scale is only accepted (and ignored) with format "
                        "fp8_e4m3, not ") +
            cacheFormatName(shape.format);
    return false;
  }
  if (shape.format == CacheFormat::FP8DsMla &&
      shape.latentDim % kDsMlaTile != 0) {
    error = "format fp8_ds_mla needs L % " + std::to_string(kDsMlaTile) +
            " == 0, got L = " + std::to_string(shape.latentDim);
    return false;
  }
  spec = result;
  return true;
}

std::string toString(const ProjectionKernelSpec &spec) {
  const ProjectionShape &s = spec.shape;
  std::ostringstream os;
  if (spec.kind == ProjectionKind::AbsorbQ)
    os << "absorb_q chip=" << chipName(spec.chip) << " N=" << s.numHeads
       << " P=" << s.inDim << " L=" << s.outDim << " R=" << s.ropeDim;
  else
    os << "up_proj_out chip=" << chipName(spec.chip) << " N=" << s.numHeads
       << " L=" << s.inDim << " V=" << s.outDim;
  os << " dtype=" << actTypeName(s.elem);
  return os.str();
}

bool parseProjectionKernelSpec(const std::string &text,
                               ProjectionKernelSpec &spec, std::string &error) {
  Fields fields;
  if (!splitFields(text, fields, error))
    return false;
  ProjectionKernelSpec result;
  if (fields.family == "absorb_q") {
    result.kind = ProjectionKind::AbsorbQ;
    if (!checkRequired(fields, {"chip", "N", "P", "L", "R", "dtype"},
                       "chip, N, P, L, R and dtype", error))
      return false;
  } else if (fields.family == "up_proj_out") {
    result.kind = ProjectionKind::UpProjOut;
    if (!checkRequired(fields, {"chip", "N", "L", "V", "dtype"},
                       "chip, N, L, V and dtype", error))
      return false;
  } else {
    error = "a projection kernel spec starts with 'absorb_q' or "
            "'up_proj_out', got '" +
            fields.family + "'";
    return false;
  }
  bool absorb = result.kind == ProjectionKind::AbsorbQ;
  ProjectionShape &shape = result.shape;
  shape.ropeDim = 0;
  std::vector<KeyRule> rules = {chipRule(result.chip),
                                countRule("N", shape.numHeads, 1)};
  if (absorb)
    rules.insert(rules.end(), {countRule("P", shape.inDim, 1),
                               countRule("L", shape.outDim, 1),
                               countRule("R", shape.ropeDim, 1)});
  else
    rules.insert(rules.end(), {countRule("L", shape.inDim, 1),
                               countRule("V", shape.outDim, 1)});
  rules.push_back(actTypeRule(shape.elem));
  if (!applyRules(fields, rules, error))
    return false;
  if (const char *why = checkProjectionShape(shape); *why) {
    error =
        std::string("no ") + fields.family + " kernel for this shape: " + why;
    return false;
  }
  spec = result;
  return true;
}

std::string toString(const GatherCacheKernelSpec &spec) {
  // The same fields as a cache write of these rows: the text differs in its
  // family word only.
  CacheWriteKernelSpec rows{spec.chip, spec.shape.row, spec.shape.pageSize};
  return "gather_cache" + toString(rows).substr(std::strlen("cache_write"));
}

bool parseGatherCacheKernelSpec(const std::string &text,
                                GatherCacheKernelSpec &spec,
                                std::string &error) {
  std::istringstream words(text);
  std::string family;
  words >> family;
  if (family != "gather_cache") {
    error =
        "a gather kernel spec starts with 'gather_cache', got '" + family + "'";
    return false;
  }
  std::string rest((std::istreambuf_iterator<char>(words)),
                   std::istreambuf_iterator<char>());
  CacheWriteKernelSpec rows;
  if (!parseCacheWriteKernelSpec("cache_write" + rest, rows, error))
    return false;
  GatherCacheKernelSpec result;
  result.chip = rows.chip;
  result.shape.row = rows.shape;
  result.shape.pageSize = rows.pageSize;
  if (const char *why = checkGatherCacheShape(result.shape); *why) {
    error = std::string("no gather_cache kernel for this shape: ") + why;
    return false;
  }
  spec = result;
  return true;
}

std::string toString(const MergeStatesKernelSpec &spec) {
  const MergeStatesShape &s = spec.shape;
  std::ostringstream os;
  os << "merge_states chip=" << chipName(spec.chip) << " N=" << s.numHeads
     << " H=" << s.headDim << " dtype=" << actTypeName(s.elem);
  return os.str();
}

bool parseMergeStatesKernelSpec(const std::string &text,
                                MergeStatesKernelSpec &spec,
                                std::string &error) {
  Fields fields;
  if (!startSpec(text, "merge_states", "a merge kernel spec starts with",
                 {"chip", "N", "H", "dtype"}, "chip, N, H and dtype", fields,
                 error))
    return false;
  MergeStatesKernelSpec result;
  MergeStatesShape &shape = result.shape;
  if (!applyRules(fields,
                  {chipRule(result.chip), countRule("N", shape.numHeads, 1),
                   countRule("H", shape.headDim, 1), actTypeRule(shape.elem)},
                  error))
    return false;
  spec = result;
  return true;
}

std::string toString(const UpProjKvKernelSpec &spec) {
  const UpProjKvShape &s = spec.shape;
  std::ostringstream os;
  os << "up_proj_kv chip=" << chipName(spec.chip) << " N=" << s.numHeads
     << " L=" << s.latentDim << " P=" << s.nopeDim << " V=" << s.valueDim
     << " dtype=" << actTypeName(s.elem);
  return os.str();
}

bool parseUpProjKvKernelSpec(const std::string &text, UpProjKvKernelSpec &spec,
                             std::string &error) {
  Fields fields;
  if (!startSpec(text, "up_proj_kv", "an up-projection kernel spec starts with",
                 {"chip", "N", "L", "P", "V", "dtype"},
                 "chip, N, L, P, V and dtype", fields, error))
    return false;
  UpProjKvKernelSpec result;
  UpProjKvShape &shape = result.shape;
  if (!applyRules(fields,
                  {chipRule(result.chip), countRule("N", shape.numHeads, 1),
                   countRule("L", shape.latentDim, 1),
                   countRule("P", shape.nopeDim, 1),
                   countRule("V", shape.valueDim, 1), actTypeRule(shape.elem)},
                  error))
    return false;
  if (const char *why = checkUpProjKvShape(shape); *why) {
    error = std::string("no up_proj_kv kernel for this shape: ") + why;
    return false;
  }
  spec = result;
  return true;
}

std::string toString(const MhaKernelSpec &spec) {
  const MhaShape &s = spec.shape;
  std::ostringstream os;
  os << "mha chip=" << chipName(spec.chip) << " N=" << s.numHeads
     << " D=" << s.qkDim << " V=" << s.vDim << " dtype=" << actTypeName(s.elem)
     << " causal=" << (s.causal ? 1 : 0) << " scale=" << scaleText(s.scale);
  return os.str();
}

bool parseMhaKernelSpec(const std::string &text, MhaKernelSpec &spec,
                        std::string &error) {
  Fields fields;
  if (!startSpec(text, "mha", "an attention kernel spec starts with",
                 {"chip", "N", "D", "V", "dtype", "causal", "scale"},
                 "chip, N, D, V, dtype, causal and scale", fields, error))
    return false;
  MhaKernelSpec result;
  MhaShape &shape = result.shape;
  KeyRule scale{"scale", [&](const std::string &value, std::string &message) {
                  if (parsePositiveScale(value, shape.scale))
                    return true;
                  message = "scale must be a positive finite f32, got '" +
                            value + "'";
                  return false;
                }};
  if (!applyRules(fields,
                  {chipRule(result.chip), countRule("N", shape.numHeads, 1),
                   countRule("D", shape.qkDim, 1),
                   countRule("V", shape.vDim, 1), actTypeRule(shape.elem),
                   flagRule("causal", shape.causal), scale},
                  error))
    return false;
  spec = result;
  return true;
}

bool parseKernelSpec(const std::string &text, KernelSpec &spec,
                     std::string &error) {
  std::istringstream words(text);
  std::string family;
  words >> family;
  if (family == "decode") {
    DecodeKernelSpec decode;
    if (!parseDecodeKernelSpec(text, decode, error))
      return false;
    spec = decode;
    return true;
  }
  if (family == "cache_write") {
    CacheWriteKernelSpec cacheWrite;
    if (!parseCacheWriteKernelSpec(text, cacheWrite, error))
      return false;
    spec = cacheWrite;
    return true;
  }
  if (family == "absorb_q" || family == "up_proj_out") {
    ProjectionKernelSpec projection;
    if (!parseProjectionKernelSpec(text, projection, error))
      return false;
    spec = projection;
    return true;
  }
  if (family == "gather_cache")
    return parseInto<GatherCacheKernelSpec>(text, spec, error,
                                            parseGatherCacheKernelSpec);
  if (family == "merge_states")
    return parseInto<MergeStatesKernelSpec>(text, spec, error,
                                            parseMergeStatesKernelSpec);
  if (family == "up_proj_kv")
    return parseInto<UpProjKvKernelSpec>(text, spec, error,
                                         parseUpProjKvKernelSpec);
  if (family == "mha")
    return parseInto<MhaKernelSpec>(text, spec, error, parseMhaKernelSpec);
  error = "a kernel spec starts with its family (decode, cache_write, "
          "absorb_q, up_proj_out, gather_cache, merge_states, up_proj_kv "
          "or mha), got '" +
          family + "'";
  return false;
}

std::string toString(const KernelSpec &spec) {
  return std::visit([](const auto &s) { return toString(s); }, spec);
}

std::string pipelineFor(const DecodeKernelSpec &spec) {
  return mlaToNvvm(spec.chip);
}
std::string pipelineFor(const CacheWriteKernelSpec &spec) {
  return mlaToNvvm(spec.chip);
}
std::string pipelineFor(const ProjectionKernelSpec &spec) {
  return mlaToNvvm(spec.chip);
}
std::string pipelineFor(const GatherCacheKernelSpec &spec) {
  return mlaToNvvm(spec.chip);
}
std::string pipelineFor(const MergeStatesKernelSpec &spec) {
  return mlaToNvvm(spec.chip);
}
std::string pipelineFor(const UpProjKvKernelSpec &spec) {
  return mlaToNvvm(spec.chip);
}
std::string pipelineFor(const MhaKernelSpec &spec) {
  return mlaToNvvm(spec.chip);
}
std::string pipelineFor(const KernelSpec &spec) {
  return std::visit([](const auto &s) { return pipelineFor(s); }, spec);
}

const char *toolchainVersion() {
  return MLA_TOOLCHAIN_VERSION ";codegen-" MLA_CODEGEN_FINGERPRINT;
}

/// Every family's key hashes the same four inputs.
template <typename Spec> static std::string keyOf(const Spec &spec) {
  return computeKernelCacheKey(toString(spec), pipelineFor(spec),
                               toolchainVersion(), chipName(spec.chip));
}

std::string cacheKeyFor(const DecodeKernelSpec &spec) { return keyOf(spec); }
std::string cacheKeyFor(const CacheWriteKernelSpec &spec) {
  return keyOf(spec);
}
std::string cacheKeyFor(const ProjectionKernelSpec &spec) {
  return keyOf(spec);
}
std::string cacheKeyFor(const GatherCacheKernelSpec &spec) {
  return keyOf(spec);
}
std::string cacheKeyFor(const MergeStatesKernelSpec &spec) {
  return keyOf(spec);
}
std::string cacheKeyFor(const UpProjKvKernelSpec &spec) { return keyOf(spec); }
std::string cacheKeyFor(const MhaKernelSpec &spec) { return keyOf(spec); }
std::string cacheKeyFor(const KernelSpec &spec) {
  return std::visit([](const auto &s) { return cacheKeyFor(s); }, spec);
}

} // namespace mla::gpu
