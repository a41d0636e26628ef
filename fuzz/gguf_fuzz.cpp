// libFuzzer target for the GGUF reader: any input must parse to a value or a clean Error, never
// crash, read out of bounds or leak (built with ASan+UBSan by the `fuzz` preset).
// Run: fuzz/run_fuzz.sh gguf [SECONDS]
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = kiln::GgufFile::parse(std::span<const uint8_t>(data, size));
  if (file.ok()) {
    // Touch everything a caller may read: every accessor must stay inside the input.
    const kiln::GgufFile& g = **file;
    for (const kiln::GgufKv& kv : g.metadata()) (void)g.find(kv.key);
    uint64_t sum = 0;
    for (const kiln::GgufTensorInfo& t : g.tensors()) {
      const auto bytes = g.tensor_data(t);
      if (!bytes.empty()) sum += bytes.front() + bytes.back();
      (void)g.find_tensor(t.name);
      (void)g.tensor_view(t);
    }
    (void)g.get_string("general.architecture");
    (void)g.get_u32("general.alignment");
    (void)g.get_string_array("tokenizer.ggml.tokens");
    (void)g.get_f32_array("tokenizer.ggml.scores");
    (void)g.get_i64_array("tokenizer.ggml.token_type");
    if (sum == 1) return 0;  // keeps the reads from being optimised away
  }
  return 0;
}
