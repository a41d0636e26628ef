// GET /v1/models and /models (OpenAI's list; with many models llama-server's router listing, each
// model with "status": {"value": "unloaded" | "loading" | "loaded" | "sleeping"}), POST
// /models/load and /models/unload ({"model": NAME} -> {"success": true}; llama-server's router
// routes). Listing only looks: it never wakes or loads a model. Each model also says what its
// requests may carry, as /props does: "modalities": {"vision", "audio"} (with many models, from its
// mmproj file's header, loaded or not), and its "kind": "text" or "image" (image models listed after
// the text models).
#include "serve/api_json.h"
#include "serve/image_models.h"
#include "serve/model_router.h"
#include "serve/server_state.h"

namespace kiln::serve {
namespace {

json model_json(const std::string& name, int64_t created) {
  return {{"id", name}, {"object", "model"}, {"created", created}, {"owned_by", "kiln"}};
}

json list_json(const RouteContext& rc) {
  const int64_t created = unix_time();
  json data = json::array();
  if (ModelRouter* router = rc.server.router()) {
    for (const ModelRouter::Listing& l : router->list()) {
      json m = model_json(l.name, created);
      m["path"] = l.path;
      m["status"] = {{"value", model_status_name(l.status)}, {"pinned", l.pinned}};
      m["modalities"] = {{"vision", l.vision}, {"audio", l.audio}};
      m["kind"] = model_kind_name(ModelKind::Text);
      data.push_back(std::move(m));
    }
  }
  if (ImageModels* images = rc.server.images()) {
    for (const ImageModels::Listing& l : images->list()) {
      json m = model_json(l.name, created);
      m["path"] = l.path;
      m["status"] = {{"value", l.loaded ? "loaded" : "unloaded"}, {"pinned", false}};
      m["kind"] = model_kind_name(ModelKind::Image);
      data.push_back(std::move(m));
    }
  }
  if (auto info = rc.server.router() == nullptr ? rc.server.info() : nullptr) {
    json m = model_json(info->name, created);
    m["modalities"] = {{"vision", info->vision}, {"audio", info->audio}};
    m["kind"] = model_kind_name(ModelKind::Text);
    data.push_back(std::move(m));
  }
  return {{"object", "list"}, {"data", std::move(data)}};
}

// POST /models/load and /models/unload: `act` on the body's model.
http::Handler model_action(const RouteContext& rc, std::optional<HttpError> (ModelRouter::*act)(const std::string&)) {
  return [rc, act](const http::Request& req, http::Exchange& ex) {
    ModelRouter* router = rc.server.router();
    if (router == nullptr)
      return send_error(ex, {400, "this server serves one model; start it with -m NAME=PATH (repeated), "
                                  "--models-dir or --models-preset to load and unload models"});
    auto body = parse_body(req, ex);
    if (!body) return;
    auto it = body->find("model");
    if (it == body->end() || !it->is_string())
      return send_error(ex, {400, "field 'model' must name one of the server's models"});
    if (auto err = (router->*act)(it->get<std::string>())) return send_error(ex, *err);
    send_json(ex, {{"success", true}});
  };
}

}  // namespace

void add_model_routes(http::Router& r, const RouteContext& rc) {
  auto list = [rc](const http::Request&, http::Exchange& ex) {
    if (!rc.server.router() && !rc.server.info()) return send_error(ex, {503, "the model is loading"});
    send_json(ex, list_json(rc));
  };
  r.get("/v1/models", list);
  r.get("/models", list);
  r.post("/models/load", model_action(rc, &ModelRouter::load));
  r.post("/models/unload", model_action(rc, &ModelRouter::unload));
}

}  // namespace kiln::serve
