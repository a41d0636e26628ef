// The image routes' requests, checked into what ImageModels::run takes: OpenAI's
// /v1/images/generations (JSON) and /v1/images/edits (a multipart form), and A1111's
// /sdapi/v1/txt2img and /sdapi/v1/img2img (JSON, as stable-diffusion.cpp's server reads them).
// Every field left out takes `kiln image`'s default (diffusion::sd_settings; the model's own once
// it is open: resolve_for_model), so the same settings
// give the same pixels from the CLI and the server. Untrusted input: a field of the wrong type or
// out of range is a 400 naming the field (an unknown sampler, a size that is not a multiple of 64,
// n over kMaxImagesPerRequest, an init image over kMaxInitImageBytes), never a crash.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "diffusion/a1111_parameters.h"
#include "diffusion/image_generation.h"
#include "image/image.h"
#include "serve/api_json.h"
#include "serve/http/multipart.h"

namespace kiln::serve {

// Most images one request may ask for (OpenAI's n, A1111's batch_size).
inline constexpr int kMaxImagesPerRequest = 8;
// Most bytes of an init image as sent (base64 text, or a form part's bytes).
inline constexpr size_t kMaxInitImageBytes = size_t{16} << 20;
// Most steps a request may ask for.
inline constexpr int kMaxImageSteps = 150;

enum class ImageFormat { Png, Jpeg };

struct ImageRequest {
  std::string model;             // the request's model; empty: the server's first image model
  diffusion::ImageJob job;       // job.init_pixels is empty here: run() points it at init.pixels
  RgbImage init;                 // image to image: the decoded init image; else empty
  ImageFormat format = ImageFormat::Png;
  int jpeg_quality = 90;         // sd-cli's; OpenAI's output_compression sets it
  int clip_skip = -1;            // the request's clip_skip; <= 0: the model's (resolve_for_model)
  bool clip_skip_given = false;  // for A1111's parameters text
  bool seed_given = false;
};

// POST /v1/images/generations: model, prompt (required), n, size "WxH", response_format (b64_json;
// url is refused: nothing is stored), output_format (png, jpeg), output_compression (0-100),
// and kiln's extensions seed, negative_prompt, steps, cfg_scale, sampler, scheduler.
std::variant<ImageRequest, HttpError> parse_image_generation(const json& body);
// POST /v1/images/edits: the same fields as form parts, `image` the init image's file (PNG or
// JPEG; its size is the output's unless `size` is given, which it must then have) and `strength`
// (0-1, default 0.75).
std::variant<ImageRequest, HttpError> parse_image_edit(const std::vector<http::FormPart>& form);
// POST /sdapi/v1/txt2img and img2img: prompt, negative_prompt, width, height, steps, cfg_scale,
// seed (-1: random), batch_size, sampler_name (kiln's names or A1111's: "Euler a"), scheduler,
// clip_skip; img2img: init_images (base64 or a data URI; the first is used) and
// denoising_strength. The model: "model", else override_settings.sd_model_checkpoint.
std::variant<ImageRequest, HttpError> parse_a1111_request(const json& body, bool img2img);

// One generated image (`pixels`, the job's size) encoded as the request asks, with A1111's
// parameters text (PNG text chunk, JPEG EXIF) for image `index` of the batch, as kiln image writes it.
Result<std::vector<uint8_t>> encode_generated(const ImageRequest& request, const diffusion::ParameterFiles& files,
                                              int index, std::vector<uint8_t> pixels);

}  // namespace kiln::serve
