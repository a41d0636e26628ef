// POST /v1/audio/transcriptions and /audio/transcriptions: OpenAI's transcription route as
// llama-server serves it. The multipart form becomes the one-message chat of
// transcription_request.h, which goes the chat route's way (the template, the input_audio part
// read and encoded before the queue, one choice in a slot); a model without an audio encoder is
// the chat route's 400. Answers: response_format json gives {"type": "transcript.text.done",
// "text", "usage": {"type": "tokens", "input_tokens", "output_tokens", "total_tokens",
// "input_tokens_details": {"cached_tokens"}}} (llama-server's shape), text the text alone as
// text/plain; stream gives {"type": "transcript.text.delta", "delta"} events, then the done event
// and "data: [DONE]". The text is the answer's content: a reasoning block the template's parser
// splits off is left out.
#include "serve/routes_audio.h"

#include "serve/chat_request.h"
#include "serve/choice_set.h"
#include "serve/completion_request.h"
#include "serve/deferred_response.h"
#include "serve/queue_completion.h"
#include "serve/http/multipart.h"
#include "serve/server_state.h"
#include "serve/sse_writer.h"
#include "serve/transcription_request.h"
#include "text/chat/output_parser.h"

namespace kiln::serve {
namespace {

// ref: server_task_result_cmpl_final::to_json_oaicompat_asr.
json done_event(const std::string& text, const ChoiceSet& set) {
  const Generation& g = set.gen(0);
  return {{"type", "transcript.text.done"},
          {"text", text},
          {"usage",
           {{"type", "tokens"},
            {"input_tokens", g.n_prompt()},
            {"output_tokens", g.n_generated()},
            {"total_tokens", g.n_prompt() + g.n_generated()},
            {"input_tokens_details", {{"cached_tokens", g.n_cached()}}}}}};
}

// The answer's content as it is written: through the template's output parser when it splits
// the answer (reasoning), else as generated. Not thread-safe: one per request.
class ContentFilter {
 public:
  explicit ContentFilter(const chat::ChatPlan& plan) {
    if (parse_chat_output(plan)) parser_.emplace(plan.parser, [] { return std::string(); });
  }
  std::string feed(const std::string& text) { return parser_ ? parser_->feed(text).content : text; }
  std::string finish() { return parser_ ? parser_->finish().content : std::string(); }

 private:
  std::optional<chat::ChatOutputParser> parser_;
};

void transcription_handler(const RouteContext& rc, const http::Request& req, http::Exchange& ex) {
  auto admitted = rc.admit(req, ex);  // held until the request is queued
  if (!admitted) return;
  const std::string_view content_type = req.header("Content-Type");
  if (!http::is_multipart_form(content_type))
    return send_error(ex, {400, "a transcription request is a multipart/form-data form (got Content-Type '" +
                                    std::string(content_type) + "')"});
  auto form = http::parse_multipart_form(content_type, req.body);
  if (!form.ok()) return send_error(ex, {400, form.error().message});
  TranscriptionRequest t;
  if (auto e = transcription_request(*form, t)) return send_error(ex, *e);
  auto st = rc.ready(ex, t.chat);
  if (!st) return;
  CompletionRequest p;
  if (auto e = parse_completion_fields(t.chat, st->model->tokenizer(), p, CompletionApi::Chat))
    return send_error(ex, *e);
  chat::ChatPlan plan;
  if (auto e = plan_chat_request(*st, rc.options, ordered_json(t.chat), p, plan)) return send_error(ex, *e);
  auto set = queue_completion(rc, *st, p, admitted, ex);  // p.n is 1: the form has no choices
  if (!set) return;
  auto filter = std::make_shared<ContentFilter>(plan);

  if (!t.stream) {
    const bool text_format = t.text_format;
    return respond_when_done(ex, set,
                             ResponseBuilder([=](const ChoiceSet& s, std::vector<ChoiceOutput>& outs) {
                               const std::string text = filter->feed(outs[0].text) + filter->finish();
                               if (text_format) {
                                 http::Response r;
                                 r.content_type = "text/plain; charset=utf-8";
                                 r.body = text;
                                 return r;
                               }
                               return json_response(done_event(text, s));
                             }));
  }
  SseWriter out(ex);
  ex.on_client_gone([set] { set->cancel(); });
  std::string text;
  auto delta = [&](const std::string& piece) {
    if (piece.empty()) return;
    text += piece;
    out.event({{"type", "transcript.text.delta"}, {"delta", piece}});
  };
  bool done = false;
  while (!done) {
    done = set->poll(kPollInterval, [&](size_t, Generation::Chunk& c) {
      delta(filter->feed(c.text));
      if (c.final) delta(filter->finish());
    });
    if (!out.ok()) return set->cancel();
  }
  if (const std::string e = set->error(); !e.empty()) {
    out.error({set->error_status(), e});
  } else {
    out.event(done_event(text, *set));
  }
  out.write("data: [DONE]\n\n");
}

}  // namespace

void add_audio_routes(http::Router& r, const RouteContext& rc) {
  for (const char* path : {"/v1/audio/transcriptions", "/audio/transcriptions"})
    r.post(path, [rc](const http::Request& req, http::Exchange& ex) { transcription_handler(rc, req, ex); });
}

}  // namespace kiln::serve
