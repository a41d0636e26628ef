// `kiln inspect FILE [--json] [--all]`: a GGUF file's header, metadata, tensors and totals.
// Text output summarises long arrays and strings unless --all; --json prints the same content as
// one JSON object (arrays summarised as {count, first} unless --all).
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "command.h"
#include "core/gguf.h"
#include "messages.h"
#include "options.h"

namespace kiln::cli {
namespace {

constexpr size_t kFirstItems = 5;        // array items shown when summarising
constexpr size_t kMaxStringShown = 120;  // string bytes shown in text mode when summarising

struct InspectOptions {
  std::string path;
  bool json = false;
  bool all = false;  // every array item and whole strings
};

// Text form of a string for one line: escapes control characters and quotes; cut unless `all`.
std::string quoted(std::string_view s, bool all) {
  std::string out = "\"";
  const size_t shown = all ? s.size() : std::min(s.size(), kMaxStringShown);
  for (size_t i = 0; i < shown; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += "\"";
  if (shown < s.size()) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

std::string scalar_text(const GgufValue& v, bool all) {
  char buf[64];
  switch (v.type) {
    case GgufType::U8:
    case GgufType::U16:
    case GgufType::U32:
    case GgufType::U64:
      std::snprintf(buf, sizeof buf, "%" PRIu64, v.num.u);
      return buf;
    case GgufType::I8:
    case GgufType::I16:
    case GgufType::I32:
    case GgufType::I64:
      std::snprintf(buf, sizeof buf, "%" PRId64, v.num.i);
      return buf;
    case GgufType::F32:
      std::snprintf(buf, sizeof buf, "%.9g", v.num.f);
      return buf;
    case GgufType::F64:
      std::snprintf(buf, sizeof buf, "%.17g", v.num.f);
      return buf;
    case GgufType::BOOL:
      return v.num.u != 0 ? "true" : "false";
    case GgufType::STRING:
      return quoted(v.str, all);
    case GgufType::ARRAY:
      break;
  }
  KILN_ASSERT(false, "scalar_text on an array");
  return {};
}

std::string type_text(const GgufValue& v) {
  if (v.type != GgufType::ARRAY) return std::string(gguf_type_name(v.type));
  return "array<" + std::string(gguf_type_name(v.elem_type)) + ">[" + std::to_string(v.arr.size()) + "]";
}

std::string value_text(const GgufValue& v, bool all) {
  if (v.type != GgufType::ARRAY) return scalar_text(v, all);
  std::string out = "[";
  const size_t shown = all ? v.arr.size() : std::min(v.arr.size(), kFirstItems);
  for (size_t i = 0; i < shown; ++i) {
    if (i > 0) out += ", ";
    out += value_text(v.arr[i], all);
  }
  if (shown < v.arr.size()) out += ", ...";
  return out + "]";
}

nlohmann::ordered_json value_json(const GgufValue& v, bool all) {
  switch (v.type) {
    case GgufType::U8:
    case GgufType::U16:
    case GgufType::U32:
    case GgufType::U64:
      return v.num.u;
    case GgufType::I8:
    case GgufType::I16:
    case GgufType::I32:
    case GgufType::I64:
      return v.num.i;
    case GgufType::F32:
    case GgufType::F64:
      return v.num.f;
    case GgufType::BOOL:
      return v.num.u != 0;
    case GgufType::STRING:
      return v.str;
    case GgufType::ARRAY:
      break;
  }
  nlohmann::ordered_json items = nlohmann::ordered_json::array();
  const size_t shown = all ? v.arr.size() : std::min(v.arr.size(), kFirstItems);
  for (size_t i = 0; i < shown; ++i) items.push_back(value_json(v.arr[i], all));
  return items;
}

std::string shape_text(const GgufTensorInfo& t) {
  std::string out = "[";
  for (int d = 0; d < t.n_dims; ++d) out += (d ? ", " : "") + std::to_string(t.ne[d]);
  return out + "]";
}

std::string mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

struct TypeTotal {
  size_t tensors = 0;
  uint64_t params = 0;
  uint64_t bytes = 0;
};

// Per tensor type, ordered by type name.
std::map<std::string, TypeTotal> totals_by_type(const GgufFile& g) {
  std::map<std::string, TypeTotal> totals;
  for (const GgufTensorInfo& t : g.tensors()) {
    TypeTotal& tt = totals[std::string(dtype_name(t.type))];
    ++tt.tensors;
    tt.params += static_cast<uint64_t>(t.nelements());
    tt.bytes += t.size;
  }
  return totals;
}

void print_text(const GgufFile& g, const InspectOptions& opt) {
  const uint64_t file_size = g.bytes().size();
  std::printf("file: %s\n", opt.path.c_str());
  std::printf("size: %" PRIu64 " bytes (%s), GGUF version %u, alignment %" PRIu64 ", data offset %" PRIu64
              "\n",
              file_size, mib(file_size).c_str(), g.version(), g.alignment(), g.data_offset());

  std::printf("\nmetadata: %zu keys\n", g.metadata().size());
  size_t key_width = 0;
  for (const GgufKv& kv : g.metadata()) key_width = std::max(key_width, kv.key.size());
  for (const GgufKv& kv : g.metadata()) {
    std::printf("  %-*s  %-22s %s\n", static_cast<int>(key_width), kv.key.c_str(),
                type_text(kv.value).c_str(), value_text(kv.value, opt.all).c_str());
  }

  std::printf("\ntensors: %zu\n", g.tensors().size());
  size_t name_width = 4;
  for (const GgufTensorInfo& t : g.tensors()) name_width = std::max(name_width, t.name.size());
  std::printf("  %-*s  %-8s %-28s %14s %14s\n", static_cast<int>(name_width), "name", "type", "shape",
              "bytes", "offset");
  for (const GgufTensorInfo& t : g.tensors()) {
    std::printf("  %-*s  %-8s %-28s %14" PRIu64 " %14" PRIu64 "\n", static_cast<int>(name_width),
                t.name.c_str(), std::string(dtype_name(t.type)).c_str(), shape_text(t).c_str(), t.size,
                g.data_offset() + t.offset);
  }

  std::printf("\ntotals by type:\n");
  uint64_t params = 0, bytes = 0;
  for (const auto& [name, tt] : totals_by_type(g)) {
    std::printf("  %-8s %5zu tensors %16" PRIu64 " params %14" PRIu64 " bytes (%s)\n", name.c_str(),
                tt.tensors, tt.params, tt.bytes, mib(tt.bytes).c_str());
    params += tt.params;
    bytes += tt.bytes;
  }
  std::printf("\nparameters: %" PRIu64 "\ntensor data: %" PRIu64 " bytes (%s)\nfile size: %" PRIu64
              " bytes (%s)\n",
              params, bytes, mib(bytes).c_str(), file_size, mib(file_size).c_str());
}

nlohmann::ordered_json to_json(const GgufFile& g, const InspectOptions& opt) {
  nlohmann::ordered_json j;
  j["file"] = opt.path;
  j["file_size"] = g.bytes().size();
  j["version"] = g.version();
  j["alignment"] = g.alignment();
  j["data_offset"] = g.data_offset();
  nlohmann::ordered_json meta = nlohmann::ordered_json::array();
  for (const GgufKv& kv : g.metadata()) {
    nlohmann::ordered_json m{{"key", kv.key}, {"type", gguf_type_name(kv.value.type)}};
    if (kv.value.type == GgufType::ARRAY) {
      m["elem_type"] = gguf_type_name(kv.value.elem_type);
      m["count"] = kv.value.arr.size();
      m[opt.all ? "items" : "first"] = value_json(kv.value, opt.all);
    } else {
      m["value"] = value_json(kv.value, opt.all);
    }
    meta.push_back(std::move(m));
  }
  j["metadata"] = std::move(meta);
  nlohmann::ordered_json tensors = nlohmann::ordered_json::array();
  for (const GgufTensorInfo& t : g.tensors()) {
    tensors.push_back({{"name", t.name},
                       {"type", dtype_name(t.type)},
                       {"shape", std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims)},
                       {"params", t.nelements()},
                       {"bytes", t.size},
                       {"offset", g.data_offset() + t.offset}});
  }
  j["tensors"] = std::move(tensors);
  nlohmann::ordered_json totals = nlohmann::ordered_json::object();
  uint64_t params = 0, bytes = 0;
  for (const auto& [name, tt] : totals_by_type(g)) {
    totals[name] = {{"tensors", tt.tensors}, {"params", tt.params}, {"bytes", tt.bytes}};
    params += tt.params;
    bytes += tt.bytes;
  }
  j["totals_by_type"] = std::move(totals);
  j["params"] = params;
  j["tensor_bytes"] = bytes;
  return j;
}

int run_inspect(int argc, char** argv) {
  InspectOptions opt;
  OptionParser p("inspect", "kiln inspect FILE [--json] [--all]");
  p.description("Shows a GGUF file's header, metadata, tensor table and totals.");
  p.argument(&opt.path, "FILE", "a GGUF file");
  p.flag({"--json"}, &opt.json, "machine-readable JSON on stdout");
  p.flag({"--all"}, &opt.all, "every array item and whole strings (default: summarised)");
  if (auto code = p.parse(argc, argv)) return *code;
  auto file = GgufFile::open(opt.path);
  if (!file.ok()) return fail("inspect", file.error().message);
  if (opt.json) {
    // Strings in a GGUF need not be valid UTF-8: replace bad bytes instead of failing.
    const std::string text =
        to_json(**file, opt).dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    std::printf("%s\n", text.c_str());
  } else {
    print_text(**file, opt);
  }
  return 0;
}

}  // namespace

KILN_COMMAND(inspect, "show a GGUF file's metadata, tensors and totals", run_inspect);

}  // namespace kiln::cli
