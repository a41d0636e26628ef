#include "serve/engine.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "core/check.h"
#include "llm/kv_cache.h"
#include "llm/media_prompt.h"
#include "llm/speculative/step.h"

namespace kiln::serve {
namespace {

// The nice value of a thread sampling aside (Linux: per thread), above the engine's 0.
constexpr int kAsideNice = 10;

double ms_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// The image of `images` that starts at `pos`, or null.
const PromptImage* image_at(const std::vector<PromptImage>& images, size_t pos) {
  for (const PromptImage& im : images)
    if (static_cast<size_t>(im.pos) == pos) return &im;
  return nullptr;
}

// Positions that tokens `a` (with images `ai`) and `b` (with `bi`) share from the start: tokens one
// by one, an image only whole and only when both hold the same one there.
size_t common_prefix(const std::vector<int32_t>& a, const std::vector<PromptImage>& ai,
                     const std::vector<int32_t>& b, const std::vector<PromptImage>& bi) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n) {
    if (a[i] != kMediaToken && b[i] != kMediaToken) {
      if (a[i] != b[i]) break;
      ++i;
      continue;
    }
    const PromptImage* x = image_at(ai, i);
    const PromptImage* y = image_at(bi, i);
    if (!x || !y || x->embd->id != y->embd->id || x->embd->n_tokens != y->embd->n_tokens ||
        i + static_cast<size_t>(x->embd->n_tokens) > n)
      break;
    i += static_cast<size_t>(x->embd->n_tokens);
  }
  return i;
}

}  // namespace

void EngineSignal::notify() {
  { std::lock_guard lock(mutex); }  // a waiter between its check and its wait sees the change
  cv.notify_all();
}

uint64_t Notifier::version() const {
  std::lock_guard lock(mutex_);
  return version_;
}

void Notifier::notify() {
  {
    std::lock_guard lock(mutex_);
    ++version_;
  }
  cv_.notify_all();
}

bool Notifier::wait(uint64_t seen, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return cv_.wait_for(lock, timeout, [&] { return version_ != seen; });
}

Generation::Generation(GenerationRequest request, Sampler sampler, std::shared_ptr<Notifier> notifier)
    : request_(std::move(request)),
      sampler_(std::move(sampler)),
      notifier_(notifier ? std::move(notifier) : std::make_shared<Notifier>()),
      stop_text_(request_.stop) {
  for (const auto& s : request_.stop) max_stop_ = std::max(max_stop_, s.size());
}

Generation::Chunk Generation::take() {
  Chunk c;
  bool was_paused = false;
  {
    std::lock_guard lock(mutex_);
    was_paused = pending_tokens_.size() >= kMaxUntakenTokens && !done_;
    c.text = std::move(pending_);
    pending_.clear();
    c.tokens = std::move(pending_tokens_);
    pending_tokens_.clear();
    c.final = done_;
  }
  if (was_paused && engine_) engine_->notify();
  return c;
}

void Generation::cancel() {
  cancelled_ = true;
  interrupt_ = true;
  if (engine_) engine_->notify();
}

bool Generation::ended() const {
  std::lock_guard lock(mutex_);
  return done_;
}

void Generation::apply_controls() {
  if (end_reasoning_.exchange(false)) sampler_.force_reasoning_end();
}

bool Generation::backlogged() const {
  std::lock_guard lock(mutex_);
  return pending_tokens_.size() >= kMaxUntakenTokens;
}

Generation::Chunk Generation::next() {
  for (;;) {
    const uint64_t seen = notifier_->version();
    Chunk c = take();
    if (!c.empty()) return c;
    notifier_->wait(seen, std::chrono::hours(1));
  }
}

GenerationTimings Generation::timings() const {
  std::lock_guard lock(mutex_);
  GenerationTimings t;
  t.prompt_n = n_prompt() - n_cached_;
  t.predicted_n = n_generated_;
  t.draft_n = n_drafted_;
  t.draft_n_accepted = n_draft_accepted_;
  if (has_first_) {
    t.prompt_ms = ms_between(t_start_, t_first_);
    t.predicted_ms = ms_between(t_first_, t_end_);
  } else if (done_) {
    t.prompt_ms = ms_between(t_start_, t_end_);
  }
  return t;
}

bool Generation::append(TokenOutput token) {
  const std::string& text = stop_text_.text();
  const size_t before = text.size();
  // The bytes a completed stop string can start in: the last max_stop_ of the old text, then the
  // new piece (kept to name the stop string once the text is cut).
  const size_t tail_begin = before - std::min(before, max_stop_);
  const std::string tail = max_stop_ > 0 ? text.substr(tail_begin) + token.piece : std::string();
  const size_t end = before + token.piece.size();
  const bool stopped = stop_text_.append(token.piece);
  if (stopped) {
    const size_t cut = stop_text_.text().size();
    for (const auto& s : request_.stop) {
      if (!s.empty() && cut >= tail_begin && tail.compare(cut - tail_begin, s.size(), s) == 0) {
        stopping_word_ = s;
        break;
      }
    }
  }
  held_.emplace_back(end, std::move(token));
  if (stopped) return true;
  {
    std::lock_guard lock(mutex_);
    release_text(false);
  }
  notifier_->notify();
  return false;
}

void Generation::release_text(bool flush) {
  std::string out = stop_text_.take(flush);
  released_ += out.size();
  pending_ += out;
  while (!held_.empty() && held_.front().first <= released_) {
    pending_tokens_.push_back(std::move(held_.front().second));
    held_.pop_front();
  }
  if (flush) held_.clear();  // what is left was cut by a stop string
}

void Generation::finish(StopType type, std::string error) {
  {
    std::lock_guard lock(mutex_);
    release_text(/*flush=*/true);
    stop_type_ = type;
    finish_reason_ = type == StopType::Limit ? "length" : "stop";
    error_ = std::move(error);
    t_end_ = Clock::now();
    done_ = true;
  }
  notifier_->notify();
}

int32_t n_ctx_per_slot(int64_t n_ctx, const EngineOptions& o) {
  int64_t n = o.kv_unified ? n_ctx : n_ctx / o.n_slots;
  if (o.kv_unified_per_slot > 0) n = std::min<int64_t>(n, o.kv_unified_per_slot);
  return static_cast<int32_t>(n);
}

Engine::Engine(Context& ctx, const EngineOptions& options, Speculator* speculator)
    : ctx_(ctx),
      speculator_(speculator),
      n_ctx_slot_(n_ctx_per_slot(ctx.n_ctx(), options)),
      queue_limit_(options.queue_limit) {
  const int32_t n_slots = options.n_slots;
  KILN_ASSERT(n_slots >= 1 && n_slots <= kMaxSequences, "Engine: slot count out of range");
  KILN_ASSERT(options.queue_limit >= 0, "Engine: negative queue limit");
  slots_.resize(static_cast<size_t>(n_slots));
  for (int32_t i = 0; i < n_slots; ++i) {
    Slot& s = slots_[static_cast<size_t>(i)];
    s.id = i;
    if (speculator_) s.drafter = speculator_->drafter(i);
  }
  ctx_.clear();
  metrics_.kv_size = ctx.n_ctx();
  publish();
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() { stop(); }

void Engine::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    // A token in progress stops its grammar's work (slots' generations change under mutex_ only).
    for (const Slot& s : slots_)
      if (s.gen) s.gen->interrupt_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Result<std::shared_ptr<Generation>> Engine::submit(GenerationRequest request, Sampler sampler,
                                                   std::shared_ptr<Notifier> notifier) {
  auto gen = std::make_shared<Generation>(std::move(request), std::move(sampler), std::move(notifier));
  gen->engine_ = signal_;
  if (grammar::GrammarConstraint* c = gen->sampler_.grammar()) c->set_interrupt(&gen->interrupt_);
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return make_error("the server is shutting down");
    ++metrics_.requests_total;
    // Requests beyond the free slots wait; at most queue_limit_ of them.
    const auto n_free =
        std::count_if(info_.begin(), info_.end(), [](const SlotInfo& s) { return !s.processing; });
    if (static_cast<int64_t>(queue_.size()) >= queue_limit_ + n_free) {
      ++metrics_.requests_rejected;
      return make_error("the server is busy: all ", info_.size(), " slots work and ", queue_limit_,
                        " requests already wait for one");
    }
    queue_.push_back(gen);
  }
  cv_.notify_all();
  return gen;
}

std::vector<SlotInfo> Engine::slots() const {
  std::lock_guard lock(mutex_);
  return info_;
}

EngineMetrics Engine::metrics() const {
  std::lock_guard lock(mutex_);
  EngineMetrics m = metrics_;
  m.requests_deferred = static_cast<int32_t>(queue_.size());
  for (const SlotInfo& s : info_) {
    m.requests_processing += s.processing ? 1 : 0;
    m.kv_tokens += s.n_cached;
  }
  return m;
}

void Engine::publish() {
  info_.clear();
  for (const Slot& s : slots_) {
    SlotInfo i{s.id, s.gen != nullptr, s.parked.has_value(), static_cast<int32_t>(s.cache.size()), 0, -1, 0};
    if (s.gen) {
      i.n_prompt = s.gen->n_prompt();
      i.n_predict = s.gen->request_.max_tokens;
      i.n_decoded = s.gen->n_generated();
    }
    info_.push_back(i);
  }
}

void Engine::loop() {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || has_work(); });
      if (stopping_) break;
      // Requests cancelled while queued end here; the others take free slots in order.
      std::erase_if(queue_, [](const std::shared_ptr<Generation>& g) {
        if (!g->cancelled()) return false;
        g->finish(StopType::None, "cancelled");
        return true;
      });
      while (!queue_.empty() &&
             std::any_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.gen == nullptr; })) {
        assign(std::move(queue_.front()));
        queue_.pop_front();
      }
      publish();
    }
    step();
  }
  for (Slot& s : slots_)  // stop() raised their interrupt flags
    if (s.aside.result.valid()) take_aside(s);
  std::lock_guard lock(mutex_);
  for (Slot& s : slots_) {
    if (!s.gen) continue;
    s.gen->shut_down_ = true;
    release(s, StopType::None, "the server is shutting down");
  }
  for (auto& g : queue_) {
    g->shut_down_ = true;
    g->finish(StopType::None, "the server is shutting down");
  }
  queue_.clear();
  publish();
}

bool Engine::has_work() const {
  const bool free_slot =
      std::any_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.gen == nullptr; });
  for (const auto& g : queue_)
    if (free_slot || g->cancelled()) return true;
  // The earliest parked generation resumes when the pool has room for it (make_room()).
  if (const int i = earliest_parked(); i >= 0 && can_resume(slots_[static_cast<size_t>(i)])) return true;
  // A slot works unless its generation is paused for its client (and not cancelled), its token
  // is being sampled aside, or it is parked (until cancelled).
  return std::any_of(slots_.begin(), slots_.end(), [](const Slot& s) {
    if (s.aside.result.valid()) return s.aside.ready() || s.gen->cancelled();
    if (s.parked) return s.gen->cancelled();
    return s.gen && (s.pending < 0 || s.gen->cancelled() || !s.gen->backlogged());
  });
}

void Engine::assign(std::shared_ptr<Generation> gen) {
  const auto& prompt = gen->request_.prompt;
  // The free slot whose cached tokens share the longest prefix with the prompt.
  Slot* best = nullptr;
  size_t best_common = 0;
  const auto& images = gen->request_.images;
  for (Slot& s : slots_) {
    if (s.gen) continue;
    const size_t common = common_prefix(s.cache, s.images, prompt, images);
    if (!best || common > best_common) {
      best = &s;
      best_common = common;
    }
  }
  KILN_ASSERT(best != nullptr, "Engine::assign without a free slot");
  if (!gen->request_.cache_prompt) best_common = 0;
  // At least the last prompt token is decoded again: its logits start the generation.
  // An image is decoded whole: a prefix never ends inside one.
  best_common = std::min(best_common, prompt.size() - 1);
  for (const PromptImage& im : images)
    if (static_cast<size_t>(im.pos) < best_common &&
        best_common < static_cast<size_t>(im.pos + im.embd->n_tokens))
      best_common = static_cast<size_t>(im.pos);
  ctx_.seq_rm(best->id, static_cast<int32_t>(best_common), -1);
  best->cache.resize(best_common);
  std::erase_if(best->images,
                [&](const PromptImage& im) { return static_cast<size_t>(im.pos) >= best_common; });
  best->n_prompt_done = best_common;
  best->pending = -1;
  best->drafter_begun = false;
  best->admitted = ++n_admitted_;
  // The draft model and the n-gram sources read token ids: a prompt with images does not draft.
  gen->speculative_ = speculator_ != nullptr && images.empty();
  gen->n_cached_ = static_cast<int32_t>(best_common);
  gen->t_start_ = Generation::Clock::now();
  for (int32_t t : prompt)
    if (t != kMediaToken) gen->sampler_.accept_prompt(t);
  best->gen = std::move(gen);
}

void Engine::release(Slot& s, StopType type, std::string error) {
  KILN_ASSERT(!s.aside.result.valid(), "Engine::release: a token is sampled aside");
  Generation& g = *s.gen;
  g.finish(type, std::move(error));
  metrics_.predicted_tokens += static_cast<uint64_t>(g.n_generated());
  if (g.has_first_) metrics_.predicted_seconds += ms_between(g.t_first_, g.t_end_) / 1e3;
  s.gen.reset();
  s.pending = -1;
  s.batch_index = -1;
  s.last_used = ++n_released_;
  if (s.parked) {  // its cells were out of the cache: nothing of it stays cached
    s.parked.reset();
    s.cache.clear();
    s.images.clear();
  }
}

int64_t Engine::free_cells() const { return ctx_.kv().free_cells(); }

int64_t Engine::idle_cells() const {
  uint64_t idle = 0;
  for (const Slot& s : slots_)
    if (!s.gen) idle |= uint64_t{1} << s.id;
  return ctx_.kv().cells_held_only_by(idle);
}

int64_t Engine::cells_to_grow(const Slot& s, int32_t next_pos, int64_t n) const {
  return ctx_.kv().cells_to_grow(s.id, next_pos, n);
}

int64_t Engine::least_demand(const Slot* also) const {
  auto runs = [&](const Slot& s) { return s.gen && (!s.parked || &s == also) && !s.aside.result.valid(); };
  // A prompt that reached an image decodes it whole, alone in its step (add_image takes the first).
  for (const Slot& s : slots_) {
    if (!runs(s) || s.pending >= 0) continue;
    const auto& prompt = s.gen->request_.prompt;
    if (s.n_prompt_done < prompt.size() && prompt[s.n_prompt_done] == kMediaToken)
      return cells_to_grow(s, static_cast<int32_t>(s.n_prompt_done),
                           image_at(s.gen->request_.images, s.n_prompt_done)->embd->n_tokens);
  }
  // Room for one token per generating slot, and for the first reading slot's next chunk whole (a
  // prompt's chunks are then cut as they would be with room: the same batches, the same bits),
  // in the cells of the blocks they take.
  int64_t n = 0;
  bool chunk = false;
  for (const Slot& s : slots_) {
    if (!runs(s)) continue;
    if (s.pending >= 0) {
      n += s.gen->backlogged() ? 0 : cells_to_grow(s, static_cast<int32_t>(s.cache.size()), 1);
    } else if (!chunk) {
      chunk = true;
      n += cells_to_grow(s, static_cast<int32_t>(s.n_prompt_done), static_cast<int64_t>(text_run(s, kPromptChunk)));
    }
  }
  return n;
}

size_t Engine::text_run(const Slot& s, size_t limit) const {
  const auto& prompt = s.gen->request_.prompt;
  const size_t n = std::min(limit, prompt.size() - s.n_prompt_done);
  for (size_t j = 0; j < n; ++j)
    if (prompt[s.n_prompt_done + j] == kMediaToken) return j;
  return n;
}

bool Engine::can_resume(const Slot& s) const {
  const bool others_run =
      std::any_of(slots_.begin(), slots_.end(), [](const Slot& o) { return o.gen && !o.parked; });
  const int64_t need =
      KvCache::cells_for_positions(s.parked->positions) + least_demand(&s) + (others_run ? kResumeHeadroom : 0);
  return free_cells() + idle_cells() >= need;
}

void Engine::forget_draft_cells(Slot& s) {
  if (!s.drafter) return;
  s.drafter = speculator_->drafter(s.id);
  s.drafter_begun = false;
}

void Engine::clear_idle_cache(Slot& s) {
  ctx_.seq_rm(s.id, 0, -1);
  s.cache.clear();
  s.images.clear();
  forget_draft_cells(s);
  std::lock_guard lock(mutex_);
  ++metrics_.idle_caches_cleared;
}

void Engine::park(Slot& s) {
  auto cells = ctx_.copy_sequence_cells(s.id);
  if (!cells.ok()) {
    ctx_.seq_rm(s.id, 0, -1);
    s.cache.clear();
    s.images.clear();
    std::lock_guard lock(mutex_);
    return release(s, StopType::None,
                   "parking the generation for room in the KV cache: " + cells.error().message);
  }
  ctx_.seq_rm(s.id, 0, -1);
  s.parked = std::move(*cells);
  forget_draft_cells(s);
  std::lock_guard lock(mutex_);
  ++metrics_.generations_parked;
}

void Engine::resume(Slot& s) {
  const Status st = ctx_.put_sequence_cells(s.id, *s.parked);
  s.parked.reset();
  if (st.ok()) return;
  ctx_.seq_rm(s.id, 0, -1);
  s.cache.clear();
  s.images.clear();
  std::lock_guard lock(mutex_);
  release(s, StopType::None, "resuming the generation: " + st.error().message);
}

int Engine::earliest_parked() const {
  int first = -1;
  for (size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].parked && (first < 0 || slots_[i].admitted < slots_[static_cast<size_t>(first)].admitted))
      first = static_cast<int>(i);
  return first;
}

void Engine::make_room() {
  // The slot whose cached prompt was used least recently among the idle ones that hold cells.
  auto lru_idle = [&]() -> Slot* {
    Slot* best = nullptr;
    for (Slot& s : slots_)
      if (!s.gen && !s.cache.empty() && (!best || s.last_used < best->last_used)) best = &s;
    return best;
  };
  // The earliest parked generation comes back when it fits; one a step, so that prompts resumed
  // together do not share a batch they would not have shared with room.
  if (const int i = earliest_parked(); i >= 0 && can_resume(slots_[static_cast<size_t>(i)])) {
    Slot& next = slots_[static_cast<size_t>(i)];
    const int64_t need = KvCache::cells_for_positions(next.parked->positions) + least_demand(&next);
    for (Slot* idle = lru_idle(); idle && free_cells() < need; idle = lru_idle()) clear_idle_cache(*idle);
    resume(next);
  }
  // The step's least progress must fit: idle caches go first, then the latest admitted
  // generations are parked, as long as another one runs.
  while (free_cells() < least_demand(nullptr)) {
    if (Slot* idle = lru_idle()) {
      clear_idle_cache(*idle);
      continue;
    }
    Slot* latest = nullptr;
    int running = 0;
    for (Slot& s : slots_) {
      if (!s.gen || s.parked) continue;
      ++running;
      if (!s.aside.result.valid() && (!latest || s.admitted > latest->admitted)) latest = &s;
    }
    if (!latest || running < 2) break;
    park(*latest);
  }
  std::lock_guard lock(mutex_);
  publish();
}

bool Engine::step() {
  // Tokens sampled aside since the last step are handed over; cancelled generations free their
  // slots (their cached tokens stay for reuse) once their sampling aside stopped.
  {
    std::vector<Sampled> ready;
    for (Slot& s : slots_)
      if (s.aside.result.valid() && (s.aside.ready() || s.gen->cancelled())) ready.push_back(take_aside(s));
    std::lock_guard lock(mutex_);
    const auto now = Generation::Clock::now();
    for (Sampled& x : ready)
      if (!x.slot->gen->cancelled()) hand_over(x, now);
    for (Slot& s : slots_)
      if (s.gen && s.gen->cancelled()) release(s, StopType::None, "cancelled");
    publish();
  }
  make_room();

  for (Slot& s : slots_) {
    s.batch_index = -1;
    s.draft.clear();
  }
  Batch batch;
  // An image that a slot's prompt has reached is decoded alone (a batch holds token ids or
  // embeddings): the generating slots wait one step, as in llama-server.
  if (Slot* image_slot = add_image(batch)) {
    decode_rows(batch, {{image_slot, batch.size()}}, false);
    return true;
  }
  std::vector<Slot*> generating;
  for (Slot& s : slots_)
    if (s.gen && !s.parked && s.pending >= 0 && !s.gen->backlogged()) generating.push_back(&s);  // else waits
  std::vector<std::pair<Slot*, std::string>> failed;
  // Drafts take the cells left after the step's least progress (the prompt chunk keeps its room).
  draft(generating, free_cells() - least_demand(nullptr), failed);
  if (!failed.empty()) {
    std::lock_guard lock(mutex_);
    for (auto& [s, message] : failed) {
      std::erase(generating, s);
      release(*s, StopType::None, "draft model: " + message);
    }
    publish();
  }
  // The sampled token of each generating slot, then its draft.
  for (Slot* s : generating) {
    s->batch_index = static_cast<int64_t>(batch.size());
    add_verification_rows(batch, s->id, static_cast<int32_t>(s->cache.size()), s->pending, s->draft);
  }
  // These rows decode in single-row order, each as it would alone, so a slot's text depends
  // neither on its drafts nor on the other slots.
  bool worked = false;
  if (batch.size() > 0) {
    decode_rows(batch, {}, true);
    worked = true;
  }
  return decode_prompt_chunks() || worked;
}

bool Engine::decode_prompt_chunks() {
  size_t rows = 0;
  for (Slot& s : slots_) {
    if (!s.gen || s.parked || s.pending >= 0 || s.aside.result.valid()) continue;
    const size_t n = text_run(s, kPromptChunk);
    if (n == 0) continue;  // an image comes first: add_image() takes it in a later step
    if (rows > 0 && rows + n > kPromptChunk) break;
    if (cells_to_grow(s, static_cast<int32_t>(s.n_prompt_done), static_cast<int64_t>(n)) > free_cells()) break;
    const auto& prompt = s.gen->request_.prompt;
    Batch batch;
    for (size_t j = 0; j < n; ++j) {
      const size_t i = s.n_prompt_done + j;
      const bool last = i + 1 == prompt.size();
      if (last) s.batch_index = static_cast<int64_t>(batch.size());
      batch.add(prompt[i], static_cast<int32_t>(i), s.id, last);
    }
    decode_rows(batch, {{&s, n}}, false);
    rows += n;
  }
  return rows > 0;
}

void Engine::decode_rows(const Batch& batch, const std::vector<std::pair<Slot*, size_t>>& chunks,
                         bool single_row_order) {
  const Status st = ctx_.decode(batch, {.single_row_order = single_row_order});
  if (!st.ok()) {
    for (Slot& s : slots_) {  // their tokens follow cells dropped now (joined without the lock: they notify)
      if (!s.aside.result.valid()) continue;
      s.gen->interrupt_ = true;
      take_aside(s);
    }
    std::lock_guard lock(mutex_);
    // Nothing of this batch can be trusted to be cached: drop those sequences entirely.
    for (Slot& s : slots_) {
      if (!s.gen) continue;
      ctx_.seq_rm(s.id, 0, -1);
      s.cache.clear();
      release(s, StopType::None, st.error().message);
    }
    publish();
    return;
  }
  // The slots' own state (engine thread only): no lock.
  for (auto& [s, n] : chunks) {
    const auto& prompt = s->gen->request_.prompt;
    s->cache.insert(s->cache.end(), prompt.begin() + static_cast<ptrdiff_t>(s->n_prompt_done),
                    prompt.begin() + static_cast<ptrdiff_t>(s->n_prompt_done + n));
    if (const PromptImage* im = image_at(s->gen->request_.images, s->n_prompt_done)) s->images.push_back(*im);
    s->n_prompt_done += n;
  }
  // Sampling holds no lock: a grammar's work for a token (bounded by its WorkBudget, stopped by
  // a cancel) must not hold up submit(), slots() and the clients taking their text.
  const auto now = Generation::Clock::now();
  std::vector<Sampled> sampled;
  std::vector<Slot*> aside;
  for (Slot& s : slots_) {
    if (!s.gen || s.batch_index < 0) continue;
    const auto row = static_cast<size_t>(std::exchange(s.batch_index, -1));  // not again by a later batch
    if (samples_aside(s)) {
      sample_aside(s, row);
      aside.push_back(&s);
    } else {
      sampled.push_back(sample_rows(s, row));
    }
  }
  // The tokens started aside now that are ready within kAsideWait are handed over with the others.
  const auto deadline = Generation::Clock::now() + kAsideWait;
  for (Slot* s : aside)
    if (s->aside.result.wait_until(deadline) == std::future_status::ready) sampled.push_back(take_aside(*s));
  std::lock_guard lock(mutex_);
  ++metrics_.n_decode;
  metrics_.n_busy_slots += static_cast<uint64_t>(
      std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) { return s.gen != nullptr; }));
  for (Sampled& x : sampled) hand_over(x, now);
  publish();
}

bool Engine::samples_aside(const Slot& s) const {
  const Generation& g = *s.gen;
  const grammar::GrammarConstraint* c = g.sampler_.grammar();
  return c != nullptr && !c->awaiting_trigger() && !g.speculative_ && g.request_.max_tokens != 0;
}

void Engine::sample_aside(Slot& s, size_t row) {
  Sampled x;
  x.slot = &s;
  x.row = row;
  x.first = !s.gen->has_first_;
  if (s.pending >= 0) {  // decoded now: in the cells
    x.pos = static_cast<int32_t>(s.cache.size());
    s.cache.push_back(std::exchange(s.pending, -1));
  }
  const auto logits = ctx_.logits(row);
  x.logits.assign(logits.begin(), logits.end());
  std::promise<Sampled> promise;
  s.aside.result = promise.get_future();
  // The thread owns what it touches: the generation (its sampler, used by no one else meanwhile),
  // the copied logits and the engine's signal, which wakes the loop once the result is set. It
  // runs below the decoding threads' priority: where the cores are fewer than the threads, a
  // costly grammar takes its time from idle cores, not from the other requests' passes.
  s.aside.thread =
      std::thread([gen = s.gen, signal = signal_, x = std::move(x), promise = std::move(promise)]() mutable {
        setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), kAsideNice);
        gen->apply_controls();
        const int32_t token = gen->sampler_.sample(x.logits);
        gen->sampler_.accept(token);
        x.verdict.tokens.push_back(token);
        promise.set_value(std::move(x));
        signal->notify();
      });
}

Engine::Sampled Engine::take_aside(Slot& s) {
  Sampled x = s.aside.result.get();
  s.aside.thread.join();
  s.aside = Aside{};
  return x;
}

Engine::Sampled Engine::sample_rows(Slot& s, size_t row) {
  Generation& g = *s.gen;
  Sampled x;
  x.slot = &s;
  x.row = row;
  if (s.pending >= 0) {  // the sampled token and its draft were verified
    x.pos = static_cast<int32_t>(s.cache.size());
    s.cache.push_back(s.pending);
    g.apply_controls();
    x.verdict = conclude_verification(ctx_, s.id, x.pos, row, s.draft, g.sampler_,
                                      g.speculative_ ? s.drafter.get() : nullptr);
    // The accepted draft tokens stay in the cells; the last token is the new pending one.
    s.cache.insert(s.cache.end(), x.verdict.tokens.begin(), x.verdict.tokens.end() - 1);
    return x;
  }
  x.first = !g.has_first_;  // the prompt is done: its logits are here
  if (g.request_.max_tokens == 0) return x;
  g.apply_controls();
  const int32_t token = g.sampler_.sample(ctx_.logits(row));
  g.sampler_.accept(token);
  x.verdict.tokens.push_back(token);
  return x;
}

void Engine::hand_over(Sampled& x, Generation::Clock::time_point now) {
  Slot& s = *x.slot;
  Generation& g = *s.gen;
  if (x.first) {
    g.has_first_ = true;
    g.t_first_ = now;
    metrics_.prompt_tokens += static_cast<uint64_t>(g.n_prompt() - g.n_cached());
    metrics_.prompt_seconds += ms_between(g.t_start_, now) / 1e3;
  }
  if (x.verdict.tokens.empty()) return release(s, StopType::Limit, "");  // max_tokens 0: the prompt is cached
  // A grammar that ran out of work is the request's fault; one interrupted was cancelled (the
  // next step frees the slot) or stopped with the engine.
  if (const grammar::GrammarConstraint* c = g.sampler_.grammar(); c != nullptr && c->failed()) {
    if (c->interrupted()) return;
    g.request_error_ = true;
    return release(s, StopType::None, c->failure());
  }
  auto logits = [&](size_t i) {
    return x.logits.empty() ? ctx_.logits(x.row + i) : std::span<const float>(x.logits);
  };
  if (x.pos < 0) return on_token(s, x.verdict.tokens[0], logits(0), s.cache.size());
  if (!s.draft.empty()) {
    g.n_drafted_ += static_cast<int32_t>(s.draft.size());
    g.n_draft_accepted_ += x.verdict.n_accepted();
    metrics_.draft_tokens += s.draft.size();
    metrics_.draft_accepted += static_cast<uint64_t>(x.verdict.n_accepted());
    ++metrics_.drafts;
  }
  // Token i follows pos + 1 + i tokens, as it would without speculation.
  for (size_t i = 0; i < x.verdict.tokens.size() && s.gen; ++i)
    on_token(s, x.verdict.tokens[i], logits(i), static_cast<size_t>(x.pos) + 1 + i);
}

Engine::Slot* Engine::add_image(Batch& batch) {
  for (Slot& s : slots_) {
    if (!s.gen || s.parked || s.pending >= 0 || s.aside.result.valid()) continue;
    const auto& prompt = s.gen->request_.prompt;
    if (s.n_prompt_done >= prompt.size() || prompt[s.n_prompt_done] != kMediaToken) continue;
    const PromptImage* im = image_at(s.gen->request_.images, s.n_prompt_done);
    KILN_ASSERT(im != nullptr, "Engine: a media position without its image");
    const ImageEmbeddings& e = *im->embd;
    if (cells_to_grow(s, static_cast<int32_t>(s.n_prompt_done), e.n_tokens) > free_cells())
      return nullptr;  // make_room() could not fit it this step
    batch.causal = !e.non_causal;
    for (int64_t t = 0; t < e.n_tokens; ++t) {
      const size_t i = s.n_prompt_done + static_cast<size_t>(t);
      const bool last = i + 1 == prompt.size();
      if (last) s.batch_index = static_cast<int64_t>(batch.size());
      batch.add_embedding(e.row(t), static_cast<int32_t>(i), s.id, last);
    }
    return &s;
  }
  return nullptr;
}

void Engine::draft(const std::vector<Slot*>& generating, int64_t spare,
                   std::vector<std::pair<Slot*, std::string>>& failed) {
  if (!speculator_ || generating.empty()) return;
  // Every generating slot's rows fit one decode() call.
  const int64_t rows_per_slot = ctx_.n_batch() / static_cast<int64_t>(generating.size());
  for (Slot* s : generating) {
    Generation& g = *s->gen;
    if (!g.speculative_) continue;
    if (!s->drafter_begun) {
      // ref: llama.cpp's server read the request's speculative.n_min/n_max/p_min and kept
      // n_min <= n_max.
      DraftModelLimits& l = s->drafter->limits;
      l = speculator_->options().draft;
      l.n_max = g.request_.draft_n_max.value_or(l.n_max);
      l.n_min = std::min(g.request_.draft_n_min.value_or(l.n_min), l.n_max);
      l.p_min = g.request_.draft_p_min.value_or(l.p_min);
      s->drafter_begun = true;
      if (const Status st = s->drafter->begin(s->cache); !st.ok()) {
        s->drafter = speculator_->drafter(s->id);  // forget what the failed decode left
        failed.emplace_back(s, st.error().message);
        continue;
      }
    }
    // The sampled token goes to cell position `pos`; its draft follows it.
    const auto pos = static_cast<int32_t>(s->cache.size());
    const int64_t own = cells_to_grow(*s, pos, 1);  // counted in the step's least demand
    const int64_t budget =
        std::min<int64_t>({n_draft_budget(n_ctx_slot_, static_cast<int64_t>(s->cache.size()),
                                          g.request_.max_tokens, g.n_generated_),
                           rows_per_slot - 1, ctx_.kv().tokens_within(s->id, pos, own + spare) - 1});
    auto d = s->drafter->propose(s->cache, s->pending, static_cast<int32_t>(budget));
    if (!d.ok()) {
      s->drafter = speculator_->drafter(s->id);
      failed.emplace_back(s, d.error().message);
      continue;
    }
    s->draft = std::move(*d);
    spare -= cells_to_grow(*s, pos, 1 + static_cast<int64_t>(s->draft.size())) - own;
  }
}

void Engine::on_token(Slot& s, int32_t token, std::span<const float> logits, size_t n_before) {
  Generation& g = *s.gen;
  const auto& tok = ctx_.model().tokenizer();
  if (tok.is_eog(token)) return release(s, StopType::Eos, "");
  ++g.n_generated_;
  const auto& preserved = g.request_.preserved_tokens;
  auto piece_of = [&](int32_t id) {
    auto p = tok.token_to_piece(id, std::find(preserved.begin(), preserved.end(), id) != preserved.end());
    return p.ok() ? std::move(*p) : std::string();
  };
  TokenOutput out;
  out.id = token;
  out.piece = piece_of(token);
  if (g.request_.logprobs) {
    PositionLogprobs lp = position_logprobs(logits, token, g.request_.top_logprobs);
    out.logprob = lp.chosen;
    for (const TokenLogprob& t : lp.top) out.top_pieces.push_back(piece_of(t.id));
    out.top = std::move(lp.top);
  }
  if (g.append(std::move(out))) return release(s, StopType::Word, "");
  if (g.request_.max_tokens >= 0 && g.n_generated_ >= g.request_.max_tokens)
    return release(s, StopType::Limit, "");
  // The sampled token still needs a cell of this slot's share of the cache.
  if (static_cast<int64_t>(n_before) + 1 >= n_ctx_slot_) return release(s, StopType::Limit, "");
  s.pending = token;
}

}  // namespace kiln::serve
