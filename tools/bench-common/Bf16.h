//===- Bf16.h - bf16 bit patterns on the host, for the GPU tools ----------===//
//
// The benchmarks fill device buffers and read results as raw bf16 bit
// patterns; these conversions round to nearest even, as the kernels do.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TOOLS_BENCHCOMMON_BF16_H
#define MLA_TOOLS_BENCHCOMMON_BF16_H

#include <cstdint>
#include <cstring>

namespace mla::bench {

/// bf16 <-> float, round to nearest even (NaN stays NaN).
inline uint16_t floatToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return 0x7fc0;
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

inline float bf16ToFloat(uint16_t value) {
  uint32_t bits = static_cast<uint32_t>(value) << 16;
  float result;
  std::memcpy(&result, &bits, sizeof(result));
  return result;
}

} // namespace mla::bench

#endif // MLA_TOOLS_BENCHCOMMON_BF16_H
