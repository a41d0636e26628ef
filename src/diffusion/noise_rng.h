// stable-diffusion.cpp's two generators of standard normal floats, bit for bit: `cuda` (its default,
// a Philox 4x32-10 counter generator imitating torch's CUDA randn, as in A1111's rng_philox.py) and
// `cpu` (torch's CPU randn: MT19937 with torch's uniform and Box-Muller transforms).
// One object is one stream: stable-diffusion.cpp seeds it once per image (seed + batch index), draws
// the initial noise from it and then the ancestral samplers' per-step noise, in that order.
// Thread-safety: an object is used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

namespace kiln::diffusion {

enum class RngKind { Cuda, Cpu };

class NoiseRng {
 public:
  virtual ~NoiseRng() = default;
  // Restarts the stream as stable-diffusion.cpp's manual_seed does.
  virtual void seed(uint64_t seed) = 0;
  // Fills `out` with the next out.size() normal floats, as one randn(out.size()) call.
  virtual void randn(std::span<float> out) = 0;
};

std::unique_ptr<NoiseRng> make_noise_rng(RngKind kind);

// "cuda" or "cpu" (sd-cli's --rng names); nullopt for anything else.
std::optional<RngKind> parse_rng_kind(std::string_view name);
std::string_view rng_kind_name(RngKind kind);

}  // namespace kiln::diffusion
