#include "bench_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

namespace kiln::cli {
namespace {

using Record = std::vector<std::pair<std::string, std::string>>;  // field, JSON literal

std::string json_string(const std::string& v) {
  std::string out = "\"";
  for (const char c : v) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string number(double v, const char* fmt) {
  char buf[32];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

double mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
}

double stddev(const std::vector<double>& v) {  // sample standard deviation, as llama-bench
  if (v.size() < 2) return 0.0;
  const double m = mean(v);
  double sq = 0;
  for (double x : v) sq += (x - m) * (x - m);
  return std::sqrt(sq / static_cast<double>(v.size() - 1));
}

std::string list(const std::vector<double>& v, const char* fmt) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + number(v[i], fmt);
  return out + "]";
}

std::vector<double> tokens_per_second(const BenchRow& row) {
  std::vector<double> ts;
  for (double s : row.seconds) ts.push_back(static_cast<double>(row.n_tokens) / s);
  return ts;
}

// llama-bench's tensor_split value: each share as %.2f up to the last positive one, '/' between.
std::string tensor_split_text(const std::vector<float>& ts) {
  size_t last = 0;
  for (size_t i = 0; i < ts.size(); ++i) last = ts[i] > 0 ? i : last;
  std::string out;
  for (size_t i = 0; i <= last; ++i) out += (i ? "/" : "") + number(i < ts.size() ? ts[i] : 0.0, "%.2f");
  return out;
}

// llama-bench's tensor_buft_overrides value: PATTERN=DEVICE joined by ';', or "none".
std::string overrides_text(const std::vector<std::pair<std::string, std::string>>& ot) {
  if (ot.empty()) return "none";
  std::string out;
  for (const auto& [pattern, device] : ot) out += (out.empty() ? "" : ";") + pattern + "=" + device;
  return out;
}

// The row's record with llama-bench's field names, in its order (n_streams is kiln's own).
Record record_of(const BenchSetting& s, const BenchRow& row) {
  const BenchConfig& c = s.config;
  std::vector<double> ns;
  for (double sec : row.seconds) ns.push_back(sec * 1e9);
  const std::vector<double> ts = tokens_per_second(row);
  return {
      {"model_filename", json_string(s.model_filename)},
      {"model_type", json_string(s.model_type)},
      {"model_size", std::to_string(s.model_size)},
      {"model_n_params", std::to_string(s.model_n_params)},
      {"n_batch", std::to_string(c.n_batch)},
      {"n_ubatch", std::to_string(c.n_ubatch)},
      {"n_threads", std::to_string(s.n_threads)},
      {"type_k", json_string(std::string(dtype_name(c.type_k)))},
      {"type_v", json_string(std::string(dtype_name(c.type_v)))},
      {"n_gpu_layers", std::to_string(c.n_gpu_layers)},
      {"split_mode", json_string(c.split_mode == SplitMode::None ? "none" : "layer")},
      {"main_gpu", std::to_string(c.main_gpu)},
      {"no_kv_offload", c.no_kv_offload ? "true" : "false"},
      {"flash_attn", std::to_string(flash_attn_field(c.flash_attn))},
      {"tensor_split", json_string(tensor_split_text(c.tensor_split))},
      {"tensor_buft_overrides", json_string(overrides_text(c.overrides))},
      {"use_mmap", c.use_mmap ? "true" : "false"},
      {"n_prompt", std::to_string(row.n_prompt)},
      {"n_gen", std::to_string(row.n_gen)},
      {"n_depth", std::to_string(row.n_depth)},
      {"n_streams", std::to_string(row.n_streams)},
      {"avg_ns", number(mean(ns), "%.0f")},
      {"stddev_ns", number(stddev(ns), "%.0f")},
      {"avg_ts", number(mean(ts), "%.6f")},
      {"stddev_ts", number(stddev(ts), "%.6f")},
      {"samples_ns", list(ns, "%.0f")},
      {"samples_ts", list(ts, "%.6f")},
  };
}

// A record's value as text (md cells, csv): strings unquoted, booleans 1 or 0 (as llama-bench).
std::string plain(const std::string& literal) {
  if (literal == "true") return "1";
  if (literal == "false") return "0";
  if (!literal.empty() && literal[0] == '"')
    return literal.substr(1, literal.size() - 2);  // no escapes in md
  return literal;
}

std::string csv_field(const std::string& literal) {
  std::string v = literal;
  if (v.empty() || (v[0] != '[' && v[0] != '"')) return plain(v);
  if (v[0] == '"') v = v.substr(1, v.size() - 2);
  std::string q = "\"";  // quoted, inner quotes doubled
  for (char c : v) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string display_name(const std::string& field) {  // llama-bench's md headers
  static const std::vector<std::pair<std::string, std::string>> names = {
      {"flash_attn", "fa"},    {"use_mmap", "mmap"},      {"n_gpu_layers", "ngl"},        {"split_mode", "sm"},
      {"no_kv_offload", "nkvo"}, {"tensor_split", "ts"}, {"tensor_buft_overrides", "ot"}};
  for (const auto& [f, name] : names)
    if (f == field) return name;
  return field;
}

std::string size_text(int64_t bytes) {
  const double mib = static_cast<double>(bytes) / (1024.0 * 1024.0);
  return mib < 1024 ? number(mib, "%.2f MiB") : number(mib / 1024.0, "%.2f GiB");
}

std::string params_text(int64_t n) {
  const double v = static_cast<double>(n);
  return n < 1000 * 1000 * 1000 ? number(v / 1e6, "%.2f M") : number(v / 1e9, "%.2f B");
}

}  // namespace

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string BenchReport::parse_format(const std::string& v, Format* out) {
  if (v == "md")
    *out = Format::Markdown;
  else if (v == "csv")
    *out = Format::Csv;
  else if (v == "json")
    *out = Format::Json;
  else if (v == "jsonl")
    *out = Format::JsonLines;
  else
    return "'" + v + "' is not one of md, csv, json, jsonl";
  return "";
}

BenchReport::BenchReport(Format format, std::vector<std::string> shown_fields)
    : format_(format), shown_(std::move(shown_fields)) {}

void BenchReport::add(const BenchSetting& setting, const BenchRow& row) {
  if (format_ != Format::Markdown && !row.llama_bench_test) return;
  const Record rec = record_of(setting, row);
  auto value = [&](const std::string& field) {
    for (const auto& [name, literal] : rec)
      if (name == field) return literal;
    return std::string();
  };
  const bool first = n_rows_++ == 0;
  switch (format_) {
    case Format::Markdown: {
      if (first) {
        std::string head = "| model | size | params | backend | threads |", rule = "|---|---:|---:|---|---:|";
        for (const std::string& f : shown_) {
          head += " " + display_name(f) + " |";
          rule += "---:|";
        }
        std::printf("%s test | t/s (median) | t/s (min .. max) | ratio (median) |\n%s---|---:|---:|---:|\n",
                    head.c_str(), rule.c_str());
      }
      std::string cells = "| " + setting.model_type + " | " + size_text(setting.model_size) + " | " +
                          params_text(setting.model_n_params) + " | " + setting.backend + " | " +
                          std::to_string(setting.n_threads) + " |";
      for (const std::string& f : shown_) cells += " " + plain(value(f)) + " |";
      const std::vector<double> ts = tokens_per_second(row);
      std::printf("%s %s | %.2f | %.2f .. %.2f | %s |\n", cells.c_str(), row.test.c_str(), median(ts),
                  *std::min_element(ts.begin(), ts.end()), *std::max_element(ts.begin(), ts.end()),
                  row.ratio.c_str());
      break;
    }
    case Format::Csv: {
      std::string line;
      if (first) {
        for (const auto& [name, literal] : rec) line += (line.empty() ? "" : ",") + name;
        std::printf("%s\n", line.c_str());
        line.clear();
      }
      for (size_t i = 0; i < rec.size(); ++i) line += (i ? "," : "") + csv_field(rec[i].second);
      std::printf("%s\n", line.c_str());
      break;
    }
    case Format::Json:
    case Format::JsonLines: {
      std::string obj = "{";
      for (size_t i = 0; i < rec.size(); ++i)
        obj += (i ? ", " : "") + std::string("\"") + rec[i].first + "\": " + rec[i].second;
      obj += "}";
      if (format_ == Format::JsonLines)
        std::printf("%s\n", obj.c_str());
      else
        std::printf("%s  %s", first ? "[\n" : ",\n", obj.c_str());
      break;
    }
  }
  std::fflush(stdout);
}

void BenchReport::finish() {
  if (format_ == Format::Json) std::printf(n_rows_ == 0 ? "[]\n" : "\n]\n");
}

}  // namespace kiln::cli
