// POST /v1/embeddings (OpenAI's shape), /embeddings and /embedding (llama-server's), served only
// by a server started with --embeddings, as llama-server: otherwise 501. The pooling is
// --pooling, else the model's {arch}.pooling_type, else mean; pooled vectors are normalised
// (Euclidean). Pooling none is not OpenAI-compatible: /v1/embeddings refuses it (400) and
// /embeddings returns every token's raw vector. Inputs may be as long as a slot's context.
#include "serve/api_json.h"
#include "serve/embed_request.h"
#include "serve/embedder.h"
#include "serve/server_state.h"

namespace kiln::serve {
namespace {

http::Handler embeddings_handler(const RouteContext& rc, std::shared_ptr<Embedder> embedder, bool oai) {
  return [rc, embedder, oai](const http::Request& req, http::Exchange& ex) {
    if (!rc.options.embeddings)
      return send_error(ex, {501, "This server does not support embeddings. Start it with `--embeddings`"});
    const auto admitted = rc.admit(req, ex);  // the tokenizing and the pass are the request's own work
    if (!admitted) return;
    auto body = parse_body(req, ex);  // a malformed request does not wake a sleeping server
    if (!body) return;
    auto st = rc.ready(ex, *body);
    if (!st) return;
    auto pooling = server_pooling(rc.options, *st->model);
    if (!pooling.ok()) return send_error(ex, {501, "embeddings: " + pooling.error().message});
    if (oai && *pooling == Pooling::None)
      return send_error(ex, {400,
                             "Pooling type 'none' is not OAI compatible. Please use a different pooling type "
                             "(start the server with --pooling mean|cls|last, or use POST /embeddings)"});
    EmbedRequest p;
    if (auto e = parse_embed_request(*body, *st->model, st->engine->n_ctx_slot(), oai, p))
      return send_error(ex, *e);
    auto vectors = embedder->embed(*st, p.inputs, *pooling, rc.options.context);
    if (!vectors.ok()) return send_error(ex, {500, vectors.error().message});
    if (oai) return send_json(ex, oai_embeddings_json(p, *vectors, st->name));
    send_json(ex, native_embeddings_json(*vectors, st->model->hparams().n_embd));
  };
}

}  // namespace

void add_embedding_routes(http::Router& r, const RouteContext& rc) {
  auto embedder = std::make_shared<Embedder>();
  r.post("/v1/embeddings", embeddings_handler(rc, embedder, true));
  r.post("/embeddings", embeddings_handler(rc, embedder, false));
  r.post("/embedding", embeddings_handler(rc, embedder, false));
}

}  // namespace kiln::serve
