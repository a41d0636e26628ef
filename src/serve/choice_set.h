// ChoiceSet: the n generations of one request (OpenAI's n; 1 for most requests), submitted
// together with one Notifier so that the client thread waits for any of them, and drained into
// per-choice text and tokens.
// Thread-safety: one client thread uses a ChoiceSet (the engine thread fills its generations);
// cancel(), end_reasoning() and live() may be called from any thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "serve/api_json.h"
#include "serve/engine.h"

namespace kiln::serve {

class ChoiceSet {
 public:
  // Submits `n` (>= 1) generations of `request`. When `seeded`, choice i samples with
  // request.sampler.seed + i (reproducible, distinct choices); otherwise choice 0 keeps the seed
  // and the others draw fresh random seeds. Each choice samples under its own constraint of
  // request.grammar. Errors: bad sampler parameters, a grammar that does not parse or whose first
  // token costs more than its work budget (400, computed on the calling thread), the
  // engine is busy or stopping (503; choices already submitted are cancelled).
  static std::variant<std::shared_ptr<ChoiceSet>, HttpError> submit(Engine& engine,
                                                                    const GenerationRequest& request,
                                                                    int32_t n, bool seeded);
  ~ChoiceSet() { cancel(); }  // a set dropped before its end frees its slots

  // Waits at most `timeout` for output, then calls on_chunk(choice, chunk) for every choice with
  // something new; each choice's final chunk is passed exactly once. True when every choice ended.
  bool poll(std::chrono::milliseconds timeout,
            const std::function<void(size_t, Generation::Chunk&)>& on_chunk);
  void cancel();
  bool all_done() const;
  // Asks every choice to end its reasoning block (Generation::end_reasoning). Any thread.
  void end_reasoning();
  // Some choice has not ended yet. Any thread.
  bool live() const;

  size_t size() const { return gens_.size(); }
  const Generation& gen(size_t i) const { return *gens_[i]; }
  // The first error among the ended choices; empty when none failed.
  std::string error() const;
  // The HTTP status of that error: 503 when the server is shutting down, 400 when the request
  // caused it (its grammar ran out of work for a token), else 500.
  int error_status() const;

 private:
  std::shared_ptr<Notifier> notifier_;
  std::vector<std::shared_ptr<Generation>> gens_;
  std::vector<bool> ended_;  // the final chunk was passed on
};

// A choice's output gathered over the chunks (non-streaming responses).
struct ChoiceOutput {
  std::string text;
  std::vector<TokenOutput> tokens;
};

}  // namespace kiln::serve
