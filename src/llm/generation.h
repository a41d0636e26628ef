// The decode → sample → stream loop that `kiln run`, `kiln chat` and the C API (kiln_generate)
// share: prompt tokens decoded in batches after what a sequence already holds, then tokens sampled
// one at a time, each token's text handed to a callback, until an end-of-generation token, the
// length limit, a reverse prompt, a full context, an interrupt or the callback says stop.
// Thread-safety: as the Context and Sampler given (one generation per context at a time).
#pragma once

#include <csignal>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "llm/context.h"
#include "llm/sampler.h"
#include "llm/reverse_prompts.h"
#include "llm/speculative/step.h"
#include "runtime/function_ref.h"

namespace kiln {

// Decodes `tokens` into `cached.seq` at the positions after cached.tokens, in batches of at most
// `n_batch`, with logits for the last token only (read them with ctx.logits(last_batch_index)).
// Appends the tokens to cached.tokens as they are decoded; returns the batch index of the last
// token's logits. `tokens` must not be empty.
Result<size_t> decode_tokens(Context& ctx, std::span<const int32_t> tokens, SequenceState& cached,
                             int64_t n_batch);

// Stopped: the caller's on_piece returned false.
enum class StopReason { EndOfGeneration, Length, ReversePrompt, ContextFull, Interrupted, Stopped };

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
  int64_t n_generated = 0;      // tokens handed to on_piece (end-of-generation tokens excluded)
  std::vector<int32_t> tokens;  // those tokens (the last one is not decoded into the cache)
  std::string text;             // their text, concatenated
};

// Called with each generated token and its text (control tokens' text only with show_special);
// returns false to stop the generation after that token (StopReason::Stopped).
using OnPiece = FunctionRef<bool(int32_t token, std::string_view piece)>;

// Samples from `logits` (of the last token of `cached`), hands each token's text to `on_piece`,
// accepts it into `sampler` and decodes it into `cached` (all but the last sampled token, whose
// logits nobody reads; with speculation, accepted draft tokens past the end of the reply too;
// after an interrupt every streamed token is decoded). End-of-generation tokens stop the loop and
// are neither streamed nor decoded.
Result<GenerateResult> generate(Context& ctx, Sampler& sampler, std::span<const float> logits,
                                SequenceState& cached, const GenerateOptions& options, OnPiece on_piece);

}  // namespace kiln
