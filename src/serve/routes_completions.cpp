// POST /v1/completions, /completions, /v1/chat/completions, /chat/completions: OpenAI's shapes,
// with n choices (each its own generation, run concurrently in slots), logprobs (chat: logprobs +
// top_logprobs 0..20; legacy: logprobs 0..5), usage and llama-server's timings. Non-streaming
// answers go through respond_when_done (disconnects cancel the generation, see
// deferred_response.h); streaming answers are SSE chunks, each carrying its choice's index, one
// finish chunk per choice, then the usage chunk (stream_options.include_usage) and "data: [DONE]".
// Also registers llama-server's native POST /completion (routes_native.cpp).
#include "serve/api_json.h"
#include "serve/choice_set.h"
#include "serve/completion_json.h"
#include "serve/completion_request.h"
#include "serve/deferred_response.h"
#include "serve/http.h"
#include "serve/media_request.h"
#include "serve/routes_native.h"
#include "serve/server_state.h"
#include "serve/sse_writer.h"

namespace kiln::serve {
namespace {

// The handler of one completion route: `chat` selects the chat shape.
httplib::Server::Handler completion_handler(const RouteContext& rc, bool chat) {
  return [rc, chat](const httplib::Request& req, httplib::Response& res) {
    auto st = rc.ready(res);
    if (!st) return;
    auto body = parse_body(req, res);
    if (!body) return;
    CompletionRequest p;
    if (auto e = parse_completion_fields(*body, *st->model, p,
                                         chat ? CompletionApi::Chat : CompletionApi::Completions))
      return send_error(res, *e);
    const auto& tok = st->model->tokenizer();
    if (chat) {
      std::string text;
      std::vector<std::string> image_urls;
      if (auto e = render_chat(*st, *body, text, &image_urls)) return send_error(res, *e);
      if (image_urls.empty()) {
        p.gen.prompt = tokenize_chat(tok, text);
      } else {
        std::vector<std::shared_ptr<const PreparedImage>> images(image_urls.size());
        for (size_t i = 0; i < images.size(); ++i)
          if (auto e = read_image_url(*st, image_urls[i], i, images[i])) return send_error(res, *e);
        if (auto e = media_prompt_request(*st, text, images, /*collapse_bos=*/true, p.gen))
          return send_error(res, *e);
      }
    } else {
      auto it = body->find("prompt");
      if (it == body->end())
        return send_error(res, {400, "field 'prompt' must be a string, or a list of token ids and strings"});
      bool handled = false;
      if (auto e = parse_prompt_object(*st, *it, "prompt", p.gen, handled)) return send_error(res, *e);
      if (!handled)
        if (auto e = parse_prompt(*it, tok, "prompt", p.gen.prompt)) return send_error(res, *e);
    }
    if (auto e = check_prompt(*st, p.gen.prompt)) return send_error(res, *e);
    auto submitted =
        ChoiceSet::submit(*st->engine, p.gen, p.n, p.seeded, static_cast<int32_t>(st->ctx->n_vocab()));
    if (auto* e = std::get_if<HttpError>(&submitted)) return send_error(res, *e);
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
          res, set, [st, chat, logprobs, envelope](const ChoiceSet& s, std::vector<ChoiceOutput>& outs) {
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

    struct StreamState {
      std::vector<bool> first;     // the choice's next chunk is its first (chat: carries the role)
      std::vector<size_t> offset;  // legacy text_offset of the choice's next token
    };
    auto ss = std::make_shared<StreamState>();
    ss->first.assign(set->size(), chat);
    ss->offset.assign(set->size(), 0);
    const bool include_usage = p.include_usage;
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [=](size_t, httplib::DataSink& sink) {
          SseWriter out(sink);
          auto choice = [&](size_t i, const std::string& text, const std::vector<TokenOutput>& tokens,
                            const json& finish) {
            json c = {{"index", i}, {"finish_reason", finish}, {"logprobs", nullptr}};
            if (chat) {
              c["delta"] = json::object();
              if (ss->first[i]) c["delta"]["role"] = "assistant";
              if (!text.empty() || ss->first[i]) c["delta"]["content"] = text;
              ss->first[i] = false;
              if (logprobs && !tokens.empty()) c["logprobs"] = {{"content", chat_logprobs(tokens)}};
            } else {
              c["text"] = text;
              if (logprobs && !tokens.empty()) c["logprobs"] = legacy_logprobs(tokens, ss->offset[i]);
            }
            return c;
          };
          const bool done = set->poll(kKeepaliveInterval, [&](size_t i, Generation::Chunk& c) {
            if (!c.text.empty() || !c.tokens.empty())
              out.event(envelope(json::array({choice(i, c.text, c.tokens, nullptr)})));
            if (c.final && set->gen(i).error().empty())
              out.event(envelope(json::array({choice(i, "", {}, set->gen(i).finish_reason())})));
          });
          if (!out.ok()) {
            set->cancel();
            return false;
          }
          if (!done) return true;
          (void)st;  // held until the stream ends: the server stays awake
          if (const std::string e = set->error(); !e.empty()) {
            out.error(e);
          } else if (include_usage) {
            json u = envelope(json::array());
            u["usage"] = usage_json(*set);
            u["timings"] = timings_json(*set);
            out.event(u);
          }
          out.write("data: [DONE]\n\n");
          sink.done();
          return true;
        },
        [set](bool) { set->cancel(); });
  };
}

}  // namespace

void add_completion_routes(httplib::Server& h, const RouteContext& rc) {
  h.Post("/v1/completions", completion_handler(rc, false));
  h.Post("/completions", completion_handler(rc, false));
  h.Post("/v1/chat/completions", completion_handler(rc, true));
  h.Post("/chat/completions", completion_handler(rc, true));
  add_native_completion_routes(h, rc);
}

}  // namespace kiln::serve
