// POST /tokenize, /detokenize, /apply-template (llama-server's shapes). Each needs the model (its
// tokenizer or chat template): they wake a sleeping server (without restoring its memory: they
// compute nothing on the device).
#include "serve/api_json.h"
#include "serve/chat_request.h"
#include "serve/completion_request.h"
#include "serve/server_state.h"

namespace kiln::serve {

void add_token_routes(http::Router& r, const RouteContext& rc) {
  r.post("/tokenize", [rc](const http::Request& req, http::Exchange& ex) {
    const auto admitted = rc.admit(req, ex);  // the whole request is work before any queue
    if (!admitted) return;
    auto body = parse_body(req, ex);  // a malformed request does not wake a sleeping server
    if (!body) return;
    auto st = rc.ready(ex, *body);
    if (!st) return;
    auto it = body->find("content");
    if (it == body->end() || !it->is_string())
      return send_error(ex, {400, "field 'content' must be a string"});
    bool add_special = false, parse_special = true, with_pieces = false;
    for (auto [key, out] :
         {std::pair{"add_special", &add_special}, std::pair{"parse_special", &parse_special},
          std::pair{"with_pieces", &with_pieces}})
      if (auto e = read_bool(*body, key, *out)) return send_error(ex, *e);
    const auto& tok = st->model->tokenizer();
    const auto ids = tok.tokenize(it->get<std::string>(), add_special, parse_special);
    // Written out token by token: a JSON tree of millions of {"id", "piece"} objects took 3.9 GB
    // for a 15.9 MB body.
    std::string out = "{\"tokens\":[";
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) out += ',';
      if (!with_pieces) {
        out += std::to_string(ids[i]);
        continue;
      }
      auto piece = tok.token_to_piece(ids[i], true);
      const std::string text = piece.ok() ? *piece : std::string();
      json jp = text;
      if (!valid_utf8(text)) {
        jp = json::array();  // not valid UTF-8 on its own: its bytes, as llama-server does
        for (unsigned char c : text) jp.push_back(c);
      }
      out += "{\"id\":" + std::to_string(ids[i]) + ",\"piece\":" + dump_json(jp) + "}";
    }
    out += "]}";
    ex.respond({.status = 200,
                .content_type = "application/json; charset=utf-8",
                .body = std::move(out),
                .headers = {}});
  });

  r.post("/detokenize", [rc](const http::Request& req, http::Exchange& ex) {
    auto body = parse_body(req, ex);  // a malformed request does not wake a sleeping server
    if (!body) return;
    auto st = rc.ready(ex, *body);
    if (!st) return;
    auto it = body->find("tokens");
    if (it == body->end() || !it->is_array())
      return send_error(ex, {400, "field 'tokens' must be a list of token ids"});
    std::vector<int32_t> ids;
    for (const auto& t : *it) {
      // Out of int32 range is never a token id: refused here rather than wrapped into one.
      if (!t.is_number_integer() || (t.is_number_unsigned() && t.get<uint64_t>() > INT32_MAX) ||
          (!t.is_number_unsigned() && (t.get<int64_t>() < INT32_MIN || t.get<int64_t>() > INT32_MAX)))
        return send_error(ex, {400, "field 'tokens' must be a list of token ids"});
      ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
    auto text = st->model->tokenizer().detokenize(ids, false, false);
    if (!text.ok()) return send_error(ex, {400, "field 'tokens': " + text.error().message});
    send_json(ex, {{"content", *text}});
  });

  // The chat as the completion routes would prompt the model, without generating:
  // {"messages": [...], "add_generation_prompt"?, "chat_template_kwargs"?} -> {"prompt": "..."}.
  r.post("/apply-template", [rc](const http::Request& req, http::Exchange& ex) {
    const auto admitted = rc.admit(req, ex);  // rendering is work before any queue
    if (!admitted) return;
    auto body = parse_body(req, ex);
    if (!body) return;
    auto st = rc.ready(ex, *body);
    if (!st) return;
    std::string prompt;
    if (auto e = render_chat(*st, rc.options, ordered_json::parse(req.body), prompt))
      return send_error(ex, *e);
    send_json(ex, {{"prompt", prompt}});
  });
}

}  // namespace kiln::serve
