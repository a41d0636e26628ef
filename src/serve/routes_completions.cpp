// POST /v1/completions, /completions, /v1/chat/completions, /chat/completions: OpenAI's shapes,
// with n choices (each its own generation, run concurrently in slots), logprobs (chat: logprobs +
// top_logprobs 0..20; legacy: logprobs 0..5), usage and llama-server's timings. Non-streaming
// answers go through respond_when_done (disconnects cancel the generation, see
// deferred_response.h); streaming answers are SSE chunks, each carrying its choice's index, one
// finish chunk per choice, then the usage chunk (stream_options.include_usage) and "data: [DONE]".
// A client that stops reading a stream pauses its generation (the engine's backlog bound) and is
// dropped, its generation cancelled, after the server's write timeout.
// Also registers llama-server's native POST /completion (routes_native.cpp).
#include "serve/api_json.h"
#include "serve/choice_set.h"
#include "serve/completion_json.h"
#include "serve/completion_request.h"
#include "serve/deferred_response.h"
#include "serve/routes_native.h"
#include "serve/server_state.h"
#include "serve/sse_writer.h"

namespace kiln::serve {
namespace {

// The handler of one completion route: `chat` selects the chat shape.
http::Handler completion_handler(const RouteContext& rc, bool chat) {
  return [rc, chat](const http::Request& req, http::Exchange& ex) {
    auto body = parse_body(req, ex);  // a malformed request does not wake a sleeping server
    if (!body) return;
    auto st = rc.ready(ex);
    if (!st) return;
    CompletionRequest p;
    const auto& tok = st->model->tokenizer();
    if (auto e =
            parse_completion_fields(*body, tok, p, chat ? CompletionApi::Chat : CompletionApi::Completions))
      return send_error(ex, *e);
    if (chat) {
      std::string text;
      if (auto e = render_chat({*st->chat_template, st->bos_text, st->eos_text}, *body, text))
        return send_error(ex, *e);
      p.gen.prompt = tokenize_chat(tok, text);
    } else {
      auto it = body->find("prompt");
      if (it == body->end())
        return send_error(ex, {400, "field 'prompt' must be a string, or a list of token ids and strings"});
      if (auto e = parse_prompt(*it, tok, "prompt", p.gen.prompt)) return send_error(ex, *e);
    }
    if (auto e = check_prompt(*st, p.gen.prompt)) return send_error(ex, *e);
    auto submitted =
        ChoiceSet::submit(*st->engine, p.gen, p.n, p.seeded, static_cast<int32_t>(st->ctx->n_vocab()));
    if (auto* e = std::get_if<HttpError>(&submitted)) return send_error(ex, *e);
    auto set = std::get<std::shared_ptr<ChoiceSet>>(std::move(submitted));

    const std::string id = make_id(chat ? "chatcmpl-" : "cmpl-");
    const int64_t created = unix_time();
    const std::string model_name = st->model->name();
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
          ex, set, [st, chat, logprobs, envelope](const ChoiceSet& s, std::vector<ChoiceOutput>& outs) {
            json choices = json::array();
            for (size_t i = 0; i < s.size(); ++i) {
              json c = {{"index", i}, {"finish_reason", s.gen(i).finish_reason()}, {"logprobs", nullptr}};
              if (chat) {
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
      if (chat) {
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
          out.event(envelope(json::array({choice(i, c.text, c.tokens, nullptr)})));
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

}  // namespace

void add_completion_routes(http::Router& r, const RouteContext& rc) {
  r.post("/v1/completions", completion_handler(rc, false));
  r.post("/completions", completion_handler(rc, false));
  r.post("/v1/chat/completions", completion_handler(rc, true));
  r.post("/chat/completions", completion_handler(rc, true));
  add_native_completion_routes(r, rc);
}

}  // namespace kiln::serve
