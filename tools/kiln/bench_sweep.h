// The parameters `kiln bench` sweeps, as llama-bench: -m, -mmp, -b, -ub, -ctk, -ctv, -fa, -t and -d
// take comma lists (or repeat), and the run measures every combination, in llama-bench's order of
// loops (model outermost, then mmap, n_batch, n_ubatch, type_k, type_v, flash_attn, threads, and
// depth innermost, around the tests). A change of model, mmap or threads places the weights again
// (kiln's thread pool belongs to the devices); any other change re-creates only the context.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "llm/context.h"
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

  // Same weights on the same devices (model, mmap, threads): only the context differs.
  bool same_weights(const BenchConfig& o) const {
    return model == o.model && use_mmap == o.use_mmap && n_threads == o.n_threads;
  }
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

  // Declares -m, -mmp, -b, -ub, -ctk, -ctv, -fa, -t, -d (each a comma list, or repeated; values
  // checked as the single-valued flags of `kiln run` check them).
  void declare(OptionParser& p);
  // Fills the lists not given with `defaults` (ModelFlags' context defaults, --no-mmap, -t).
  void fill_defaults(const ContextOptions& defaults, bool no_mmap);
  // Every combination but depth, in llama-bench's order.
  std::vector<BenchConfig> configs() const;
  // The md table's columns beyond model, size, params, backend, threads and test, as llama-bench
  // picks them: a parameter swept (several values) or set to other than the default.
  std::vector<std::string> shown_fields(const ContextOptions& defaults) const;
};

}  // namespace kiln::cli
