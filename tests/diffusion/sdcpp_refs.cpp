#include "sdcpp_refs.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <fstream>
#include <sstream>

#include "test_data.h"

namespace kiln::diffusion::test {

const std::map<std::string, std::vector<uint32_t>>& sdcpp_refs() {
  static const std::map<std::string, std::vector<uint32_t>> refs = [] {
    std::map<std::string, std::vector<uint32_t>> out;
    for (const char* file :
         {"diffusion/sdcpp-refs.txt", "diffusion/sdcpp-clip-refs.txt", "diffusion/sdcpp-unet-refs.txt",
          "diffusion/sdcpp-taesd-refs.txt", "diffusion/sdcpp-loop-refs.txt", "diffusion/sdcpp-vae-refs.txt",
          "diffusion/sdcpp-img2img-refs.txt", "diffusion/sdcpp-sd2-refs.txt"}) {
      std::ifstream in(test_data::path(file));
      std::string line;
      while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream fields(line);
        std::string key;
        size_t count = 0;
        fields >> key >> count;
        std::vector<uint32_t> values(count);
        for (uint32_t& v : values) fields >> std::hex >> v;
        out.emplace(std::move(key), std::move(values));
      }
    }
    return out;
  }();
  return refs;
}

std::vector<float> ref_floats(const std::string& key) {
  const auto it = sdcpp_refs().find(key);
  EXPECT_NE(it, sdcpp_refs().end()) << "no reference record " << key;
  if (it == sdcpp_refs().end()) return {};
  std::vector<float> out;
  for (uint32_t b : it->second) out.push_back(std::bit_cast<float>(b));
  return out;
}

std::vector<uint32_t> ref_words(const std::string& key) {
  const auto it = sdcpp_refs().find(key);
  EXPECT_NE(it, sdcpp_refs().end()) << "no reference record " << key;
  return it == sdcpp_refs().end() ? std::vector<uint32_t>{} : it->second;
}

std::string ref_text(const std::string& key) {
  std::string text;
  for (uint32_t byte : ref_words(key)) text += static_cast<char>(byte);
  return text;
}

std::vector<std::string> ref_keys(const std::string& prefix) {
  std::vector<std::string> keys;
  for (const auto& [key, values] : sdcpp_refs()) {
    if (key.starts_with(prefix)) keys.push_back(key);
  }
  return keys;
}

::testing::AssertionResult bits_equal(std::span<const float> expected, std::span<const float> actual) {
  if (expected.size() != actual.size()) {
    return ::testing::AssertionFailure() << "size " << actual.size() << ", expected " << expected.size();
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    if (std::bit_cast<uint32_t>(expected[i]) != std::bit_cast<uint32_t>(actual[i])) {
      return ::testing::AssertionFailure()
             << "index " << i << ": " << actual[i] << " (0x" << std::hex << std::bit_cast<uint32_t>(actual[i])
             << "), expected " << std::dec << expected[i] << " (0x" << std::hex
             << std::bit_cast<uint32_t>(expected[i]) << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

RelativeErrors relative_errors(std::span<const float> actual, std::span<const float> expected) {
  double d2 = 0, e2 = 0, dmax = 0, emax = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const double d = static_cast<double>(actual[i]) - expected[i];
    d2 += d * d;
    e2 += static_cast<double>(expected[i]) * expected[i];
    dmax = std::max(dmax, std::fabs(d));
    emax = std::max(emax, std::fabs(static_cast<double>(expected[i])));
  }
  return {std::sqrt(d2 / e2), dmax / emax};
}

}  // namespace kiln::diffusion::test
