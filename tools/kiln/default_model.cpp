#include "default_model.h"

#include <cstdint>

// Defined by the generated default_model_blob.S (CMakeLists.txt): the bytes of the GGUF file.
extern "C" const uint8_t kiln_default_model_start[];
extern "C" const uint8_t kiln_default_model_end[];

namespace kiln::cli {
namespace {

Result<std::span<const uint8_t>> embedded_bytes() {
  const std::span<const uint8_t> bytes(kiln_default_model_start, kiln_default_model_end);
  if (bytes.empty()) return make_error("this kiln build embeds no default model: pass one with -m FILE.gguf");
  return bytes;
}

}  // namespace

Result<std::shared_ptr<const Model>> load_default_model() {
  KILN_ASSIGN_OR_RETURN(const auto bytes, embedded_bytes());
  return Model::from_memory(bytes, "kjv-llama (embedded)");
}

Result<std::unique_ptr<GgufFile>> open_default_gguf() {
  KILN_ASSIGN_OR_RETURN(const auto bytes, embedded_bytes());
  return GgufFile::parse(bytes);
}

}  // namespace kiln::cli
