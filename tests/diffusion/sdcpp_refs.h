// stable-diffusion.cpp's reference numbers (tests/data/diffusion/sdcpp-refs.txt, recorded by
// tools/fixtures/mksdcpp_refs.sh, sdcpp-clip-refs.txt, by mksdcpp_clip_refs.sh, and
// sdcpp-unet-refs.txt, sdcpp-taesd-refs.txt and sdcpp-vae-refs.txt, by mksdcpp_net_refs.sh, and
// sdcpp-loop-refs.txt, by mksdcpp_loop_refs.sh, and sdcpp-sd2-refs.txt, by mksdcpp_sd2_refs.sh):
// records `key count hex...`, floats as IEEE-754 bit patterns.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace kiln::diffusion::test {

// Every record, loaded once. A test fails (not crashes) on a missing key: floats() returns {}.
const std::map<std::string, std::vector<uint32_t>>& sdcpp_refs();
std::vector<float> ref_floats(const std::string& key);
// A record of integers (token ids) or bytes (texts), as written.
std::vector<uint32_t> ref_words(const std::string& key);
std::string ref_text(const std::string& key);
// The keys that start with `prefix`, in order.
std::vector<std::string> ref_keys(const std::string& prefix);

struct RelativeErrors {
  double l2 = 0;   // ||a - b|| / ||b||: the relative error of the set
  double max = 0;  // max |a - b| / max |b|: the worst value
};
// `actual` against `expected` (of at least expected's size).
RelativeErrors relative_errors(std::span<const float> actual, std::span<const float> expected);

// Bit-for-bit equality, naming the first differing index and both values.
::testing::AssertionResult bits_equal(std::span<const float> expected, std::span<const float> actual);

}  // namespace kiln::diffusion::test
