// stable-diffusion.cpp's reference numbers (tests/data/diffusion/sdcpp-refs.txt, recorded by
// tools/fixtures/mksdcpp_refs.sh, sdcpp-clip-refs.txt, by mksdcpp_clip_refs.sh, and
// sdcpp-unet-refs.txt, sdcpp-taesd-refs.txt and sdcpp-vae-refs.txt, by mksdcpp_net_refs.sh,
// sdcpp-loop-refs.txt and sdcpp-img2img-refs.txt, by mksdcpp_loop_refs.sh, sdcpp-sd2-refs.txt, by
// mksdcpp_sd2_refs.sh, and sdcpp-quant-refs.txt, by mksdcpp_quant_refs.sh): records
// `key count hex...`, floats as IEEE-754 bit patterns.
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

// An image's bytes against a record of pixels (bytes packed 4 to a word, as the oracles write them).
struct PixelMatch {
  size_t n = 0;           // bytes compared
  size_t within_one = 0;  // |kiln - sd.cpp| <= 1 (the bar: at least 99% of n)
  size_t equal = 0;
  size_t saturated = 0;  // the reference's 0 or 255 (an image clipped to them hardly depends on its input)
  int max_difference = 0;
  bool within_one_on_99_percent() const { return n > 0 && within_one * 100 >= n * 99; }
};
// Every `stride`-th byte of `pixels` against the record `key` (recorded with the same stride). A
// record of another length is a test failure, and an empty match (n = 0).
PixelMatch match_pixels(std::span<const uint8_t> pixels, const std::string& key, size_t stride = 1);

}  // namespace kiln::diffusion::test
