#include "text/grammar/schema_rules.h"

#include <algorithm>
#include <stdexcept>

namespace kiln::grammar::schema_rules {
namespace {

// ref: llama.cpp PRIMITIVE_RULES and STRING_FORMAT_RULES (the JSON syntax as GBNF).
const Primitive kPrimitives[] = {
    {"boolean", R"(("true" | "false"))", {}},
    {"decimal-part", R"([0-9]{1,16})", {}},
    {"integral-part", R"([0] | [1-9] [0-9]{0,15})", {}},
    {"number", R"(("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)?)", {"integral-part", "decimal-part"}},
    {"integer", R"(("-"? integral-part))", {"integral-part"}},
    {"value", R"(object | array | string | number | boolean | null)", {"object", "array", "string", "number", "boolean", "null"}},
    {"object", R"("{" space ( string ":" space value ("," space string ":" space value)* )? space "}")", {"string", "value"}},
    {"array", R"("[" space ( value ("," space value)* )? space "]")", {"value"}},
    {"uuid", R"("\"" [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12} "\"")", {}},
    {"char", R"([^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4}))", {}},
    {"string", R"("\"" char* "\"")", {"char"}},
    {"null", R"("null")", {}},
    {"date", R"([0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] ))", {}},
    {"time",
     R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? ( "Z" | ( "+" | "-" ) ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))",
     {}},
    {"date-time", R"(date "T" time)", {"date", "time"}},
    {"date-string", R"("\"" date "\"")", {"date"}},
    {"time-string", R"("\"" time "\"")", {"time"}},
    {"date-time-string", R"("\"" date-time "\"")", {"date-time"}},
};

std::string repeat(std::string_view s, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

void digit_range(char from, char to, std::string& out) {
  out += "[";
  out += from;
  if (from != to) {
    out += "-";
    out += to;
  }
  out += "]";
}

void more_digits(int min_digits, int max_digits, std::string& out) {
  out += "[0-9]";
  if (min_digits == max_digits && min_digits == 1) return;
  out += '{';
  out += std::to_string(min_digits);
  if (max_digits != min_digits) {
    out += ",";
    if (max_digits != std::numeric_limits<int>::max()) out += std::to_string(max_digits);
  }
  out += "}";
}

// The digit strings of from's length between `from` and `to` (same length), as llama.cpp's
// uniform_range writes them.
void uniform_digits(std::string_view from, std::string_view to, std::string& out) {
  size_t i = 0;
  while (i < from.size() && i < to.size() && from[i] == to[i]) ++i;
  if (i > 0) {
    out += '"';
    out += from.substr(0, i);
    out += '"';
  }
  if (i < from.size() && i < to.size()) {
    if (i > 0) out += " ";
    const size_t sub_len = from.size() - i - 1;
    if (sub_len > 0) {
      const std::string_view from_sub = from.substr(i + 1);
      const std::string_view to_sub = to.substr(i + 1);
      const std::string sub_zeros = repeat("0", sub_len);
      const std::string sub_nines = repeat("9", sub_len);
      bool to_reached = false;
      out += "(";
      if (from_sub == sub_zeros) {
        digit_range(from[i], static_cast<char>(to[i] - 1), out);
        out += " ";
        more_digits(static_cast<int>(sub_len), static_cast<int>(sub_len), out);
      } else {
        out += "[";
        out += from[i];
        out += "] (";
        uniform_digits(from_sub, sub_nines, out);
        out += ")";
        if (from[i] < to[i] - 1) {
          out += " | ";
          if (to_sub == sub_nines) {
            digit_range(static_cast<char>(from[i] + 1), to[i], out);
            to_reached = true;
          } else {
            digit_range(static_cast<char>(from[i] + 1), static_cast<char>(to[i] - 1), out);
          }
          out += " ";
          more_digits(static_cast<int>(sub_len), static_cast<int>(sub_len), out);
        }
      }
      if (!to_reached) {
        out += " | ";
        digit_range(to[i], to[i], out);
        out += " ";
        uniform_digits(sub_zeros, to_sub, out);
      }
      out += ")";
    } else {
      out += "[";
      out += from[i];
      out += "-";
      out += to[i];
      out += "]";
    }
  }
}

// ref: llama.cpp build_min_max_int (same alternation, same text).
void min_max_int(int64_t min_value, int64_t max_value, std::string& out, int decimals_left = 16, bool top_level = true) {
  const bool has_min = min_value != std::numeric_limits<int64_t>::min();
  const bool has_max = max_value != std::numeric_limits<int64_t>::max();
  auto digit_range = [&](char from, char to) { kiln::grammar::schema_rules::digit_range(from, to, out); };
  auto more_digits = [&](int min_digits, int max_digits) { kiln::grammar::schema_rules::more_digits(min_digits, max_digits, out); };
  auto uniform_range = [&](std::string_view from, std::string_view to) { uniform_digits(from, to, out); };

  if (has_min && has_max) {
    if (min_value < 0 && max_value < 0) {
      out += "\"-\" (";
      min_max_int(-max_value, -min_value, out, decimals_left, true);
      out += ")";
      return;
    }
    if (min_value < 0) {
      out += "\"-\" (";
      min_max_int(0, -min_value, out, decimals_left, true);
      out += ") | ";
      min_value = 0;
    }
    std::string min_s = std::to_string(min_value);
    const std::string max_s = std::to_string(max_value);
    for (size_t digits = min_s.size(); digits < max_s.size(); ++digits) {
      uniform_range(min_s, repeat("9", digits));
      min_s = repeat("0", digits + 1);
      min_s[0] = '1';
      out += " | ";
    }
    uniform_range(min_s, max_s);
    return;
  }
  const int less_decimals = std::max(decimals_left - 1, 1);
  if (has_min) {
    if (min_value < 0) {
      out += "\"-\" (";
      min_max_int(std::numeric_limits<int64_t>::min(), -min_value, out, decimals_left, false);
      out += ") | [0] | [1-9] ";
      more_digits(0, decimals_left - 1);
    } else if (min_value == 0) {
      if (top_level) {
        out += "[0] | [1-9] ";
        more_digits(0, less_decimals);
      } else {
        more_digits(1, decimals_left);
      }
    } else if (min_value <= 9) {
      const char c = static_cast<char>('0' + min_value);
      const char range_start = top_level ? '1' : '0';
      if (c > range_start) {
        digit_range(range_start, static_cast<char>(c - 1));
        out += " ";
        more_digits(1, less_decimals);
        out += " | ";
      }
      digit_range(c, '9');
      out += " ";
      more_digits(0, less_decimals);
    } else {
      const std::string min_s = std::to_string(min_value);
      const int len = static_cast<int>(min_s.size());
      const char c = min_s[0];
      if (c > '1') {
        digit_range(top_level ? '1' : '0', static_cast<char>(c - 1));
        out += " ";
        more_digits(len, less_decimals);
        out += " | ";
      }
      digit_range(c, c);
      out += " (";
      min_max_int(std::stoll(min_s.substr(1)), std::numeric_limits<int64_t>::max(), out, less_decimals, false);
      out += ")";
      if (c < '9') {
        out += " | ";
        digit_range(static_cast<char>(c + 1), '9');
        out += " ";
        more_digits(len - 1, less_decimals);
      }
    }
    return;
  }
  // has_max only (integer_range never calls with neither bound).
  if (max_value >= 0) {
    if (top_level) {
      out += "\"-\" [1-9] ";
      more_digits(0, less_decimals);
      out += " | ";
    }
    min_max_int(0, max_value, out, decimals_left, true);
  } else {
    out += "\"-\" (";
    min_max_int(-max_value, std::numeric_limits<int64_t>::max(), out, decimals_left, false);
    out += ")";
  }
}

}  // namespace

const Primitive* primitive(std::string_view name) {
  for (const Primitive& p : kPrimitives) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

bool is_reserved_name(std::string_view name) { return name == "root" || primitive(name) != nullptr; }

// ref: llama.cpp build_repetition
std::string repetition(const std::string& item, int min_items, int max_items, const std::string& separator) {
  const bool has_max = max_items != std::numeric_limits<int>::max();
  if (max_items == 0) return "";
  if (min_items == 0 && max_items == 1) return item + "?";
  if (separator.empty()) {
    if (min_items == 1 && !has_max) return item + "+";
    if (min_items == 0 && !has_max) return item + "*";
    return item + "{" + std::to_string(min_items) + "," + (has_max ? std::to_string(max_items) : "") + "}";
  }
  std::string result = item + " " +
                       repetition("(" + separator + " " + item + ")", min_items == 0 ? 0 : min_items - 1,
                                  has_max ? max_items - 1 : max_items);
  if (min_items == 0) result = "(" + result + ")?";
  return result;
}

namespace {

// Where llama.cpp's recursion goes wrong for "at least m" (m > 0, no maximum): a remainder after
// the first digit that starts with 0 and has two or more digits loses its length (minimum 100
// admits 12), and at the start of a number (a negative maximum) it admits a leading 0.
bool llama_at_least_is_wrong(int64_t m, bool at_number_start) {
  const std::string s = std::to_string(m);
  for (size_t k = 1; k + 1 < s.size(); ++k) {
    if (s[k] == '0') return true;
  }
  return at_number_start && (m <= 9 || s[0] > '1');
}

// The integers >= m (m > 0) of at most 16 digits, no leading zeros: the numbers of m's length
// from m up, then every longer one.
std::string at_least(int64_t m) {
  const std::string s = std::to_string(m);
  std::string out;
  uniform_digits(s, repeat("9", s.size()), out);
  if (s.size() < 16) {
    out += " | [1-9] ";
    more_digits(static_cast<int>(s.size()), 15, out);
  }
  return out;
}

}  // namespace

std::string integer_range(int64_t min_value, int64_t max_value) {
  constexpr int64_t kNone = std::numeric_limits<int64_t>::min(), kNoMax = std::numeric_limits<int64_t>::max();
  // kiln departs from llama.cpp's text only where llama.cpp's grammar admits wrong numbers.
  if (max_value == kNoMax && min_value >= 10 && llama_at_least_is_wrong(min_value, false)) return at_least(min_value);
  if (min_value == kNone && max_value < 0 && llama_at_least_is_wrong(-max_value, true))
    return "\"-\" (" + at_least(-max_value) + ")";
  std::string out;
  min_max_int(min_value, max_value, out);
  return out;
}

}  // namespace kiln::grammar::schema_rules
