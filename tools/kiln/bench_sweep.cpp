#include "bench_sweep.h"

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
}

std::vector<BenchConfig> BenchSweep::configs() const {
  std::vector<BenchConfig> out;
  // clang-format off
  for (const std::string& m : models)
  for (int64_t mmp : use_mmap)
  for (int64_t nb : n_batch)
  for (int64_t nub : n_ubatch)
  for (DType tk : type_k)
  for (DType tv : type_v)
  for (FlashAttention fa : flash_attn)
  for (int64_t nt : n_threads)
    out.push_back({.model = m, .use_mmap = mmp != 0, .n_batch = nb, .n_ubatch = nub, .type_k = tk,
                   .type_v = tv, .flash_attn = fa, .n_threads = static_cast<int32_t>(nt)});
  // clang-format on
  return out;
}

std::vector<std::string> BenchSweep::shown_fields(const ContextOptions& defaults) const {
  std::vector<std::string> fields;
  auto show = [&](const char* field, const auto& values, const auto& default_value) {
    if (values.size() > 1 || (values.size() == 1 && values[0] != default_value)) fields.push_back(field);
  };
  show("n_batch", n_batch, defaults.n_batch);
  show("n_ubatch", n_ubatch, defaults.n_ubatch);
  show("type_k", type_k, defaults.type_k);
  show("type_v", type_v, defaults.type_v);
  show("flash_attn", flash_attn, defaults.flash_attention);
  show("use_mmap", use_mmap, int64_t{1});
  return fields;
}

}  // namespace kiln::cli
