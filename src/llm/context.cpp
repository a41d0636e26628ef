#include "llm/context.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <optional>

#include "runtime/memory_breakdown.h"

namespace kiln {
namespace {

constexpr size_t kInputAlign = 64;

size_t align_up(size_t n) { return (n + kInputAlign - 1) / kInputAlign * kInputAlign; }

// The stand-in addresses a segment of `bytes` takes: whole pages, so that no two share one.
size_t stand_in_span(size_t bytes) { return (bytes + 4095) / 4096 * 4096; }

// Byte offsets of a micro-batch's inputs inside the context's input buffer. Input embeddings
// (n_embd_in floats per token; 0 without input_embeddings) come last.
struct InputLayout {
  size_t ids, pos, rows, cells, mask, embd, total;
  static InputLayout of(const ContextOptions& opt, const HParams& hp) {
    const int64_t n_ubatch = opt.n_ubatch, n_ctx = KvCache::cells_for(opt.n_ctx);
    const int64_t n_embd_in = opt.input_embeddings ? hp.n_embd : 0;
    InputLayout l{};
    const size_t col = align_up(static_cast<size_t>(n_ubatch) * 4);
    l.ids = 0;
    l.pos = col;
    l.rows = 2 * col;
    l.cells = 3 * col;
    l.mask = 4 * col;
    l.embd = l.mask + align_up(static_cast<size_t>(n_ctx) * static_cast<size_t>(n_ubatch) * 4);
    l.total = l.embd + align_up(static_cast<size_t>(n_embd_in) * static_cast<size_t>(n_ubatch) * 4);
    return l;
  }
};

}  // namespace

size_t context_input_bytes(const ContextOptions& options, const HParams& hparams) {
  return InputLayout::of(options, hparams).total;
}

DecoderGraphSpec worst_case_step(const ContextOptions& options, AttentionPath attention) {
  DecoderGraphSpec spec;
  spec.n_tokens = options.n_ubatch;
  spec.n_outputs = options.n_ubatch;
  spec.n_kv = KvCache::cells_for(options.n_ctx);
  spec.attention = attention;
  spec.output = options.embeddings ? DecoderOutput::Embeddings : DecoderOutput::Logits;
  return spec;
}

ContextOptions resolve_context_options(const ContextOptions& options, const HParams& hparams) {
  ContextOptions o = options;
  o.n_ctx = context_size(options, hparams);
  o.n_ubatch = std::min({o.n_ubatch, o.n_batch, o.n_ctx});
  return o;
}

int64_t context_size(const ContextOptions& options, const HParams& hparams) {
  if (options.n_ctx == ContextOptions::kTrainingContext) return hparams.n_ctx_train;
  return options.n_ctx > 0 ? options.n_ctx : std::min<int64_t>(hparams.n_ctx_train, 4096);
}

Result<std::unique_ptr<Context>> Context::create(std::shared_ptr<const Model> model, Backend& backend,
                                                 const ContextOptions& options) {
  KILN_ASSIGN_OR_RETURN(auto weights, DeviceWeights::create(std::move(model), backend.device()));
  return create(std::move(weights), backend, options);
}

Result<std::unique_ptr<Context>> Context::create(std::shared_ptr<const DeviceWeights> weights,
                                                 Backend& backend, const ContextOptions& options) {
  std::vector<ContextDevice> one{{std::move(weights), &backend, options.arena}};
  return create(std::move(one), options);
}

Status Context::Stage::allocate_inputs(size_t bytes) {
  inputs.reset();
  inputs_bytes = bytes;
  KILN_ASSIGN_OR_RETURN(inputs, compute.allocate({bytes, MemoryKind::Compute, owner_name + ":inputs"}));
  return ok_status();
}

Status Context::Stage::evict() {
  if (own_arena) own_arena->release();
  inputs.reset();
  return ok_status();
}

Status Context::Stage::restore() {
  KILN_ASSIGN_OR_RETURN(inputs, compute.allocate({inputs_bytes, MemoryKind::Compute, owner_name + ":inputs"}));
  if (const Status st = own_arena ? own_arena->allocate() : ok_status(); !st.ok()) {
    inputs.reset();
    return st;
  }
  return ok_status();
}

Result<std::unique_ptr<Context>> Context::create(std::vector<ContextDevice> devices, const ContextOptions& options) {
  if (devices.empty()) return make_error("context: no device");
  const Model& model = devices[0].weights->model();
  const HParams& hp = model.hparams();
  const std::string& owner = model.name();
  std::unique_ptr<Context> c(new Context());
  for (ContextDevice& d : devices) {
    if (&d.weights->model() != &model)
      return make_error("context: the weights on ", d.weights->device().name(), " are of another model");
    if (&d.weights->device() != &d.backend->device())
      return make_error("context: the weights of '", owner, "' are on device '", d.weights->device().name(),
                        "', the backend computes on '", d.backend->device().name(), "'");
    for (const auto& st : c->stages_) {
      if (&st->device() == &d.backend->device())
        return make_error("context: device ", st->device().name(), " given twice");
    }
    auto st = std::make_unique<Stage>();
    st->weights = std::move(d.weights);
    st->backend = d.backend;
    st->owner_name = owner;
    if (d.arena != nullptr && &d.arena->device() != &st->device())
      return make_error("context: the shared compute arena '", d.arena->owner(), "' is on device '",
                        d.arena->device().name(), "', the backend on '", st->device().name(), "'");
    st->arena = d.arena;
    st->compute.attach(st->device(), st->weights->owner(), owner, MemoryKind::Compute, "re-planned", st.get());
    c->stages_.push_back(std::move(st));
  }
  // The owners' memory stays while the context is made (pinned, weights restored first).
  MemoryHold pins;
  for (const auto& st : c->stages_) {
    if (ResidencyManager* m = st->device().residency()) {
      KILN_ASSIGN_OR_RETURN(auto pin, m->pin(st->weights->owner()));
      pins.push_back(std::move(pin));
    }
    if (!st->weights->resident())
      return make_error("context: the weights of '", owner, "' on ", st->device().name(),
                        " are released: rebuild them first");
  }
  if (options.n_ubatch <= 0 || options.n_batch <= 0)
    return make_error("context: batch sizes must be positive (n_batch ", options.n_batch, ", n_ubatch ",
                      options.n_ubatch, ")");
  c->opt_ = resolve_context_options(options, hp);
  c->attention_ = options.flash_attention == FlashAttention::Off ? AttentionPath::Plain : AttentionPath::Flash;
  c->graph_weights_ = model.weights();  // the slots, whose views merge_graph_weights() sets
  KILN_TRY(c->set_up_segments());
  KILN_TRY(c->merge_graph_weights());
  // Each layer's K and V on the device holding its K projection (or, kv_on_host, the host's), the
  // lane of that projection's weights computing with them.
  std::vector<KvCache::LayerPlace> kv_places;
  std::vector<int64_t> layers_on(c->stages_.size(), 0);
  size_t host = 0;
  while (host < c->stages_.size() && !c->stages_[host]->device().is_host()) ++host;
  if (options.kv_on_host && host == c->stages_.size())
    return make_error("context: the KV cache in host memory (-nkvo) needs the CPU among the model's devices");
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const auto holds_wk = [il](const DecoderWeights& w) { return static_cast<bool>(w.blocks[static_cast<size_t>(il)].attn.wk); };
    size_t lane = SIZE_MAX;
    for (const auto& st : c->stages_) {
      if (holds_wk(st->weights->weights())) lane = st->lane;
      for (const Stage::Segment& seg : st->segments) {
        if (lane == SIZE_MAX && holds_wk(seg.views)) lane = seg.lane;
      }
      if (lane != SIZE_MAX) break;
    }
    if (lane == SIZE_MAX) return make_error("context: no device holds layer ", il, " of '", owner, "'");
    size_t d = c->lanes_[lane].stage;
    if (options.kv_on_host) {
      d = host;
      lane = c->stages_[host]->lane;
    }
    c->kv_lane_.push_back(lane);
    kv_places.push_back({&c->stages_[d]->device(), c->stages_[d]->weights->owner()});
    ++layers_on[d];
  }
  const InputLayout layout = InputLayout::of(c->opt_, hp);
  for (size_t d = 0; d < c->stages_.size(); ++d) {
    if (ResidencyManager* m = c->stages_[d]->device().residency()) {
      // Admission: what grows with n_ctx (the KV cache, and the inputs, whose mask has a row per
      // cell) is checked against the room there is before anything is allocated.
      const size_t kv_bytes = KvCache::bytes_for(hp, c->opt_.n_ctx, options.type_k, options.type_v, layers_on[d]);
      KILN_TRY(m->admit(c->stages_[d]->weights->owner(), kv_bytes + layout.total,
                        "'" + owner + "' (a context of " + std::to_string(c->opt_.n_ctx) + " tokens: KV cache " +
                            format_memory_size(kv_bytes) + ", inputs " + format_memory_size(layout.total) + ")"));
    }
  }
  KILN_ASSIGN_OR_RETURN(c->kv_, KvCache::create(hp, c->opt_.n_ctx, options.type_k, options.type_v, kv_places, owner));
  c->kv_generation_ = c->kv_->generation();
  for (int64_t il = 0; il < hp.n_layer; ++il) c->kv_layers_.push_back({c->kv_->k(il), c->kv_->v(il)});

  // Reserve each arena for the largest micro-batch over the whole cache, allocate it once and
  // prepare the backends' scratch for it. An arena of the context's own is counted with its
  // stage's compute resident; a shared one is counted by whoever made it (the device's
  // ResidentArena, DeviceRegistry::arena, is an owner of its own).
  for (const auto& st : c->stages_) {
    if (st->arena == nullptr) {
      st->own_arena = std::make_unique<ComputeArena>(st->device(), owner, &st->compute);
      st->arena = st->own_arena.get();
    }
  }
  // The inputs buffers; the worst case's crossings are added below.
  for (const auto& st : c->stages_) KILN_TRY(st->allocate_inputs(layout.total));
  // Pinned as for a pass (the weights, and shared arenas of other owners: the devices'), then the
  // arenas' turns: the worst case may grow an arena, making room by evicting other owners.
  KILN_ASSIGN_OR_RETURN(const MemoryHold hold, c->hold_memory());
  const auto turns = c->take_turns();
  Graph worst;
  KILN_TRY(build_decoder_graph(worst, hp, c->graph_weights_, c->kv_layers_, worst_case_step(c->opt_, c->attention_)));
  KILN_ASSIGN_OR_RETURN(SplitPlan plan, c->plan_graph(worst));
  std::vector<size_t> transfer(c->stages_.size(), 0);  // per stage: the most any of its lanes needs
  for (size_t l = 0; l < c->lanes_.size(); ++l)
    transfer[c->lanes_[l].stage] = std::max(transfer[c->lanes_[l].stage], plan.transfer_bytes(l));
  for (size_t d = 0; d < c->stages_.size(); ++d) {
    if (transfer[d] > 0) KILN_TRY(c->stages_[d]->allocate_inputs(layout.total + transfer[d]));
  }
  KILN_TRY(plan.prepare(c->split_devices()));
  return c;
}

std::vector<std::unique_lock<std::mutex>> Context::take_turns() const {
  std::vector<ComputeArena*> arenas;
  for (const auto& st : stages_) arenas.push_back(st->arena);
  std::sort(arenas.begin(), arenas.end(), std::less<ComputeArena*>());
  std::vector<std::unique_lock<std::mutex>> turns;
  for (ComputeArena* a : arenas) turns.push_back(a->take_turn());
  return turns;
}

std::vector<std::shared_ptr<const DeviceWeights>> Context::device_weights() const {
  std::vector<std::shared_ptr<const DeviceWeights>> out;
  for (const auto& st : stages_) {
    out.push_back(st->weights);
    for (const Stage::Segment& seg : st->segments) out.push_back(seg.weights);
  }
  return out;
}

Status Context::set_up_segments() {
  size_t stand_in_bytes = 0;
  for (const auto& st : stages_) {
    st->lane = lanes_.size();
    lanes_.push_back({static_cast<size_t>(&st - stages_.data()), -1, st->device().name()});
    for (const auto& w : st->weights->segments()) {
      Stage::Segment seg;
      seg.weights = w;
      seg.manager = st->device().residency();
      if (seg.manager == nullptr || st->device().is_host())
        return make_error("context: segments of '", w->name(), "' on ", st->device().name(),
                          ": segmented execution needs a device with its own memory and a residency manager");
      seg.lane = lanes_.size();
      seg.bytes = w->buffer_bytes();
      lanes_.push_back({static_cast<size_t>(&st - stages_.data()), static_cast<int>(st->segments.size()), w->name()});
      stand_in_bytes += stand_in_span(seg.bytes);
      st->segments.push_back(std::move(seg));
    }
  }
  if (stand_in_bytes == 0) return ok_status();
  KILN_TRY(stand_in_.reserve(stand_in_bytes));
  // Each segment restored once (one at a time: they need not fit together) to read where its
  // layout puts each weight; the views are kept at the segment's stand-in range.
  uint8_t* next = stand_in_.base();
  for (const auto& st : stages_) {
    for (Stage::Segment& seg : st->segments) {
      KILN_ASSIGN_OR_RETURN(const ResidencyManager::Pin pin, seg.manager->pin(seg.weights->owner()));
      const auto* base = static_cast<const uint8_t*>(seg.weights->buffer()->base());
      seg.built = next;
      next += stand_in_span(seg.bytes);
      seg.views = seg.weights->weights();
      for_each_weight_slot(seg.views, [&](Weight& w, WeightUse, int64_t) {
        if (w) w.view.data = seg.built + (static_cast<const uint8_t*>(w.view.data) - base);
      });
    }
  }
  return ok_status();
}

Status Context::run_plan(SplitPlan& plan, std::span<const SplitDevice> devices) {
  const bool segmented = lanes_.size() > stages_.size();
  if (!segmented) return plan.execute(devices);
  const auto before = [&](size_t p) -> Status {
    const Lane& lane = lanes_[plan.part_device(p)];
    if (lane.segment < 0) return ok_status();
    Stage::Segment& seg = stages_[lane.stage]->segments[static_cast<size_t>(lane.segment)];
    Stage::Segment* next = nullptr;  // the segment of the next part that computes with another one
    for (size_t q = p + 1; q < plan.part_count() && next == nullptr; ++q) {
      const Lane& l = lanes_[plan.part_device(q)];
      if (l.segment >= 0 && &stages_[l.stage]->segments[static_cast<size_t>(l.segment)] != &seg)
        next = &stages_[l.stage]->segments[static_cast<size_t>(l.segment)];
    }
    KILN_TRY(acquire_segment(seg, next));
    return plan.relocate(p, seg.built, seg.bytes, seg.weights->buffer()->base());
  };
  const Status st = plan.execute(devices, before);
  finish_prefetch(false);
  for (const auto& stage : stages_) {
    for (Stage::Segment& seg : stage->segments) seg.pin.reset();  // resident, evictable again
  }
  return st;
}

Status Context::acquire_segment(Stage::Segment& seg, Stage::Segment* next) {
  ++segment_clock_;
  // The segments done are evictable again; the one prefetched keeps its pin.
  for (const auto& stage : stages_) {
    for (Stage::Segment& s : stage->segments) {
      if (&s != &seg && &s != prefetching_) s.pin.reset();
    }
  }
  finish_prefetch(true);
  if (!seg.pin.held()) {
    KILN_TRY(make_segment_room(seg, next));
    KILN_ASSIGN_OR_RETURN(seg.pin, seg.manager->pin(seg.weights->owner()));
  }
  seg.last_use = segment_clock_;
  if (next == nullptr || next->pin.held() || !opt_.prefetch_segments) return ok_status();
  KILN_TRY(make_segment_room(*next, &seg));
  prefetching_ = next;
  prefetched_ = ResidencyManager::Pin{};
  // The thread touches nothing of the context: the manager restores the owner under its own lock.
  prefetch_ = std::thread([this, m = next->manager, owner = next->weights->owner()] { prefetched_ = m->pin(owner); });
  return ok_status();
}

void Context::finish_prefetch(bool keep) {
  if (!prefetch_.joinable()) return;
  prefetch_.join();
  // A failed prefetch (no room while the current segment was pinned) is retried when its part runs.
  if (keep && prefetched_.ok()) prefetching_->pin = std::move(*prefetched_);
  prefetched_ = ResidencyManager::Pin{};
  prefetching_ = nullptr;
}

Status Context::make_segment_room(const Stage::Segment& target, const Stage::Segment* keep) {
  ResidencyManager& m = *target.manager;
  if (m.owner_resident(target.weights->owner())) return ok_status();
  while (!m.fits(target.bytes)) {
    Stage::Segment* victim = nullptr;
    for (const auto& stage : stages_) {
      for (Stage::Segment& s : stage->segments) {
        if (&s == &target || &s == keep || s.manager != &m || s.pin.held() || &s == prefetching_ ||
            !m.owner_resident(s.weights->owner()))
          continue;
        if (victim == nullptr || s.last_use > victim->last_use) victim = &s;
      }
    }
    if (victim == nullptr) break;  // pin() evicts other owners, or names the sizes
    KILN_TRY(m.evict_owner(victim->weights->owner()));
  }
  return ok_status();
}

uint64_t Context::weights_generation() const {
  uint64_t g = 0;
  for (const auto& st : stages_) g += st->weights->generation();
  return g;
}

Result<Context::MemoryHold> Context::hold_memory() {
  MemoryHold hold;
  for (const auto& st : stages_) {
    ResidencyManager* m = st->device().residency();
    if (m == nullptr) continue;
    KILN_ASSIGN_OR_RETURN(auto pin, m->pin(st->weights->owner()));
    hold.push_back(std::move(pin));
    const OwnerId a = st->arena->resident_owner();
    if (a != 0 && a != st->weights->owner()) {
      KILN_ASSIGN_OR_RETURN(auto arena_pin, m->pin(a));
      hold.push_back(std::move(arena_pin));
    }
  }
  if (kv_ && kv_->generation() != kv_generation_) {
    for (size_t il = 0; il < kv_layers_.size(); ++il) {
      kv_layers_[il] = {kv_->k(static_cast<int64_t>(il)), kv_->v(static_cast<int64_t>(il))};
    }
    kv_generation_ = kv_->generation();
  }
  if (weights_generation() != graph_weights_gen_) KILN_TRY(merge_graph_weights());
  return hold;
}

Status Context::merge_graph_weights() {
  std::vector<Weight*> slots;
  for_each_weight_slot(graph_weights_, [&](Weight& w, WeightUse, int64_t) {
    w = Weight{};
    slots.push_back(&w);
  });
  const auto merge = [&](const DecoderWeights& from) {
    size_t i = 0;
    for_each_weight_slot(from, [&](const Weight& w, WeightUse, int64_t) {
      if (w && !*slots[i]) *slots[i] = w;
      ++i;
    });
  };
  for (const auto& st : stages_) {
    merge(st->weights->weights());
    for (const Stage::Segment& seg : st->segments) merge(seg.views);
  }
  size_t i = 0;
  Status missing = ok_status();
  for_each_weight_slot(model().weights(), [&](const Weight& w, WeightUse, int64_t) {
    if (w && !*slots[i] && missing.ok())
      missing = make_error("context: no device holds tensor '", w.info->name, "' of '", model().name(), "'");
    ++i;
  });
  graph_weights_gen_ = weights_generation();
  return missing;
}

std::vector<SplitDevice> Context::split_devices() const {
  const size_t crossings_at = InputLayout::of(opt_, model().hparams()).total;
  std::vector<SplitDevice> out;
  for (const Lane& l : lanes_) {
    const Stage& st = *stages_[l.stage];
    out.push_back({st.backend, st.inputs.get(), crossings_at});
  }
  return out;
}

Result<DecoderPlan*> Context::step_plan(const DecoderGraphSpec& spec) {
  const DecoderPlans::Generations gen{weights_generation(), kv_->generation()};
  if (!opt_.reuse_plans) plans_.clear();
  if (DecoderPlan* cached = plans_.find(spec, gen)) return cached;
  auto step = std::make_unique<DecoderPlan>();
  KILN_ASSIGN_OR_RETURN(step->io,
                        build_decoder_graph(step->graph, model().hparams(), graph_weights_, kv_layers_, spec));
  KILN_ASSIGN_OR_RETURN(SplitPlan plan, plan_graph(step->graph));
  step->plan.emplace(std::move(plan));
  ++graphs_built_;
  return &plans_.insert(spec, gen, std::move(step));
}

uint64_t Context::graphs_built() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return graphs_built_;
}

Result<SplitPlan> Context::plan_graph(const Graph& g) {
  std::vector<ComputeArena*> arenas;
  std::vector<Device*> devices;
  std::vector<std::string> names;
  for (const auto& st : stages_) devices.push_back(&st->device());
  for (const Lane& l : lanes_) {
    arenas.push_back(stages_[l.stage]->arena);
    names.push_back(l.name);
  }
  if (lanes_.size() == stages_.size()) return SplitPlan::create(g, arenas);
  // A segment's weights by their stand-in range, a layer's K and V by its lane, the rest by device.
  const ExternalPlacement by_device = placement_by_holds(devices);
  const ExternalPlacement where = [&](const TensorView& v) -> size_t {
    const auto* p = static_cast<const uint8_t*>(v.data);
    for (const auto& st : stages_) {
      for (const Stage::Segment& seg : st->segments) {
        if (p >= seg.built && p < seg.built + seg.bytes) return seg.lane;
      }
    }
    for (size_t il = 0; il < kv_layers_.size(); ++il) {
      if (v.data == kv_layers_[il].k.data || v.data == kv_layers_[il].v.data) return kv_lane_[il];
    }
    const size_t d = by_device(v);
    return d == kNoDevice ? kNoDevice : stages_[d]->lane;
  };
  // A step's crossings fit the inputs buffers sized for the worst case at creation (Buffer::view
  // refuses one that would not).
  return SplitPlan::create(g, arenas, where, names);
}

Status Context::bind_input(SplitPlan& sp, Tensor t, DType type, int64_t ne0, int64_t ne1, size_t offset,
                           const void* bytes) {
  for (size_t d = 0; d < stages_.size(); ++d) {
    Stage& st = *stages_[d];
    std::optional<TensorView> v;  // uploaded once per device, bound for each of its lanes that reads it
    for (size_t l = 0; l < lanes_.size(); ++l) {
      if (lanes_[l].stage != d || !sp.reads_on(t, l)) continue;
      if (!v) {
        KILN_ASSIGN_OR_RETURN(v, st.inputs->view(type, {ne0, ne1, 1, 1}, offset));
        KILN_TRY(st.device().upload(*v, bytes, v->span_bytes()));
      }
      KILN_TRY(sp.bind(t, l, *v));
    }
  }
  return ok_status();
}

Status Context::decode(const Batch& batch, const DecodeOptions& options) {
  std::lock_guard<std::mutex> lock(mutex_);
  const size_t n = batch.size();
  if (n == 0) return make_error("decode: empty batch");
  if (batch.seq.size() != n || batch.output.size() != n)
    return make_error("decode: batch arrays differ in length");
  if (static_cast<int64_t>(n) > opt_.n_batch)
    return make_error("decode: batch of ", n, " tokens exceeds n_batch ", opt_.n_batch);
  KILN_ASSIGN_OR_RETURN(const MemoryHold hold, hold_memory());
  for (const auto& st : stages_) {
    if (!st->weights->resident())
      return make_error("decode: the weights of '", model().name(), "' on ", st->device().name(),
                        " are released: rebuild them first");
  }
  const int64_t n_vocab = model().hparams().n_vocab;
  if (batch.has_embeddings()) {
    if (!opt_.input_embeddings)
      return make_error("decode: a batch of embeddings, but the context was created without input_embeddings");
    if (!batch.tokens.empty()) return make_error("decode: a batch holds token ids or embeddings, not both");
    const size_t width = static_cast<size_t>(model().hparams().n_embd);
    if (batch.embd.size() != n * width)
      return make_error("decode: ", batch.embd.size(), " embedding values for ", n, " tokens of width ", width);
  } else if (batch.tokens.size() != n) {
    return make_error("decode: batch arrays differ in length");
  }
  if (!batch.causal && static_cast<int64_t>(n) > opt_.n_ubatch)
    return make_error("decode: a non-causal batch of ", n, " tokens must fit one micro-batch (n_ubatch ",
                      opt_.n_ubatch, "; raise -ub)");
  size_t n_outputs = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!batch.has_embeddings() && (batch.tokens[i] < 0 || batch.tokens[i] >= n_vocab))
      return make_error("decode: token id ", batch.tokens[i], " at batch index ", i, " outside the vocabulary [0, ",
                        n_vocab, ")");
    if (batch.pos[i] < 0) return make_error("decode: negative position ", batch.pos[i], " at batch index ", i);
    if (batch.seq[i] < 0 || batch.seq[i] >= kMaxSequences)
      return make_error("decode: sequence id ", batch.seq[i], " outside [0, ", kMaxSequences, ")");
    n_outputs += batch.output[i] ? 1 : 0;
  }
  if (kv_->n_used() + static_cast<int64_t>(n) > kv_->size())
    return make_error("decode: ", n, " new tokens do not fit the context: ", kv_->n_used(), " of ", kv_->size(),
                      " cells in use (the context is full)");
  const auto turns = take_turns();
  if (kv_->has_shift()) KILN_TRY(apply_kv_shift());

  outputs_.resize(n_outputs * output_width());
  output_row_.assign(n, -1);
  size_t out_index = 0;
  for (size_t begin = 0; begin < n; begin += static_cast<size_t>(opt_.n_ubatch)) {
    const size_t end = std::min(n, begin + static_cast<size_t>(opt_.n_ubatch));
    KILN_TRY(decode_ubatch(batch, options, begin, end, out_index));
  }
  return ok_status();
}

Status Context::decode_ubatch(const Batch& batch, const DecodeOptions& options, size_t begin, size_t end,
                              size_t& out_index) {
  const int64_t T = static_cast<int64_t>(end - begin);
  const HParams& hp = model().hparams();
  const std::span<const int32_t> pos(batch.pos.data() + begin, end - begin);
  const std::span<const int32_t> seq(batch.seq.data() + begin, end - begin);
  KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> cells, kv_->place(pos, seq));

  stage_rows_.clear();
  for (size_t i = begin; i < end; ++i) {
    if (batch.output[i]) stage_rows_.push_back(static_cast<int32_t>(i - begin));
  }
  const bool any_output = !stage_rows_.empty();
  if (!any_output) stage_rows_.push_back(static_cast<int32_t>(T - 1));  // computed and dropped

  DecoderGraphSpec spec;
  spec.n_tokens = T;
  spec.n_outputs = static_cast<int64_t>(stage_rows_.size());
  spec.n_kv = kv_->n_kv_padded();
  spec.attention = attention_;
  spec.output = opt_.embeddings ? DecoderOutput::Embeddings : DecoderOutput::Logits;
  spec.embeddings_input = batch.has_embeddings();
  spec.single_row_order = options.single_row_order;
  KILN_ASSIGN_OR_RETURN(DecoderPlan * step, step_plan(spec));
  SplitPlan& plan = *step->plan;
  const DecoderGraph& dg = step->io;
  // After an eviction released an arena: the plans' offsets still hold.
  for (const auto& st : stages_) KILN_TRY(st->arena->allocate());
  const std::vector<SplitDevice> devices = split_devices();
  KILN_TRY(plan.prepare(devices));

  stage_pos_.assign(pos.begin(), pos.end());
  stage_cells_.resize(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) stage_cells_[static_cast<size_t>(t)] = static_cast<int32_t>(cells[static_cast<size_t>(t)]);
  stage_mask_.resize(static_cast<size_t>(spec.n_kv * T));
  kv_->fill_mask(stage_mask_, spec.n_kv, pos, seq, batch.causal);

  const InputLayout layout = InputLayout::of(opt_, model().hparams());
  if (spec.embeddings_input) {
    const auto width = static_cast<size_t>(hp.n_embd);
    KILN_TRY(bind_input(plan, dg.input_embd, DType::F32, hp.n_embd, T, layout.embd, batch.embd.data() + begin * width));
  } else {
    stage_ids_.assign(batch.tokens.begin() + static_cast<std::ptrdiff_t>(begin),
                      batch.tokens.begin() + static_cast<std::ptrdiff_t>(end));
    KILN_TRY(bind_input(plan, dg.tokens, DType::I32, T, 1, layout.ids, stage_ids_.data()));
  }
  KILN_TRY(bind_input(plan, dg.positions, DType::I32, T, 1, layout.pos, stage_pos_.data()));
  KILN_TRY(bind_input(plan, dg.kv_cells, DType::I32, T, 1, layout.cells, stage_cells_.data()));
  KILN_TRY(bind_input(plan, dg.out_rows, DType::I32, spec.n_outputs, 1, layout.rows, stage_rows_.data()));
  KILN_TRY(bind_input(plan, dg.kq_mask, DType::F32, spec.n_kv, T, layout.mask, stage_mask_.data()));
  KILN_TRY(run_plan(plan, devices));

  if (any_output) {
    const size_t bytes = stage_rows_.size() * output_width() * sizeof(float);
    KILN_TRY(plan.download(opt_.embeddings ? dg.embeddings : dg.logits, outputs_.data() + out_index * output_width(),
                           bytes));
    for (int32_t r : stage_rows_) output_row_[begin + static_cast<size_t>(r)] = static_cast<int64_t>(out_index++);
  }
  return ok_status();
}

size_t Context::output_width() const {
  return static_cast<size_t>(opt_.embeddings ? model().hparams().n_embd : model().hparams().n_vocab);
}

std::span<const float> Context::output_row(size_t i) const {
  if (i >= output_row_.size() || output_row_[i] < 0) return {};
  const size_t width = output_width();
  return {outputs_.data() + static_cast<size_t>(output_row_[i]) * width, width};
}

std::span<const float> Context::logits(size_t i) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return opt_.embeddings ? std::span<const float>{} : output_row(i);
}

std::span<const float> Context::embeddings(size_t i) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return opt_.embeddings ? output_row(i) : std::span<const float>{};
}

Status Context::apply_kv_shift() {
  const HParams& hp = model().hparams();
  const int64_t n_ctx = kv_->size();
  Graph g;
  const Tensor shift = g.input("k_shift", DType::I32, {n_ctx, 1, 1, 1});
  Tensor last;
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const Weight& freqs = graph_weights_.blocks[static_cast<size_t>(il)].rope_freqs;
    const Tensor ff = freqs ? g.external("rope_freqs", freqs.view) : Tensor{};
    const Tensor k_cache = g.external("k_cache", kv_->k(il));
    Tensor k = g.reshape(k_cache, {hp.head_dim_k, hp.n_head_kv, n_ctx, 1});
    if (kv_->type_k() != DType::F32) k = g.cast(k, DType::F32);
    k = ff.valid() ? g.rope(k, shift, ff, hp.rope_params()) : g.rope(k, shift, hp.rope_params());
    last = g.cpy_into(k, k_cache);
  }
  g.mark_output(last);
  KILN_TRY(g.status());
  KILN_ASSIGN_OR_RETURN(SplitPlan plan, plan_graph(g));
  const std::vector<SplitDevice> devices = split_devices();
  KILN_TRY(plan.prepare(devices));
  // The shifts go where a micro-batch's mask goes (it holds n_ctx * n_ubatch floats).
  const InputLayout layout = InputLayout::of(opt_, model().hparams());
  KILN_TRY(bind_input(plan, shift, DType::I32, n_ctx, 1, layout.mask, kv_->positions_shift().data()));
  KILN_TRY(run_plan(plan, devices));
  kv_->clear_shift();
  return ok_status();
}

void Context::seq_rm(int32_t seq, int32_t p0, int32_t p1) {
  std::lock_guard<std::mutex> lock(mutex_);
  kv_->seq_rm(seq, p0, p1);
}
void Context::seq_cp(int32_t src, int32_t dst, int32_t p0, int32_t p1) {
  std::lock_guard<std::mutex> lock(mutex_);
  kv_->seq_cp(src, dst, p0, p1);
}
void Context::seq_keep(int32_t seq) {
  std::lock_guard<std::mutex> lock(mutex_);
  kv_->seq_keep(seq);
}
Status Context::seq_add(int32_t seq, int32_t p0, int32_t p1, int32_t delta) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (int64_t c = 0; c < kv_->size(); ++c) {
    const KvCell& cell = kv_->cell(c);
    if (cell.has(seq) && cell.seq_mask != (uint64_t{1} << seq) && cell.pos >= std::max(0, p0) && (p1 < 0 || cell.pos < p1))
      return make_error("context: cannot shift sequence ", seq, ": cell ", c, " is shared with another sequence");
  }
  kv_->seq_add(seq, p0, p1, delta);
  return ok_status();
}
int32_t Context::seq_pos_max(int32_t seq) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return kv_->seq_pos_max(seq);
}
void Context::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  kv_->clear();
}

void Context::release_host_buffers() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<float>().swap(outputs_);
  std::vector<int64_t>().swap(output_row_);
  std::vector<int32_t>().swap(stage_ids_);
  std::vector<int32_t>().swap(stage_pos_);
  std::vector<int32_t>().swap(stage_rows_);
  std::vector<int32_t>().swap(stage_cells_);
  std::vector<float>().swap(stage_mask_);
  plans_.clear();
}

namespace {

constexpr char kSeqMagic[8] = {'K', 'I', 'L', 'N', 'S', 'E', 'Q', '1'};

struct SeqHeader {
  char magic[8];
  uint32_t n_layer, n_embd_k, n_embd_v, type_k, type_v;
  uint32_t n_tokens, n_cells;
};

}  // namespace

Result<SequenceCells> Context::read_sequence_cells(int32_t seq) const {
  SequenceCells out;
  out.cell_bytes = kv_->cell_bytes();
  std::vector<int64_t> cells;
  for (int64_t c = 0; c < kv_->size(); ++c) {
    if (kv_->cell(c).has(seq)) {
      cells.push_back(c);
      out.positions.push_back(kv_->cell(c).pos);
    }
  }
  KILN_TRY(kv_->read_cells(cells, out.bytes));
  return out;
}

Status Context::write_sequence_cells(int32_t seq, const SequenceCells& in) {
  if (in.cell_bytes != kv_->cell_bytes() || in.bytes.size() != in.positions.size() * in.cell_bytes)
    return make_error("state: the cells were copied from a context of another shape or cache type");
  kv_->seq_rm(seq, -1, -1);
  if (in.positions.empty()) return ok_status();
  const std::vector<int32_t> seqs(in.positions.size(), seq);
  KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> cells, kv_->place(in.positions, seqs));
  if (const Status st = kv_->write_cells(cells, in.bytes); !st.ok()) {
    kv_->seq_rm(seq, -1, -1);
    return st;
  }
  return ok_status();
}

Result<SequenceCells> Context::copy_sequence_cells(int32_t seq) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (seq < 0 || seq >= kMaxSequences) return make_error("state: sequence id ", seq, " out of range");
  KILN_ASSIGN_OR_RETURN(const MemoryHold hold, hold_memory());
  return read_sequence_cells(seq);
}

Status Context::put_sequence_cells(int32_t seq, const SequenceCells& cells) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (seq < 0 || seq >= kMaxSequences) return make_error("state: sequence id ", seq, " out of range");
  KILN_ASSIGN_OR_RETURN(const MemoryHold hold, hold_memory());
  return write_sequence_cells(seq, cells);
}

Status Context::save_sequence(int32_t seq, std::span<const int32_t> tokens, const std::string& path) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (seq < 0 || seq >= kMaxSequences) return make_error("state: sequence id ", seq, " out of range");
  KILN_ASSIGN_OR_RETURN(const MemoryHold hold, hold_memory());
  KILN_ASSIGN_OR_RETURN(const SequenceCells cells, read_sequence_cells(seq));
  const HParams& hp = model().hparams();
  SeqHeader h{};
  std::memcpy(h.magic, kSeqMagic, sizeof kSeqMagic);
  h.n_layer = static_cast<uint32_t>(hp.n_layer);
  h.n_embd_k = static_cast<uint32_t>(hp.n_embd_k_gqa());
  h.n_embd_v = static_cast<uint32_t>(hp.n_embd_v_gqa());
  h.type_k = static_cast<uint32_t>(kv_->type_k());
  h.type_v = static_cast<uint32_t>(kv_->type_v());
  h.n_tokens = static_cast<uint32_t>(tokens.size());
  h.n_cells = static_cast<uint32_t>(cells.size());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return make_error("state: cannot write '", path, "'");
  out.write(reinterpret_cast<const char*>(&h), sizeof h);
  out.write(reinterpret_cast<const char*>(tokens.data()), static_cast<std::streamsize>(tokens.size_bytes()));
  out.write(reinterpret_cast<const char*>(cells.positions.data()),
            static_cast<std::streamsize>(cells.positions.size() * 4));
  out.write(reinterpret_cast<const char*>(cells.bytes.data()),
            static_cast<std::streamsize>(cells.bytes.size()));
  if (!out) return make_error("state: write to '", path, "' failed");
  return ok_status();
}

Result<std::vector<int32_t>> Context::load_sequence(int32_t seq, const std::string& path) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (seq < 0 || seq >= kMaxSequences) return make_error("state: sequence id ", seq, " out of range");
  KILN_ASSIGN_OR_RETURN(const MemoryHold hold, hold_memory());
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("state: cannot read '", path, "'");
  SeqHeader h{};
  in.read(reinterpret_cast<char*>(&h), sizeof h);
  if (!in || std::memcmp(h.magic, kSeqMagic, sizeof kSeqMagic) != 0)
    return make_error("state: '", path, "' is not a kiln sequence state file");
  const HParams& hp = model().hparams();
  if (h.n_layer != hp.n_layer || h.n_embd_k != hp.n_embd_k_gqa() || h.n_embd_v != hp.n_embd_v_gqa() ||
      h.type_k != static_cast<uint32_t>(kv_->type_k()) || h.type_v != static_cast<uint32_t>(kv_->type_v()))
    return make_error("state: '", path, "' was saved by a context of another model shape or cache type");
  if (h.n_cells > kv_->size() || h.n_tokens > (1u << 26))
    return make_error("state: '", path, "' holds ", h.n_cells, " cells; this context has ", kv_->size());
  std::vector<int32_t> tokens(h.n_tokens);
  SequenceCells cells;
  cells.cell_bytes = kv_->cell_bytes();
  cells.positions.resize(h.n_cells);
  cells.bytes.resize(static_cast<size_t>(h.n_cells) * cells.cell_bytes);
  in.read(reinterpret_cast<char*>(tokens.data()), static_cast<std::streamsize>(tokens.size() * 4));
  in.read(reinterpret_cast<char*>(cells.positions.data()),
          static_cast<std::streamsize>(cells.positions.size() * 4));
  in.read(reinterpret_cast<char*>(cells.bytes.data()), static_cast<std::streamsize>(cells.bytes.size()));
  if (!in || in.peek() != std::char_traits<char>::eof())
    return make_error("state: '", path, "' is truncated or has trailing bytes");
  for (int32_t t : tokens) {
    if (t < 0 || t >= hp.n_vocab) return make_error("state: token id ", t, " outside the vocabulary");
  }
  for (int32_t p : cells.positions) {
    if (p < 0) return make_error("state: negative position ", p, " in '", path, "'");
  }
  KILN_TRY(write_sequence_cells(seq, cells));
  return tokens;
}

}  // namespace kiln
