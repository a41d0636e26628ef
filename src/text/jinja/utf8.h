// UTF-8 helpers for the template engine: strings are UTF-8 bytes; lengths, indexing and slicing
// count code points, as Python's str does. Malformed bytes decode to U+FFFD one byte at a time.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kiln::jinja {

std::u32string utf8_decode(std::string_view s);
std::string utf8_encode(std::u32string_view s);
void utf8_append(std::string& out, char32_t cp);
// Simple case mapping for ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic; other code
// points map to themselves.
char32_t to_upper(char32_t c);
char32_t to_lower(char32_t c);
std::string utf8_upper(std::string_view s);
std::string utf8_lower(std::string_view s);
// Number of code points in s.
size_t utf8_length(std::string_view s);

}  // namespace kiln::jinja
