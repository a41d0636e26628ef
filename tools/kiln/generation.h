// The sample → stream loop that `kiln run` and `kiln chat` share, after their prompt is decoded
// (llm/media_prompt.h): tokens sampled one at a time, their text streamed UTF-8-safely, until an
// end-of-generation token, the length limit, a full context or an interrupt.
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

// The tokens of one sequence in a Context's KV cache, at positions 0..tokens.size()-1
// (kMediaToken where an image's embeddings are).
struct CachedSequence {
  int32_t seq = 0;
  std::vector<int32_t> tokens;
};

enum class StopReason { EndOfGeneration, Length, ContextFull, Interrupted };

struct GenerateOptions {
  int64_t n_predict = -1;      // most tokens to generate; -1: no limit
  bool show_special = false;   // print control tokens' text
  bool context_shift = false;  // when the context is full, drop half of the text after n_keep and go on
  int64_t n_keep = 0;          // tokens a context shift keeps at the start
  // Checked before each token; when non-zero the reply stops (StopReason::Interrupted).
  const volatile std::sig_atomic_t* interrupted = nullptr;
};

struct GenerateResult {
  StopReason stop = StopReason::EndOfGeneration;
  int64_t n_generated = 0;  // tokens whose text was streamed (end-of-generation tokens excluded)
  std::string text;         // their text, concatenated
};

// Samples from `logits` (of the last token of `cached`), streams each token's text to `out`,
// accepts it into `sampler` and decodes it into `cached` (all but the last sampled token, whose
// logits nobody reads). End-of-generation tokens stop the loop and are neither streamed nor decoded.
Result<GenerateResult> generate(Context& ctx, Sampler& sampler, std::span<const float> logits,
                                CachedSequence& cached, const GenerateOptions& options, Utf8Stream& out);

}  // namespace kiln::cli
