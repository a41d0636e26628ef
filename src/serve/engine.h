// Engine: the server's generation loop. One thread owns the Context; it serves N slots (each one
// sequence id of the shared KV cache) with continuous batching: every step decodes, in one Batch,
// the last sampled token of each generating slot plus at most kPromptChunk pending prompt
// tokens, then samples every slot that produced logits. Each slot keeps the tokens it has cached;
// a new request reuses the longest common prefix (unless it asks cache_prompt false). Requests
// beyond the slots wait in a bounded queue.
//
// Thread-safety: submit(), slots() and stop() may be called from any thread; a Generation is
// read by one client thread while the engine thread writes it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "llm/context.h"
#include "llm/sampler.h"
#include "serve/stop_text.h"

namespace kiln::serve {

// Prompt tokens one step decodes at most (over all slots): a long prompt is processed in chunks
// between the token steps of the streams already running.
inline constexpr size_t kPromptChunk = 512;

struct GenerationRequest {
  std::vector<int32_t> prompt;     // non-empty; shorter than the slot context
  SamplerParams sampler;
  int32_t max_tokens = -1;         // < 0: until end of text or the slot's context is full
  std::vector<std::string> stop;
  bool cache_prompt = true;
};

// One request's output, handed from the engine thread to a client thread.
class Generation {
 public:
  struct Chunk {
    std::string text;
    bool final = false;  // the generation ended; finish_reason() / error() are set
  };
  Generation(GenerationRequest request, Sampler sampler)
      : request_(std::move(request)), sampler_(std::move(sampler)), stop_text_(request_.stop) {}

  // Blocks until text is available or the generation ended.
  Chunk next();
  // Asks the engine to stop this generation and free its slot (no effect once it ended).
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

  // Valid after the final chunk.
  const std::string& finish_reason() const { return finish_reason_; }  // "stop" or "length"
  const std::string& error() const { return error_; }                  // non-empty: it failed
  int32_t n_prompt() const { return static_cast<int32_t>(request_.prompt.size()); }
  int32_t n_cached() const { return n_cached_; }
  int32_t n_generated() const { return n_generated_; }

 private:
  friend class Engine;
  void push(std::string text);
  void finish(std::string reason, std::string error);

  GenerationRequest request_;
  Sampler sampler_;
  StopText stop_text_;  // engine thread only
  std::atomic<bool> cancelled_{false};
  std::mutex mutex_;
  std::condition_variable cv_;
  std::string pending_;
  bool done_ = false;
  std::string finish_reason_, error_;
  int32_t n_cached_ = 0, n_generated_ = 0;
};

struct SlotInfo {
  int32_t id;
  bool processing;
  int32_t n_cached;  // tokens of this slot in the KV cache
};

class Engine {
 public:
  // `ctx` must outlive the Engine; n_slots in [1, kMaxSequences]; queue_limit >= 0.
  Engine(Context& ctx, int32_t n_slots, int32_t queue_limit);
  ~Engine();  // stops the thread, ending every generation with an error
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Tokens one slot may hold (prompt + generated).
  int32_t n_ctx_slot() const { return n_ctx_slot_; }
  // Queues a request; an Error when the queue is full or the engine stopped.
  Result<std::shared_ptr<Generation>> submit(GenerationRequest request, Sampler sampler);
  std::vector<SlotInfo> slots() const;
  // Ends every generation ("the server is shutting down") and the thread.
  void stop();

 private:
  struct Slot {
    int32_t id = 0;
    std::vector<int32_t> cache;  // tokens of sequence `id` in the KV cache, positions 0..
    std::shared_ptr<Generation> gen;
    size_t n_prompt_done = 0;    // prompt tokens in the cache
    int32_t pending = -1;        // sampled token not yet decoded
    int64_t batch_index = -1;    // row of this slot's logits in the current batch
  };
  void loop();
  void assign(std::shared_ptr<Generation> gen);  // under mutex_
  bool step();                                   // false: nothing to do
  void release(Slot& s, std::string reason, std::string error);
  void on_token(Slot& s, int32_t token);
  void publish();                                // copies slot states for slots(), under mutex_

  Context& ctx_;
  int32_t n_ctx_slot_;
  int32_t queue_limit_;
  std::vector<Slot> slots_;  // engine thread (and assign() under mutex_)
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Generation>> queue_;
  std::vector<SlotInfo> info_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kiln::serve
