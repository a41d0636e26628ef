// POST /completion: llama-server's native completion route. Fields (llama-server's names and
// defaults): prompt (a string, a list of token ids and strings, or {"prompt_string",
// "multimodal_data": [base64 images]} with --mmproj: serve/media_request.h), n_predict (-1; 0 only caches
// the prompt), temperature 0.8, top_k 40, top_p 0.95, min_p 0.05, typical_p, repeat_penalty,
// repeat_last_n, presence_penalty, frequency_penalty, stop, seed, stream, n_probs (0..100),
// cache_prompt, logit_bias ({"id": bias} or [[id or text, bias], ...], false bans), ignore_eos,
// return_tokens, grammar (GBNF) or json_schema (one of them).
// Fields that would change the output and that kiln lacks (mirostat, dry_*, xtc_*, samplers, lora,
// post_sampling_probs, n, ...) are refused with a 400 (unsupported_fields.h).
//
// Response: content, tokens (with return_tokens), stop: true, stop_type ("eos", "limit", "word";
// "none" when cancelled), stopping_word, model, tokens_predicted, tokens_evaluated (the prompt's
// tokens), tokens_cached (prompt tokens reused from the slot's cache), truncated, timings, and
// completion_probabilities when n_probs > 0. Streaming: SSE events {"content", "tokens", "stop":
// false} (with completion_probabilities), the last with stop: true and the final fields; no [DONE].
#include "serve/routes_native.h"

#include "serve/api_json.h"
#include "serve/chat_request.h"
#include "serve/choice_set.h"
#include "serve/completion_json.h"
#include "serve/completion_request.h"
#include "serve/deferred_response.h"
#include "serve/queue_completion.h"
#include "serve/media_request.h"
#include "serve/server_state.h"
#include "serve/sse_writer.h"

namespace kiln::serve {
namespace {

const char* stop_type_name(StopType t) {
  switch (t) {
    case StopType::Eos:
      return "eos";
    case StopType::Limit:
      return "limit";
    case StopType::Word:
      return "word";
    case StopType::None:
      break;
  }
  return "none";
}

json token_ids(const std::vector<TokenOutput>& tokens) {
  json ids = json::array();
  for (const TokenOutput& t : tokens) ids.push_back(t.id);
  return ids;
}

// The fields of the last (or only) answer.
json final_fields(const ChoiceSet& set, const std::string& model_name, int32_t n_ctx_slot) {
  const Generation& g = set.gen(0);
  return {{"index", 0},
          {"stop", true},
          {"model", model_name},
          {"tokens_predicted", g.n_generated()},
          {"tokens_evaluated", g.n_prompt()},
          {"tokens_cached", g.n_cached()},
          {"truncated", g.stop_type() == StopType::Limit && g.n_prompt() + g.n_generated() + 1 >= n_ctx_slot},
          {"stop_type", stop_type_name(g.stop_type())},
          {"stopping_word", g.stopping_word()},
          {"timings", timings_json(set)}};
}

}  // namespace

void add_native_completion_routes(http::Router& r, const RouteContext& rc) {
  r.post("/completion", [rc](const http::Request& req, http::Exchange& ex) {
    auto admitted = rc.admit(req, ex);  // held until the request is queued
    if (!admitted) return;
    auto body = parse_body(req, ex);  // a malformed request does not wake a sleeping server
    if (!body) return;
    auto st = rc.ready(ex, *body);
    if (!st) return;
    CompletionRequest p;
    const auto& tok = st->model->tokenizer();
    if (auto e = parse_completion_fields(*body, tok, p, CompletionApi::Native)) return send_error(ex, *e);
    OutputFormat format;
    if (auto e = parse_output_format(ordered_json::parse(req.body), false, format)) return send_error(ex, *e);
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
    auto set = queue_completion(rc, *st, p, admitted, ex);  // p.n is 1: /completion has no choices
    if (!set) return;
    const std::string model_name = st->name;
    const int32_t n_ctx_slot = st->engine->n_ctx_slot();
    const bool probs = p.gen.logprobs, return_tokens = p.return_tokens;

    if (!p.stream) {
      return respond_when_done(ex, set, [&](const ChoiceSet& s, std::vector<ChoiceOutput>& outs) {
        json out = final_fields(s, model_name, n_ctx_slot);
        out["content"] = outs[0].text;
        out["tokens"] = return_tokens ? token_ids(outs[0].tokens) : json::array();
        if (probs) out["completion_probabilities"] = native_probs(outs[0].tokens);
        return out;
      });
    }

    SseWriter out(ex);
    ex.on_client_gone([set] { set->cancel(); });
    bool done = false;
    while (!done) {
      done = set->poll(kPollInterval, [&](size_t, Generation::Chunk& c) {
        if (c.final) {
          if (!set->gen(0).error().empty()) return;
          json last = final_fields(*set, model_name, n_ctx_slot);
          last["content"] = c.text;
          last["tokens"] = token_ids(c.tokens);
          if (probs) last["completion_probabilities"] = native_probs(c.tokens);
          return out.event(last);
        }
        json e = {{"index", 0}, {"content", c.text}, {"tokens", token_ids(c.tokens)}, {"stop", false}};
        if (probs) e["completion_probabilities"] = native_probs(c.tokens);
        out.event(e);
      });
      if (!out.ok()) return set->cancel();
    }
    if (const std::string e = set->error(); !e.empty()) out.error({set->error_status(), e});
  });
}

}  // namespace kiln::serve
