// POST /v1/embeddings: placeholder until the embeddings engineer lands the route (this session).
#include "serve/http.h"
#include "serve/api_json.h"
#include "serve/server_state.h"

namespace kiln::serve {

void add_embedding_routes(httplib::Server& h, const RouteContext& rc) {
  h.Post("/v1/embeddings", [rc](const httplib::Request&, httplib::Response& res) {
    send_error(res, {501, "embeddings are not implemented yet"});
  });
}

}  // namespace kiln::serve
