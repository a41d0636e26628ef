// POST /v1/images/generations (JSON) and /v1/images/edits (multipart/form-data): OpenAI's image
// routes over the server's image models. Answer: {"created", "data": [{"b64_json"}, ...],
// "output_format", "size"} (OpenAI's shape; the images carry A1111's parameters text as kiln image
// writes them). Requests are image_request.h's; a text model's name is a 400.
#include "serve/routes_images.h"

#include <atomic>
#include <memory>

#include "image/data_uri.h"
#include "serve/image_models.h"
#include "serve/model_router.h"
#include "serve/server_state.h"

namespace kiln::serve {

std::variant<std::vector<std::vector<uint8_t>>, HttpError> run_image_request(const RouteContext& rc,
                                                                            ImageRequest& request,
                                                                            http::Exchange& ex) {
  ImageModels* images = rc.server.images();
  if (images == nullptr)
    return HttpError{400, "this server has no image models (serve one with -m NAME=CHECKPOINT.safetensors or a "
                          "--models-preset section naming diffusion-model, clip_l, vae/taesd)"};
  if (request.model.empty()) request.model = images->first();
  if (!images->has(request.model)) {
    ModelRouter* router = rc.server.router();
    if (router != nullptr && router->has(request.model))
      return HttpError{400, "model '" + request.model +
                                "' is a text model: it answers /v1/chat/completions and /v1/completions"};
    return HttpError{404, "model '" + request.model + "' is not one of the server's image models (GET /v1/models)"};
  }
  // The client's leaving, seen from the I/O thread; the flag outlives the handler.
  auto gone = std::make_shared<std::atomic<bool>>(false);
  ex.on_client_gone([gone] { gone->store(true); });
  std::vector<std::vector<uint8_t>> encoded;
  std::optional<HttpError> failed;
  const diffusion::ParameterFiles files = images->parameter_files(request.model);
  diffusion::ImageHooks hooks;
  hooks.cancelled = [gone] { return gone->load(); };
  hooks.image = [&](int index, std::vector<uint8_t> pixels) -> Status {
    KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, encode_generated(request, files, index, std::move(pixels)));
    encoded.push_back(std::move(bytes));
    return ok_status();
  };
  request.job.init_pixels = request.init.pixels;
  if (auto e = images->run(request.model, request.job, request.clip_skip, hooks)) return *e;
  return encoded;
}

namespace {

void answer(const RouteContext& rc, ImageRequest& request, http::Exchange& ex) {
  auto got = run_image_request(rc, request, ex);
  if (auto* e = std::get_if<HttpError>(&got)) return send_error(ex, *e);
  json data = json::array();
  for (const auto& bytes : std::get<0>(got)) data.push_back({{"b64_json", encode_base64(bytes)}});
  const auto& p = request.job.params;
  send_json(ex, {{"created", unix_time()},
                 {"data", std::move(data)},
                 {"output_format", request.format == ImageFormat::Png ? "png" : "jpeg"},
                 {"size", std::to_string(p.width) + "x" + std::to_string(p.height)}});
}

void generations(const RouteContext& rc, const http::Request& req, http::Exchange& ex) {
  auto admitted = rc.admit(req, ex);  // held while the body is parsed
  if (!admitted) return;
  auto body = parse_body(req, ex);
  if (!body) return;
  auto parsed = parse_image_generation(*body);
  if (auto* e = std::get_if<HttpError>(&parsed)) return send_error(ex, *e);
  admitted.reset();
  answer(rc, std::get<ImageRequest>(parsed), ex);
}

void edits(const RouteContext& rc, const http::Request& req, http::Exchange& ex) {
  auto admitted = rc.admit(req, ex);  // held while the form and its image are decoded
  if (!admitted) return;
  const std::string_view content_type = req.header("Content-Type");
  if (!http::is_multipart_form(content_type))
    return send_error(ex, {400, "an image edit is a multipart/form-data form (got Content-Type '" +
                                    std::string(content_type) + "')"});
  auto form = http::parse_multipart_form(content_type, req.body);
  if (!form.ok()) return send_error(ex, {400, form.error().message});
  auto parsed = parse_image_edit(*form);
  if (auto* e = std::get_if<HttpError>(&parsed)) return send_error(ex, *e);
  admitted.reset();
  answer(rc, std::get<ImageRequest>(parsed), ex);
}

}  // namespace

void add_image_routes(http::Router& router, const RouteContext& rc) {
  router.post("/v1/images/generations",
              [rc](const http::Request& req, http::Exchange& ex) { generations(rc, req, ex); });
  router.post("/v1/images/edits", [rc](const http::Request& req, http::Exchange& ex) { edits(rc, req, ex); });
  add_sdapi_routes(router, rc);
}

}  // namespace kiln::serve
