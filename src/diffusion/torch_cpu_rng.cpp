#include "diffusion/torch_cpu_rng.h"

#include <cmath>
#include <numbers>

namespace kiln::diffusion {
namespace {

constexpr int kShift = 397;
constexpr uint32_t kMatrixA = 0x9908b0dfu;
constexpr uint32_t kUpperMask = 0x80000000u;
constexpr uint32_t kLowerMask = 0x7fffffffu;

uint32_t twist_pair(uint32_t u, uint32_t v) {
  const uint32_t mixed = (u & kUpperMask) | (v & kLowerMask);
  return (mixed >> 1) ^ ((v & 1) ? kMatrixA : 0);
}

// torch's uniform_real: the low `digits` bits of a word scaled to [0, 1).
float uniform_float(uint32_t word) {
  constexpr uint32_t kMask = (uint32_t{1} << 24) - 1;
  constexpr float kScale = 1.0f / static_cast<float>(uint32_t{1} << 24);
  return static_cast<float>(word & kMask) * kScale;
}

double uniform_double(uint64_t word) {
  constexpr uint64_t kMask = (uint64_t{1} << 53) - 1;
  constexpr double kScale = 1.0 / static_cast<double>(uint64_t{1} << 53);
  return static_cast<double>(word & kMask) * kScale;
}

}  // namespace

TorchCpuRng::TorchCpuRng() { seed(0); }

void TorchCpuRng::seed(uint64_t seed) {
  state_[0] = static_cast<uint32_t>(seed);
  for (int j = 1; j < kStateWords; ++j) {
    const uint32_t prev = state_[j - 1];
    state_[j] = 1812433253u * (prev ^ (prev >> 30)) + static_cast<uint32_t>(j);
  }
  left_ = 1;
  next_ = 0;
  has_cached_normal_ = false;
}

void TorchCpuRng::twist() {
  for (int j = 0; j < kStateWords; ++j) {
    const int far = (j + kShift) % kStateWords;
    const int near = (j + 1) % kStateWords;
    state_[j] = state_[far] ^ twist_pair(state_[j], state_[near]);
  }
  left_ = kStateWords;
  next_ = 0;
}

uint32_t TorchCpuRng::next_word() {
  if (--left_ == 0) twist();
  uint32_t y = state_[next_++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

double TorchCpuRng::next_normal_double() {
  if (has_cached_normal_) {
    has_cached_normal_ = false;
    return cached_normal_;
  }
  auto next_u64 = [this] {
    const uint64_t high = next_word();
    const uint64_t low = next_word();
    return (high << 32) | low;
  };
  const double u1 = uniform_double(next_u64());
  const double u2 = uniform_double(next_u64());
  const double radius = std::sqrt(-2.0 * std::log1p(-u2));
  const double theta = 2.0 * std::numbers::pi * u1;
  // torch's `* std + mean` with std 1 and mean 0: the + 0.0 turns a -0 into +0.
  cached_normal_ = radius * std::sin(theta) + 0.0;
  has_cached_normal_ = true;
  return radius * std::cos(theta) + 0.0;
}

// Uniforms in block[0..16) to normals: block[j] and block[j + 8] form one pair.
void TorchCpuRng::fill_normal_16(float* block) {
  constexpr float kTwoPi = 2.0f * std::numbers::pi_v<float>;
  for (int j = 0; j < 8; ++j) {
    const float u1 = 1.0f - block[j];
    const float u2 = block[j + 8];
    const float radius = std::sqrt(-2.0f * std::log(u1));
    const float theta = kTwoPi * u2;
    block[j] = radius * std::cos(theta) + 0.0f;  // + 0: torch's mean, which turns -0 into +0
    block[j + 8] = radius * std::sin(theta) + 0.0f;
  }
}

void TorchCpuRng::randn(std::span<float> out) {
  const size_t n = out.size();
  if (n < 16) {
    for (float& v : out) v = static_cast<float>(next_normal_double());
    return;
  }
  for (float& v : out) v = uniform_float(next_word());
  for (size_t i = 0; i + 16 <= n; i += 16) fill_normal_16(out.data() + i);
  if (n % 16 != 0) {
    float* tail = out.data() + n - 16;
    for (int i = 0; i < 16; ++i) tail[i] = uniform_float(next_word());
    fill_normal_16(tail);
  }
}

}  // namespace kiln::diffusion
