#include "serve/engine.h"

#include <algorithm>

#include "core/check.h"
#include "llm/kv_cache.h"

namespace kiln::serve {

Generation::Chunk Generation::next() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return done_ || !pending_.empty(); });
  Chunk c;
  c.text = std::move(pending_);
  pending_.clear();
  c.final = done_;
  return c;
}

void Generation::push(std::string text) {
  if (text.empty()) return;
  {
    std::lock_guard lock(mutex_);
    pending_ += text;
  }
  cv_.notify_all();
}

void Generation::finish(std::string reason, std::string error) {
  {
    std::lock_guard lock(mutex_);
    pending_ += stop_text_.take(/*flush=*/true);
    finish_reason_ = std::move(reason);
    error_ = std::move(error);
    done_ = true;
  }
  cv_.notify_all();
}

Engine::Engine(Context& ctx, int32_t n_slots, int32_t queue_limit)
    : ctx_(ctx), n_ctx_slot_(static_cast<int32_t>(ctx.n_ctx() / n_slots)), queue_limit_(queue_limit) {
  KILN_ASSERT(n_slots >= 1 && n_slots <= kMaxSequences, "Engine: slot count out of range");
  slots_.resize(static_cast<size_t>(n_slots));
  for (int32_t i = 0; i < n_slots; ++i) slots_[static_cast<size_t>(i)].id = i;
  ctx_.clear();
  publish();
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() { stop(); }

void Engine::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Result<std::shared_ptr<Generation>> Engine::submit(GenerationRequest request, Sampler sampler) {
  auto gen = std::make_shared<Generation>(std::move(request), std::move(sampler));
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return make_error("the server is shutting down");
    // Requests beyond the free slots wait; at most queue_limit_ of them.
    const auto n_free = std::count_if(info_.begin(), info_.end(), [](const SlotInfo& s) { return !s.processing; });
    if (static_cast<int64_t>(queue_.size()) >= queue_limit_ + n_free)
      return make_error("the server is busy: all ", info_.size(), " slots work and ", queue_limit_,
                        " requests already wait for one");
    queue_.push_back(gen);
  }
  cv_.notify_all();
  return gen;
}

std::vector<SlotInfo> Engine::slots() const {
  std::lock_guard lock(mutex_);
  return info_;
}

void Engine::publish() {
  info_.clear();
  for (const Slot& s : slots_)
    info_.push_back({s.id, s.gen != nullptr, static_cast<int32_t>(s.cache.size())});
}

void Engine::loop() {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      auto busy = [&] {
        return std::any_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.gen != nullptr; });
      };
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty() || busy(); });
      if (stopping_) break;
      // Requests cancelled while queued end here; the others take free slots in order.
      std::erase_if(queue_, [](const std::shared_ptr<Generation>& g) {
        if (!g->cancelled()) return false;
        g->finish("stop", "cancelled");
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
  std::lock_guard lock(mutex_);
  for (Slot& s : slots_)
    if (s.gen) release(s, "stop", "the server is shutting down");
  for (auto& g : queue_) g->finish("stop", "the server is shutting down");
  queue_.clear();
  publish();
}

void Engine::assign(std::shared_ptr<Generation> gen) {
  const auto& prompt = gen->request_.prompt;
  // The free slot whose cached tokens share the longest prefix with the prompt.
  Slot* best = nullptr;
  size_t best_common = 0;
  for (Slot& s : slots_) {
    if (s.gen) continue;
    const size_t n = std::min(s.cache.size(), prompt.size());
    size_t common = 0;
    while (common < n && s.cache[common] == prompt[common]) ++common;
    if (!best || common > best_common) {
      best = &s;
      best_common = common;
    }
  }
  KILN_ASSERT(best != nullptr, "Engine::assign without a free slot");
  if (!gen->request_.cache_prompt) best_common = 0;
  // At least the last prompt token is decoded again: its logits start the generation.
  best_common = std::min(best_common, prompt.size() - 1);
  ctx_.seq_rm(best->id, static_cast<int32_t>(best_common), -1);
  best->cache.resize(best_common);
  best->n_prompt_done = best_common;
  best->pending = -1;
  gen->n_cached_ = static_cast<int32_t>(best_common);
  for (int32_t t : prompt) gen->sampler_.accept(t);
  best->gen = std::move(gen);
}

void Engine::release(Slot& s, std::string reason, std::string error) {
  s.gen->finish(std::move(reason), std::move(error));
  s.gen.reset();
  s.pending = -1;
  s.batch_index = -1;
}

bool Engine::step() {
  // Cancelled generations free their slots first (their cached tokens stay for reuse).
  {
    std::lock_guard lock(mutex_);
    for (Slot& s : slots_)
      if (s.gen && s.gen->cancelled()) release(s, "stop", "cancelled");
    publish();
  }

  Batch batch;
  for (Slot& s : slots_) {
    s.batch_index = -1;
    if (!s.gen || s.pending < 0) continue;
    s.batch_index = static_cast<int64_t>(batch.size());
    batch.add(s.pending, static_cast<int32_t>(s.cache.size()), s.id, true);
  }
  // Prompt chunks: at most kPromptChunk prompt tokens a step, so streams keep flowing.
  std::vector<std::pair<Slot*, size_t>> chunks;  // slot, tokens added this step
  size_t budget = kPromptChunk;
  for (Slot& s : slots_) {
    if (!s.gen || s.pending >= 0 || budget == 0) continue;
    const auto& prompt = s.gen->request_.prompt;
    const size_t n = std::min(budget, prompt.size() - s.n_prompt_done);
    for (size_t j = 0; j < n; ++j) {
      const size_t i = s.n_prompt_done + j;
      const bool last = i + 1 == prompt.size();
      if (last) s.batch_index = static_cast<int64_t>(batch.size());
      batch.add(prompt[i], static_cast<int32_t>(i), s.id, last);
    }
    chunks.emplace_back(&s, n);
    budget -= n;
  }
  if (batch.size() == 0) return false;

  const Status st = ctx_.decode(batch);
  {
    std::lock_guard lock(mutex_);
    if (!st.ok()) {
      // Nothing of this batch can be trusted to be cached: drop those sequences entirely.
      for (Slot& s : slots_) {
        if (!s.gen) continue;
        ctx_.seq_rm(s.id, 0, -1);
        s.cache.clear();
        release(s, "stop", st.error().message);
      }
      publish();
      return true;
    }
    for (Slot& s : slots_)
      if (s.gen && s.pending >= 0 && s.batch_index >= 0) s.cache.push_back(s.pending);
    for (auto& [s, n] : chunks) {
      const auto& prompt = s->gen->request_.prompt;
      s->cache.insert(s->cache.end(), prompt.begin() + static_cast<ptrdiff_t>(s->n_prompt_done),
                      prompt.begin() + static_cast<ptrdiff_t>(s->n_prompt_done + n));
      s->n_prompt_done += n;
    }
    for (Slot& s : slots_) {
      if (!s.gen || s.batch_index < 0) continue;
      const int32_t token = s.gen->sampler_.sample(ctx_.logits(static_cast<size_t>(s.batch_index)));
      s.gen->sampler_.accept(token);
      on_token(s, token);
    }
    publish();
  }
  return true;
}

void Engine::on_token(Slot& s, int32_t token) {
  Generation& g = *s.gen;
  const auto& tok = ctx_.model().tokenizer();
  if (tok.is_eog(token)) return release(s, "stop", "");
  ++g.n_generated_;
  auto piece = tok.token_to_piece(token, false);
  if (g.stop_text_.append(piece.ok() ? *piece : std::string())) return release(s, "stop", "");
  g.push(g.stop_text_.take(false));
  if (g.request_.max_tokens >= 0 && g.n_generated_ >= g.request_.max_tokens) return release(s, "length", "");
  // The sampled token still needs a cell of this slot's share of the cache.
  if (static_cast<int32_t>(s.cache.size()) + 1 >= n_ctx_slot_) return release(s, "length", "");
  s.pending = token;
}

}  // namespace kiln::serve
