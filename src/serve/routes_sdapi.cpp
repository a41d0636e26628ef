// A1111's web UI API as stable-diffusion.cpp's server serves it (its examples/server/routes_sdapi.cpp
// gives the field names and answers), over the server's image models:
//   POST /sdapi/v1/txt2img, /sdapi/v1/img2img  -> {"images": [BASE64 PNG, ...], "parameters": the
//        request's body, "info": a JSON object as a string (prompt, seed, all_seeds, infotexts, ...)}
//   GET  /sdapi/v1/samplers, /schedulers       -> [{"name", "aliases", "options"}], [{"name", "label"}]
//   GET  /sdapi/v1/sd-models                   -> [{"title", "model_name", "filename", ...}] per image model
//   GET  /sdapi/v1/options                     -> {"samples_format": "png", "sd_model_checkpoint"}
//   GET  /sdapi/v1/progress                    -> A1111's {"progress" 0-1, "eta_relative",
//        "state": {"job_count", "sampling_step", "sampling_steps", ...}, "current_image": null}
//   POST /sdapi/v1/interrupt                   -> {} (the running job ends at its next UNet step)
// Unlike stable-diffusion.cpp, an unknown sampler or scheduler is a 400 naming the field, not the default.
#include <filesystem>

#include "image/data_uri.h"
#include "serve/image_models.h"
#include "serve/routes_images.h"
#include "serve/server_state.h"

namespace kiln::serve {
namespace {

using diffusion::TextToImageParams;

// stable-diffusion.cpp's info field: what made the images, as a JSON object.
json info_json(const ImageRequest& r, const diffusion::ParameterFiles& files, bool img2img, int count) {
  const TextToImageParams& p = r.job.params;
  json info = {{"prompt", p.prompt},
               {"seed", p.seed},
               {"cfg_scale", p.cfg_scale},
               {"width", p.width},
               {"height", p.height},
               {"steps", p.steps},
               {"sampler_name", std::string(diffusion::sampler_name(p.sampler))},
               {"extra_generation_params", {{"Schedule type", std::string(diffusion::scheduler_name(p.scheduler))}}},
               {"version", "kiln"}};
  if (!p.negative_prompt.empty()) info["negative_prompt"] = p.negative_prompt;
  if (r.clip_skip_given) info["clip_skip"] = p.clip_skip;
  if (img2img) info["denoising_strength"] = r.job.strength;
  const std::string& model = files.diffusion_model.empty() ? files.model : files.diffusion_model;
  info["sd_model_name"] = std::filesystem::path(model).filename().string();
  json infotexts = json::array(), seeds = json::array(), prompts = json::array(), negatives = json::array();
  for (int i = 0; i < count; ++i) {
    infotexts.push_back(diffusion::a1111_parameters(p, p.seed + i, files, r.clip_skip_given,
                                                   img2img ? std::optional<float>(r.job.strength) : std::nullopt));
    seeds.push_back(p.seed + i);
    prompts.push_back(p.prompt);
    negatives.push_back(p.negative_prompt);
  }
  info["infotexts"] = std::move(infotexts);
  info["all_seeds"] = std::move(seeds);
  info["all_prompts"] = std::move(prompts);
  info["all_negative_prompts"] = std::move(negatives);
  return info;
}

void any2img(const RouteContext& rc, const http::Request& req, http::Exchange& ex, bool img2img) {
  auto admitted = rc.admit(req, ex);  // held while the body and its init image are decoded
  if (!admitted) return;
  auto body = parse_body(req, ex);
  if (!body) return;
  auto parsed = parse_a1111_request(*body, img2img);
  if (auto* e = std::get_if<HttpError>(&parsed)) return send_error(ex, *e);
  admitted.reset();
  ImageRequest& request = std::get<ImageRequest>(parsed);
  auto got = run_image_request(rc, request, ex);
  if (auto* e = std::get_if<HttpError>(&got)) return send_error(ex, *e);
  const auto& encoded = std::get<0>(got);
  json images = json::array();
  for (const auto& bytes : encoded) images.push_back(encode_base64(bytes));
  const diffusion::ParameterFiles files = rc.server.images()->parameter_files(request.model);
  send_json(ex, {{"images", std::move(images)},
                 {"parameters", *body},
                 {"info", info_json(request, files, img2img, static_cast<int>(encoded.size())).dump()}});
}

// The image models, or the 400 a server without them answers.
ImageModels* image_models(const RouteContext& rc, http::Exchange& ex) {
  ImageModels* images = rc.server.images();
  if (images == nullptr) send_error(ex, {400, "this server has no image models"});
  return images;
}

json samplers_json() {
  json out = json::array();
  for (diffusion::Sampler s : diffusion::all_samplers()) {
    const std::string name(diffusion::sampler_name(s));
    out.push_back({{"name", name}, {"aliases", json::array({name})}, {"options", json::object()}});
  }
  return out;
}

json schedulers_json() {
  json out = json::array();
  for (diffusion::Scheduler s : diffusion::all_schedulers()) {
    const std::string name(diffusion::scheduler_name(s));
    out.push_back({{"name", name}, {"label", name}});
  }
  return out;
}

json progress_json(const ImageModels::Progress& p) {
  // The share done: whole images, then the steps of the one in progress.
  double done = 0;
  if (p.active && p.images > 0 && p.steps > 0)
    done = (p.image + static_cast<double>(std::max(0, p.step - 1)) / p.steps) / p.images;
  const double eta = done > 0 ? p.elapsed_seconds * (1 - done) / done : 0;
  return {{"progress", done},
          {"eta_relative", eta},
          {"state",
           {{"skipped", false},
            {"interrupted", false},
            {"job", p.active ? p.model : ""},
            {"job_count", p.active ? 1 : 0},
            {"job_no", p.active ? p.image : 0},
            {"sampling_step", p.step},
            {"sampling_steps", p.steps}}},
          {"current_image", nullptr},
          {"textinfo", nullptr}};
}

}  // namespace

void add_sdapi_routes(http::Router& r, const RouteContext& rc) {
  r.post("/sdapi/v1/txt2img", [rc](const http::Request& req, http::Exchange& ex) { any2img(rc, req, ex, false); });
  r.post("/sdapi/v1/img2img", [rc](const http::Request& req, http::Exchange& ex) { any2img(rc, req, ex, true); });
  // The listings and the progress only look: they answer on the I/O thread however busy the workers are.
  const http::RouteOptions inline_route{.dispatch = http::Dispatch::Inline};
  r.get("/sdapi/v1/samplers", [](const http::Request&, http::Exchange& ex) { send_json(ex, samplers_json()); },
        inline_route);
  r.get("/sdapi/v1/schedulers",
        [](const http::Request&, http::Exchange& ex) { send_json(ex, schedulers_json()); }, inline_route);
  r.get(
      "/sdapi/v1/sd-models",
      [rc](const http::Request&, http::Exchange& ex) {
        ImageModels* images = image_models(rc, ex);
        if (images == nullptr) return;
        json out = json::array();
        for (const ImageModels::Listing& l : images->list()) {
          const std::string file = std::filesystem::path(l.path).filename().string();
          out.push_back({{"title", l.name}, {"model_name", l.name}, {"filename", file}, {"hash", nullptr},
                         {"sha256", nullptr}, {"config", nullptr}});
        }
        send_json(ex, out);
      },
      inline_route);
  r.get(
      "/sdapi/v1/options",
      [rc](const http::Request&, http::Exchange& ex) {
        ImageModels* images = image_models(rc, ex);
        if (images == nullptr) return;
        send_json(ex, {{"samples_format", "png"}, {"sd_model_checkpoint", images->first()}});
      },
      inline_route);
  r.get(
      "/sdapi/v1/progress",
      [rc](const http::Request&, http::Exchange& ex) {
        ImageModels* images = image_models(rc, ex);
        if (images == nullptr) return;
        send_json(ex, progress_json(images->progress()));
      },
      inline_route);
  r.post(
      "/sdapi/v1/interrupt",
      [rc](const http::Request&, http::Exchange& ex) {
        ImageModels* images = image_models(rc, ex);
        if (images == nullptr) return;
        images->interrupt();
        send_json(ex, json::object());
      },
      inline_route);
}

}  // namespace kiln::serve
