#include "llm/context.h"

#include <algorithm>
#include <cstring>
#include <fstream>

#include "runtime/memory_breakdown.h"

namespace kiln {
namespace {

constexpr size_t kInputAlign = 64;

size_t align_up(size_t n) { return (n + kInputAlign - 1) / kInputAlign * kInputAlign; }

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
  if (&weights->device() != &backend.device())
    return make_error("context: the weights of '", weights->model().name(), "' are on device '",
                      weights->device().name(), "', the backend computes on '", backend.device().name(), "'");
  std::unique_ptr<Context> c(new Context());
  const HParams& hp = weights->model().hparams();
  const std::string& owner = weights->model().name();
  ResidencyManager::Pin pin;  // the owner's memory stays while the context is made
  if (ResidencyManager* m = weights->device().residency()) {
    KILN_ASSIGN_OR_RETURN(pin, m->pin(weights->owner()));
  }
  if (!weights->resident())
    return make_error("context: the weights of '", weights->model().name(), "' on ", weights->device().name(),
                      " are released: rebuild them first");
  c->opt_ = options;
  c->opt_.n_ctx = context_size(options, hp);
  if (c->opt_.n_ubatch <= 0 || c->opt_.n_batch <= 0)
    return make_error("context: batch sizes must be positive (n_batch ", c->opt_.n_batch, ", n_ubatch ",
                      c->opt_.n_ubatch, ")");
  c->opt_.n_ubatch = std::min({c->opt_.n_ubatch, c->opt_.n_batch, c->opt_.n_ctx});
  c->attention_ = options.flash_attention == FlashAttention::Off ? AttentionPath::Plain : AttentionPath::Flash;
  c->weights_ = std::move(weights);
  c->backend_ = &backend;
  Device& dev = backend.device();
  const InputLayout layout = InputLayout::of(c->opt_, hp);
  if (ResidencyManager* m = dev.residency()) {
    // Admission: what grows with n_ctx (the KV cache, and the inputs, whose mask has a row per
    // cell) is checked against the room there is before anything is allocated.
    const size_t kv_bytes = KvCache::bytes_for(hp, c->opt_.n_ctx, options.type_k, options.type_v);
    KILN_TRY(m->admit(c->weights_->owner(), kv_bytes + layout.total,
                      "'" + owner + "' (a context of " + std::to_string(c->opt_.n_ctx) + " tokens: KV cache " +
                          format_memory_size(kv_bytes) + ", inputs " + format_memory_size(layout.total) + ")"));
  }
  KILN_ASSIGN_OR_RETURN(c->kv_,
                        KvCache::create(dev, hp, c->opt_.n_ctx, options.type_k, options.type_v,
                                        c->weights_->owner(), owner));
  c->kv_generation_ = c->kv_->generation();
  for (int64_t il = 0; il < hp.n_layer; ++il) c->kv_layers_.push_back({c->kv_->k(il), c->kv_->v(il)});
  c->compute_resident_.attach(dev, c->weights_->owner(), owner, MemoryKind::Compute, "re-planned", c.get());
  KILN_ASSIGN_OR_RETURN(c->inputs_,
                        c->compute_resident_.allocate({layout.total, MemoryKind::Compute, owner + ":inputs"}));

  // Reserve the arena for the largest micro-batch over the whole cache, allocate it once and
  // prepare the backend's scratch for it. An arena of the context's own is counted with its
  // compute resident; a shared one is counted by whoever made it (the device's ResidentArena,
  // DeviceRegistry::arena, is an owner of its own).
  if (options.arena != nullptr) {
    if (&options.arena->device() != &dev)
      return make_error("context: the shared compute arena '", options.arena->owner(), "' is on device '",
                        options.arena->device().name(), "', the backend on '", dev.name(), "'");
    c->arena_ = options.arena;
  } else {
    c->own_arena_ = std::make_unique<ComputeArena>(dev, owner, &c->compute_resident_);
    c->arena_ = c->own_arena_.get();
  }
  // Pinned as for a pass (the weights, and a shared arena of another owner: the device's), then
  // the arena's turn: the worst case may grow the arena, making room by evicting other owners.
  KILN_ASSIGN_OR_RETURN(const MemoryHold hold, c->hold_memory());
  const auto turn = c->arena_->take_turn();
  Graph worst;
  DecoderGraphSpec spec;
  spec.n_tokens = c->opt_.n_ubatch;
  spec.n_outputs = c->opt_.n_ubatch;
  spec.n_kv = c->kv_->size();
  spec.attention = c->attention_;
  spec.output = options.embeddings ? DecoderOutput::Embeddings : DecoderOutput::Logits;
  KILN_TRY(build_decoder_graph(worst, hp, c->weights_->weights(), c->kv_layers_, spec));
  KILN_ASSIGN_OR_RETURN(ExecPlan plan, c->plan_graph(worst));
  KILN_TRY(backend.prepare(plan));
  return c;
}

Result<Context::MemoryHold> Context::hold_memory() {
  MemoryHold hold;
  if (ResidencyManager* m = backend_->device().residency()) {
    KILN_ASSIGN_OR_RETURN(hold.weights, m->pin(weights_->owner()));
  }
  KILN_ASSIGN_OR_RETURN(hold.arena, pin_shared_arena());
  if (kv_->generation() != kv_generation_) {
    for (size_t il = 0; il < kv_layers_.size(); ++il) {
      kv_layers_[il] = {kv_->k(static_cast<int64_t>(il)), kv_->v(static_cast<int64_t>(il))};
    }
    kv_generation_ = kv_->generation();
  }
  return hold;
}

Result<ResidencyManager::Pin> Context::pin_shared_arena() const {
  ResidencyManager* m = backend_->device().residency();
  const OwnerId a = arena_->resident_owner();
  if (m == nullptr || a == 0 || a == weights_->owner()) return ResidencyManager::Pin();
  return m->pin(a);
}

Status Context::evict() {
  if (own_arena_) own_arena_->release();
  inputs_.reset();
  return ok_status();
}

Status Context::restore() {
  const InputLayout layout = InputLayout::of(opt_, model().hparams());
  KILN_ASSIGN_OR_RETURN(
      inputs_, compute_resident_.allocate({layout.total, MemoryKind::Compute, model().name() + ":inputs"}));
  if (const Status st = own_arena_ ? own_arena_->allocate() : ok_status(); !st.ok()) {
    inputs_.reset();
    return st;
  }
  return ok_status();
}

Result<DecoderPlan*> Context::step_plan(const DecoderGraphSpec& spec) {
  const DecoderPlans::Generations gen{weights_->generation(), kv_->generation()};
  if (!opt_.reuse_plans) plans_.clear();
  if (DecoderPlan* cached = plans_.find(spec, gen)) return cached;
  auto step = std::make_unique<DecoderPlan>();
  KILN_ASSIGN_OR_RETURN(
      step->io, build_decoder_graph(step->graph, model().hparams(), weights_->weights(), kv_layers_, spec));
  KILN_ASSIGN_OR_RETURN(ExecPlan plan, plan_graph(step->graph));
  step->plan.emplace(std::move(plan));
  ++graphs_built_;
  return &plans_.insert(spec, gen, std::move(step));
}

uint64_t Context::graphs_built() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return graphs_built_;
}

Result<ExecPlan> Context::plan_graph(Graph& g) {
  KILN_TRY(arena_->reserve(g));
  KILN_TRY(arena_->allocate());  // allocates only when the reservation grew
  return arena_->plan(g);
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
  if (!weights_->resident())
    return make_error("decode: the weights of '", model().name(), "' on ", weights_->device().name(),
                      " are released: rebuild them first");
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
  const auto turn = arena_->take_turn();
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
  ExecPlan& plan = *step->plan;
  const DecoderGraph& dg = step->io;
  KILN_TRY(arena_->allocate());  // after an eviction released it; the plan's offsets still hold
  KILN_TRY(backend_->prepare(plan));

  stage_pos_.assign(pos.begin(), pos.end());
  stage_cells_.resize(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) stage_cells_[static_cast<size_t>(t)] = static_cast<int32_t>(cells[static_cast<size_t>(t)]);
  stage_mask_.resize(static_cast<size_t>(spec.n_kv * T));
  kv_->fill_mask(stage_mask_, spec.n_kv, pos, seq, batch.causal);

  Device& dev = backend_->device();
  const InputLayout layout = InputLayout::of(opt_, model().hparams());
  auto bind = [&](Tensor t, DType type, int64_t ne0, int64_t ne1, size_t offset, const void* host) -> Status {
    KILN_ASSIGN_OR_RETURN(TensorView v, inputs_->view(type, {ne0, ne1, 1, 1}, offset));
    KILN_TRY(dev.upload(v, host, v.span_bytes()));
    return plan.bind(t, v);
  };
  if (spec.embeddings_input) {
    const auto width = static_cast<size_t>(hp.n_embd);
    KILN_TRY(bind(dg.input_embd, DType::F32, hp.n_embd, T, layout.embd, batch.embd.data() + begin * width));
  } else {
    stage_ids_.assign(batch.tokens.begin() + static_cast<std::ptrdiff_t>(begin),
                      batch.tokens.begin() + static_cast<std::ptrdiff_t>(end));
    KILN_TRY(bind(dg.tokens, DType::I32, T, 1, layout.ids, stage_ids_.data()));
  }
  KILN_TRY(bind(dg.positions, DType::I32, T, 1, layout.pos, stage_pos_.data()));
  KILN_TRY(bind(dg.kv_cells, DType::I32, T, 1, layout.cells, stage_cells_.data()));
  KILN_TRY(bind(dg.out_rows, DType::I32, spec.n_outputs, 1, layout.rows, stage_rows_.data()));
  KILN_TRY(bind(dg.kq_mask, DType::F32, spec.n_kv, T, layout.mask, stage_mask_.data()));
  KILN_TRY(backend_->execute(plan));
  backend_->synchronize();

  if (any_output) {
    const TensorView ov = plan.view(opt_.embeddings ? dg.embeddings : dg.logits);
    KILN_TRY(dev.download(ov, outputs_.data() + out_index * output_width(), ov.span_bytes()));
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
  const Weight& freqs = weights_->weights().rope_freqs;
  const Tensor ff = freqs ? g.external("rope_freqs", freqs.view) : Tensor{};
  Tensor last;
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const Tensor k_cache = g.external("k_cache", kv_->k(il));
    Tensor k = g.reshape(k_cache, {hp.head_dim_k, hp.n_head_kv, n_ctx, 1});
    if (kv_->type_k() != DType::F32) k = g.cast(k, DType::F32);
    k = ff.valid() ? g.rope(k, shift, ff, hp.rope_params()) : g.rope(k, shift, hp.rope_params());
    last = g.cpy_into(k, k_cache);
  }
  g.mark_output(last);
  KILN_TRY(g.status());
  KILN_ASSIGN_OR_RETURN(ExecPlan plan, plan_graph(g));
  KILN_TRY(backend_->prepare(plan));
  // The shifts go where a micro-batch's mask goes (it holds n_ctx * n_ubatch floats).
  const InputLayout layout = InputLayout::of(opt_, model().hparams());
  KILN_ASSIGN_OR_RETURN(TensorView v, inputs_->view(DType::I32, {n_ctx, 1, 1, 1}, layout.mask));
  KILN_TRY(backend_->device().upload(v, kv_->positions_shift().data(), v.span_bytes()));
  KILN_TRY(plan.bind(shift, v));
  KILN_TRY(backend_->execute(plan));
  backend_->synchronize();
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
