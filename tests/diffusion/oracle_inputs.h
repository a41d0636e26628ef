// The inputs both stable-diffusion.cpp's oracles (tools/fixtures/sdcpp_*_oracle.cpp, built by
// tools/fixtures/mksdcpp_net_refs.sh against sd.cpp) and kiln's tests that compare with their
// records make: exact floats in [-1, 1) from a hash of the index and a salt, so that two programs
// make the same values without sharing a file. Header-only, the standard library only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace oracle_inputs {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Value i of the sequence `salt`: (splitmix64(i + salt * 0x9e3779b97f4a7c15) >> 40) / 2^24 * 2 - 1.
inline float hashed_input(uint64_t i, uint64_t salt) {
  const uint64_t h = splitmix64(i + salt * 0x9e3779b97f4a7c15ull);
  return static_cast<float>(h >> 40) / 16777216.0f * 2.0f - 1.0f;
}

// The first n values of the sequence `salt`, each times `scale`.
inline std::vector<float> hashed(size_t n, uint64_t salt, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = hashed_input(i, salt) * scale;
  return v;
}

}  // namespace oracle_inputs
