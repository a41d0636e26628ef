// libFuzzer target for the GBNF parser and its checks (src/text/grammar/gbnf.h), the way a
// request's grammar reaches them: any text must end in a Grammar or a clean error, never a crash,
// a sanitizer report, a leak or a hang. A grammar that parses is printed back (Grammar::to_string
// walks every rule).
// Run: fuzz/run_fuzz.sh gbnf [SECONDS]
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "text/grammar/gbnf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto g = kiln::grammar::Grammar::parse(std::string_view(reinterpret_cast<const char*>(data), size));
  if (g.ok()) (void)g->to_string();
  return 0;
}
