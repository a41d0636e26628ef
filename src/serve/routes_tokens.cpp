// POST /tokenize, /detokenize (llama-server's shapes).
#include "serve/http.h"
#include "serve/api_json.h"
#include "serve/server_state.h"

namespace kiln::serve {

void add_token_routes(httplib::Server& h, const RouteContext& rc) {
  h.Post("/tokenize", [rc](const httplib::Request& req, httplib::Response& res) {
    auto st = rc.ready();
    if (!st) return send_error(res, {503, "the model is loading"});
    auto body = parse_body(req, res);
    if (!body) return;
    auto it = body->find("content");
    if (it == body->end() || !it->is_string()) return send_error(res, {400, "field 'content' must be a string"});
    bool add_special = false, parse_special = true, with_pieces = false;
    for (auto [key, out] : {std::pair{"add_special", &add_special}, std::pair{"parse_special", &parse_special},
                            std::pair{"with_pieces", &with_pieces}})
      if (auto e = read_bool(*body, key, *out)) return send_error(res, *e);
    const auto& tok = st->model->tokenizer();
    const auto ids = tok.tokenize(it->get<std::string>(), add_special, parse_special);
    json tokens = json::array();
    for (int32_t id : ids) {
      if (!with_pieces) {
        tokens.push_back(id);
        continue;
      }
      auto piece = tok.token_to_piece(id, true);
      const std::string text = piece.ok() ? *piece : std::string();
      json jp = text;
      if (!valid_utf8(text)) {
        jp = json::array();  // not valid UTF-8 on its own: its bytes, as llama-server does
        for (unsigned char c : text) jp.push_back(c);
      }
      json entry = json::object();
      entry["id"] = id;
      entry["piece"] = std::move(jp);
      tokens.push_back(std::move(entry));
    }
    send_json(res, {{"tokens", tokens}});
  });

  h.Post("/detokenize", [rc](const httplib::Request& req, httplib::Response& res) {
    auto st = rc.ready();
    if (!st) return send_error(res, {503, "the model is loading"});
    auto body = parse_body(req, res);
    if (!body) return;
    auto it = body->find("tokens");
    if (it == body->end() || !it->is_array()) return send_error(res, {400, "field 'tokens' must be a list of token ids"});
    std::vector<int32_t> ids;
    for (const auto& t : *it) {
      if (!t.is_number_integer()) return send_error(res, {400, "field 'tokens' must be a list of token ids"});
      ids.push_back(t.get<int32_t>());
    }
    auto text = st->model->tokenizer().detokenize(ids, false, false);
    if (!text.ok()) return send_error(res, {400, "field 'tokens': " + text.error().message});
    send_json(res, {{"content", *text}});
  });
}

}  // namespace kiln::serve
