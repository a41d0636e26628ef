#include "llm/vision_encoder.h"

#include "models/clip/vit.h"

namespace kiln {
namespace {

constexpr size_t kInputAlign = 64;

size_t align_up(size_t n) { return (n + kInputAlign - 1) / kInputAlign * kInputAlign; }

// Bytes of an encoder graph's inputs, each aligned, in the order bind_inputs lays them out.
size_t input_bytes(const Graph& g, const EncoderGraph& eg) {
  size_t total = align_up(g.tensor(eg.patches).view.span_bytes());
  for (const ConstantInput& c : eg.constants) total += align_up(g.tensor(c.tensor).view.span_bytes());
  return total;
}

// Points every external leaf of an encoder graph (a weight, named after its GGUF tensor by
// weight_tensor in models/clip/vit.h, over the mmproj's mapping) at that tensor's placement on the
// encoder's device, in its layout. Under the weights' pin: the views change when they are evicted
// and restored.
Status place_weights(Graph& g, const DeviceWeights& weights) {
  for (size_t i = 0; i < g.size(); ++i) {
    const GraphTensor& t = g.tensors()[i];
    if (t.role != TensorRole::External) continue;
    const Weight* w = weights.tensor(t.name);
    if (w == nullptr || w->view.span_bytes() != t.view.span_bytes())
      return make_error("vision encoder: the graph reads '", t.name, "', which is not a tensor of ",
                        weights.name());
    KILN_TRY(g.rebind_external(Tensor{static_cast<int32_t>(i)}, w->view.data, w->view.layout));
  }
  return ok_status();
}

// The externals of an encoder graph that only mul_mats read as weights (their placement may take
// a kernel layout). Every image size's graph reads the mmproj's tensors in the same roles.
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

Result<std::unique_ptr<VisionEncoder>> VisionEncoder::create(std::shared_ptr<const VisionModel> model,
                                                             Backend& backend,
                                                             const VisionEncoderOptions& options) {
  Device& dev = backend.device();
  std::unique_ptr<VisionEncoder> e(new VisionEncoder());
  e->model_ = std::move(model);
  e->backend_ = &backend;
  e->opt_ = options;
  e->attention_ =
      options.flash_attention == FlashAttention::Off ? AttentionPath::Plain : AttentionPath::Flash;
  if (options.arena != nullptr) {
    if (&options.arena->device() != &dev)
      return make_error("vision encoder: the shared compute arena '", options.arena->owner(),
                        "' is on device '", options.arena->device().name(), "', the backend on '", dev.name(),
                        "'");
    e->arena_ = options.arena;
  } else {
    e->own_arena_ = std::make_unique<ComputeArena>(dev, e->model_->name());
    e->arena_ = e->own_arena_.get();
  }
  // The largest graph: its arena need joins the shared arena's reservation, its inputs size the
  // input buffer and its kernels the backend's scratch.
  const Projector& proj = e->model_->projector();
  const auto [w, h] = proj.worst_case_size();
  Graph worst;
  KILN_ASSIGN_OR_RETURN(const EncoderGraph eg, proj.build(worst, w, h, e->attention_));
  KILN_ASSIGN_OR_RETURN(e->memory_, VisionMemory::create(e->model_, dev, input_bytes(worst, eg),
                                                         matmul_weights(worst), options.weights));
  KILN_ASSIGN_OR_RETURN(const ResidencyManager::Pin own, e->memory_->pin());
  KILN_TRY(place_weights(worst, e->memory_->weights()));
  KILN_ASSIGN_OR_RETURN(const ResidencyManager::Pin pin, e->pin_arena());
  const auto turn = e->arena_->take_turn();
  KILN_ASSIGN_OR_RETURN(e->worst_bytes_, e->arena_->reserve(worst));
  KILN_TRY(e->arena_->allocate());
  KILN_ASSIGN_OR_RETURN(ExecPlan plan, e->arena_->plan(worst));
  KILN_TRY(backend.prepare(plan));
  return e;
}

Result<std::shared_ptr<const ImageEmbeddings>> VisionEncoder::encode(const PreparedImage& image) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = by_id_.find(image.id); it != by_id_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);  // most recent first
    ++stats_.hits;
    return *it->second;
  }
  std::shared_ptr<const ImageEmbeddings> e;
  {
    KILN_ASSIGN_OR_RETURN(const ResidencyManager::Pin own, memory_->pin());
    KILN_ASSIGN_OR_RETURN(const ResidencyManager::Pin pin, pin_arena());
    const auto turn = arena_->take_turn();
    KILN_ASSIGN_OR_RETURN(e, run(image));
  }
  ++stats_.encoded;
  remember(e);
  return e;
}

Result<ResidencyManager::Pin> VisionEncoder::pin_arena() const {
  ResidencyManager* m = backend_->device().residency();
  const OwnerId owner = arena_->resident_owner();
  if (owner == 0 || m == nullptr) return ResidencyManager::Pin();
  return m->pin(owner);
}

Result<std::shared_ptr<const ImageEmbeddings>> VisionEncoder::run(const PreparedImage& image) {
  const Projector& proj = model_->projector();
  Graph g;
  KILN_ASSIGN_OR_RETURN(const EncoderGraph eg,
                        proj.build(g, image.pixels.width, image.pixels.height, attention_));
  KILN_TRY(place_weights(g, memory_->weights()));
  Buffer& inputs = memory_->inputs();
  if (input_bytes(g, eg) > inputs.size())
    return make_error("vision encoder: an image of ", image.pixels.width, " x ", image.pixels.height,
                      " needs more input memory than the encoder's largest graph");
  KILN_TRY(arena_->reserve(g));
  KILN_TRY(arena_->allocate());  // allocates only when the reservation grew
  KILN_ASSIGN_OR_RETURN(ExecPlan plan, arena_->plan(g));
  KILN_TRY(backend_->prepare(plan));

  Device& dev = backend_->device();
  size_t offset = 0;
  auto bind = [&](Tensor t, const void* host) -> Status {
    const TensorView& shape = g.tensor(t).view;
    KILN_ASSIGN_OR_RETURN(TensorView v, inputs.view(shape.type, shape.ne, offset));
    offset += align_up(v.span_bytes());
    KILN_TRY(dev.upload(v, host, v.span_bytes()));
    return plan.bind(t, v);
  };
  stage_.resize(static_cast<size_t>(g.tensor(eg.patches).view.nelements()));
  image_to_patches(image.pixels, proj.hparams(), stage_);
  KILN_TRY(bind(eg.patches, stage_.data()));
  for (const ConstantInput& c : eg.constants) KILN_TRY(bind(c.tensor, c.values.data()));
  KILN_TRY(backend_->execute(plan));
  backend_->synchronize();

  const TensorView out = plan.view(eg.embeddings);  // [n_embd, n_tokens]
  auto e = std::make_shared<ImageEmbeddings>();
  e->id = image.id;
  e->n_embd = out.ne[0];
  e->n_tokens = out.ne[1];
  e->non_causal = proj.markup().non_causal;
  e->data.resize(static_cast<size_t>(out.nelements()));
  KILN_TRY(dev.download(out, e->data.data(), out.span_bytes()));
  if (e->n_tokens != image.n_tokens)
    return make_error("vision encoder: the graph made ", e->n_tokens, " tokens, the prompt holds ",
                      image.n_tokens);
  return std::shared_ptr<const ImageEmbeddings>(std::move(e));
}

void VisionEncoder::remember(std::shared_ptr<const ImageEmbeddings> e) {
  if (opt_.cache_images == 0) return;
  lru_.push_front(e);
  by_id_[e->id] = lru_.begin();
  while (lru_.size() > opt_.cache_images) {
    by_id_.erase(lru_.back()->id);
    lru_.pop_back();
  }
}

VisionEncoder::CacheStats VisionEncoder::cache_stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  CacheStats s = stats_;
  s.images = lru_.size();
  return s;
}

}  // namespace kiln
