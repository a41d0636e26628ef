// The parameters `kiln bench` sweeps, as llama-bench: -m, -ngl, -sm, -mg, -ts, -ot, -mmp, -b, -ub,
// -ctk, -ctv, -nkvo, -fa, -t and -d take comma lists (or repeat; -ngl and -mg also ranges
// first-last[+|*step]; -ts's shares within one value are separated by '/' or ';', -ot's overrides by
// ';'), and the run measures every combination, in llama-bench's order of loops (model outermost,
// then n_gpu_layers, split_mode, main_gpu, tensor_split, overrides, mmap, n_batch, n_ubatch, type_k,
// type_v, no_kv_offload, flash_attn, threads, and depth innermost, around the tests). A change of
// model, placement, mmap or threads places the weights again (kiln's thread pool belongs to the
// devices); any other change re-creates only the context.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "llm/context.h"
#include "llm/model_placement.h"
#include "options.h"

namespace kiln::cli {

// One combination of the swept parameters but depth (a context).
struct BenchConfig {
  std::string model;  // path; empty: the embedded model
  bool use_mmap = true;
  int64_t n_batch = 0, n_ubatch = 0;
  DType type_k = DType::F16, type_v = DType::F16;
  FlashAttention flash_attn = FlashAttention::Auto;
  int32_t n_threads = 0;  // 0 or less: every hardware thread
  // The placement (llm/model_placement.h's SplitFlags of the same names).
  int64_t n_gpu_layers = SplitOptions::kAllLayers;
  SplitMode split_mode = SplitMode::Layer;
  int32_t main_gpu = 0;
  std::vector<float> tensor_split;
  std::vector<std::pair<std::string, std::string>> overrides;
  bool no_kv_offload = false;

  // Same weights on the same devices (model, placement, mmap, threads): only the context differs.
  bool same_weights(const BenchConfig& o) const {
    return model == o.model && use_mmap == o.use_mmap && n_threads == o.n_threads && n_gpu_layers == o.n_gpu_layers &&
           split_mode == o.split_mode && main_gpu == o.main_gpu && tensor_split == o.tensor_split &&
           overrides == o.overrides && no_kv_offload == o.no_kv_offload;
  }
  // `flags` with this configuration's placement.
  SplitFlags placement(SplitFlags flags) const;
};

// A comma list of integers in `range` ("512,1024") into `out` (replaced).
std::string parse_int_list(const std::string& v, const IntRange& range, std::vector<int64_t>* out);

// llama-bench's flash_attn field: -1 auto, 0 off, 1 on.
int flash_attn_field(FlashAttention fa);

struct BenchSweep {
  std::vector<std::string> models;
  std::vector<int64_t> use_mmap, n_batch, n_ubatch, n_threads, n_depth;
  std::vector<DType> type_k, type_v;
  std::vector<FlashAttention> flash_attn;
  std::vector<int64_t> n_gpu_layers, main_gpu, no_kv_offload;
  std::vector<SplitMode> split_mode;
  std::vector<std::vector<float>> tensor_split;
  std::vector<std::vector<std::pair<std::string, std::string>>> overrides;

  // Declares -m, -ngl, -sm, -mg, -ts, -ot, -mmp, -b, -ub, -ctk, -ctv, -nkvo, -fa, -t, -d (each a
  // comma list, or repeated; values checked as the single-valued flags of `kiln run` check them).
  void declare(OptionParser& p);
  // Fills the lists not given with `defaults` (ModelFlags' context defaults, --no-mmap, -t, and the
  // placement flags' defaults).
  void fill_defaults(const ContextOptions& defaults, bool no_mmap);
  // Every combination but depth, in llama-bench's order.
  std::vector<BenchConfig> configs() const;
  // The md table's columns beyond model, size, params, backend, threads and test, as llama-bench
  // picks them: a parameter swept (several values) or set to other than the default; n_gpu_layers
  // whenever the model runs on an offload device (`offload`: --device names one), as llama-bench
  // shows it for a backend that is not the CPU.
  std::vector<std::string> shown_fields(const ContextOptions& defaults, bool offload) const;
};

}  // namespace kiln::cli
