#include "diffusion/philox_rng.h"

#include <array>
#include <cmath>

namespace kiln::diffusion {
namespace {

constexpr uint32_t kMul0 = 0xD2511F53u;
constexpr uint32_t kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u;
constexpr uint32_t kWeyl1 = 0xBB67AE85u;
constexpr int kRounds = 10;

using Words = std::array<uint32_t, 4>;

Words philox4x32(Words counter, uint32_t key0, uint32_t key1) {
  for (int round = 0; round < kRounds; ++round) {
    if (round > 0) {
      key0 += kWeyl0;
      key1 += kWeyl1;
    }
    const uint64_t p0 = uint64_t{counter[0]} * kMul0;
    const uint64_t p1 = uint64_t{counter[2]} * kMul1;
    counter = {static_cast<uint32_t>(p1 >> 32) ^ counter[1] ^ key0, static_cast<uint32_t>(p1),
               static_cast<uint32_t>(p0 >> 32) ^ counter[3] ^ key1, static_cast<uint32_t>(p0)};
  }
  return counter;
}

// Two uniform words to one normal float. The words pass through float first (rounding), the
// uniforms are centred in their 2^-32 cells, the transcendental steps run in double.
float box_muller(uint32_t a, uint32_t b) {
  constexpr float kInv2Pow32 = 2.3283064e-10f;
  const float inv_2pow32_2pi = kInv2Pow32 * 6.2831855f;
  const float u = static_cast<float>(a) * kInv2Pow32 + kInv2Pow32 / 2;
  const float v = static_cast<float>(b) * inv_2pow32_2pi + inv_2pow32_2pi / 2;
  const float radius = static_cast<float>(std::sqrt(-2.0f * std::log(static_cast<double>(u))));
  return static_cast<float>(radius * std::sin(static_cast<double>(v)));
}

}  // namespace

void PhiloxRng::seed(uint64_t seed) {
  seed_ = seed;
  calls_ = 0;
}

void PhiloxRng::randn(std::span<float> out) {
  const uint32_t key0 = static_cast<uint32_t>(seed_);
  const uint32_t key1 = static_cast<uint32_t>(seed_ >> 32);
  for (size_t i = 0; i < out.size(); ++i) {
    const Words w = philox4x32({calls_, 0, static_cast<uint32_t>(i), 0}, key0, key1);
    out[i] = box_muller(w[0], w[1]);
  }
  ++calls_;
}

}  // namespace kiln::diffusion
