// The `cpu` generator: torch's CPU randn over MT19937, as stable-diffusion.cpp reproduces it.
// A call of n >= 16 draws n uniform floats (24-bit mantissa from one 32-bit word each) and turns
// each block of 16 into normals pairwise (j with j + 8) by a float Box-Muller; when n is not a
// multiple of 16 the last 16 values are drawn again from the stream and transformed. A call of
// n < 16 draws doubles (53 bits from two words each) in pairs with a double Box-Muller, keeping
// the pair's second value for the next draw.
#pragma once

#include <array>

#include "diffusion/noise_rng.h"

namespace kiln::diffusion {

class TorchCpuRng final : public NoiseRng {
 public:
  TorchCpuRng();
  void seed(uint64_t seed) override;
  void randn(std::span<float> out) override;

 private:
  static constexpr int kStateWords = 624;

  uint32_t next_word();
  void twist();
  double next_normal_double();
  void fill_normal_16(float* block);

  std::array<uint32_t, kStateWords> state_{};
  int left_ = 1;  // words left before the next twist, plus one
  int next_ = 0;  // index of the next word in state_
  bool has_cached_normal_ = false;
  double cached_normal_ = 0.0;
};

}  // namespace kiln::diffusion
