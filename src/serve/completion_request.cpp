#include "serve/completion_request.h"

#include <cmath>
#include <limits>
#include <random>

#include "serve/unsupported_fields.h"

namespace kiln::serve {
namespace {

std::optional<HttpError> read_stop(const json& body, std::vector<std::string>& out) {
  auto it = body.find("stop");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) {
    out.push_back(it->get<std::string>());
    return std::nullopt;
  }
  if (it->is_array()) {
    for (const auto& s : *it) {
      if (!s.is_string()) return HttpError{400, "field 'stop' must be a string or a list of strings"};
      out.push_back(s.get<std::string>());
    }
    return std::nullopt;
  }
  return HttpError{400, "field 'stop' must be a string or a list of strings"};
}

// One logit_bias entry: the key is a token id (number or decimal string) or, in llama-server's
// list form, a text whose tokens all get the bias; the bias is a number or false (banned).
std::optional<HttpError> add_bias(const json& key, const json& value, const text::Tokenizer& tok,
                                  bool text_keys, std::vector<std::pair<int32_t, float>>& out) {
  float bias = 0;
  if (value.is_boolean() && !value.get<bool>()) {
    bias = -std::numeric_limits<float>::infinity();
  } else if (value.is_number()) {
    const double v = value.get<double>();
    if (!std::isfinite(v) || std::fabs(v) > std::numeric_limits<float>::max())
      return HttpError{400, "field 'logit_bias': the bias of " + key.dump() + " is out of range"};
    bias = static_cast<float>(v);
  } else {
    return HttpError{400, "field 'logit_bias': the bias of " + key.dump() + " must be a number or false"};
  }
  const int64_t n_vocab = tok.n_tokens();
  auto range_error = [&](const std::string& what) {
    return HttpError{400, "field 'logit_bias': " + what + " is not a token id of this vocabulary (0.." +
                              std::to_string(n_vocab - 1) + ")"};
  };
  if (key.is_number_integer()) {
    const bool in_vocab = key.is_number_unsigned() ? key.get<uint64_t>() < static_cast<uint64_t>(n_vocab)
                                                   : key.get<int64_t>() >= 0 && key.get<int64_t>() < n_vocab;
    if (!in_vocab) return range_error(key.dump());
    const int64_t id = key.get<int64_t>();
    out.emplace_back(static_cast<int32_t>(id), bias);
    return std::nullopt;
  }
  if (!key.is_string()) return HttpError{400, "field 'logit_bias': keys must be token ids or strings"};
  const std::string s = key.get<std::string>();
  if (text_keys) {
    for (int32_t id : tok.tokenize(s, false, false)) out.emplace_back(id, bias);
    return std::nullopt;
  }
  int64_t id = -1;
  try {
    size_t used = 0;
    id = std::stoll(s, &used);
    if (used != s.size()) id = -1;
  } catch (...) {
    id = -1;
  }
  if (id < 0 || id >= n_vocab) return range_error("'" + s + "'");
  out.emplace_back(static_cast<int32_t>(id), bias);
  return std::nullopt;
}

// OpenAI's object {"id": bias}; llama-server also takes [[id or text, bias], ...].
std::optional<HttpError> read_logit_bias(const json& body, const text::Tokenizer& tok,
                                         std::vector<std::pair<int32_t, float>>& out) {
  auto it = body.find("logit_bias");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (it->is_object()) {
    for (const auto& [key, value] : it->items())
      if (auto e = add_bias(json(key), value, tok, false, out)) return e;
    return std::nullopt;
  }
  if (it->is_array()) {
    for (const auto& pair : *it) {
      if (!pair.is_array() || pair.size() != 2)
        return HttpError{400, "field 'logit_bias': list entries must be [token id or text, bias]"};
      if (auto e = add_bias(pair[0], pair[1], tok, true, out)) return e;
    }
    return std::nullopt;
  }
  return HttpError{400, "field 'logit_bias' must be an object of token id -> bias, or a list of [id, bias]"};
}

// read_number_in() into an optional: set only when the field is present (and not null).
template <class T>
std::optional<HttpError> read_optional_in(const json& body, const char* key, T lo, T hi, std::optional<T>& out) {
  T v{};
  if (auto e = read_number_in(body, key, lo, hi, v)) return e;
  if (auto it = body.find(key); it != body.end() && !it->is_null()) out = v;
  return std::nullopt;
}

}  // namespace

std::optional<HttpError> parse_completion_fields(const json& body, const text::Tokenizer& tok,
                                                 CompletionRequest& p, CompletionApi api) {
  if (auto e = refuse_unsupported_fields(body, api)) return e;

  SamplerParams& sp = p.gen.sampler;
  if (api != CompletionApi::Native) {
    sp.temperature = 1.0f;  // OpenAI's defaults; the native route keeps llama-server's (SamplerParams)
    sp.top_p = 1.0f;
    sp.top_k = 0;
    sp.min_p = 0.0f;
  }
  if (auto e = read_number(body, "temperature", sp.temperature)) return e;
  if (auto e = read_number_in(body, "top_p", 0.0f, 1.0f, sp.top_p)) return e;
  if (auto e = read_number(body, "top_k", sp.top_k)) return e;
  if (auto e = read_number_in(body, "min_p", 0.0f, 1.0f, sp.min_p)) return e;
  if (auto e = read_number_in(body, "typical_p", 0.0f, 1.0f, sp.typical_p)) return e;
  if (auto e = read_number(body, "presence_penalty", sp.presence_penalty)) return e;
  if (auto e = read_number(body, "frequency_penalty", sp.frequency_penalty)) return e;
  if (api != CompletionApi::Native && (sp.presence_penalty != 0 || sp.frequency_penalty != 0))
    sp.penalty_last_n = -1;  // OpenAI's penalties look at the whole text
  // llama-server's sampling fields, on every route as llama-server takes them.
  if (auto e = read_number(body, "repeat_penalty", sp.repeat_penalty)) return e;
  if (auto e = read_number_in(body, "repeat_last_n", -1, INT32_MAX, sp.penalty_last_n)) return e;
  if (auto e = read_number(body, "min_keep", sp.min_keep)) return e;
  int64_t seed = -1;
  if (auto e = read_number(body, "seed", seed)) return e;
  // llama-server's "random" seed is 0xFFFFFFFF (LLAMA_DEFAULT_SEED) as well as -1.
  p.seeded = seed >= 0 && seed != 0xFFFFFFFFLL;
  sp.seed = p.seeded ? static_cast<uint64_t>(seed) : std::random_device{}();

  // -1: until the end of text or the slot's context; the native route also takes 0 (only cache).
  int32_t max_tokens = -1;
  if (api == CompletionApi::Native) {
    if (auto e = read_number_in(body, "n_predict", -1, INT32_MAX, max_tokens)) return e;
  } else {
    for (const char* key : {"max_tokens", "max_completion_tokens"}) {
      if (auto e = read_number_in(body, key, -1, INT32_MAX, max_tokens)) return e;
      if (max_tokens == 0) return HttpError{400, field_message(key, "must be at least 1 (or -1: no limit)")};
    }
  }
  p.gen.max_tokens = max_tokens;
  if (auto e = read_bool(body, "stream", p.stream)) return e;
  if (auto e = read_bool(body, "cache_prompt", p.gen.cache_prompt)) return e;
  if (auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return HttpError{400, "field 'stream_options' must be an object"};
    if (auto e = read_bool(*it, "include_usage", p.include_usage)) return e;
  }
  if (auto e = read_stop(body, p.gen.stop)) return e;
  if (auto e = read_logit_bias(body, tok, sp.logit_bias)) return e;
  // ignore_eos, as llama-server: the end-of-generation tokens are never sampled (their logits
  // -inf), so the generation runs to max_tokens (or the slot's context).
  bool ignore_eos = false;
  if (auto e = read_bool(body, "ignore_eos", ignore_eos)) return e;
  if (ignore_eos) {
    for (int32_t id : tok.vocab().eog_ids()) sp.logit_bias.emplace_back(id, -INFINITY);
  }

  // Choices and log-probabilities.
  int32_t n = 1;
  if (api != CompletionApi::Native) {
    if (auto e = read_number_in(body, "n", 1, static_cast<int32_t>(kMaxChoices), n)) return e;
  }
  p.n = n;
  int32_t top = 0;
  switch (api) {
    case CompletionApi::Chat: {
      if (auto e = read_bool(body, "logprobs", p.gen.logprobs)) return e;
      if (auto e = read_number_in(body, "top_logprobs", 0, static_cast<int32_t>(kMaxTopLogprobsChat), top))
        return e;
      if (top > 0 && !p.gen.logprobs) return HttpError{400, "field 'top_logprobs' needs 'logprobs': true"};
      break;
    }
    case CompletionApi::Completions: {
      auto it = body.find("logprobs");
      if (it != body.end() && !it->is_null()) {
        if (!it->is_number_integer())
          return HttpError{400, "field 'logprobs' must be an integer in 0..5 (or null)"};
        if (auto e = read_number_in(body, "logprobs", 0, static_cast<int32_t>(kMaxLogprobsLegacy), top))
          return e;
        p.gen.logprobs = true;
      }
      break;
    }
    case CompletionApi::Native: {
      if (auto e = read_number_in(body, "n_probs", 0, static_cast<int32_t>(kMaxProbsNative), top)) return e;
      p.gen.logprobs = top > 0;
      if (auto e = read_bool(body, "return_tokens", p.return_tokens)) return e;
      break;
    }
  }
  p.gen.top_logprobs = top;

  // Draft-model limits for speculative decoding (flat keys, as llama-server once took them); the
  // server's flags where absent. n_min above n_max is cut to n_max.
  if (auto e = read_optional_in(body, "speculative.n_max", 0, 1024, p.gen.draft_n_max)) return e;
  if (auto e = read_optional_in(body, "speculative.n_min", 0, 1024, p.gen.draft_n_min)) return e;
  if (auto e = read_optional_in(body, "speculative.p_min", 0.0f, 1.0f, p.gen.draft_p_min)) return e;
  return std::nullopt;
}

std::optional<HttpError> parse_prompt(const json& value, const text::Tokenizer& tok, const char* field,
                                      int32_t n_ctx_slot, std::vector<int32_t>& out) {
  out.clear();
  std::string text;  // the prompt's strings, for the size check
  if (value.is_string()) text = value.get<std::string>();
  if (value.is_array())
    for (const auto& part : value)
      if (part.is_string()) text += part.get<std::string>();
  if (auto e = check_prompt_text(tok, text, n_ctx_slot)) return e;
  if (value.is_string()) {
    out = tok.tokenize(value.get<std::string>(), true, true);
    return std::nullopt;
  }
  const std::string what = "must be a string, or a list of token ids and strings";
  if (!value.is_array() || value.empty()) return HttpError{400, field_message(field, what)};
  bool first = true;
  for (const auto& part : value) {
    if (part.is_string()) {
      const auto ids = tok.tokenize(part.get<std::string>(), first, true);
      out.insert(out.end(), ids.begin(), ids.end());
    } else if (part.is_number_integer()) {
      const bool in_vocab = part.is_number_unsigned()
                                ? part.get<uint64_t>() < static_cast<uint64_t>(tok.n_tokens())
                                : part.get<int64_t>() >= 0 && part.get<int64_t>() < tok.n_tokens();
      if (!in_vocab)
        return HttpError{
            400, field_message(field, "holds " + part.dump() + ", not a token id of this vocabulary (0.." +
                                          std::to_string(tok.n_tokens() - 1) + ")")};
      const int64_t id = part.get<int64_t>();
      out.push_back(static_cast<int32_t>(id));
    } else if (part.is_array()) {
      return HttpError{
          400, field_message(field, "holds a list: several prompts in one request are not supported")};
    } else {
      return HttpError{400, field_message(field, what)};
    }
    first = false;
  }
  return std::nullopt;
}

std::vector<int32_t> tokenize_chat(const text::Tokenizer& tok, const std::string& text) {
  auto ids = tok.tokenize(text, true, true);
  if (tok.add_bos() && ids.size() >= 2 && ids[0] == tok.bos() && ids[1] == tok.bos()) ids.erase(ids.begin());
  return ids;
}

namespace {

HttpError too_long(const std::string& count, int32_t n_ctx_slot) {
  return HttpError{400, "the prompt has " + count + " tokens, more than a slot's context of " +
                            std::to_string(n_ctx_slot) + " allows"};
}

}  // namespace

std::optional<HttpError> check_prompt_text(const text::Tokenizer& tok, std::string_view text,
                                           int32_t n_ctx_slot) {
  const size_t least = tok.min_tokens(text);
  if (least >= static_cast<size_t>(n_ctx_slot))
    return too_long("at least " + std::to_string(least), n_ctx_slot);
  return std::nullopt;
}

std::optional<HttpError> check_prompt(const ServerState& st, const std::vector<int32_t>& prompt) {
  if (prompt.empty()) return HttpError{400, "the prompt is empty"};
  const int32_t n_ctx_slot = st.engine->n_ctx_slot();
  if (static_cast<int64_t>(prompt.size()) >= n_ctx_slot)
    return too_long(std::to_string(prompt.size()), n_ctx_slot);
  return std::nullopt;
}

}  // namespace kiln::serve
