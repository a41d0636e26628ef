#include "bench_sweep.h"

#include <algorithm>

#include "model_flags.h"

namespace kiln::cli {
namespace {

// Appends each comma-separated item of `v` parsed by `parse` to `out` (an empty item, as in "4,"
// or "4,,8", goes to `parse` too, which refuses it).
template <typename T, typename Parse>
std::string append_items(const std::string& v, std::vector<T>* out, Parse parse) {
  size_t begin = 0;
  for (;;) {
    const size_t comma = v.find(',', begin);
    T x{};
    if (std::string err =
            parse(v.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin), &x);
        !err.empty())
      return err;
    out->push_back(x);
    if (comma == std::string::npos) return "";
    begin = comma + 1;
  }
}

std::string append_ints(const std::string& v, const IntRange& range, std::vector<int64_t>* out) {
  return append_items(v, out,
                      [&](const std::string& item, int64_t* x) { return parse_integer(item, range, x); });
}

// llama-bench's integer ranges: comma-separated items FIRST[-LAST[+STEP|*STEP]] (each value checked
// by `one`, which parses a single value into an int64_t).
template <typename One>
std::string append_ranges(const std::string& v, std::vector<int64_t>* out, One one) {
  std::vector<std::string> items;
  if (std::string e = append_items(v, &items, [](const std::string& item, std::string* x) {
        *x = item;
        return std::string();
      });
      !e.empty())
    return e;
  for (const std::string& item : items) {
    const size_t dash = item.find('-', 1);  // not a leading sign
    if (dash == std::string::npos) {
      int64_t x = 0;
      if (std::string e = one(item, &x); !e.empty()) return e;
      out->push_back(x);
      continue;
    }
    const size_t op = item.find_first_of("+*", dash);
    int64_t first = 0, last = 0, step = 1;
    if (std::string e = one(item.substr(0, dash), &first); !e.empty()) return e;
    if (std::string e = one(item.substr(dash + 1, op == std::string::npos ? std::string::npos : op - dash - 1), &last);
        !e.empty())
      return e;
    if (op != std::string::npos) {
      if (std::string e = parse_integer(item.substr(op + 1), IntRange::at_least(1), &step); !e.empty()) return e;
    }
    const bool times = op != std::string::npos && item[op] == '*';
    if (first > last || (times && (first <= 0 || step < 2)))
      return "'" + item + "' is not a range (FIRST-LAST, FIRST-LAST+STEP or FIRST-LAST*STEP, rising)";
    if ((last - first) / (times ? 1 : step) > 4096) return "'" + item + "' has too many values";
    for (int64_t x = first; x <= last; x = times ? x * step : x + step) out->push_back(x);
  }
  return "";
}

// Splits `v` at commas: one value per comma-separated group (llama-bench's -ts and -ot lists).
std::vector<std::string> groups(const std::string& v) {
  std::vector<std::string> out;
  size_t begin = 0;
  for (;;) {
    const size_t comma = v.find(',', begin);
    out.push_back(v.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin));
    if (comma == std::string::npos) return out;
    begin = comma + 1;
  }
}

// `v` with every `from` replaced by `to`.
std::string replaced(std::string v, char from, char to) {
  std::replace(v.begin(), v.end(), from, to);
  return v;
}

}  // namespace

std::string parse_int_list(const std::string& v, const IntRange& range, std::vector<int64_t>* out) {
  out->clear();
  return append_ints(v, range, out);
}

int flash_attn_field(FlashAttention fa) {
  return fa == FlashAttention::Auto ? -1 : fa == FlashAttention::On ? 1 : 0;
}

void BenchSweep::declare(OptionParser& p) {
  p.custom(
      {"-m", "--model"},
      [this](const std::string& v) {
        return append_items(v, &models, [](const std::string& item, std::string* x) {
          *x = item;
          return item.empty() ? std::string("an empty model path") : std::string();
        });
      },
      "F1,F2,...", "GGUF models, each measured in turn (default: the model embedded in kiln)");
  p.custom(
      {"-ngl", "--gpu-layers", "--n-gpu-layers"},
      [this](const std::string& v) { return append_ranges(v, &n_gpu_layers, parse_gpu_layers); }, "N|all,...",
      "layers on the --device devices, as `kiln run -ngl` (default all); ranges FIRST-LAST[+STEP] too");
  p.custom(
      {"-sm", "--split-mode"},
      [this](const std::string& v) { return append_items(v, &split_mode, parse_split_mode); }, "none|layer,...",
      "how layers spread over several devices (default layer)");
  p.custom(
      {"-mg", "--main-gpu"},
      [this](const std::string& v) {
        return append_ranges(v, &main_gpu, [](const std::string& item, int64_t* x) {
          return parse_integer(item, IntRange::between(0, 64), x);
        });
      },
      "N,...", "the device (index in --device) for -sm none (default 0)");
  p.custom(
      {"-ts", "--tensor-split"},
      [this](const std::string& v) {
        for (const std::string& g : groups(v)) {
          std::vector<float> shares;
          if (std::string e = parse_tensor_split(replaced(g, ';', '/'), &shares); !e.empty()) return e;
          tensor_split.push_back(std::move(shares));
        }
        return std::string();
      },
      "A/B/...,...", "shares of the layers per device (within one value separated by / or ;), e.g. 1/1,3/1");
  p.custom(
      {"-ot", "--override-tensor"},
      [this](const std::string& v) {
        for (const std::string& g : groups(v)) {
          std::vector<std::pair<std::string, std::string>> one;
          if (!g.empty()) {
            if (std::string e = parse_overrides(replaced(g, ';', ','), &one); !e.empty()) return e;
          }
          overrides.push_back(std::move(one));
        }
        return std::string();
      },
      "P=DEV;P=DEV,...", "tensor overrides as `kiln run -ot` (within one value separated by ;)");
  p.custom(
      {"-nkvo", "--no-kv-offload"},
      [this](const std::string& v) { return append_ints(v, IntRange::between(0, 1), &no_kv_offload); }, "0|1,...",
      "every layer's K and V in host memory (1) or on its layer's device (0, default)");
  p.custom(
      {"-mmp", "--mmap"},
      [this](const std::string& v) { return append_ints(v, IntRange::between(0, 1), &use_mmap); }, "0|1,...",
      "read the weights from the mapped file (1, default) or copy them (0: as --no-mmap)");
  p.custom(
      {"-b", "--batch-size"},
      [this](const std::string& v) { return append_ints(v, IntRange::at_least(1), &n_batch); }, "N,...",
      "most tokens per decode call (default 2048)");
  p.custom(
      {"-ub", "--ubatch-size"},
      [this](const std::string& v) { return append_ints(v, IntRange::at_least(1), &n_ubatch); }, "N,...",
      "most tokens per micro-batch (default 512)");
  p.custom(
      {"-ctk", "--cache-type-k"},
      [this](const std::string& v) { return append_items(v, &type_k, parse_cache_type); }, "TYPE,...",
      "KV cache types of K: f16 (default), f32");
  p.custom(
      {"-ctv", "--cache-type-v"},
      [this](const std::string& v) { return append_items(v, &type_v, parse_cache_type); }, "TYPE,...",
      "KV cache types of V: f16 (default), f32");
  p.custom(
      {"-fa", "--flash-attn"},
      [this](const std::string& v) { return append_items(v, &flash_attn, parse_flash_attention); },
      "on|off|auto,...", "fused flash-attention path (default auto: on; 1 and 0 as on and off)");
  p.custom(
      {"-t", "--threads"},
      [this](const std::string& v) { return append_ints(v, IntRange::at_most(kMaxThreads), &n_threads); },
      "N,...", "threads (default: all cores; 0 or less: all)");
  p.custom(
      {"-d", "--n-depth"},
      [this](const std::string& v) { return append_ints(v, IntRange::at_least(0), &n_depth); }, "N,...",
      "tokens already in the KV cache when each test starts (default 0)");
}

void BenchSweep::fill_defaults(const ContextOptions& defaults, bool no_mmap) {
  if (models.empty()) models = {""};
  if (use_mmap.empty()) use_mmap = {no_mmap ? 0 : 1};
  if (n_batch.empty()) n_batch = {defaults.n_batch};
  if (n_ubatch.empty()) n_ubatch = {defaults.n_ubatch};
  if (type_k.empty()) type_k = {defaults.type_k};
  if (type_v.empty()) type_v = {defaults.type_v};
  if (flash_attn.empty()) flash_attn = {defaults.flash_attention};
  if (n_threads.empty()) n_threads = {0};
  if (n_depth.empty()) n_depth = {0};
  if (n_gpu_layers.empty()) n_gpu_layers = {SplitOptions::kAllLayers};
  if (split_mode.empty()) split_mode = {SplitMode::Layer};
  if (main_gpu.empty()) main_gpu = {0};
  if (tensor_split.empty()) tensor_split = {{}};
  if (overrides.empty()) overrides = {{}};
  if (no_kv_offload.empty()) no_kv_offload = {0};
}

SplitFlags BenchConfig::placement(SplitFlags flags) const {
  flags.n_gpu_layers = n_gpu_layers;
  flags.mode = split_mode;
  flags.main_gpu = main_gpu;
  flags.tensor_split = tensor_split;
  flags.overrides = overrides;
  flags.no_kv_offload = no_kv_offload;
  return flags;
}

std::vector<BenchConfig> BenchSweep::configs() const {
  std::vector<BenchConfig> out;
  // clang-format off
  for (const std::string& m : models)
  for (int64_t ngl : n_gpu_layers)
  for (SplitMode sm : split_mode)
  for (int64_t mg : main_gpu)
  for (const std::vector<float>& ts : tensor_split)
  for (const auto& ot : overrides)
  for (int64_t mmp : use_mmap)
  for (int64_t nb : n_batch)
  for (int64_t nub : n_ubatch)
  for (DType tk : type_k)
  for (DType tv : type_v)
  for (int64_t nkvo : no_kv_offload)
  for (FlashAttention fa : flash_attn)
  for (int64_t nt : n_threads)
    out.push_back({.model = m, .use_mmap = mmp != 0, .n_batch = nb, .n_ubatch = nub, .type_k = tk,
                   .type_v = tv, .flash_attn = fa, .n_threads = static_cast<int32_t>(nt), .n_gpu_layers = ngl,
                   .split_mode = sm, .main_gpu = static_cast<int32_t>(mg), .tensor_split = ts, .overrides = ot,
                   .no_kv_offload = nkvo != 0});
  // clang-format on
  return out;
}

std::vector<std::string> BenchSweep::shown_fields(const ContextOptions& defaults, bool offload) const {
  std::vector<std::string> fields;
  auto show = [&](const char* field, const auto& values, const auto& default_value) {
    if (values.size() > 1 || (values.size() == 1 && values[0] != default_value)) fields.push_back(field);
  };
  if (offload) fields.push_back("n_gpu_layers");
  show("n_batch", n_batch, defaults.n_batch);
  show("n_ubatch", n_ubatch, defaults.n_ubatch);
  show("type_k", type_k, defaults.type_k);
  show("type_v", type_v, defaults.type_v);
  show("main_gpu", main_gpu, int64_t{0});
  show("split_mode", split_mode, SplitMode::Layer);
  show("no_kv_offload", no_kv_offload, int64_t{0});
  show("flash_attn", flash_attn, defaults.flash_attention);
  show("tensor_split", tensor_split, std::vector<float>{});
  show("tensor_buft_overrides", overrides, std::vector<std::pair<std::string, std::string>>{});
  show("use_mmap", use_mmap, int64_t{1});
  return fields;
}

}  // namespace kiln::cli
