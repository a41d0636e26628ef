#include "serve/completion_json.h"

#include <algorithm>

namespace kiln::serve {

json usage_json(const ChoiceSet& set) {
  const Generation& first = set.gen(0);
  int32_t completion = 0;
  for (size_t i = 0; i < set.size(); ++i) completion += set.gen(i).n_generated();
  return {{"prompt_tokens", first.n_prompt()},
          {"completion_tokens", completion},
          {"total_tokens", first.n_prompt() + completion},
          {"prompt_tokens_details", {{"cached_tokens", first.n_cached()}}}};
}

json timings_json(const ChoiceSet& set) {
  const GenerationTimings first = set.gen(0).timings();
  int32_t predicted_n = 0, draft_n = 0, draft_n_accepted = 0;
  double predicted_ms = 0;
  for (size_t i = 0; i < set.size(); ++i) {
    const GenerationTimings t = set.gen(i).timings();
    predicted_n += t.predicted_n;
    predicted_ms = std::max(predicted_ms, t.predicted_ms);
    draft_n += t.draft_n;
    draft_n_accepted += t.draft_n_accepted;
  }
  auto per_token = [](double ms, int32_t n) { return n > 0 ? ms / n : 0.0; };
  auto per_second = [](double ms, int32_t n) { return ms > 0 ? 1e3 * n / ms : 0.0; };
  json out = {{"prompt_n", first.prompt_n},
              {"prompt_ms", first.prompt_ms},
              {"prompt_per_token_ms", per_token(first.prompt_ms, first.prompt_n)},
              {"prompt_per_second", per_second(first.prompt_ms, first.prompt_n)},
              {"predicted_n", predicted_n},
              {"predicted_ms", predicted_ms},
              {"predicted_per_token_ms", per_token(predicted_ms, predicted_n)},
              {"predicted_per_second", per_second(predicted_ms, predicted_n)}};
  // As llama-server: only when something was drafted.
  if (draft_n > 0) {
    out["draft_n"] = draft_n;
    out["draft_n_accepted"] = draft_n_accepted;
  }
  return out;
}

json bytes_json(const std::string& s) {
  json out = json::array();
  for (unsigned char c : s) out.push_back(c);
  return out;
}

json chat_logprobs(const std::vector<TokenOutput>& tokens) {
  json content = json::array();
  for (const TokenOutput& t : tokens) {
    json top = json::array();
    for (size_t k = 0; k < t.top.size(); ++k)
      top.push_back({{"token", t.top_pieces[k]},
                     {"logprob", t.top[k].logprob},
                     {"bytes", bytes_json(t.top_pieces[k])}});
    content.push_back(
        {{"token", t.piece}, {"logprob", t.logprob}, {"bytes", bytes_json(t.piece)}, {"top_logprobs", top}});
  }
  return content;
}

json legacy_logprobs(const std::vector<TokenOutput>& tokens, size_t& text_offset) {
  json out = {{"tokens", json::array()},
              {"token_logprobs", json::array()},
              {"top_logprobs", json::array()},
              {"text_offset", json::array()}};
  for (const TokenOutput& t : tokens) {
    out["tokens"].push_back(t.piece);
    out["token_logprobs"].push_back(t.logprob);
    json top = json::object();
    for (size_t k = 0; k < t.top.size(); ++k)
      if (!top.contains(t.top_pieces[k])) top[t.top_pieces[k]] = t.top[k].logprob;  // first (likelier) wins
    out["top_logprobs"].push_back(std::move(top));
    out["text_offset"].push_back(text_offset);
    text_offset += t.piece.size();
  }
  return out;
}

json native_probs(const std::vector<TokenOutput>& tokens) {
  json out = json::array();
  for (const TokenOutput& t : tokens) {
    json top = json::array();
    for (size_t k = 0; k < t.top.size(); ++k)
      top.push_back({{"id", t.top[k].id},
                     {"token", t.top_pieces[k]},
                     {"bytes", bytes_json(t.top_pieces[k])},
                     {"logprob", t.top[k].logprob}});
    out.push_back({{"id", t.id},
                   {"token", t.piece},
                   {"bytes", bytes_json(t.piece)},
                   {"logprob", t.logprob},
                   {"top_logprobs", std::move(top)}});
  }
  return out;
}

}  // namespace kiln::serve
