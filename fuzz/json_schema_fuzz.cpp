// libFuzzer target for the JSON-schema converter (src/text/grammar/json_schema.h), the way a
// request's json_schema reaches it: the text parsed as JSON when it nests no deeper than the
// server lets a body nest, converted, and the grammar it gives parsed. Any schema must end in a
// grammar or a clean error, never a crash, a sanitizer report, a leak or a hang.
// Run: fuzz/run_fuzz.sh json_schema [SECONDS]
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "text/grammar/gbnf.h"
#include "text/grammar/json_schema.h"
#include "text/json_depth.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (kiln::text::json_nests_deeper_than(text, kiln::text::kMaxJsonDepth)) return 0;  // a 400 before
  const auto schema = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return 0;
  const auto gbnf = kiln::grammar::json_schema_to_gbnf(schema);
  if (gbnf.ok()) (void)kiln::grammar::Grammar::parse(*gbnf);
  return 0;
}
