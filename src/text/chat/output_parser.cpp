#include "text/chat/output_parser.h"

#include <cctype>
#include <nlohmann/json.hpp>
#include <optional>

#include "text/chat/text_util.h"

namespace kiln::chat {
namespace {

// `s` between double quotes. Built by appending: GCC 12 warns falsely (-Wrestrict, GCC bug 105329)
// on operator+(const char*, std::string&&), and CI makes warnings errors.
std::string in_quotes(std::string_view s) {
  std::string q;
  q.reserve(s.size() + 2);
  q += '"';
  q += s;
  q += '"';
  return q;
}

using json = nlohmann::ordered_json;
constexpr size_t npos = std::string::npos;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

size_t skip_ws(std::string_view s, size_t p) {
  while (p < s.size() && is_space(s[p])) ++p;
  return p;
}

std::string_view rtrim(std::string_view s) {
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

std::string_view ltrim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  return s;
}

// Bytes at the end of `s` that begin a UTF-8 sequence not complete yet.
size_t incomplete_utf8(std::string_view s) {
  for (size_t back = 1; back <= std::min<size_t>(3, s.size()); ++back) {
    const auto c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;
    const size_t need = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

// JSON string escaping without the quotes, byte by byte (so that a prefix escapes to a prefix).
std::string escape_json(std::string_view s) {
  std::string out;
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  return out;
}

enum class Match { None, Partial, Full };

// `marker` at text[p], whitespace in the marker matching any whitespace (or none) in the text and
// leading/trailing whitespace of the marker optional. `end` is set past the match.
Match match_marker(std::string_view text, size_t p, std::string_view marker, size_t& end) {
  marker = trim_view(marker);
  size_t i = 0;
  while (i < marker.size()) {
    if (is_space(marker[i])) {
      while (i < marker.size() && is_space(marker[i])) ++i;
      p = skip_ws(text, p);
      continue;
    }
    if (p >= text.size()) return Match::Partial;
    if (text[p] != marker[i]) return Match::None;
    ++p;
    ++i;
  }
  end = p;
  return Match::Full;
}

// A JSON object's members as far as the text goes.
struct Member {
  std::string key;
  size_t value_begin = 0, value_end = npos;  // value_end npos: the value is not complete
};
struct ObjectScan {
  std::vector<Member> members;
  bool complete = false;
  bool invalid = false;
  size_t end = 0;
};

ObjectScan scan_object(std::string_view text, size_t p) {
  ObjectScan o;
  if (p >= text.size() || text[p] != '{') {
    o.invalid = p < text.size();
    return o;
  }
  size_t i = p + 1;
  while (true) {
    i = skip_ws(text, i);
    if (i >= text.size()) return o;
    if (text[i] == '}' && (o.members.empty())) {
      o.complete = true;
      o.end = i + 1;
      return o;
    }
    if (text[i] != '"') {
      o.invalid = true;
      return o;
    }
    const JsonScan k = scan_json(text.substr(i));
    if (k.status != JsonScan::Status::Complete) {
      o.invalid = k.status == JsonScan::Status::Invalid;
      return o;
    }
    Member m;
    m.key = json::parse(text.substr(i, k.end)).get<std::string>();
    i = skip_ws(text, i + k.end);
    if (i >= text.size()) return o;
    if (text[i] != ':') {
      o.invalid = true;
      return o;
    }
    i = skip_ws(text, i + 1);
    m.value_begin = i;
    if (i >= text.size()) {
      o.members.push_back(m);
      return o;
    }
    const JsonScan v = scan_json(text.substr(i));
    if (v.status == JsonScan::Status::Invalid) {
      o.invalid = true;
      return o;
    }
    if (v.status == JsonScan::Status::Incomplete) {
      o.members.push_back(m);
      return o;
    }
    m.value_end = i + v.end;
    o.members.push_back(m);
    i = skip_ws(text, m.value_end);
    if (i >= text.size()) return o;
    if (text[i] == ',') {
      ++i;
      continue;
    }
    if (text[i] == '}') {
      o.complete = true;
      o.end = i + 1;
      return o;
    }
    o.invalid = true;
    return o;
  }
}

const Member* member(const ObjectScan& o, std::string_view key) {
  for (const Member& m : o.members) {
    if (m.key == key) return &m;
  }
  return nullptr;
}

// A complete JSON string value's text, decoded.
std::optional<std::string> string_value(std::string_view text, const Member* m) {
  if (m == nullptr || m->value_end == npos) return std::nullopt;
  const json v = json::parse(text.substr(m->value_begin, m->value_end - m->value_begin), nullptr, false);
  if (!v.is_string()) return std::nullopt;
  return v.get<std::string>();
}

// The decoded prefix of a JSON string literal that starts at text[p] ('"'), holding back an
// unfinished escape or UTF-8 sequence; `closed` tells whether the literal ended.
std::string string_prefix(std::string_view text, size_t p, bool& closed) {
  std::string out;
  closed = false;
  size_t i = p + 1;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '"') {
      closed = true;
      return out;
    }
    if (c != '\\') {
      out += c;
      ++i;
      continue;
    }
    if (i + 1 >= text.size()) break;
    const char e = text[i + 1];
    if (e == 'u') {
      if (i + 6 > text.size()) break;
      const json v = json::parse(in_quotes(text.substr(i, 6)), nullptr, false);
      if (v.is_string()) {
        out += v.get<std::string>();
        i += 6;
        continue;
      }
      // A surrogate pair: decode both halves together.
      if (i + 12 > text.size()) break;
      const json pair = json::parse(in_quotes(text.substr(i, 12)), nullptr, false);
      if (pair.is_string()) out += pair.get<std::string>();
      i += 12;
      continue;
    }
    switch (e) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      default: out += e;
    }
    i += 2;
  }
  out.resize(out.size() - incomplete_utf8(out));
  return out;
}

class Parse {
 public:
  Parse(std::string_view text, bool partial, const ParserOptions& o)
      : text_(text), partial_(partial), o_(o), t_(o.syntax.tools) {}

  ParsedMessage run() {
    size_t pos = 0;
    const ReasoningSyntax& r = o_.syntax.reasoning;
    const bool extract = o_.reasoning_format != ReasoningFormat::None && r.supported();
    bool after_reasoning = false;
    if (!extract && o_.starts_in_reasoning) msg_.content = o_.opened_reasoning;
    if (extract) {
      const std::string start = trim(r.start), end = trim(r.end);
      bool inside = o_.starts_in_reasoning;
      size_t p = 0;
      if (!inside && !start.empty()) {
        const size_t q = skip_ws(text_, 0);
        const std::string_view rest = text_.substr(q);
        if (rest.substr(0, start.size()) == start) {
          inside = true;
          p = q + start.size();
        } else if (partial_ && start.substr(0, rest.size()) == rest) {
          return msg_;  // maybe the start of a reasoning block: wait
        }
      }
      if (inside) {
        const size_t e = text_.find(end, p);
        if (e == npos) {
          std::string_view body = ltrim(text_.substr(p));
          if (partial_) {
            body = rtrim(body.substr(0, body.size() - partial_marker_suffix(body, end)));
            body = body.substr(0, body.size() - incomplete_utf8(body));
          }
          msg_.reasoning_content = std::string(partial_ ? body : trim_view(body));
          return msg_;
        }
        msg_.reasoning_content = trim(text_.substr(p, e - p));
        pos = e + end.size();
        after_reasoning = true;
      }
    }
    if (after_reasoning) {
      pos = skip_ws(text_, pos);
      if (partial_ && pos == text_.size()) return msg_;
    }
    std::string_view rest = text_.substr(pos);
    // Content the template wraps in markers (Command R7B, Granite with reasoning).
    const std::string cstart = trim(o_.syntax.content_start), cend = trim(o_.syntax.content_end);
    if (!cstart.empty()) {
      const size_t q = skip_ws(rest, 0);
      if (rest.substr(q, cstart.size()) == cstart) {
        const size_t b = q + cstart.size();
        const size_t e = rest.find(cend, b);
        std::string_view inner = rest.substr(b, e == npos ? npos : e - b);
        if (e == npos && partial_) inner = inner.substr(0, inner.size() - partial_marker_suffix(inner, cend));
        add_content(e == npos && partial_ ? ltrim(inner) : trim_view(inner), e == npos && partial_);
        if (e == npos) return msg_;
        rest = rest.substr(e + cend.size());
      } else if (partial_ && q < rest.size() && cstart.substr(0, rest.size() - q) == rest.substr(q)) {
        return msg_;
      }
    }
    if (!o_.parse_tool_calls) {
      add_content(rest, partial_);
      return msg_;
    }
    if (t_.shape == ToolSyntax::Shape::Generic) {
      generic(rest);
      return msg_;
    }
    const std::string trigger = trim(!t_.section_start.empty() ? t_.section_start : t_.call_start);
    size_t t;
    if (trigger.empty()) {
      // No marker (Llama 3.x): calls are bare JSON objects that open the output.
      t = skip_ws(rest, 0);
      if (t >= rest.size()) {
        if (!partial_) add_content(rest, false);
        return msg_;
      }
      if (rest[t] != '{' || !looks_like_call(rest.substr(t))) {
        if (partial_ && rest[t] == '{' && !decided_not_call(rest.substr(t))) return msg_;
        add_content(rest, partial_);
        return msg_;
      }
    } else {
      t = rest.find(trigger);
      if (t == npos) {
        add_content(rest, partial_, trigger);
        return msg_;
      }
    }
    add_content(rtrim(rest.substr(0, t)), false);
    const size_t end = calls(rest, t);
    if (!partial_ && end < rest.size() && !trim_view(rest.substr(end)).empty()) add_content(rest.substr(end), false);
    return msg_;
  }

 private:
  // Appends content; while streaming, holds back trailing whitespace and a partial `marker`.
  void add_content(std::string_view s, bool hold, std::string_view marker = {}) {
    if (hold) {
      if (!marker.empty()) s = s.substr(0, s.size() - partial_marker_suffix(s, marker));
      s = rtrim(s);
      s = s.substr(0, s.size() - incomplete_utf8(s));
    }
    msg_.content += s;
  }

  bool looks_like_call(std::string_view s) const {
    const ObjectScan o = scan_object(s, 0);
    return !o.members.empty() && (o.members[0].key == t_.name_key || o.members[0].key == t_.args_key);
  }
  bool decided_not_call(std::string_view s) const {
    const ObjectScan o = scan_object(s, 0);
    return o.invalid || o.complete || !o.members.empty();
  }

  // Reads markers and calls from rest[p]; returns where the calls end.
  size_t calls(std::string_view s, size_t p) {
    size_t e = 0;
    if (!t_.section_start.empty()) {
      const Match m = match_marker(s, p, t_.section_start, e);
      if (m != Match::Full) return s.size();
      p = e;
    }
    if (t_.shape == ToolSyntax::Shape::JsonObjects && t_.array) {
      p = skip_ws(s, p);
      if (p >= s.size() || s[p] != '[') return s.size();
      ++p;
    }
    while (true) {
      p = skip_ws(s, p);
      if (p >= s.size()) return s.size();
      if (t_.shape == ToolSyntax::Shape::JsonObjects && t_.array) {
        if (s[p] == ']') {
          ++p;
          break;
        }
        if (s[p] == ',' && !msg_.tool_calls.empty()) p = skip_ws(s, p + 1);
      } else if (!t_.call_start.empty()) {
        const Match m = match_marker(s, p, t_.call_start, e);
        if (m == Match::Partial) return s.size();
        if (m == Match::None) break;
        p = e;
      } else if (!msg_.tool_calls.empty() && t_.shape == ToolSyntax::Shape::JsonObjects && s[p] != '{') {
        break;
      }
      p = skip_ws(s, p);
      bool done = false;
      const size_t after = t_.shape == ToolSyntax::Shape::JsonObjects ? json_call(s, p, done)
                           : t_.shape == ToolSyntax::Shape::NameThenJson ? name_json_call(s, p, done)
                                                                        : tagged_call(s, p, done);
      if (!done) return s.size();
      p = after;
      if (!t_.call_end.empty() && !(t_.shape == ToolSyntax::Shape::JsonObjects && t_.array)) {
        const Match m = match_marker(s, skip_ws(s, p), t_.call_end, e);
        if (m == Match::Partial) return s.size();
        if (m == Match::Full) p = e;
      }
    }
    if (!t_.section_end.empty()) {
      const Match m = match_marker(s, skip_ws(s, p), t_.section_end, e);
      if (m == Match::Full) p = e;
      if (m == Match::Partial) return s.size();
    }
    return p;
  }

  void add_call(std::string name, std::string id, std::string arguments) {
    msg_.tool_calls.push_back({std::move(id), std::move(name), std::move(arguments)});
  }

  // {"name": .., "arguments": {..}[, "id": ..]}
  size_t json_call(std::string_view s, size_t p, bool& done) {
    const ObjectScan o = scan_object(s, p);
    const auto name = string_value(s, member(o, t_.name_key));
    const Member* args = member(o, t_.args_key);
    std::optional<std::string> id;
    if (!t_.id_key.empty() && t_.id_first) {
      const Member* idm = member(o, t_.id_key);
      if (idm != nullptr) id = string_value(s, idm);
      if (!id) id = o.complete ? std::optional<std::string>("") : std::nullopt;  // wait for it while streaming
    } else {
      id = std::string();
    }
    if (name && id && args != nullptr) {
      const size_t end = args->value_end == npos ? s.size() : args->value_end;
      std::string_view a = s.substr(args->value_begin, end - args->value_begin);
      if (args->value_end == npos) a = rtrim(a.substr(0, a.size() - incomplete_utf8(a)));
      add_call(*name, *id, std::string(a));
    } else if (name && id && o.complete) {
      add_call(*name, *id, "{}");
    }
    done = o.complete;
    return o.complete ? o.end : s.size();
  }

  // The first position of any of `stops` (trimmed, non-empty) from p, or npos.
  static size_t find_first(std::string_view s, size_t p, std::initializer_list<std::string_view> stops, size_t& which_len) {
    size_t best = npos;
    for (std::string_view stop : stops) {
      const std::string_view t = trim_view(stop);
      if (t.empty()) continue;
      const size_t f = s.find(t, p);
      if (f < best) {
        best = f;
        which_len = t.size();
      }
    }
    return best;
  }

  // name_prefix NAME name_suffix [id_prefix ID] args_prefix {JSON} args_suffix
  size_t name_json_call(std::string_view s, size_t p, bool& done) {
    done = false;
    size_t e = 0, len = 0;
    if (!trim_view(t_.name_prefix).empty()) {
      const Match m = match_marker(s, p, t_.name_prefix, e);
      if (m != Match::Full) return s.size();
      p = e;
    }
    const size_t name_end = find_first(s, p, {t_.name_suffix, t_.id_prefix, t_.args_prefix, "{"}, len);
    if (name_end == npos) return s.size();
    const std::string name = trim(s.substr(p, name_end - p));
    p = name_end;
    if (!trim_view(t_.name_suffix).empty() && match_marker(s, p, t_.name_suffix, e) == Match::Full) p = e;
    std::string id;
    if (!t_.id_prefix.empty()) {
      if (match_marker(s, p, t_.id_prefix, e) != Match::Full) return s.size();
      const size_t id_end = find_first(s, e, {t_.args_prefix, "{"}, len);
      if (id_end == npos) return s.size();
      id = trim(s.substr(e, id_end - e));
      p = id_end;
    }
    if (!trim_view(t_.args_prefix).empty()) {
      const Match m = match_marker(s, p, t_.args_prefix, e);
      if (m != Match::Full) return s.size();
      p = e;
    }
    p = skip_ws(s, p);
    if (p >= s.size()) {
      add_call(name, id, "");
      return s.size();
    }
    const JsonScan j = scan_json(s.substr(p));
    if (j.status == JsonScan::Status::Invalid) return s.size();
    if (j.status == JsonScan::Status::Incomplete) {
      std::string_view a = rtrim(s.substr(p));
      add_call(name, id, std::string(a.substr(0, a.size() - incomplete_utf8(a))));
      return s.size();
    }
    add_call(name, id, std::string(s.substr(p, j.end)));
    p += j.end;
    if (!trim_view(t_.args_suffix).empty()) {
      const Match m = match_marker(s, skip_ws(s, p), t_.args_suffix, e);
      if (m == Match::Partial) return s.size();
      if (m == Match::Full) p = e;
    }
    done = true;
    return p;
  }

  const json* param_schema(const std::string& tool, const std::string& param) const {
    for (const ToolDef& t : o_.tools) {
      if (t.name != tool) continue;
      if (t.parameters.contains("properties") && t.parameters["properties"].contains(param))
        return &t.parameters["properties"][param];
    }
    return nullptr;
  }

  // name_prefix NAME name_suffix (arg_prefix KEY arg_infix VALUE arg_suffix)* args_suffix
  size_t tagged_call(std::string_view s, size_t p, bool& done) {
    done = false;
    size_t e = 0, len = 0;
    if (!trim_view(t_.name_prefix).empty()) {
      if (match_marker(s, p, t_.name_prefix, e) != Match::Full) return s.size();
      p = e;
    }
    const size_t name_end = find_first(s, p, {t_.name_suffix, "\n", t_.arg_prefix, t_.args_suffix, t_.call_end}, len);
    if (name_end == npos) return s.size();
    const std::string name = trim(s.substr(p, name_end - p));
    p = name_end;
    if (!trim_view(t_.name_suffix).empty() && match_marker(s, p, t_.name_suffix, e) == Match::Full) p = e;
    std::string args = "{";
    size_t n_args = 0;
    // The first line of the infix ends the key ("</arg_key>" of "</arg_key>\n<arg_value>").
    const std::string infix = trim(t_.arg_infix);
    const std::string key_stop = infix.substr(0, infix.find('\n'));
    while (true) {
      p = skip_ws(s, p);
      const Match m = match_marker(s, p, t_.arg_prefix, e);
      if (!partial_ && p >= s.size()) break;  // the output ends here: close the arguments
      if (m == Match::Partial || (m == Match::None && p >= s.size())) {
        add_call(name, "", args);
        return s.size();
      }
      if (m == Match::None) break;
      const size_t key_end = s.find(key_stop, e);
      if (key_end == npos) {
        add_call(name, "", args);
        return s.size();
      }
      const std::string key = trim(s.substr(e, key_end - e));
      if (match_marker(s, key_end, t_.arg_infix, e) != Match::Full) {
        add_call(name, "", args);
        return s.size();
      }
      const std::string suffix = trim(t_.arg_suffix);
      const size_t value_end = s.find(suffix, e);
      const json* schema = param_schema(name, key);
      const bool as_string = schema == nullptr || (*schema).value("type", json()) == "string";
      args += (n_args++ ? ", " : "") + json(key).dump() + ": ";
      if (value_end == npos) {  // the value is still being written
        std::string_view v = ltrim(s.substr(e));
        v = rtrim(v.substr(0, v.size() - partial_marker_suffix(v, suffix)));
        v = v.substr(0, v.size() - incomplete_utf8(v));
        if (as_string) {
          args += '"';
          args += escape_json(v);
        } else {
          args += v;
        }
        add_call(name, "", args);
        return s.size();
      }
      const std::string value = trim(s.substr(e, value_end - e));
      if (as_string) {
        args += in_quotes(escape_json(value));
      } else {
        const json v = json::parse(value, nullptr, false);
        args += v.is_discarded() ? in_quotes(escape_json(value)) : value;
      }
      p = value_end + suffix.size();
    }
    args += "}";
    if (!trim_view(t_.args_suffix).empty()) {
      const Match m = match_marker(s, p, t_.args_suffix, e);
      if (m == Match::Partial) {
        add_call(name, "", args.substr(0, args.size() - 1));
        return s.size();
      }
      if (m == Match::Full) p = e;
    }
    add_call(name, "", args);
    done = true;
    return p;
  }

  // The generic format: {"tool_call": {..}}, {"tool_calls": [..]} or {"response": ".."}.
  void generic(std::string_view s) {
    const size_t q = skip_ws(s, 0);
    if (q >= s.size()) {
      if (!partial_) add_content(s, false);
      return;
    }
    if (s[q] != '{') {
      add_content(s, partial_);
      return;
    }
    const ObjectScan o = scan_object(s, q);
    if (o.invalid) {
      if (!partial_) add_content(s, false);
      return;
    }
    if (o.members.empty()) {
      if (!partial_) add_content(s, false);
      return;
    }
    const Member& first = o.members[0];
    if (first.key == "response") {
      if (first.value_begin >= s.size() || s[first.value_begin] != '"') return;
      bool closed = false;
      msg_.content = string_prefix(s, first.value_begin, closed);
      return;
    }
    auto one = [&](size_t p) {
      const ObjectScan c = scan_object(s, p);
      const auto name = string_value(s, member(c, "name"));
      const Member* args = member(c, "arguments");
      if (!name || args == nullptr) return;
      const size_t end = args->value_end == npos ? s.size() : args->value_end;
      std::string_view a = s.substr(args->value_begin, end - args->value_begin);
      if (args->value_end == npos) a = rtrim(a.substr(0, a.size() - incomplete_utf8(a)));
      add_call(*name, "", std::string(a));
    };
    if (first.key == "tool_call") {
      one(first.value_begin);
    } else if (first.key == "tool_calls" && first.value_begin < s.size() && s[first.value_begin] == '[') {
      size_t p = first.value_begin + 1;
      while (true) {
        p = skip_ws(s, p);
        if (p >= s.size() || s[p] != '{') break;
        one(p);
        const JsonScan j = scan_json(s.substr(p));
        if (j.status != JsonScan::Status::Complete) break;
        p = skip_ws(s, p + j.end);
        if (p < s.size() && s[p] == ',') ++p;
      }
    } else if (!partial_) {
      add_content(s, false);
    }
  }

  std::string_view text_;
  bool partial_;
  const ParserOptions& o_;
  const ToolSyntax& t_;
  ParsedMessage msg_;
};

// The part of `now` after `before`, which must be its prefix (else nothing: a parse never takes
// back what it gave).
std::string added(const std::string& before, const std::string& now) {
  if (now.size() < before.size() || now.compare(0, before.size(), before) != 0) return "";
  return now.substr(before.size());
}

}  // namespace

Result<ReasoningFormat> reasoning_format_from_name(std::string_view name) {
  if (name == "none") return ReasoningFormat::None;
  if (name == "auto") return ReasoningFormat::Auto;
  if (name == "deepseek") return ReasoningFormat::Deepseek;
  if (name == "deepseek-legacy") return ReasoningFormat::DeepseekLegacy;
  return make_error("reasoning format '", name, "' is not none, auto, deepseek or deepseek-legacy");
}

ParsedMessage parse_output(std::string_view text, bool partial, const ParserOptions& options) {
  return Parse(text, partial, options).run();
}

ChatOutputParser::ChatOutputParser(ParserOptions options, std::function<std::string()> make_id)
    : options_(std::move(options)), make_id_(std::move(make_id)) {}

ChatDelta ChatOutputParser::feed(std::string_view text) {
  text_ += text;
  return advance(true);
}

ChatDelta ChatOutputParser::finish() { return advance(false); }

ChatDelta ChatOutputParser::advance(bool partial) {
  ParsedMessage next = parse_output(text_, partial, options_);
  // Ids: the model's own when its syntax writes them, else made up once per call.
  for (size_t i = 0; i < next.tool_calls.size(); ++i) {
    if (i < current_.tool_calls.size()) {
      next.tool_calls[i].id = current_.tool_calls[i].id;
      continue;
    }
    if (!next.tool_calls[i].id.empty()) continue;
    const auto style = options_.syntax.tools.ids;
    if (style == ToolSyntax::Ids::Index) {
      next.tool_calls[i].id = std::to_string(i);
    } else {
      std::string id = make_id_();
      if (style == ToolSyntax::Ids::Alnum9) {
        std::erase_if(id, [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); });
        id.resize(9, '0');
      }
      next.tool_calls[i].id = std::move(id);
    }
  }
  ChatDelta d;
  d.reasoning_content = added(current_.reasoning_content, next.reasoning_content);
  d.content = added(current_.content, next.content);
  for (size_t i = 0; i < next.tool_calls.size(); ++i) {
    ToolCallDelta td;
    td.index = i;
    if (i >= current_.tool_calls.size()) {
      td.id = next.tool_calls[i].id;
      td.name = next.tool_calls[i].name;
      td.arguments = next.tool_calls[i].arguments;
    } else {
      td.arguments = added(current_.tool_calls[i].arguments, next.tool_calls[i].arguments);
      if (td.arguments.empty()) continue;
    }
    d.tool_calls.push_back(std::move(td));
  }
  current_ = std::move(next);
  return d;
}

}  // namespace kiln::chat
