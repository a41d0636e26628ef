#include "serve/image_request.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <random>
#include <set>

#include "image/data_uri.h"
#include "image/decode.h"
#include "image/jpeg_encode.h"
#include "image/png_encode.h"

namespace kiln::serve {
namespace {

using diffusion::Sampler;
using diffusion::Scheduler;

HttpError bad(std::string_view key, std::string_view what) { return {400, field_message(key, what)}; }

// An optional string field; absent or null leaves `out`.
std::optional<HttpError> read_string(const json& body, const char* key, std::string& out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) return bad(key, "must be a string");
  out = it->get<std::string>();
  return std::nullopt;
}

// A side of an image in pixels, checked as the UNet takes it.
std::optional<HttpError> check_side(std::string_view key, int64_t side) {
  if (side < diffusion::kImageSideStep || side > diffusion::kMaxImageSide || side % diffusion::kImageSideStep != 0)
    return bad(key, "must be a multiple of " + std::to_string(diffusion::kImageSideStep) + " in " +
                        std::to_string(diffusion::kImageSideStep) + ".." + std::to_string(diffusion::kMaxImageSide) +
                        " (got " + std::to_string(side) + ")");
  return std::nullopt;
}

// OpenAI's size "WxH" ("auto": 512x512).
std::optional<HttpError> parse_size(const std::string& text, int64_t& width, int64_t& height) {
  if (text == "auto") return std::nullopt;
  const size_t x = text.find('x');
  auto number = [](std::string_view s, int64_t& out) {
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && end == s.data() + s.size();
  };
  if (x == std::string::npos || !number(std::string_view(text).substr(0, x), width) ||
      !number(std::string_view(text).substr(x + 1), height))
    return bad("size", "must be \"WIDTHxHEIGHT\" in pixels (got \"" + text + "\")");
  if (auto e = check_side("size", width)) return e;
  return check_side("size", height);
}

// A1111's sampler names beside kiln's (sd-cli's); nullopt for an unknown one.
std::optional<Sampler> sampler_by_name(std::string name) {
  if (auto s = diffusion::parse_sampler(name)) return s;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  static const std::pair<const char*, const char*> kA1111[] = {
      {"euler a", "euler_a"}, {"k_euler_a", "euler_a"}, {"k_euler", "euler"},  {"k_heun", "heun"},
      {"k_dpm_2", "dpm2"},    {"ddim", "ddim_trailing"}, {"dpm++ 2m", "dpm++2m"}, {"k_dpmpp_2m", "dpm++2m"},
      {"dpm++ 2s a", "dpm++2s_a"}, {"k_dpmpp_2s_a", "dpm++2s_a"}};
  for (const auto& [a1111, kiln] : kA1111)
    if (name == a1111) return diffusion::parse_sampler(kiln);
  return diffusion::parse_sampler(name);
}

// The fields both APIs share (the sampler under `sampler_key`): `r.job.params` from sd_settings
// and what the body sets; a seed left out (or below 0) is a random one.
std::optional<HttpError> read_sampling(const json& body, const char* sampler_key, ImageRequest& r) {
  std::string sampler_text, scheduler_text;
  if (auto e = read_string(body, sampler_key, sampler_text)) return e;
  if (auto e = read_string(body, "scheduler", scheduler_text)) return e;
  std::optional<Sampler> sampler;
  if (!sampler_text.empty() && sampler_text != "default") {
    sampler = sampler_by_name(sampler_text);
    if (!sampler) return bad(sampler_key, "names no sampler kiln has ('" + sampler_text + "'; GET /sdapi/v1/samplers)");
  }
  std::optional<Scheduler> scheduler;
  if (!scheduler_text.empty() && scheduler_text != "default") {
    scheduler = diffusion::parse_scheduler(scheduler_text == "normal" ? "discrete" : scheduler_text);
    if (!scheduler)
      return bad("scheduler", "names no scheduler kiln has ('" + scheduler_text + "'; GET /sdapi/v1/schedulers)");
  }
  if (auto e = read_number_in<int>(body, "clip_skip", -1, 12, r.clip_skip)) return e;
  r.clip_skip_given = r.clip_skip > 0;
  diffusion::TextToImageParams& p = r.job.params;
  p = diffusion::sd_settings(sampler, scheduler);
  if (auto e = read_string(body, "prompt", p.prompt)) return e;
  if (auto e = read_string(body, "negative_prompt", p.negative_prompt)) return e;
  if (auto e = read_number_in<int>(body, "steps", 1, kMaxImageSteps, p.steps)) return e;
  if (auto e = read_number_in<float>(body, "cfg_scale", 0.0f, 100.0f, p.cfg_scale)) return e;
  int64_t seed = -1;
  if (auto e = read_number(body, "seed", seed)) return e;
  r.seed_given = seed >= 0;
  p.seed = r.seed_given ? seed : static_cast<int64_t>(std::random_device{}() & 0x7fffffff);
  return std::nullopt;
}

// The init image's encoded bytes decoded; its size becomes the job's unless `size_given`, when it
// must equal it (resizing is not supported, as in kiln image).
std::optional<HttpError> take_init_image(std::string_view key, std::span<const uint8_t> bytes, bool size_given,
                                         ImageRequest& r) {
  auto image = decode_image(bytes);
  if (!image.ok()) return bad(key, "is not an image kiln decodes (" + image.error().message + ")");
  diffusion::TextToImageParams& p = r.job.params;
  if (size_given && (image->width != p.width || image->height != p.height))
    return bad(key, "is " + std::to_string(image->width) + "x" + std::to_string(image->height) + ", not the " +
                        std::to_string(p.width) + "x" + std::to_string(p.height) +
                        " asked (resizing it is not supported yet; leave the size out to take its own)");
  if (auto e = check_side(key, image->width)) return e;
  if (auto e = check_side(key, image->height)) return e;
  p.width = image->width;
  p.height = image->height;
  r.init = std::move(*image);
  return std::nullopt;
}

// OpenAI's fields shared by generations and edits, from `body` (the form's parts as strings for
// edits). `size_given` says whether "size" was there.
std::optional<HttpError> read_openai(const json& body, ImageRequest& r, bool& size_given) {
  if (auto e = read_string(body, "model", r.model)) return e;
  if (auto e = read_sampling(body, "sampler", r)) return e;
  if (r.job.params.prompt.empty()) return bad("prompt", "is required (the text of the image)");
  if (auto e = read_number_in<int>(body, "n", 1, kMaxImagesPerRequest, r.job.batch)) return e;
  std::string size;
  if (auto e = read_string(body, "size", size)) return e;
  size_given = !size.empty() && size != "auto";
  if (auto e = parse_size(size.empty() ? "auto" : size, r.job.params.width, r.job.params.height)) return e;
  std::string response_format = "b64_json";
  if (auto e = read_string(body, "response_format", response_format)) return e;
  if (response_format == "url")
    return bad("response_format", "'url' is not supported: kiln stores no images; ask for 'b64_json'");
  if (response_format != "b64_json") return bad("response_format", "must be 'b64_json'");
  std::string format = "png";
  if (auto e = read_string(body, "output_format", format)) return e;
  if (format == "jpeg" || format == "jpg") {
    r.format = ImageFormat::Jpeg;
  } else if (format != "png") {
    return bad("output_format", "must be 'png' or 'jpeg' (got '" + format + "')");
  }
  int compression = r.jpeg_quality;
  if (auto e = read_number_in(body, "output_compression", 0, 100, compression)) return e;
  r.jpeg_quality = std::max(1, compression);
  return std::nullopt;
}

}  // namespace

std::variant<ImageRequest, HttpError> parse_image_generation(const json& body) {
  ImageRequest r;
  bool size_given = false;
  if (auto e = read_openai(body, r, size_given)) return *e;
  return r;
}

std::variant<ImageRequest, HttpError> parse_image_edit(const std::vector<http::FormPart>& form) {
  // The text fields as a JSON object (numbers parsed from their text), so that they go the
  // generations route's way; the image part aside.
  json body = json::object();
  const http::FormPart* image = nullptr;
  float strength = 0.75f;
  for (const http::FormPart& part : form) {
    if (part.name == "image" || part.name == "image[]") {
      if (image == nullptr) image = &part;
      continue;
    }
    // The numeric fields as numbers when their text is one (else the field's 400 names it).
    static const std::set<std::string> kNumeric = {"n", "steps", "seed", "cfg_scale", "clip_skip",
                                                   "output_compression", "strength"};
    const std::string text(part.data);
    const json value = kNumeric.contains(part.name) ? json::parse(text, nullptr, false) : json();
    body[part.name] = value.is_number() ? value : json(text);
  }
  if (auto e = read_number_in(body, "strength", 0.0f, 1.0f, strength)) return *e;
  body.erase("strength");
  ImageRequest r;
  bool size_given = false;
  if (auto e = read_openai(body, r, size_given)) return *e;
  if (image == nullptr) return HttpError{400, field_message("image", "is required (the image to edit, PNG or JPEG)")};
  if (image->data.size() > kMaxInitImageBytes)
    return bad("image", "is over " + std::to_string(kMaxInitImageBytes >> 20) + " MiB");
  const auto* bytes = reinterpret_cast<const uint8_t*>(image->data.data());
  if (auto e = take_init_image("image", {bytes, image->data.size()}, size_given, r)) return *e;
  r.job.strength = strength;
  return r;
}

std::variant<ImageRequest, HttpError> parse_a1111_request(const json& body, bool img2img) {
  ImageRequest r;
  if (auto e = read_string(body, "model", r.model)) return *e;
  if (r.model.empty()) {
    if (auto it = body.find("override_settings"); it != body.end() && it->is_object()) {
      if (auto e = read_string(*it, "sd_model_checkpoint", r.model)) return *e;
    }
  }
  if (auto e = read_sampling(body, "sampler_name", r)) return *e;
  if (r.job.params.prompt.empty()) return bad("prompt", "is required (the text of the image)");
  if (auto e = read_number_in<int>(body, "batch_size", 1, kMaxImagesPerRequest, r.job.batch)) return *e;
  diffusion::TextToImageParams& p = r.job.params;
  const bool size_given = body.contains("width") || body.contains("height");
  if (auto e = read_number(body, "width", p.width)) return *e;
  if (auto e = read_number(body, "height", p.height)) return *e;
  if (auto e = check_side("width", p.width)) return *e;
  if (auto e = check_side("height", p.height)) return *e;
  if (!img2img) return r;
  auto it = body.find("init_images");
  if (it == body.end() || !it->is_array() || it->empty() || !(*it)[0].is_string())
    return bad("init_images", "must be an array of base64 images (img2img starts from the first)");
  const std::string& text = (*it)[0].get_ref<const std::string&>();
  if (text.size() > kMaxInitImageBytes)
    return bad("init_images", "holds an image of " + std::to_string(text.size() >> 20) + " MiB of text, over the " +
                                  std::to_string(kMaxInitImageBytes >> 20) + " MiB limit");
  Result<std::vector<uint8_t>> bytes = text.starts_with("data:")
                                           ? [&]() -> Result<std::vector<uint8_t>> {
                                               KILN_ASSIGN_OR_RETURN(DataUri uri, parse_data_uri(text));
                                               return std::move(uri.bytes);
                                             }()
                                           : decode_base64(text);
  if (!bytes.ok()) return bad("init_images", bytes.error().message);
  if (auto e = take_init_image("init_images", *bytes, size_given, r)) return *e;
  r.job.strength = 0.75f;
  if (auto e = read_number_in(body, "denoising_strength", 0.0f, 1.0f, r.job.strength)) return *e;
  return r;
}

Result<std::vector<uint8_t>> encode_generated(const ImageRequest& request, const diffusion::ParameterFiles& files,
                                              int index, std::vector<uint8_t> pixels) {
  const diffusion::TextToImageParams& p = request.job.params;
  RgbImage image;
  image.width = static_cast<int32_t>(p.width);
  image.height = static_cast<int32_t>(p.height);
  image.pixels = std::move(pixels);
  const std::string text = diffusion::a1111_parameters(
      p, p.seed + index, files, request.clip_skip_given,
      request.init.pixels.empty() ? std::nullopt : std::optional<float>(request.job.strength));
  return request.format == ImageFormat::Png ? encode_png(image, {{"parameters", text}})
                                            : encode_jpeg(image, request.jpeg_quality, text);
}

}  // namespace kiln::serve
