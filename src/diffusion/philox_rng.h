// The `cuda` generator: Philox 4x32 with 10 rounds. Element i of the c-th randn call (c counts calls
// since the last seed) is counter {c, 0, i, 0} under key {seed low 32 bits, seed high 32 bits}; its
// first two output words become one normal float through a single-precision Box-Muller whose
// log, sqrt and sin are evaluated in double (as stable-diffusion.cpp's unqualified calls resolve).
#pragma once

#include "diffusion/noise_rng.h"

namespace kiln::diffusion {

class PhiloxRng final : public NoiseRng {
 public:
  void seed(uint64_t seed) override;
  void randn(std::span<float> out) override;

 private:
  uint64_t seed_ = 0;
  uint32_t calls_ = 0;  // the counter's first word for the next randn call
};

}  // namespace kiln::diffusion
