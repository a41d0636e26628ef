// The decode → sample → stream loop that `kiln run` and `kiln chat` share: prompt tokens decoded
// in batches after what a sequence already holds, then tokens sampled one at a time, their text
// streamed UTF-8-safely, until an end-of-generation token, the length limit, a reverse prompt, a
// full context or an interrupt.
#pragma once

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "llm/context.h"
#include "llm/sampler.h"
#include "llm/speculative/step.h"
#include "reverse_prompt.h"

namespace kiln::cli {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Writes text to a stream as it grows, holding back a UTF-8 sequence that is not complete yet, so
// a terminal never shows half a character. Bytes that are not UTF-8 pass through unchanged.
// Not thread-safe.
class Utf8Stream {
 public:
  explicit Utf8Stream(FILE* out) : out_(out) {}
  ~Utf8Stream() { finish(); }
  void write(std::string_view text);
  // Writes what is held back (an incomplete sequence at the very end of the text).
  void finish();

 private:
  FILE* out_;
  std::string pending_;
};

// Decodes `tokens` into `cached.seq` at the positions after cached.tokens, in batches of at most
// `n_batch`, with logits for the last token only (read them with ctx.logits(last_batch_index)).
// Appends the tokens to cached.tokens as they are decoded; returns the batch index of the last
// token's logits. `tokens` must not be empty.
Result<size_t> decode_tokens(Context& ctx, std::span<const int32_t> tokens, SequenceState& cached,
                             int64_t n_batch);

enum class StopReason { EndOfGeneration, Length, ReversePrompt, ContextFull, Interrupted };

struct GenerateOptions {
  int64_t n_predict = -1;      // most tokens to generate; -1: no limit
  bool show_special = false;   // print control tokens' text
  bool context_shift = false;  // when the context is full, drop half of the text after n_keep and go on
  int64_t n_keep = 0;          // tokens a context shift keeps at the start
  // Checked after each token (with the sequence's tokens); none when null or empty.
  const ReversePrompts* reverse_prompts = nullptr;
  // Checked before each token; when non-zero the reply stops (StopReason::Interrupted).
  const volatile std::sig_atomic_t* interrupted = nullptr;
  // Speculative decoding: drafts from here are verified in one batch per step (the output is the
  // same tokens as without). The caller has called drafter->begin() with the prompt.
  SequenceDrafter* drafter = nullptr;
};

struct GenerateResult {
  StopReason stop = StopReason::EndOfGeneration;
  int64_t n_generated = 0;      // tokens whose text was streamed (end-of-generation tokens excluded)
  std::vector<int32_t> tokens;  // those tokens (the last one is not decoded into the cache)
  std::string text;             // their text, concatenated
};

// Samples from `logits` (of the last token of `cached`), streams each token's text to `out`,
// accepts it into `sampler` and decodes it into `cached` (all but the last sampled token, whose
// logits nobody reads; with speculation, accepted draft tokens past the end of the reply too;
// after an interrupt every streamed token is decoded). End-of-generation tokens stop the loop and
// are neither streamed nor decoded.
Result<GenerateResult> generate(Context& ctx, Sampler& sampler, std::span<const float> logits,
                                SequenceState& cached, const GenerateOptions& options, Utf8Stream& out);

}  // namespace kiln::cli
