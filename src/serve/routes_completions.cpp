// POST /v1/completions, /completions, /v1/chat/completions, /chat/completions: OpenAI's shapes,
// non-streaming or SSE chunks ending with "data: [DONE]".
#include "serve/http.h"
#include "serve/api_json.h"
#include "serve/completion_request.h"
#include "serve/server_state.h"

namespace kiln::serve {
namespace {

// The handler of one completion route: `chat` selects the chat shape.
httplib::Server::Handler completion_handler(const RouteContext& rc, bool chat) {
  return [rc, chat](const httplib::Request& req, httplib::Response& res) {
    auto st = rc.ready();
    if (!st) return send_error(res, {503, "the model is loading"});
    auto body = parse_body(req, res);
    if (!body) return;
    CompletionRequest p;
    if (auto e = parse_completion_fields(*body, *st->model, p)) return send_error(res, *e);
    const auto& tok = st->model->tokenizer();
    if (chat) {
      std::string text;
      if (auto e = render_chat(*st, *body, text)) return send_error(res, *e);
      p.gen.prompt = tokenize_chat(tok, text);
    } else {
      auto it = body->find("prompt");
      if (it != body->end() && it->is_array() && it->size() == 1 && (*it)[0].is_string()) it = it->begin();
      if (it == body->end() || !it->is_string()) return send_error(res, {400, "field 'prompt' must be a string"});
      p.gen.prompt = tok.tokenize(it->get<std::string>(), true, true);
    }
    if (auto e = check_prompt(*st, p.gen.prompt)) return send_error(res, *e);
    auto sampler = Sampler::create(p.gen.sampler, static_cast<int32_t>(st->ctx->n_vocab()));
    if (!sampler.ok()) return send_error(res, {400, sampler.error().message});
    auto gen_or = st->engine->submit(std::move(p.gen), std::move(*sampler));
    if (!gen_or.ok()) return send_error(res, {503, gen_or.error().message});
    std::shared_ptr<Generation> gen = *gen_or;

    const std::string id = make_id(chat ? "chatcmpl-" : "cmpl-");
    const int64_t created = unix_time();
    const std::string model_name = st->model->name();
    const char* object = chat ? (p.stream ? "chat.completion.chunk" : "chat.completion") : "text_completion";
    auto envelope = [=](json choices) {
      return json{{"id", id}, {"object", object}, {"created", created}, {"model", model_name},
                  {"choices", std::move(choices)}};
    };

    if (!p.stream) {
      std::string text;
      for (;;) {
        auto c = gen->next();
        text += c.text;
        if (c.final) break;
      }
      if (!gen->error().empty()) return send_error(res, {500, gen->error()});
      json choice = {{"index", 0}, {"finish_reason", gen->finish_reason()}, {"logprobs", nullptr}};
      if (chat)
        choice["message"] = {{"role", "assistant"}, {"content", text}};
      else
        choice["text"] = text;
      json out = envelope(json::array({choice}));
      out["usage"] = usage_json(*gen);
      return send_json(res, out);
    }

    const bool include_usage = p.include_usage;
    auto first = std::make_shared<bool>(chat);
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [=](size_t, httplib::DataSink& sink) {
          auto event = [&](const json& j) {
            const std::string line = sse_event(j);
            return sink.write(line.data(), line.size());
          };
          auto choice = [&](const std::string& text, const json& finish) {
            json c = {{"index", 0}, {"finish_reason", finish}, {"logprobs", nullptr}};
            if (chat) {
              c["delta"] = json::object();
              if (*first) c["delta"]["role"] = "assistant";
              if (!text.empty() || *first) c["delta"]["content"] = text;
              *first = false;
            } else {
              c["text"] = text;
            }
            return c;
          };
          auto c = gen->next();
          if (!c.final) return event(envelope(json::array({choice(c.text, nullptr)})));
          if (!gen->error().empty()) {
            json err = {{"error", {{"message", gen->error()}, {"type", "server_error"}, {"code", 500}}}};
            event(err);
          } else {
            if (!c.text.empty() && !event(envelope(json::array({choice(c.text, nullptr)})))) return false;
            if (!event(envelope(json::array({choice("", gen->finish_reason())})))) return false;
            if (include_usage) {
              json u = envelope(json::array());
              u["usage"] = usage_json(*gen);
              if (!event(u)) return false;
            }
          }
          static const std::string kDone = "data: [DONE]\n\n";
          sink.write(kDone.data(), kDone.size());
          sink.done();
          return true;
        },
        [gen](bool) { gen->cancel(); });
  };
}

}  // namespace

void add_completion_routes(httplib::Server& h, const RouteContext& rc) {
  h.Post("/v1/completions", completion_handler(rc, false));
  h.Post("/completions", completion_handler(rc, false));
  h.Post("/v1/chat/completions", completion_handler(rc, true));
  h.Post("/chat/completions", completion_handler(rc, true));
}

}  // namespace kiln::serve
