// GET /v1/models, /slots.
#include "serve/http.h"
#include "serve/api_json.h"
#include "serve/server_state.h"

namespace kiln::serve {

void add_info_routes(httplib::Server& h, const RouteContext& rc) {
  h.Get("/v1/models", [rc](const httplib::Request&, httplib::Response& res) {
    auto st = rc.ready();
    if (!st) return send_error(res, {503, "the model is loading"});
    send_json(res, {{"object", "list"},
                    {"data", json::array({{{"id", st->model->name()},
                                           {"object", "model"},
                                           {"created", unix_time()},
                                           {"owned_by", "kiln"}}})}});
  });

  h.Get("/slots", [rc](const httplib::Request&, httplib::Response& res) {
    auto st = rc.ready();
    if (!st) return send_error(res, {503, "the model is loading"});
    json out = json::array();
    for (const SlotInfo& s : st->engine->slots())
      out.push_back({{"id", s.id}, {"is_processing", s.processing}, {"n_ctx", st->engine->n_ctx_slot()},
                     {"n_cached", s.n_cached}});
    send_json(res, out);
  });
}

}  // namespace kiln::serve
