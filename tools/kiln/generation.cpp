#include "generation.h"

#include <algorithm>

#include "core/check.h"

namespace kiln::cli {
namespace {

// The length of the UTF-8 sequence a lead byte starts; 0 for a continuation or invalid byte.
size_t utf8_sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 0;
}

// How many bytes at the end of `s` begin a sequence that is not complete yet (0..3).
size_t incomplete_tail(std::string_view s) {
  const size_t look = std::min<size_t>(3, s.size());
  for (size_t back = 1; back <= look; ++back) {
    const auto c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back for its lead
    const size_t need = utf8_sequence_length(c);
    return need > back ? back : 0;
  }
  return 0;
}

}  // namespace

void Utf8Stream::write(std::string_view text) {
  pending_.append(text);
  const size_t ready = pending_.size() - incomplete_tail(pending_);
  if (ready == 0) return;
  std::fwrite(pending_.data(), 1, ready, out_);
  std::fflush(out_);
  pending_.erase(0, ready);
}

void Utf8Stream::finish() {
  if (pending_.empty()) return;
  std::fwrite(pending_.data(), 1, pending_.size(), out_);
  std::fflush(out_);
  pending_.clear();
}

Result<GenerateResult> generate(Context& ctx, Sampler& sampler, std::span<const float> logits,
                                CachedSequence& cached, const GenerateOptions& options, Utf8Stream& out) {
  const auto& tok = ctx.model().tokenizer();
  const int64_t n_ctx = ctx.n_ctx();
  GenerateResult r;
  Batch batch;
  while (true) {
    if (options.n_predict >= 0 && r.n_generated >= options.n_predict) {
      r.stop = StopReason::Length;
      break;
    }
    if (options.interrupted != nullptr && *options.interrupted != 0) {
      r.stop = StopReason::Interrupted;
      break;
    }
    const int32_t id = sampler.sample(logits);
    sampler.accept(id);
    if (tok.is_eog(id)) {
      r.stop = StopReason::EndOfGeneration;
      break;
    }
    if (auto piece = tok.token_to_piece(id, options.show_special); piece.ok()) {
      out.write(*piece);
      r.text += *piece;
    }
    ++r.n_generated;
    if (options.n_predict >= 0 && r.n_generated >= options.n_predict) {
      r.stop = StopReason::Length;
      break;
    }
    auto n_past = static_cast<int64_t>(cached.tokens.size());
    if (n_past >= n_ctx) {
      if (!options.context_shift) {
        r.stop = StopReason::ContextFull;
        break;
      }
      // ref: llama.cpp's context shift: keep n_keep tokens, drop half of the rest, slide the remainder.
      const int64_t n_keep = std::clamp<int64_t>(options.n_keep, 0, n_past);
      const int64_t n_discard = (n_past - n_keep) / 2;
      ctx.seq_rm(cached.seq, static_cast<int32_t>(n_keep), static_cast<int32_t>(n_keep + n_discard));
      KILN_TRY(ctx.seq_add(cached.seq, static_cast<int32_t>(n_keep + n_discard), static_cast<int32_t>(n_past),
                           static_cast<int32_t>(-n_discard)));
      cached.tokens.erase(cached.tokens.begin() + n_keep, cached.tokens.begin() + n_keep + n_discard);
    }
    batch.clear();
    batch.add(id, static_cast<int32_t>(cached.tokens.size()), cached.seq, true);
    KILN_TRY(ctx.decode(batch));
    cached.tokens.push_back(id);
    logits = ctx.logits(0);
  }
  out.finish();
  return r;
}

}  // namespace kiln::cli
