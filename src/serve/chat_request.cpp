#include "serve/chat_request.h"

#include "llm/media_prompt.h"
#include "serve/media_request.h"
#include "text/grammar/json_schema.h"

namespace kiln::serve {
namespace {

bool given(const ordered_json& body, const char* key) {
  auto it = body.find(key);
  return it != body.end() && !it->is_null();
}

// The messages, parts joined into one string content (as llama-server does for templates that
// expect strings): text parts with "\n" between them, each image_url and input_audio part as a
// media marker with no line break around it; the parts' urls and audio data go to `media` in order
// (null: ignored). Other part types are refused. Null content is empty text, except beside tool calls (templates test
// it there).
std::optional<HttpError> read_messages(const ordered_json& body, std::vector<ChatMessage>& out,
                                       std::vector<MediaPart>* media) {
  auto it = body.find("messages");
  if (it == body.end() || !it->is_array() || it->empty())
    return HttpError{400, "field 'messages' must be a non-empty list of messages"};
  auto messages = chat_messages_from_json(*it);
  if (!messages.ok()) return HttpError{400, "field 'messages': " + messages.error().message};
  for (size_t i = 0; i < messages->size(); ++i) {
    ChatMessage& m = (*messages)[i];
    if (auto c = m.extra.find("content"); c != m.extra.end() && c->is_null() && !m.extra.contains("tool_calls"))
      m.extra.erase(c);
    if (m.parts.empty()) continue;
    std::string joined;
    bool after_marker = false;
    for (const ChatContentPart& part : m.parts) {
      if (part.type == "image_url") {
        const auto url = part.extra.find("image_url");
        const bool ok =
            url != part.extra.end() && url->is_object() && url->contains("url") && (*url)["url"].is_string();
        if (!ok)
          return HttpError{
              400, "field 'messages': an image_url part needs {\"image_url\": {\"url\": \"data:...\"}}"};
        if (media) media->push_back({.audio = false, .data = (*url)["url"].get<std::string>()});
        joined += kMediaMarker;
        after_marker = true;
        continue;
      }
      if (part.type == "input_audio") {
        // ref: llama-server reads input_audio.data (base64) and does not check "format" (the bytes
        // tell the format); a "format" given must still be a string.
        const auto a = part.extra.find("input_audio");
        const bool ok = a != part.extra.end() && a->is_object() && a->contains("data") && (*a)["data"].is_string() &&
                        (!a->contains("format") || (*a)["format"].is_string());
        if (!ok)
          return HttpError{400,
                           "field 'messages': an input_audio part needs {\"input_audio\": {\"data\": \"<base64>\", "
                           "\"format\": \"wav\" or \"mp3\"}}"};
        if (media) media->push_back({.audio = true, .data = (*a)["data"].get<std::string>()});
        joined += kMediaMarker;
        after_marker = true;
        continue;
      }
      if (part.type != "text")
        return HttpError{400, "field 'messages': message " + std::to_string(i) + ": content parts of type '" +
                                  part.type + "' are not supported"};
      joined += (joined.empty() || after_marker ? "" : "\n") + part.text;
      after_marker = false;
    }
    m.content = std::move(joined);
    m.parts.clear();
  }
  out = std::move(*messages);
  return std::nullopt;
}

std::optional<HttpError> read_tools(const ordered_json& body, chat::ChatRequest& r) {
  if (given(body, "tools")) {
    auto tools = chat::tools_from_json(body["tools"]);
    if (!tools.ok()) return HttpError{400, tools.error().message};  // "tools[1].function.name: missing"
    r.tools = std::move(*tools);
  }
  if (given(body, "tool_choice")) {
    auto choice = chat::tool_choice_from_json(body["tool_choice"], r.tools);
    if (!choice.ok()) return HttpError{400, choice.error().message};  // "tool_choice: ..."
    r.tool_choice = *choice;
  }
  if (r.tools.empty() && (r.tool_choice.mode == chat::ToolChoice::Mode::Required ||
                          r.tool_choice.mode == chat::ToolChoice::Mode::Named))
    return HttpError{400, "field 'tool_choice': a tool call is required but 'tools' is empty"};
  if (given(body, "parallel_tool_calls")) {
    if (!body["parallel_tool_calls"].is_boolean())
      return HttpError{400, "field 'parallel_tool_calls' must be a boolean"};
    r.parallel_tool_calls = body["parallel_tool_calls"].get<bool>();
  }
  return std::nullopt;
}

}  // namespace

std::optional<HttpError> parse_output_format(const ordered_json& body, bool read_response_format,
                                             OutputFormat& out) {
  int n = 0;
  if (given(body, "grammar")) {
    if (!body["grammar"].is_string()) return HttpError{400, "field 'grammar' must be a string (GBNF)"};
    out.grammar = body["grammar"].get<std::string>();
    n += !out.grammar.empty();
  }
  if (given(body, "json_schema")) {
    if (!body["json_schema"].is_object() && !body["json_schema"].is_boolean())
      return HttpError{400, "field 'json_schema' must be a JSON schema (an object)"};
    out.json_schema = body["json_schema"];
    ++n;
  }
  if (read_response_format && given(body, "response_format")) {
    const ordered_json& rf = body["response_format"];
    const std::string type =
        rf.is_object() && rf.contains("type") && rf["type"].is_string() ? rf["type"].get<std::string>() : "";
    if (type == "json_object") {
      // OpenAI's JSON mode: an object; llama-server also takes a schema here.
      out.json_schema =
          rf.contains("schema") && !rf["schema"].is_null() ? rf["schema"] : ordered_json{{"type", "object"}};
      ++n;
    } else if (type == "json_schema") {
      if (!rf.contains("json_schema") || !rf["json_schema"].is_object() ||
          !rf["json_schema"].contains("schema"))
        return HttpError{400,
                         "field 'response_format': {\"type\": \"json_schema\"} needs \"json_schema\": "
                         "{\"schema\": {...}}"};
      out.json_schema = rf["json_schema"]["schema"];
      ++n;
    } else if (type != "text") {
      return HttpError{400,
                       "field 'response_format': type must be \"text\", \"json_object\" or \"json_schema\""};
    }
  }
  if (n > 1) return HttpError{400, "give only one of 'grammar', 'json_schema' and 'response_format'"};
  return std::nullopt;
}

std::optional<HttpError> apply_output_format(const OutputFormat& format, GenerationRequest& request) {
  if (!format.grammar.empty()) {
    request.grammar = grammar::GrammarSpec{.gbnf = format.grammar, .lazy = false, .triggers = {}};
  } else if (format.json_schema) {
    auto gbnf = grammar::json_schema_to_gbnf(*format.json_schema);
    if (!gbnf.ok()) return HttpError{400, "field 'json_schema': " + gbnf.error().message};
    request.grammar = grammar::GrammarSpec{.gbnf = std::move(*gbnf), .lazy = false, .triggers = {}};
  }
  return std::nullopt;
}

std::optional<HttpError> default_output_format(const ServerOptions& opt, OutputFormat& format) {
  if (!format.grammar.empty() || format.json_schema) return std::nullopt;
  format.grammar = opt.grammar;
  if (!opt.json_schema.empty()) {
    auto schema = ordered_json::parse(opt.json_schema, nullptr, /*allow_exceptions=*/false);
    if (schema.is_discarded()) return HttpError{500, "the server's --json-schema is not valid JSON"};
    format.json_schema = std::move(schema);
  }
  return std::nullopt;
}

namespace {

// A final assistant message is continued unless body["continue_final_message"] is false
// (llama-server's prefill): it leaves r.messages, the assistant's turn is opened, and its text goes
// to `prefill` (for the end of the prompt). One with tool_calls is a finished turn, not continued.
std::optional<HttpError> take_prefill(const ordered_json& body, chat::ChatRequest& r, std::string& prefill) {
  bool continue_final = true;
  if (given(body, "continue_final_message")) {
    if (!body["continue_final_message"].is_boolean())
      return HttpError{400, "field 'continue_final_message' must be a boolean"};
    continue_final = body["continue_final_message"].get<bool>();
  }
  const size_t n = r.messages.size();
  if (!continue_final || r.messages.back().role != "assistant" || r.messages.back().extra.contains("tool_calls"))
    return std::nullopt;
  if (n >= 2 && r.messages[n - 2].role == "assistant")
    return HttpError{400, "field 'messages': two assistant messages at the end (only the last one can be continued)"};
  prefill = std::move(r.messages.back().content);
  r.messages.pop_back();
  r.add_generation_prompt = true;
  return std::nullopt;
}

// reasoning_format, chat_template_kwargs (enable_thinking among them) and reasoning_effort over
// the server's defaults, in llama-server's order: the server's -rea, then the kwargs'
// enable_thinking, then reasoning_effort "none" (ref: oaicompat_chat_params_parse).
std::optional<HttpError> read_reasoning_options(const ServerOptions& opt, const ordered_json& body,
                                                chat::ChatRequest& r) {
  std::string format = opt.reasoning_format;
  if (given(body, "reasoning_format")) {
    if (!body["reasoning_format"].is_string())
      return HttpError{400, "field 'reasoning_format' must be a string (none, auto, deepseek, deepseek-legacy)"};
    format = body["reasoning_format"].get<std::string>();
  }
  auto parsed = chat::reasoning_format_from_name(format);
  if (!parsed.ok()) return HttpError{400, "field 'reasoning_format': " + parsed.error().message};
  r.reasoning_format = *parsed;
  r.enable_thinking = opt.enable_thinking;
  if (!opt.chat_template_kwargs.empty()) {
    r.template_kwargs = ordered_json::parse(opt.chat_template_kwargs, nullptr, /*allow_exceptions=*/false);
    if (!r.template_kwargs.is_object())
      return HttpError{500, "the server's --chat-template-kwargs is not a JSON object"};
  }
  if (given(body, "chat_template_kwargs")) {  // over the server's, key by key
    if (!body["chat_template_kwargs"].is_object())
      return HttpError{400, "field 'chat_template_kwargs' must be an object"};
    for (const auto& [key, value] : body["chat_template_kwargs"].items()) r.template_kwargs[key] = value;
  }
  if (auto it = r.template_kwargs.find("enable_thinking"); it != r.template_kwargs.end()) {
    if (it->is_string())
      return HttpError{400, "field 'chat_template_kwargs': enable_thinking must be a boolean, not a string"};
    if (it->is_boolean()) r.enable_thinking = it->get<bool>();
  }
  if (given(body, "reasoning_effort")) {
    if (!body["reasoning_effort"].is_string()) return HttpError{400, "field 'reasoning_effort' must be a string"};
    const std::string effort = body["reasoning_effort"].get<std::string>();
    if (effort == "none") {
      r.enable_thinking = false;
      r.template_kwargs.erase("reasoning_effort");
    } else if (!effort.empty()) {
      r.template_kwargs["reasoning_effort"] = effort;
    }
  }
  return std::nullopt;
}

// The chat of `body` planned: with the generation prompt unless body["add_generation_prompt"] is
// false; a final assistant message continued (take_prefill); chat_template_kwargs as template
// variables.
std::optional<HttpError> make_plan(const ServerState& st, const ServerOptions& opt, const ordered_json& body,
                                   chat::ChatPlan& plan, std::vector<MediaPart>* media,
                                   std::string* prefill_out) {
  chat::ChatRequest r;
  if (auto e = read_messages(body, r.messages, media)) return e;
  if (given(body, "add_generation_prompt")) {
    if (!body["add_generation_prompt"].is_boolean())
      return HttpError{400, "field 'add_generation_prompt' must be a boolean"};
    r.add_generation_prompt = body["add_generation_prompt"].get<bool>();
  }
  std::string prefill;
  if (auto e = take_prefill(body, r, prefill)) return e;
  if (auto e = read_tools(body, r)) return e;
  OutputFormat format;
  if (auto e = parse_output_format(body, true, format)) return e;
  // The server's --grammar / --json-schema when the request sets no format and calls no tools
  // (llama-server: a tool-call grammar replaces the default one).
  const bool use_tools = !r.tools.empty() && r.tool_choice.mode != chat::ToolChoice::Mode::None;
  if (!use_tools)
    if (auto e = default_output_format(opt, format)) return e;
  r.grammar = format.grammar;
  r.json_schema = format.json_schema;
  if (auto e = read_reasoning_options(opt, body, r)) return e;
  r.bos_token = st.bos_text;
  r.eos_token = st.eos_text;
  auto planned = chat::plan_chat(*st.chat_template, st.chat_syntax, r);
  if (!planned.ok()) return HttpError{400, planned.error().message};
  plan = std::move(*planned);
  plan.prompt += prefill;
  if (prefill_out) *prefill_out = std::move(prefill);
  return std::nullopt;
}

// The reasoning budget of a planned chat: body["reasoning_budget_tokens"] (or
// "thinking_budget_tokens"; -1: the server's --reasoning-budget) and "reasoning_budget_message",
// for templates with reasoning tags; none when the budget is -1 and "reasoning_control" is not
// true, uncapped when it is (ref: oaicompat_chat_params_parse, common_sampler_init). The
// generation prompt and the continued message count as prefill.
std::optional<HttpError> read_reasoning_budget(const ServerState& st, const ServerOptions& opt,
                                               const ordered_json& body, const chat::ChatPlan& plan,
                                               const std::string& prefill, CompletionRequest& p) {
  GenerationRequest& gen = p.gen;
  bool control = false;
  if (given(body, "reasoning_control")) {
    if (!body["reasoning_control"].is_boolean()) return HttpError{400, "field 'reasoning_control' must be a boolean"};
    control = body["reasoning_control"].get<bool>();
  }
  int64_t budget = -1;
  for (const char* key : {"reasoning_budget_tokens", "thinking_budget_tokens"}) {
    if (!given(body, key)) continue;
    if (!body[key].is_number_integer() || body[key].get<int64_t>() < -1 || body[key].get<int64_t>() > INT32_MAX)
      return HttpError{400, field_message(key, "must be an integer, -1 (the server's budget) or more")};
    budget = body[key].get<int64_t>();
    break;
  }
  if (budget == -1) budget = opt.reasoning_budget;
  std::string message = opt.reasoning_budget_message;
  if (given(body, "reasoning_budget_message")) {
    if (!body["reasoning_budget_message"].is_string())
      return HttpError{400, "field 'reasoning_budget_message' must be a string"};
    message = body["reasoning_budget_message"].get<std::string>();
  }
  if ((budget < 0 && !control) || plan.reasoning_start.empty() || plan.reasoning_end.empty()) return std::nullopt;
  gen.reasoning_budget = reasoning_budget_spec(st.model->tokenizer(), plan.reasoning_start, plan.reasoning_end, message,
                                               budget, plan.generation_prompt + prefill);
  if (!gen.reasoning_budget) return std::nullopt;
  p.reasoning_control = control;
  return std::nullopt;
}

}  // namespace

std::optional<HttpError> render_chat(const ServerState& st, const ServerOptions& opt, const ordered_json& body,
                                     std::string& text) {
  chat::ChatPlan plan;
  if (auto e = make_plan(st, opt, body, plan, nullptr, nullptr)) return e;
  text = std::move(plan.prompt);
  return std::nullopt;
}

std::optional<HttpError> plan_chat_request(const ServerState& st, const ServerOptions& opt, const ordered_json& body,
                                           CompletionRequest& p, chat::ChatPlan& plan) {
  std::vector<MediaPart> parts;
  std::string prefill;
  if (auto e = make_plan(st, opt, body, plan, &parts, &prefill)) return e;
  if (auto e = read_reasoning_budget(st, opt, body, plan, prefill, p)) return e;
  const auto& tok = st.model->tokenizer();
  if (auto e = check_prompt_text(tok, plan.prompt, st.engine->n_ctx_slot())) return e;
  if (parts.empty()) {
    p.gen.prompt = tokenize_chat(tok, plan.prompt);
  } else {
    std::vector<MediaItem> media(parts.size());
    size_t n_images = 0, n_audio = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (parts[i].audio) {
        if (auto e = read_audio_data(st, parts[i].data, n_audio++, media[i].audio)) return e;
      } else if (auto e = read_image_url(st, parts[i].data, n_images++, media[i].image)) {
        return e;
      }
    }
    if (auto e = media_prompt_request(st, plan.prompt, media, /*collapse_bos=*/true, p.gen)) return e;
  }
  p.gen.grammar = plan.grammar;
  for (const std::string& text : plan.preserved_tokens) {
    const auto ids = tok.tokenize(text, false, true);
    if (ids.size() == 1) p.gen.preserved_tokens.push_back(ids[0]);
  }
  return std::nullopt;
}

bool parse_chat_output(const chat::ChatPlan& plan) {
  return plan.parser.parse_tool_calls || plan.parser.syntax.reasoning.supported();
}

}  // namespace kiln::serve
