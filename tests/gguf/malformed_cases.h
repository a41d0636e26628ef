// Valid sample GGUFs built with GgufWriter, and malformed variants of them, each with the key words
// its error message must contain. Used by the fault tests and to seed the fuzzer's corpus.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::gguf_test {

// A small valid file with a value of every metadata type (arrays of strings, floats and ints
// included), an explicit general.alignment of 32, two keys dup.key.aaaa/dup.key.bbbb, and the
// tensors tensor_a (f32 [8, 2]), tensor_e (f32 [0, 3], no bytes), tensor_b (q4_0 [64, 2]) and
// tensor_c (f16 [4]), in that order; tensor_c's bytes end at `sample_data_end`.
std::vector<uint8_t> sample_file();
// Bytes up to the end of the last tensor's data in sample_file() (what follows is padding).
size_t sample_data_end();
// A valid file with a nested array (array of arrays of i32) and no tensors: the writer refuses to
// write these (llama.cpp does), the reader accepts them.
std::vector<uint8_t> nested_array_file(int depth);

struct MalformedCase {
  std::string name;  // short identifier, also the corpus file name
  std::vector<uint8_t> bytes;
  std::vector<std::string> expect;  // substrings the error message must contain
};
// Every hand-made malformed case (not the per-byte truncations, which the tests sweep directly).
std::vector<MalformedCase> malformed_cases();

// Index just past the first occurrence of `s` in `bytes` (asserts it occurs).
size_t offset_after(const std::vector<uint8_t>& bytes, std::string_view s);

}  // namespace kiln::gguf_test
