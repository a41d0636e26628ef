// Always-on assertions for programmer invariants (never for untrusted input: use Result).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace kiln {

[[noreturn]] void assert_fail(const char* file, int line, const char* cond, std::string_view msg);

// Turns one argument of make_error() into text: strings as they are, numbers in decimal.
inline std::string to_message_piece(std::string_view s) { return std::string(s); }
inline std::string to_message_piece(const char* s) { return std::string(s); }
inline std::string to_message_piece(const std::string& s) { return s; }
inline std::string to_message_piece(char c) { return std::string(1, c); }
template <class T>
  requires std::is_arithmetic_v<T>
std::string to_message_piece(T v) {
  return std::to_string(v);
}

}  // namespace kiln

#define KILN_ASSERT(cond, msg)                                          \
  do {                                                                  \
    if (!(cond)) ::kiln::assert_fail(__FILE__, __LINE__, #cond, (msg)); \
  } while (0)
