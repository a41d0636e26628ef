#include "text/chat/gbnf_text.h"

#include <cstdio>
#include <set>
#include <vector>

#include "text/unicode.h"

namespace kiln::chat {
namespace {

// A code point as a GBNF escape, usable inside [...].
std::string class_escape(uint32_t cp) {
  char buf[16];
  if (cp < 0x100) {
    std::snprintf(buf, sizeof(buf), "\\x%02X", cp);
  } else if (cp < 0x10000) {
    std::snprintf(buf, sizeof(buf), "\\u%04X", cp);
  } else {
    std::snprintf(buf, sizeof(buf), "\\U%08X", cp);
  }
  return buf;
}

}  // namespace

std::string until_rule(grammar::SchemaConverter& converter, const std::string& name, std::string_view stop) {
  const std::vector<uint32_t> c = text::decode_utf8(stop);
  const size_t m = c.size();
  if (m == 0) return converter.add_rule(name, "[^\\x00]*");  // never reached by the chat grammars
  // KMP failure function: fail[q] = the longest proper border of c[0..q].
  std::vector<size_t> fail(m, 0);
  for (size_t q = 1, k = 0; q < m; ++q) {
    while (k > 0 && c[q] != c[k]) k = fail[k - 1];
    if (c[q] == c[k]) ++k;
    fail[q] = k;
  }
  auto next = [&](size_t q, uint32_t x) {
    while (q > 0 && c[q] != x) q = fail[q - 1];
    return c[q] == x ? q + 1 : 0;
  };
  const std::set<uint32_t> letters(c.begin(), c.end());
  std::string others = "[^";
  for (uint32_t x : letters) others += class_escape(x);
  others += "]";
  auto state = [&](size_t q) { return name + "-" + std::to_string(q); };
  for (size_t q = 0; q < m; ++q) {
    std::string rule = "| " + others + " " + state(0);
    for (uint32_t x : letters) {
      const size_t nq = next(q, x);
      if (nq == m) continue;  // this character would complete `stop`
      rule += " | [" + class_escape(x) + "] " + state(nq);
    }
    converter.add_rule(state(q), rule);
  }
  return state(0);
}

std::string regex_escape(std::string_view text) {
  std::string out;
  for (char ch : text) {
    if (std::string_view("\\^$.|?*+()[]{}").find(ch) != std::string_view::npos) out += '\\';
    out += ch;
  }
  return out;
}

}  // namespace kiln::chat
