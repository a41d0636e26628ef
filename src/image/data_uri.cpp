#include "image/data_uri.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace kiln {
namespace {

constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr std::array<int8_t, 256> kBase64Values = [] {
  std::array<int8_t, 256> v{};
  v.fill(-1);
  for (size_t i = 0; i < kAlphabet.size(); ++i)
    v[static_cast<unsigned char>(kAlphabet[i])] = static_cast<int8_t>(i);
  return v;
}();

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

std::string shown(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return std::string("'") + c + "'";
  static const char* hex = "0123456789abcdef";
  return std::string("byte 0x") + hex[u >> 4] + hex[u & 15];
}

}  // namespace

std::string encode_base64(std::span<const uint8_t> bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t group = static_cast<uint32_t>(bytes[i]) << 16;
    if (n > 1) group |= static_cast<uint32_t>(bytes[i + 1]) << 8;
    if (n > 2) group |= bytes[i + 2];
    out.push_back(kAlphabet[(group >> 18) & 63]);
    out.push_back(kAlphabet[(group >> 12) & 63]);
    out.push_back(n > 1 ? kAlphabet[(group >> 6) & 63] : '=');
    out.push_back(n > 2 ? kAlphabet[group & 63] : '=');
  }
  return out;
}

Result<std::vector<uint8_t>> decode_base64(std::string_view text) {
  std::vector<uint8_t> out;
  out.reserve(text.size() / 4 * 3 + 3);
  uint32_t acc = 0;
  int n_bits = 0;
  size_t n_symbols = 0, n_pad = 0, first_pad = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (is_space(c)) continue;
    if (c == '=') {
      if (n_pad == 0) first_pad = i;
      ++n_pad;
      continue;
    }
    const int8_t v = kBase64Values[static_cast<unsigned char>(c)];
    if (v < 0) return make_error("image: invalid base64 character ", shown(c), " at offset ", i);
    if (n_pad > 0) return make_error("image: invalid base64: data after the padding '=' at offset ", first_pad);
    acc = (acc << 6) | static_cast<uint32_t>(v);
    n_bits += 6;
    ++n_symbols;
    if (n_bits >= 8) {
      n_bits -= 8;
      out.push_back(static_cast<uint8_t>(acc >> n_bits));
      acc &= (1u << n_bits) - 1;
    }
  }
  const size_t rest = n_symbols % 4;
  if (rest == 1) return make_error("image: invalid base64: ", n_symbols, " symbols leave a dangling 6 bits at the end");
  if (n_pad > 0 && (rest == 0 || n_pad != 4 - rest))
    return make_error("image: invalid base64: ", n_pad, " padding '=' after ", n_symbols, " symbols");
  if (acc != 0) return make_error("image: invalid base64: the last symbol has bits set past the data");
  return out;
}

Result<DataUri> parse_data_uri(std::string_view uri) {
  constexpr std::string_view kScheme = "data:";
  if (uri.size() < kScheme.size() ||
      !std::equal(kScheme.begin(), kScheme.end(), uri.begin(),
                  [](char a, char b) { return a == std::tolower(static_cast<unsigned char>(b)); }))
    return make_error("image: not a data URI (it should start with 'data:')");
  const size_t comma = uri.find(',');
  if (comma == std::string_view::npos) return make_error("image: data URI without ',' before its data");
  const std::string_view header = uri.substr(kScheme.size(), comma - kScheme.size());
  const size_t semi = header.find(';');
  DataUri out;
  out.media_type = header.substr(0, semi);
  bool base64 = false;
  for (size_t p = semi; p != std::string_view::npos;) {
    const size_t next = header.find(';', p + 1);
    if (header.substr(p + 1, next == std::string_view::npos ? std::string_view::npos : next - p - 1) == "base64") base64 = true;
    p = next;
  }
  if (!base64) return make_error("image: data URI without ';base64' (images must be base64-encoded)");
  KILN_ASSIGN_OR_RETURN(out.bytes, decode_base64(uri.substr(comma + 1)));
  return out;
}

}  // namespace kiln
