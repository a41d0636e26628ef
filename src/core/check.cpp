#include "core/check.h"

#include <cstdio>
#include <cstdlib>

namespace kiln {

void assert_fail(const char* file, int line, const char* cond, std::string_view msg) {
  std::fprintf(stderr, "kiln: assertion failed at %s:%d: %s: %.*s\n", file, line, cond,
               static_cast<int>(msg.size()), msg.data());
  std::abort();
}

}  // namespace kiln
