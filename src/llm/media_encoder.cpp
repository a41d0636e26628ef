#include "llm/media_encoder.h"

namespace kiln {

Result<std::unique_ptr<MediaEncoder>> MediaEncoder::create(std::shared_ptr<const GgufFile> mmproj,
                                                           std::string owner, std::string what,
                                                           Backend& backend, const EncoderOptions& options,
                                                           const BuildPass& worst) {
  Device& dev = backend.device();
  std::unique_ptr<MediaEncoder> e(new MediaEncoder());
  e->what_ = std::move(what);
  e->backend_ = &backend;
  e->cache_entries_ = options.cache_entries;
  if (options.arena != nullptr) {
    if (&options.arena->device() != &dev)
      return make_error(e->what_, ": the shared compute arena '", options.arena->owner(), "' is on device '",
                        options.arena->device().name(), "', the backend on '", dev.name(), "'");
    e->arena_ = options.arena;
  } else {
    e->own_arena_ = std::make_unique<ComputeArena>(dev, owner);
    e->arena_ = e->own_arena_.get();
  }
  // The largest graph: its arena need joins the shared arena's reservation, its inputs size the
  // input buffer and its kernels the backend's scratch.
  Graph g;
  KILN_ASSIGN_OR_RETURN(const EncoderPass pass, worst(g));
  KILN_ASSIGN_OR_RETURN(e->memory_, EncoderMemory::create(std::move(mmproj), std::move(owner), dev,
                                                          pass_input_bytes(g, pass.inputs), matmul_weights(g),
                                                          options.weights));
  KILN_ASSIGN_OR_RETURN(const ResidencyManager::Pin own, e->memory_->pin());
  KILN_TRY(place_weights(g, e->memory_->weights(), e->what_));
  KILN_ASSIGN_OR_RETURN(const ResidencyManager::Pin pin, pin_arena(*e->arena_));
  const auto turn = e->arena_->take_turn();
  KILN_ASSIGN_OR_RETURN(e->worst_bytes_, e->arena_->reserve(g));
  KILN_TRY(e->arena_->allocate());
  KILN_ASSIGN_OR_RETURN(ExecPlan plan, e->arena_->plan(g));
  KILN_TRY(backend.prepare(plan));
  return e;
}

Result<std::shared_ptr<const ImageEmbeddings>> MediaEncoder::encode(const std::string& id, int64_t n_tokens,
                                                                    bool non_causal, const BuildPass& build) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = by_id_.find(id); it != by_id_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);  // most recent first
    ++stats_.hits;
    return *it->second;
  }
  std::shared_ptr<const ImageEmbeddings> e;
  {
    KILN_ASSIGN_OR_RETURN(const ResidencyManager::Pin own, memory_->pin());
    KILN_ASSIGN_OR_RETURN(const ResidencyManager::Pin pin, pin_arena(*arena_));
    const auto turn = arena_->take_turn();
    KILN_ASSIGN_OR_RETURN(e, run(id, n_tokens, non_causal, build));
  }
  ++stats_.encoded;
  remember(e);
  return e;
}

Result<std::shared_ptr<const ImageEmbeddings>> MediaEncoder::run(const std::string& id, int64_t n_tokens,
                                                                 bool non_causal, const BuildPass& build) {
  Graph g;
  KILN_ASSIGN_OR_RETURN(const EncoderPass pass, build(g));
  KILN_TRY(place_weights(g, memory_->weights(), what_));
  Buffer& inputs = memory_->inputs();
  if (pass_input_bytes(g, pass.inputs) > inputs.size())
    return make_error(what_, ": the input '", id,
                      "' needs more input memory than the encoder's largest graph");
  KILN_ASSIGN_OR_RETURN(const ExecPlan plan, run_pass(g, pass.inputs, inputs, *arena_, *backend_));
  Device& dev = backend_->device();
  const TensorView out = plan.view(pass.embeddings);  // [n_embd, n_tokens]
  auto e = std::make_shared<ImageEmbeddings>();
  e->id = id;
  e->n_embd = out.ne[0];
  e->n_tokens = out.ne[1];
  e->non_causal = non_causal;
  e->data.resize(static_cast<size_t>(out.nelements()));
  KILN_TRY(dev.download(out, e->data.data(), out.span_bytes()));
  if (e->n_tokens != n_tokens)
    return make_error(what_, ": the graph made ", e->n_tokens, " tokens, the prompt holds ", n_tokens);
  return std::shared_ptr<const ImageEmbeddings>(std::move(e));
}

void MediaEncoder::remember(std::shared_ptr<const ImageEmbeddings> e) {
  if (cache_entries_ == 0) return;
  lru_.push_front(e);
  by_id_[e->id] = lru_.begin();
  while (lru_.size() > cache_entries_) {
    by_id_.erase(lru_.back()->id);
    lru_.pop_back();
  }
}

MediaEncoder::CacheStats MediaEncoder::cache_stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  CacheStats s = stats_;
  s.entries = lru_.size();
  return s;
}

}  // namespace kiln
