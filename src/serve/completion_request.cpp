#include "serve/completion_request.h"

#include <random>

namespace kiln::serve {

std::optional<HttpError> parse_completion_fields(const json& body, const Model& model, CompletionRequest& p) {
  // Refused: features this server does not implement.
  if (auto it = body.find("tools"); it != body.end() && !it->is_null() && !(it->is_array() && it->empty()))
    return HttpError{400, "field 'tools': tool calls are not supported"};
  if (auto it = body.find("response_format"); it != body.end() && !it->is_null()) {
    if (!it->is_object() || it->value("type", std::string()) != "text")
      return HttpError{400, "field 'response_format': only {\"type\": \"text\"} is supported"};
  }
  int64_t n = 1;
  if (auto e = read_number(body, "n", n)) return e;
  if (n != 1) return HttpError{400, "field 'n': only n = 1 is supported (got " + std::to_string(n) + ")"};
  if (auto it = body.find("logprobs"); it != body.end() && !it->is_null() && *it != false && *it != 0)
    return HttpError{400, "field 'logprobs': log probabilities are not supported"};

  SamplerParams& sp = p.gen.sampler;
  sp.temperature = 1.0f;  // OpenAI's defaults
  sp.top_p = 1.0f;
  sp.top_k = 0;
  sp.min_p = 0.0f;
  if (auto e = read_number(body, "temperature", sp.temperature)) return e;
  if (auto e = read_number(body, "top_p", sp.top_p)) return e;
  if (auto e = read_number(body, "top_k", sp.top_k)) return e;
  if (auto e = read_number(body, "min_p", sp.min_p)) return e;
  if (auto e = read_number(body, "presence_penalty", sp.presence_penalty)) return e;
  if (auto e = read_number(body, "frequency_penalty", sp.frequency_penalty)) return e;
  if (sp.presence_penalty != 0 || sp.frequency_penalty != 0) sp.penalty_last_n = -1;
  int64_t seed = -1;
  if (auto e = read_number(body, "seed", seed)) return e;
  sp.seed = seed >= 0 ? static_cast<uint64_t>(seed) : std::random_device{}();
  int64_t max_tokens = -1;
  if (auto e = read_number(body, "max_tokens", max_tokens)) return e;
  if (auto e = read_number(body, "max_completion_tokens", max_tokens)) return e;
  if (body.contains("max_tokens") || body.contains("max_completion_tokens")) {
    if (max_tokens < 1 && max_tokens != -1)
      return HttpError{400, "field 'max_tokens' must be at least 1 (got " + std::to_string(max_tokens) + ")"};
  }
  if (max_tokens > INT32_MAX) max_tokens = -1;
  p.gen.max_tokens = static_cast<int32_t>(max_tokens);
  if (auto e = read_bool(body, "stream", p.stream)) return e;
  if (auto e = read_bool(body, "cache_prompt", p.gen.cache_prompt)) return e;
  if (auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return HttpError{400, "field 'stream_options' must be an object"};
    if (auto e = read_bool(*it, "include_usage", p.include_usage)) return e;
  }
  if (auto it = body.find("stop"); it != body.end() && !it->is_null()) {
    if (it->is_string()) {
      p.gen.stop.push_back(it->get<std::string>());
    } else if (it->is_array()) {
      for (const auto& s : *it) {
        if (!s.is_string()) return HttpError{400, "field 'stop' must be a string or a list of strings"};
        p.gen.stop.push_back(s.get<std::string>());
      }
    } else {
      return HttpError{400, "field 'stop' must be a string or a list of strings"};
    }
  }
  if (auto it = body.find("logit_bias"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return HttpError{400, "field 'logit_bias' must be an object of token id -> bias"};
    for (const auto& [key, value] : it->items()) {
      int32_t id = -1;
      try {
        size_t used = 0;
        id = std::stoi(key, &used);
        if (used != key.size()) id = -1;
      } catch (...) {
        id = -1;
      }
      if (id < 0 || id >= model.tokenizer().n_tokens())
        return HttpError{400, "field 'logit_bias': '" + key + "' is not a token id of this vocabulary (0.." +
                                  std::to_string(model.tokenizer().n_tokens() - 1) + ")"};
      if (!value.is_number()) return HttpError{400, "field 'logit_bias': the bias of " + key + " must be a number"};
      sp.logit_bias.emplace_back(id, value.get<float>());
    }
  }
  return std::nullopt;
}

std::optional<HttpError> render_chat(const ServerState& st, const json& body, std::string& text) {
  auto it = body.find("messages");
  if (it == body.end() || !it->is_array() || it->empty())
    return HttpError{400, "field 'messages' must be a non-empty list of messages"};
  auto messages = chat_messages_from_json(ordered_json::parse(it->dump()));
  if (!messages.ok()) return HttpError{400, "field 'messages': " + messages.error().message};
  // Text parts become one string content, joined with "\n" (as llama-server does for templates
  // that expect strings); other part types are refused.
  for (ChatMessage& m : *messages) {
    if (m.parts.empty()) continue;
    std::string joined;
    for (const ChatContentPart& part : m.parts) {
      if (part.type != "text")
        return HttpError{400, "field 'messages': content parts of type '" + part.type + "' are not supported"};
      joined += (joined.empty() ? "" : "\n") + part.text;
    }
    m.content = std::move(joined);
    m.parts.clear();
  }
  ChatRenderOptions ro;
  ro.messages = std::move(*messages);
  ro.add_generation_prompt = true;
  ro.bos_token = st.bos_text;
  ro.eos_token = st.eos_text;
  auto rendered = st.chat_template->render(ro);
  if (!rendered.ok()) return HttpError{400, "the chat template: " + rendered.error().message};
  text = std::move(*rendered);
  return std::nullopt;
}

std::vector<int32_t> tokenize_chat(const text::Tokenizer& tok, const std::string& text) {
  auto ids = tok.tokenize(text, true, true);
  if (tok.add_bos() && ids.size() >= 2 && ids[0] == tok.bos() && ids[1] == tok.bos()) ids.erase(ids.begin());
  return ids;
}

std::optional<HttpError> check_prompt(const ServerState& st, const std::vector<int32_t>& prompt) {
  if (prompt.empty()) return HttpError{400, "the prompt is empty"};
  const int32_t n_ctx_slot = st.engine->n_ctx_slot();
  if (static_cast<int64_t>(prompt.size()) >= n_ctx_slot)
    return HttpError{400, "the prompt has " + std::to_string(prompt.size()) + " tokens, more than a slot's context of " +
                              std::to_string(n_ctx_slot) + " allows"};
  return std::nullopt;
}

json usage_json(const Generation& g) {
  return {{"prompt_tokens", g.n_prompt()},
          {"completion_tokens", g.n_generated()},
          {"total_tokens", g.n_prompt() + g.n_generated()},
          {"prompt_tokens_details", {{"cached_tokens", g.n_cached()}}}};
}

}  // namespace kiln::serve
