// The float32 arithmetic part 7's two candidates share (benchmarks/fused_log_softmax.cpp,
// benchmarks/fused_label_smoothed_loss.cpp): bfloat16 to float32 and back, and a vectorisable exp.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace candidate {

inline float from_bf16(uint16_t bits) {
  uint32_t widened = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &widened, 4);
  return value;
}

inline uint16_t to_bf16(float value) {  // round to nearest even; NaN stays NaN
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

inline float exp_of(float x) {  // exp for x <= 0 (Cephes' expf polynomial, within 2 ulp), vectorisable
  x = x < -87.3f ? -87.3f : x;
  float n = std::nearbyint(x * 1.44269504088896341f);
  float r = x - n * 0.693145751953125f - n * 1.428606765330187045e-06f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t exponent = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &exponent, 4);
  return p * scale;
}

}  // namespace candidate
