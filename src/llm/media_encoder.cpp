#include "llm/media_encoder.h"

namespace kiln {
namespace {

constexpr size_t kInputAlign = 64;

size_t align_up(size_t n) { return (n + kInputAlign - 1) / kInputAlign * kInputAlign; }

// Bytes of a pass's inputs, each aligned, in the order run() lays them out in the input buffer.
size_t input_bytes(const Graph& g, const EncoderPass& pass) {
  size_t total = 0;
  for (const EncoderPass::Input& in : pass.inputs) total += align_up(g.tensor(in.tensor).view.span_bytes());
  return total;
}

// Points every external leaf of an encoder graph (a weight, named after its GGUF tensor by
// weight_tensor in models/clip/vit.h, over the mmproj's mapping) at that tensor's placement on the
// encoder's device, in its layout. Under the weights' pin: the views change when they are evicted
// and restored.
Status place_weights(Graph& g, const DeviceWeights& weights, const std::string& what) {
  for (size_t i = 0; i < g.size(); ++i) {
    const GraphTensor& t = g.tensors()[i];
    if (t.role != TensorRole::External) continue;
    const Weight* w = weights.tensor(t.name);
    if (w == nullptr || w->view.span_bytes() != t.view.span_bytes())
      return make_error(what, ": the graph reads '", t.name, "', which is not a tensor of ", weights.name());
    KILN_TRY(g.rebind_external(Tensor{static_cast<int32_t>(i)}, w->view.data, w->view.layout));
  }
  return ok_status();
}

// The externals of an encoder graph that only mul_mats read as weights (their placement may take
// a kernel layout). Every input's graph reads the mmproj's tensors in the same roles.
std::vector<std::string> matmul_weights(const Graph& g) {
  std::vector<std::string> names;
  for (size_t i = 0; i < g.size(); ++i) {
    const GraphTensor& t = g.tensors()[i];
    if (t.role == TensorRole::External && g.read_only_as_weights(Tensor{static_cast<int32_t>(i)}))
      names.push_back(t.name);
  }
  return names;
}

}  // namespace

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
  KILN_ASSIGN_OR_RETURN(e->memory_,
                        EncoderMemory::create(std::move(mmproj), std::move(owner), dev, input_bytes(g, pass),
                                              matmul_weights(g), options.weights));
  KILN_ASSIGN_OR_RETURN(const ResidencyManager::Pin own, e->memory_->pin());
  KILN_TRY(place_weights(g, e->memory_->weights(), e->what_));
  KILN_ASSIGN_OR_RETURN(const ResidencyManager::Pin pin, e->pin_arena());
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
    KILN_ASSIGN_OR_RETURN(const ResidencyManager::Pin pin, pin_arena());
    const auto turn = arena_->take_turn();
    KILN_ASSIGN_OR_RETURN(e, run(id, n_tokens, non_causal, build));
  }
  ++stats_.encoded;
  remember(e);
  return e;
}

Result<ResidencyManager::Pin> MediaEncoder::pin_arena() const {
  ResidencyManager* m = backend_->device().residency();
  const OwnerId owner = arena_->resident_owner();
  if (owner == 0 || m == nullptr) return ResidencyManager::Pin();
  return m->pin(owner);
}

Result<std::shared_ptr<const ImageEmbeddings>> MediaEncoder::run(const std::string& id, int64_t n_tokens,
                                                                 bool non_causal, const BuildPass& build) {
  Graph g;
  KILN_ASSIGN_OR_RETURN(const EncoderPass pass, build(g));
  KILN_TRY(place_weights(g, memory_->weights(), what_));
  Buffer& inputs = memory_->inputs();
  if (input_bytes(g, pass) > inputs.size())
    return make_error(what_, ": the input '", id,
                      "' needs more input memory than the encoder's largest graph");
  KILN_TRY(arena_->reserve(g));
  KILN_TRY(arena_->allocate());  // allocates only when the reservation grew
  KILN_ASSIGN_OR_RETURN(ExecPlan plan, arena_->plan(g));
  KILN_TRY(backend_->prepare(plan));

  Device& dev = backend_->device();
  size_t offset = 0;
  for (const EncoderPass::Input& in : pass.inputs) {
    const TensorView& shape = g.tensor(in.tensor).view;
    KILN_ASSIGN_OR_RETURN(TensorView v, inputs.view(shape.type, shape.ne, offset));
    offset += align_up(v.span_bytes());
    KILN_TRY(dev.upload(v, in.host, v.span_bytes()));
    KILN_TRY(plan.bind(in.tensor, v));
  }
  KILN_TRY(backend_->execute(plan));
  backend_->synchronize();

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
