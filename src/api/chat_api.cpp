// kiln.h: a model's output split into an OpenAI chat message (content, reasoning, tool calls) by
// the chat plan and output parser `kiln serve` uses (text/chat/chat_plan.h, output_parser.h).
#include <nlohmann/json.hpp>

#include "api/handles.h"
#include "text/chat/chat_plan.h"
#include "text/chat/chat_syntax.h"
#include "text/chat/message_json.h"
#include "text/json_depth.h"

using namespace kiln;
using namespace kiln::api;
using nlohmann::ordered_json;

namespace kiln::api {

Result<ordered_json> parse_json(std::string_view what, const char* text) {
  if (text::json_nests_deeper_than(text, text::kMaxJsonDepth))
    return make_error(what, ": nests deeper than ", text::kMaxJsonDepth, " levels");
  auto j = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return make_error(what, ": not valid JSON");
  return j;
}

}  // namespace kiln::api

namespace {

// The chat request of `body` (messages, tools, tool_choice) for the model's template, planned as
// the server plans it; an Error names the field.
Result<chat::ChatPlan> plan(const kiln_model& model, const ordered_json& body) {
  if (!body.is_object() || !body.contains("messages")) return make_error("request_json: no 'messages'");
  chat::ChatRequest r;
  KILN_ASSIGN_OR_RETURN(r.messages, chat_messages_from_json(body["messages"]));
  if (body.contains("tools") && !body["tools"].is_null()) {
    KILN_ASSIGN_OR_RETURN(r.tools, chat::tools_from_json(body["tools"]));
  }
  if (body.contains("tool_choice") && !body["tool_choice"].is_null()) {
    KILN_ASSIGN_OR_RETURN(r.tool_choice, chat::tool_choice_from_json(body["tool_choice"], r.tools));
  }
  const ModelChatTemplate& t = *model.chat_template;
  r.bos_token = t.bos_text;
  r.eos_token = t.eos_text;
  return chat::plan_chat(t.chat_template, chat::detect_chat_syntax(t.chat_template), r);
}

}  // namespace

extern "C" {

kiln_status kiln_model_parse_chat_output(const kiln_model* model, const char* request_json,
                                         const char* output, char* buf, int64_t size, int64_t* length) {
  constexpr std::string_view fn = "kiln_model_parse_chat_output";
  KILN_API_TRY(check_handle(fn, "model", model));
  KILN_API_TRY(check_pointer(fn, "request_json", request_json));
  KILN_API_TRY(check_pointer(fn, "output", output));
  return api_call(fn, [&] {
    auto body = parse_json("request_json", request_json);
    if (!body.ok()) return bad_argument(fn, body.error().message);
    auto planned = plan(*model, *body);
    if (!planned.ok()) return bad_argument(fn, planned.error().message);
    const chat::ParsedMessage m = chat::parse_output(output, /*partial=*/false, planned->parser);
    return write_text(fn, chat::message_json<ordered_json>(m).dump(), buf, size, length);
  });
}

kiln_status kiln_model_chat_prompt(const kiln_model* model, const char* request_json, char* buf, int64_t size,
                                   int64_t* length) {
  constexpr std::string_view fn = "kiln_model_chat_prompt";
  KILN_API_TRY(check_handle(fn, "model", model));
  KILN_API_TRY(check_pointer(fn, "request_json", request_json));
  return api_call(fn, [&] {
    auto body = parse_json("request_json", request_json);
    if (!body.ok()) return bad_argument(fn, body.error().message);
    auto planned = plan(*model, *body);
    if (!planned.ok()) return bad_argument(fn, planned.error().message);
    return write_text(fn, planned->prompt, buf, size, length);
  });
}

}  // extern "C"
