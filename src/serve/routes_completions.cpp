// POST /v1/completions, /completions, /v1/chat/completions, /chat/completions: OpenAI's shapes,
// with n choices (each its own generation, run concurrently in slots), logprobs (chat: logprobs +
// top_logprobs 0..20; legacy: logprobs 0..5), usage and llama-server's timings. Non-streaming
// answers go through respond_when_done (disconnects cancel the generation, see
// deferred_response.h); streaming answers are SSE chunks, each carrying its choice's index, one
// finish chunk per choice, then the usage chunk (stream_options.include_usage) and "data: [DONE]".
// A client that stops reading a stream pauses its generation (the engine's backlog bound) and is
// dropped, its generation cancelled, after the server's write timeout.
// Chat answers of a request with tools (or a JSON schema on a reasoning template) go through the
// chat output parser: message.tool_calls / reasoning_content / content, finish_reason
// "tool_calls" when the model called a tool; streamed as delta.tool_calls (the first delta of a
// call carries its id, type and name, the next ones pieces of its arguments) and
// delta.reasoning_content.
// POST /v1/chat/completions/control ends a chat completion's reasoning block while it is written
// (control_handler). Also registers llama-server's native POST /completion (routes_native.cpp).
#include <random>

#include "serve/api_json.h"
#include "serve/chat_request.h"
#include "serve/choice_set.h"
#include "serve/completion_json.h"
#include "serve/completion_request.h"
#include "serve/deferred_response.h"
#include "serve/queue_completion.h"
#include "serve/live_completions.h"
#include "serve/media_request.h"
#include "serve/routes_native.h"
#include "serve/server_state.h"
#include "serve/sse_writer.h"
#include "text/chat/message_json.h"

namespace kiln::serve {
namespace {

// A tool call id as llama-server makes them: 32 random letters and digits.
std::string random_call_id() {
  static constexpr char kChars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937 rng{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, sizeof(kChars) - 2);
  std::string id(32, ' ');
  for (char& c : id) c = kChars[pick(rng)];
  return id;
}

// The delta fields of a parsed stretch of a streamed answer.
void add_parsed_delta(const chat::ChatDelta& d, json& delta) {
  if (!d.reasoning_content.empty()) delta["reasoning_content"] = d.reasoning_content;
  if (!d.content.empty()) delta["content"] = d.content;
  if (d.tool_calls.empty()) return;
  json calls = json::array();
  for (const chat::ToolCallDelta& t : d.tool_calls) {
    json c = {{"index", t.index}};
    if (!t.name.empty()) {
      c["id"] = t.id;
      c["type"] = "function";
      c["function"] = {{"name", t.name}, {"arguments", t.arguments}};
    } else {
      c["function"] = {{"arguments", t.arguments}};
    }
    calls.push_back(std::move(c));
  }
  delta["tool_calls"] = std::move(calls);
}

std::string finish_reason(const Generation& g, bool called_tools) {
  return called_tools && g.finish_reason() == "stop" ? "tool_calls" : g.finish_reason();
}

// The handler of one completion route: `chat` selects the chat shape; chat completions are
// registered in `live` for /v1/chat/completions/control.
http::Handler completion_handler(const RouteContext& rc, bool chat, std::shared_ptr<LiveCompletions> live) {
  return [rc, chat, live](const http::Request& req, http::Exchange& ex) {
    auto admitted = rc.admit(req, ex);  // held until the request is queued
    if (!admitted) return;
    auto body = parse_body(req, ex);  // a malformed request does not wake a sleeping server
    if (!body) return;
    auto st = rc.ready(ex, *body);
    if (!st) return;
    CompletionRequest p;
    const auto& tok = st->model->tokenizer();
    if (auto e =
            parse_completion_fields(*body, tok, p, chat ? CompletionApi::Chat : CompletionApi::Completions))
      return send_error(ex, *e);
    const ordered_json ordered = ordered_json::parse(req.body);  // schemas keep their key order
    chat::ChatPlan plan;
    if (chat) {
      if (auto e = plan_chat_request(*st, rc.options, ordered, p, plan)) return send_error(ex, *e);
    } else {
      OutputFormat format;
      if (auto e = parse_output_format(ordered, true, format)) return send_error(ex, *e);
      if (auto e = default_output_format(rc.options, format)) return send_error(ex, *e);
      if (auto e = apply_output_format(format, p.gen)) return send_error(ex, *e);
      auto it = body->find("prompt");
      if (it == body->end())
        return send_error(ex, {400, "field 'prompt' must be a string, or a list of token ids and strings"});
      bool handled = false;
      if (auto e = parse_prompt_object(*st, *it, "prompt", p.gen, handled)) return send_error(ex, *e);
      if (!handled)
        if (auto e = parse_prompt(*it, tok, "prompt", st->engine->n_ctx_slot(), p.gen.prompt))
          return send_error(ex, *e);
    }
    // One output parser per choice when the chat's answer is split (tool calls, reasoning).
    using Parsers = std::vector<std::shared_ptr<chat::ChatOutputParser>>;
    auto parsers = std::make_shared<Parsers>();
    if (chat && parse_chat_output(plan)) {
      for (int32_t i = 0; i < p.n; ++i)
        parsers->push_back(std::make_shared<chat::ChatOutputParser>(plan.parser, random_call_id));
    }
    auto set = queue_completion(rc, *st, p, admitted, ex);
    if (!set) return;

    const std::string id = make_id(chat ? "chatcmpl-" : "cmpl-");
    if (chat) live->add(id, std::string(req.header("Authorization")), set, p.reasoning_control);
    const int64_t created = unix_time();
    const std::string model_name = st->name;
    const char* object = chat ? (p.stream ? "chat.completion.chunk" : "chat.completion") : "text_completion";
    auto envelope = [=](json choices) {
      return json{{"id", id},
                  {"object", object},
                  {"created", created},
                  {"model", model_name},
                  {"choices", std::move(choices)}};
    };
    const bool logprobs = p.gen.logprobs;

    if (!p.stream) {
      return respond_when_done(
          ex, set,
          [st, chat, logprobs, envelope, parsers](const ChoiceSet& s, std::vector<ChoiceOutput>& outs) {
            json choices = json::array();
            for (size_t i = 0; i < s.size(); ++i) {
              json c = {{"index", i}, {"finish_reason", s.gen(i).finish_reason()}, {"logprobs", nullptr}};
              if (chat && !parsers->empty()) {
                chat::ChatOutputParser& parser = *(*parsers)[i];
                parser.feed(outs[i].text);
                parser.finish();
                c["message"] = chat::message_json<json>(parser.message());
                c["finish_reason"] = finish_reason(s.gen(i), !parser.message().tool_calls.empty());
                if (logprobs) c["logprobs"] = {{"content", chat_logprobs(outs[i].tokens)}};
              } else if (chat) {
                c["message"] = {{"role", "assistant"}, {"content", outs[i].text}};
                if (logprobs) c["logprobs"] = {{"content", chat_logprobs(outs[i].tokens)}};
              } else {
                c["text"] = outs[i].text;
                size_t offset = 0;
                if (logprobs) c["logprobs"] = legacy_logprobs(outs[i].tokens, offset);
              }
              choices.push_back(std::move(c));
            }
            json out = envelope(std::move(choices));
            out["usage"] = usage_json(s);
            out["timings"] = timings_json(s);
            return out;
          });
    }

    std::vector<bool> first(set->size(),
                            chat);  // the choice's next chunk is its first (chat: carries the role)
    std::vector<size_t> offset(set->size(), 0);  // legacy text_offset of the choice's next token
    SseWriter out(ex);
    ex.on_client_gone([set] { set->cancel(); });
    auto choice = [&](size_t i, const std::string& text, const std::vector<TokenOutput>& tokens,
                      const json& finish) {
      json c = {{"index", i}, {"finish_reason", finish}, {"logprobs", nullptr}};
      if (chat && !parsers->empty()) {
        c["delta"] = json::object();
        if (first[i]) c["delta"]["role"] = "assistant";
        first[i] = false;
        chat::ChatOutputParser& parser = *(*parsers)[i];
        if (!text.empty()) add_parsed_delta(parser.feed(text), c["delta"]);
        if (!finish.is_null()) {
          add_parsed_delta(parser.finish(), c["delta"]);
          c["finish_reason"] = finish_reason(set->gen(i), !parser.message().tool_calls.empty());
        }
        if (logprobs && !tokens.empty()) c["logprobs"] = {{"content", chat_logprobs(tokens)}};
        // Text the parser holds back (a marker being written) makes no chunk, as llama-server.
        if (c["delta"].empty() && finish.is_null() && c["logprobs"].is_null()) return json();
      } else if (chat) {
        c["delta"] = json::object();
        if (first[i]) c["delta"]["role"] = "assistant";
        if (!text.empty() || first[i]) c["delta"]["content"] = text;
        first[i] = false;
        if (logprobs && !tokens.empty()) c["logprobs"] = {{"content", chat_logprobs(tokens)}};
      } else {
        c["text"] = text;
        if (logprobs && !tokens.empty()) c["logprobs"] = legacy_logprobs(tokens, offset[i]);
      }
      return c;
    };
    bool done = false;
    while (!done) {
      done = set->poll(kPollInterval, [&](size_t i, Generation::Chunk& c) {
        if (!c.text.empty() || !c.tokens.empty())
          if (json ch = choice(i, c.text, c.tokens, nullptr); !ch.is_null())
            out.event(envelope(json::array({std::move(ch)})));
        if (c.final && set->gen(i).error().empty())
          out.event(envelope(json::array({choice(i, "", {}, set->gen(i).finish_reason())})));
      });
      if (!out.ok()) return set->cancel();
    }
    if (const std::string e = set->error(); !e.empty()) {
      out.error({set->error_status(), e});
    } else if (p.include_usage) {
      json u = envelope(json::array());
      u["usage"] = usage_json(*set);
      u["timings"] = timings_json(*set);
      out.event(u);
    }
    out.write("data: [DONE]\n\n");
  };
}

// POST /v1/chat/completions/control {"id", "action"}: llama-server's control of a chat completion
// in flight (LiveCompletions). Answers 200 {"success": bool[, "message"]}; a body without a
// string id or action is a 400. "model" is not needed: ids are unique across a server's models.
// Only the completion's owner (the same API key) controls it.
http::Handler control_handler(std::shared_ptr<LiveCompletions> live) {
  return [live](const http::Request& req, http::Exchange& ex) {
    auto body = parse_body(req, ex);
    if (!body) return;
    for (const char* key : {"id", "action"}) {
      auto it = body->find(key);
      if (it == body->end() || !it->is_string())
        return send_error(ex, {400, std::string("field '") + key + "' must be a string"});
    }
    const LiveCompletions::Outcome o =
        live->control((*body)["id"].get<std::string>(), std::string(req.header("Authorization")),
                      (*body)["action"].get<std::string>());
    json out = {{"success", o.success}};
    if (!o.success) out["message"] = o.message;
    send_json(ex, out);
  };
}

}  // namespace

void add_completion_routes(http::Router& r, const RouteContext& rc) {
  auto live = std::make_shared<LiveCompletions>();
  r.post("/v1/completions", completion_handler(rc, false, live));
  r.post("/completions", completion_handler(rc, false, live));
  r.post("/v1/chat/completions", completion_handler(rc, true, live));
  r.post("/chat/completions", completion_handler(rc, true, live));
  r.post("/v1/chat/completions/control", control_handler(live));
  add_native_completion_routes(r, rc);
}

}  // namespace kiln::serve
