// DecoderPlans: the decoder graphs a context has built and planned, kept for the steps that repeat
// their shape. A decode step's graph depends only on its sizes (tokens, outputs, the padded n_kv:
// DecoderGraphSpec), on where the weights and the KV cache are, and on nothing a step writes: the
// cells and the mask are inputs. So consecutive steps of one stream, or of the same number of
// streams, build and plan once per kPadCells cells instead of once per token (ref: llama.cpp's
// graph reuse, llm_graph_result::can_reuse).
//
// An entry is valid for the weights and cache generations it was built at (DeviceWeights and
// KvCache raise theirs when their memory moves); find() drops entries of other generations. At
// most kMaxEntries are kept, the least recently used leaves first. The plans stay valid when the
// arena is released and allocated again (runtime/planner.h); the caller allocates the arena and
// prepares the backend before each execution, and binds the inputs.
// Thread-safety: none; the owning Context serializes access.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "models/decoder_graph.h"
#include "runtime/graph.h"
#include "runtime/graph_split.h"

namespace kiln {

// One planned step: the graph, its inputs and outputs, and its plan in the context's arena.
struct DecoderPlan {
  Graph graph;
  DecoderGraph io;
  std::optional<SplitPlan> plan;  // over `graph`: the entry must not move (held by unique_ptr)
};

class DecoderPlans {
 public:
  static constexpr size_t kMaxEntries = 8;
  // Memory the plans are built over: an entry matches only at the generations it was built at.
  struct Generations {
    uint64_t weights = 0, kv = 0;
    bool operator==(const Generations&) const = default;
  };

  // The plan of a step with `spec`'s shape at `gen`, or null. Drops entries of other generations.
  DecoderPlan* find(const DecoderGraphSpec& spec, Generations gen);
  // Keeps `plan` (built for `spec` at `gen`) and returns it; drops the least recently used entry
  // when kMaxEntries are held.
  DecoderPlan& insert(const DecoderGraphSpec& spec, Generations gen, std::unique_ptr<DecoderPlan> plan);
  void clear() { entries_.clear(); }
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    DecoderGraphSpec spec;
    Generations gen;
    uint64_t last_use = 0;
    std::unique_ptr<DecoderPlan> plan;
  };
  std::vector<Entry> entries_;
  uint64_t clock_ = 0;
};

}  // namespace kiln
