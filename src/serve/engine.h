// Engine: the server's generation loop. One thread owns the Context; it serves N slots (each one
// sequence id of the shared KV cache) with continuous batching: every step decodes, in one Batch,
// the last sampled token of each generating slot, in single-row order (DecodeOptions: each row
// computes as it would alone), then at most kPromptChunk pending prompt tokens, each slot's chunk
// in a batch of its own and cut as the request alone would cut it; then samples every slot that
// produced logits. With the KV cache's aligned blocks (llm/kv_cache.h) a request's tokens and
// logits are thus those of the request alone, whatever else the server runs (batch invariance). Each slot keeps the tokens it has cached;
// a new request reuses the longest common prefix (unless it asks cache_prompt false). Requests
// beyond the slots wait in a bounded queue.
//
// Images: a prompt may hold images' embeddings (GenerationRequest::images, encoded by the client
// thread before submit). A step that reaches an image decodes it alone, as one batch of embeddings
// (non-causal when the projector wants it), so text chunks stop before images. A cached image is
// reused only whole and only when the new prompt holds the same image (content id) at the same
// position.
//
// Output: a Generation hands its client thread text and the tokens behind it (id, piece and, when
// asked, log-probabilities from the raw logits). Text that may begin a stop string is held back
// (StopText); a token is handed over once all of its text has been released, and a token whose
// text a stop string cut is never reported. The engine keeps llama-server's counters (metrics()).
//
// Speculative decoding (with a Speculator): every generating slot drafts (its SequenceDrafter,
// sequence = slot id) and all slots' verification rows (sampled token + draft) go into the step's
// batch of generation rows, whose single-row order makes each row's logits those of plain
// decoding: the output equals the output without speculation. A generation with images never
// drafts.
//
// One KV pool (EngineOptions::kv_unified, llama-server's -kvu): every slot may grow to
// n_ctx_slot() cells of the shared cache, so the slots together may ask for more cells than it
// has. Before each step the engine makes room for the step's least progress (one cell per
// generating slot and the next prompt chunk whole, or the whole image a prompt has reached).
// First it clears idle slots' cached prompts, least recently used first. Then it parks the most
// recently admitted running generation (often a request that just arrived, before its prompt
// took a cell): its cells are copied to host memory (Context::copy_sequence_cells: milliseconds,
// where recomputing them would take a prompt's time) and dropped from the cache, and it waits,
// keeping its slot, its sampler and its pending token. Parked generations resume one per step,
// earliest admitted first, when the pool has room for their cells, the step's needs and
// kResumeHeadroom more (no headroom when nothing else runs). The cells come back bit for bit, in
// whatever free blocks there are, each at its offset (KvCache::place), so the generation goes on
// as if it had never been parked. Room is counted in the cache's blocks (free_cells()).
// Drafts take only the cells left after the step's least progress. A request never fails for
// want of room: one running generation always fits (a slot stops at n_ctx_slot() <= the pool).
//
// Backpressure: a generation whose client has not taken kMaxUntakenTokens of its tokens is
// paused (its slot keeps its place; the others go on) until the client takes them or cancels it.
// A client that stops reading thus holds a bounded amount of output, never a whole stream.
//
// Grammars: a generation under a grammar (one that does not draft) samples each token on a
// thread of its own, from a copy of its logits; the engine waits kAsideWait for it (a cheap
// grammar's token joins the next step as if sampled inline), then steps the other slots while it
// works: a costly token never holds up other requests. Sampling, here or inline, holds no engine
// lock, so submit(), slots() and a client taking its text never wait for it. A grammar's work
// per token is bounded (grammar::WorkBudget); one that runs out ends its generation with the
// budget's message (Generation::request_error()). Cancelling a generation, or stopping the
// engine, interrupts its grammar's work in progress.
//
// Thread-safety: submit(), slots(), metrics() and stop() may be called from any thread; a
// Generation is read by one client thread while the engine thread writes it. A Notifier may be
// shared by several generations so that one client thread waits for any of them.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "llm/context.h"
#include "llm/reasoning_budget.h"
#include "llm/sampler.h"
#include "llm/speculative/speculator.h"
#include "llm/speculative/verify.h"
#include "llm/vision_encoder.h"
#include "serve/stop_text.h"
#include "serve/token_probs.h"
#include "text/grammar/grammar_constraint.h"

namespace kiln::serve {

// Prompt tokens one step decodes at most (over all slots): a long prompt is processed in chunks
// between the token steps of the streams already running. A prompt's chunks are this long (the
// last shorter), as `kiln run`'s micro-batches are with the default n_ubatch.
inline constexpr size_t kPromptChunk = 512;
// Tokens a generation may hold for its client before the engine pauses it (see above).
inline constexpr size_t kMaxUntakenTokens = 64;
// Free cells beyond its own cells and the step's needs that a parked generation waits for while
// others run, so that it is not parked again a few steps later.
inline constexpr int64_t kResumeHeadroom = 64;
// How long a step waits for the tokens sampled aside (grammars) before it goes on without them.
inline constexpr std::chrono::milliseconds kAsideWait{20};

// Wakes the engine thread from client threads (output taken, a generation cancelled). Shared by
// the engine and its generations, which may outlive it.
struct EngineSignal {
  std::mutex mutex;
  std::condition_variable cv;
  void notify();
};

// An image of a prompt: its embedding rows fill prompt positions [pos, pos + embd->n_tokens),
// which hold kMediaToken (llm/media_prompt.h).
struct PromptImage {
  int32_t pos = 0;
  std::shared_ptr<const ImageEmbeddings> embd;
};

struct GenerationRequest {
  std::vector<int32_t> prompt;  // non-empty; shorter than the slot context
  // The images in `prompt`, by position; each fits one micro-batch of the context (the caller
  // checks). The prompt does not end inside an image unless the image ends it.
  std::vector<PromptImage> images;
  SamplerParams sampler;
  int32_t max_tokens = -1;  // < 0: until end of text or the slot's context is full; 0: the
                            // prompt is only cached (llama-server's n_predict 0)
  std::vector<std::string> stop;
  bool cache_prompt = true;
  bool logprobs = false;     // compute each token's log-probability
  int32_t top_logprobs = 0;  // and the most likely alternatives (>= 0; needs logprobs)
  // The grammar the output must follow (GBNF, from a request's grammar, JSON schema or tools);
  // each choice gets its own constraint (ChoiceSet::submit).
  std::optional<grammar::GrammarSpec> grammar;
  // Control tokens whose text the output keeps (tool-call markers the chat parser reads:
  // llama.cpp's preserved_tokens); other control tokens print as nothing.
  std::vector<int32_t> preserved_tokens;
  // Caps the tokens of reasoning blocks (--reasoning-budget, reasoning_budget_tokens); each choice
  // gets its own (ChoiceSet::submit).
  std::optional<ReasoningBudgetSpec> reasoning_budget;
  // Draft-model limits of this request (the flat keys speculative.n_max, .n_min, .p_min); unset:
  // the server's (--spec-draft-n-max, ...).
  std::optional<int32_t> draft_n_max, draft_n_min;
  std::optional<float> draft_p_min;
};

// Why a generation ended (llama-server's stop_type).
enum class StopType : uint8_t { None, Eos, Limit, Word };  // None: cancelled or failed

// One generated token as a client sees it.
struct TokenOutput {
  int32_t id = -1;
  std::string piece;                    // its text (may be part of a UTF-8 character)
  float logprob = 0.0f;                 // valid when the request asked logprobs
  std::vector<TokenLogprob> top;        // request.top_logprobs alternatives, logprob descending
  std::vector<std::string> top_pieces;  // the texts of `top`
};

// Wakes a client thread waiting for the output of one or more generations.
class Notifier {
 public:
  uint64_t version() const;
  void notify();
  // Waits until version() != seen or `timeout` passed; true when it changed.
  bool wait(uint64_t seen, std::chrono::milliseconds timeout);

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  uint64_t version_ = 0;
};

// Time spent on one generation (llama-server's `timings`).
struct GenerationTimings {
  int32_t prompt_n = 0;  // prompt tokens decoded (the cached ones are not)
  double prompt_ms = 0;  // from taking a slot to the first sampled token
  int32_t predicted_n = 0;
  double predicted_ms = 0;  // from the first sampled token to the end
  int32_t draft_n = 0;           // speculative decoding: tokens drafted
  int32_t draft_n_accepted = 0;  // and accepted by the target
};

// One request's output, handed from the engine thread to a client thread.
class Generation {
 public:
  struct Chunk {
    std::string text;
    std::vector<TokenOutput> tokens;
    bool final = false;  // the generation ended and everything was taken; the getters are set
    bool empty() const { return text.empty() && tokens.empty() && !final; }
  };
  Generation(GenerationRequest request, Sampler sampler, std::shared_ptr<Notifier> notifier = nullptr);

  // What is ready now (possibly nothing); never blocks. After the final chunk, returns final
  // chunks with no text.
  Chunk take();
  // Blocks until text, tokens or the end are available.
  Chunk next();
  // Asks the engine to stop this generation and free its slot (no effect once it ended).
  // May lock the engine's mutex briefly; any thread.
  void cancel();
  bool cancelled() const { return cancelled_; }
  // Asks the engine to end the reasoning block being counted before it samples this generation's
  // next token (llama-server's reasoning_control; needs request.reasoning_budget). Any thread.
  void end_reasoning() { end_reasoning_ = true; }
  // The generation ended (its last chunk may still be untaken). Any thread.
  bool ended() const;

  // Valid after the final chunk.
  const std::string& finish_reason() const { return finish_reason_; }  // "stop" or "length"
  StopType stop_type() const { return stop_type_; }
  const std::string& stopping_word() const { return stopping_word_; }  // the stop string that matched
  const std::string& error() const { return error_; }                  // non-empty: it failed
  bool shut_down() const { return shut_down_; }                        // it failed because the engine stopped
  bool request_error() const {
    return request_error_;
  }  // it failed for the request's own fault (its grammar's cost)
  GenerationTimings timings() const;
  int32_t n_prompt() const { return static_cast<int32_t>(request_.prompt.size()); }
  int32_t n_cached() const { return n_cached_; }
  int32_t n_generated() const { return n_generated_; }

 private:
  friend class Engine;
  using Clock = std::chrono::steady_clock;
  // Engine thread: a sampled token and its text (the text may complete a stop string: true).
  bool append(TokenOutput token);
  void release_text(bool flush);  // under mutex_: moves released text and tokens to pending
  void finish(StopType type, std::string error);
  bool backlogged() const;  // the client holds back kMaxUntakenTokens or more
  void apply_controls();    // engine thread, before sampling: what end_reasoning() asked

  GenerationRequest request_;
  Sampler sampler_;
  std::shared_ptr<Notifier> notifier_;
  std::shared_ptr<EngineSignal> engine_;  // set by Engine::submit
  // Engine thread only.
  StopText stop_text_;
  size_t max_stop_ = 0;
  size_t released_ = 0;                              // bytes of stop_text_.text() handed over
  std::deque<std::pair<size_t, TokenOutput>> held_;  // tokens by the end offset of their text
  Clock::time_point t_start_, t_first_, t_end_;
  bool has_first_ = false;

  std::atomic<bool> cancelled_{false};
  // Stops the grammar's work in progress (GrammarConstraint::set_interrupt): raised by cancel()
  // and Engine::stop().
  std::atomic<bool> interrupt_{false};
  std::atomic<bool> end_reasoning_{false};  // end_reasoning() asked, not yet applied
  mutable std::mutex mutex_;
  std::string pending_;
  std::vector<TokenOutput> pending_tokens_;
  bool done_ = false;
  bool shut_down_ = false;
  bool request_error_ = false;
  std::string finish_reason_, stopping_word_, error_;
  StopType stop_type_ = StopType::None;
  std::atomic<int32_t> n_cached_{0}, n_generated_{0};
  std::atomic<int32_t> n_drafted_{0}, n_draft_accepted_{0};
  bool speculative_ = false;  // engine thread: this generation drafts
};

struct SlotInfo {
  int32_t id = 0;
  bool processing = false;
  bool parked = false;     // its generation waits for room in the pool (its cells in host memory)
  int32_t n_cached = 0;    // tokens of this slot in the KV cache
  int32_t n_prompt = 0;    // the running request's prompt tokens (0 when idle)
  int32_t n_predict = -1;  // its max_tokens (-1: no limit)
  int32_t n_decoded = 0;   // tokens it generated so far
};

// Counters since the engine started (llama-server's /metrics).
struct EngineMetrics {
  uint64_t prompt_tokens = 0;  // prompt tokens decoded
  double prompt_seconds = 0;   // summed over generations: slot taken -> first token
  uint64_t predicted_tokens = 0;
  double predicted_seconds = 0;     // summed over generations: first token -> end
  uint64_t n_decode = 0;            // Context::decode calls
  uint64_t n_busy_slots = 0;        // busy slots summed over those calls
  uint64_t requests_total = 0;      // generations submitted (accepted or not)
  uint64_t requests_rejected = 0;   // refused because the queue was full
  int32_t requests_processing = 0;  // generations holding a slot now
  int32_t requests_deferred = 0;    // generations waiting for one
  int64_t kv_tokens = 0;            // tokens cached over all slots
  int64_t kv_size = 0;              // cells of the KV cache
  uint64_t draft_tokens = 0;        // speculative decoding: tokens drafted
  uint64_t draft_accepted = 0;      // draft tokens the target accepted
  uint64_t drafts = 0;              // verifications of a non-empty draft
  uint64_t generations_parked = 0;  // one KV pool: generations parked for want of room
  uint64_t idle_caches_cleared = 0;  // one KV pool: idle slots' cached prompts dropped for room
};

// How the engine's slots share the context's KV cache (llama-server's -np, -kvu/-no-kvu,
// --kv-unified-per-slot).
struct EngineOptions {
  int32_t n_slots = 1;      // [1, kMaxSequences]
  int32_t queue_limit = 0;  // requests that may wait for a slot (>= 0)
  // true: one pool, each slot may use up to the whole cache; false: each slot gets n_ctx / n_slots.
  bool kv_unified = false;
  int32_t kv_unified_per_slot = 0;  // > 0: a slot's context is at most this many tokens
};

// Tokens one slot of an engine with `options` may hold in a cache of n_ctx cells: the whole
// cache when unified, else its share; at most kv_unified_per_slot when set.
int32_t n_ctx_per_slot(int64_t n_ctx, const EngineOptions& options);

class Engine {
 public:
  // `ctx` (and `speculator`, null: no speculative decoding) must outlive the Engine. The
  // speculator must belong to ctx's model.
  Engine(Context& ctx, const EngineOptions& options, Speculator* speculator = nullptr);
  ~Engine();  // stops the thread, ending every generation with an error
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Tokens one slot may hold (prompt + generated).
  int32_t n_ctx_slot() const { return n_ctx_slot_; }
  int32_t n_slots() const { return static_cast<int32_t>(slots_.size()); }
  const Model& model() const { return ctx_.model(); }
  int32_t n_vocab() const { return static_cast<int32_t>(ctx_.n_vocab()); }
  // Queues a request; an Error when the queue is full or the engine stopped. `notifier`: shared
  // with other generations of the same client (null: the generation's own).
  Result<std::shared_ptr<Generation>> submit(GenerationRequest request, Sampler sampler,
                                             std::shared_ptr<Notifier> notifier = nullptr);
  std::vector<SlotInfo> slots() const;
  EngineMetrics metrics() const;
  // Ends every generation ("the server is shutting down") and the thread.
  void stop();

 private:
  struct Slot;
  // One slot's sampling after a decode (sample_rows, no lock, or aside), handed over under the lock.
  struct Sampled {
    Slot* slot = nullptr;
    size_t row = 0;             // the slot's first row in the batch
    std::vector<float> logits;  // sampled aside: a copy of that row (the batch's are gone by then)
    int32_t pos = -1;           // with verification rows: the sampled token's position; -1: plain sampling
    bool first = false;         // the prompt's last row: the generation's first token
    Verdict verdict;            // the tokens to hand over (plain sampling: one; none: max_tokens 0)
  };
  // A token being sampled on a thread of its own (sample_aside): its grammar's work, however
  // long, never holds up the steps of the other slots.
  struct Aside {
    std::thread thread;
    std::future<Sampled> result;
    bool ready() const {
      return result.valid() && result.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
    }
  };
  struct Slot {
    int32_t id = 0;
    std::vector<int32_t> cache;  // tokens of sequence `id` in the KV cache, positions 0..
    std::vector<PromptImage> images;  // the images among them (kMediaToken in `cache`)
    std::shared_ptr<Generation> gen;
    size_t n_prompt_done = 0;  // prompt tokens in the cache
    int32_t pending = -1;      // sampled token not yet decoded
    int64_t batch_index = -1;  // row of this slot's logits in the current batch
    std::unique_ptr<SequenceDrafter> drafter;  // with a speculator
    std::vector<int32_t> draft;                // drafted this step, verified after `pending`
    bool drafter_begun = false;                // drafter->begin() ran for the generation
    Aside aside;                               // its token sampled aside (result valid: in progress or ready)
    uint64_t admitted = 0;                     // order in which generations took their slots (assign())
    uint64_t last_used = 0;                    // order in which slots last ended a generation (release())
    // Parked for want of room (make_room()): its cells, out of the cache. `cache` still lists
    // their tokens.
    std::optional<SequenceCells> parked;
  };
  void loop();
  // One KV pool: makes room for the step's least progress, resuming, clearing and parking as the
  // header says. Engine thread.
  void make_room();
  // Cells of free blocks the next step needs at least (see above) with the running slots and
  // `also`, when given.
  int64_t least_demand(const Slot* also) const;
  // Prompt tokens of `s` up to its next image or its end, at most `limit`.
  size_t text_run(const Slot& s, size_t limit) const;
  int64_t free_cells() const;   // of the KV blocks no sequence holds (KvCache::free_cells)
  int64_t idle_cells() const;   // of the blocks held only by idle slots' cached prompts
  // Cells of free blocks that n more tokens of `s` from position next_pos take.
  int64_t cells_to_grow(const Slot& s, int32_t next_pos, int64_t n) const;
  int earliest_parked() const;  // the index of the parked slot admitted first, or -1
  // Whether the parked slot `s` fits the pool now (clearing idle caches if need be).
  bool can_resume(const Slot& s) const;
  void clear_idle_cache(Slot& s);  // drops an idle slot's cached prompt from the cache
  void park(Slot& s);
  void resume(Slot& s);
  void forget_draft_cells(Slot& s);  // the draft model's cells of the slot (rebuilt by begin())
  void assign(std::shared_ptr<Generation> gen);                          // under mutex_
  bool step();                                                           // false: nothing to do
  // Adds to `batch` (empty) the next image of the first slot whose prompt continues with one
  // (setting its batch_index when the image ends the prompt); that slot, or null when none does.
  Slot* add_image(Batch& batch);
  void release(Slot& s, StopType type, std::string error);               // under mutex_
  // Hands `token` to the slot's client (`n_before`: the tokens before it in the sequence, which
  // the cells hold); under mutex_.
  void on_token(Slot& s, int32_t token, std::span<const float> logits, size_t n_before);
  // Drafts (Slot::draft) for each of `generating`, the slots that decode their sampled token this
  // step. A slot whose draft model failed goes to `failed` with the message.
  // The drafts take at most `spare` cells together.
  void draft(const std::vector<Slot*>& generating, int64_t spare,
             std::vector<std::pair<Slot*, std::string>>& failed);
  // Decodes the next chunk of each slot still reading its prompt (kPromptChunk tokens, fewer at
  // its next image or its end), whole and in a batch of its own, so that its chunks are those of
  // the request alone (every chunk but a prompt's last is kPromptChunk long, from where the prompt
  // left the cache) and compute as there. In slot order, at most kPromptChunk tokens a step (the
  // first chunk always), stopping at a chunk the pool has no room for. False when none was decoded.
  bool decode_prompt_chunks();
  // Decodes `batch` and hands over its results: the cache grows by `chunks` and the decoded
  // sampled tokens, every slot with a batch_index samples (or verifies its draft) from its rows
  // and its batch_index is reset. A failed decode ends every generation.
  void decode_rows(const Batch& batch, const std::vector<std::pair<Slot*, size_t>>& chunks, bool single_row_order);
  // Samples the slot's rows from batch index `row`: verifies its sampled token and draft (the
  // cache grows by the tokens now in cells), or samples after its prompt. Engine thread, no lock.
  Sampled sample_rows(Slot& s, size_t row);
  // Whether the slot's token is sampled aside (a grammar's work, a generation that does not draft).
  bool samples_aside(const Slot& s) const;
  // Starts sampling the slot's token aside from its row's logits (copied): the cache takes its
  // pending token now, and the slot sits out the steps until aside_ready().
  void sample_aside(Slot& s, size_t row);
  // Joins the slot's sampling aside (done, or stopped by its interrupt flag) and returns it.
  Sampled take_aside(Slot& s);
  // Hands `x`'s tokens to the client (or ends the generation: max_tokens 0, a grammar out of
  // work); under mutex_.
  void hand_over(Sampled& x, Generation::Clock::time_point now);
  void publish();         // copies slot states for slots(), under mutex_
  bool has_work() const;  // under mutex_: a step would do something

  Context& ctx_;
  Speculator* speculator_;  // null: no speculative decoding
  int32_t n_ctx_slot_;
  uint64_t n_admitted_ = 0, n_released_ = 0;  // engine thread: counters behind admitted, last_used
  int32_t queue_limit_;
  std::vector<Slot> slots_;  // engine thread (and assign() under mutex_)
  std::shared_ptr<EngineSignal> signal_ = std::make_shared<EngineSignal>();
  std::mutex& mutex_ = signal_->mutex;
  std::condition_variable& cv_ = signal_->cv;
  std::deque<std::shared_ptr<Generation>> queue_;
  std::vector<SlotInfo> info_;
  EngineMetrics metrics_;  // under mutex_
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kiln::serve
