// What `kiln bench` prints: a markdown table (md, the default; llama-bench's columns plus kiln's
// median, range and ratio) or one record per test with llama-bench's field names (csv, json,
// jsonl: standard output then holds only those). Rows are printed as each group of tests ends.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench_sweep.h"

namespace kiln::cli {

// The median of `v` (the mean of the middle two when even).
double median(std::vector<double> v);

// The model and setting a group of tests ran with.
struct BenchSetting {
  std::string model_filename, model_type, backend;
  int64_t model_size = 0, model_n_params = 0;
  int n_threads = 0;  // the pool's, resolved
  BenchConfig config;
};

// One test's measurements.
struct BenchRow {
  std::string test;  // "pp512", "tg128 x8", "pp512+tg128 @ d4096", "gen16 spec", "img 224x224"
  int64_t n_prompt = 0, n_gen = 0, n_depth = 0;
  int32_t n_streams = 1;
  int64_t n_tokens = 0;          // per run, for tokens/s
  std::vector<double> seconds;   // one per round
  std::string ratio;             // md's ratio column
  bool llama_bench_test = true;  // false: kiln's own (gen, img), left out of csv/json/jsonl
};

class BenchReport {
 public:
  enum class Format { Markdown, Csv, Json, JsonLines };
  // -o's value; the error message or "".
  static std::string parse_format(const std::string& v, Format* out);

  // `shown_fields`: the md table's swept columns (BenchSweep::shown_fields).
  BenchReport(Format format, std::vector<std::string> shown_fields);
  Format format() const { return format_; }
  void add(const BenchSetting& setting, const BenchRow& row);  // prints the header before the first row
  void finish();                                               // closes a JSON array

 private:
  Format format_;
  std::vector<std::string> shown_;
  size_t n_rows_ = 0;
};

}  // namespace kiln::cli
