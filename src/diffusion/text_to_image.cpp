#include "diffusion/text_to_image.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "diffusion/clip_tokenizer.h"
#include "diffusion/denoise_step.h"
#include "diffusion/img2img_sigmas.h"

namespace kiln::diffusion {
namespace {

constexpr int64_t kLatentChannels = 4;
constexpr int64_t kLatentScale = 8;  // image pixels per latent cell, each way

Status check_side(const char* name, int64_t side) {
  if (side < kImageSideStep || side > kMaxImageSide || side % kImageSideStep != 0)
    return make_error("text to image: ", name, " ", side, " must be a multiple of ", kImageSideStep, " in [",
                      kImageSideStep, ", ", kMaxImageSide, "]");
  return ok_status();
}

// The index of the first sigma equal to `sigma`, else past the end.
int sigma_index(std::span<const float> sigmas, float sigma) {
  return static_cast<int>(std::find(sigmas.begin(), sigmas.end(), sigma) - sigmas.begin());
}

}  // namespace

Status validate(const TextToImageParams& params) {
  KILN_TRY(check_side("width", params.width));
  KILN_TRY(check_side("height", params.height));
  if (params.steps < 1) return make_error("text to image: steps ", params.steps, " must be at least 1");
  if (!std::isfinite(params.cfg_scale)) return make_error("text to image: cfg_scale must be a finite number");
  if (!std::isfinite(params.eta) || params.eta < 0.0f)
    return make_error("text to image: eta must be a finite number, at least 0");
  if (params.clip_skip < 1)
    return make_error("text to image: clip_skip ", params.clip_skip, " must be at least 1");
  return ok_status();
}

Result<Conditioning> encode_conditioning(ClipTextEncoder& encoder, const TextToImageParams& params) {
  const ClipTokenizer& tokenizer = ClipTokenizer::instance();
  Conditioning c;
  KILN_ASSIGN_OR_RETURN(c.cond,
                        encode_prompt(encoder, tokenizer, params.prompt, params.clip_skip, params.family));
  if (params.cfg_scale != 1.0f) {
    KILN_ASSIGN_OR_RETURN(
        c.uncond, encode_prompt(encoder, tokenizer, params.negative_prompt, params.clip_skip, params.family));
  }
  return c;
}

namespace {

// The sampler over `sigmas` from x = init_latent + noise * sigmas[0], the noise the first draw of the
// generator seeded with seed + batch_index (params validated, init_latent of params' size).
Result<std::vector<float>> sample_from(const UnetFn& unet, const NoiseSchedule& schedule,
                                       const Conditioning& conditioning, const TextToImageParams& params,
                                       std::span<const float> sigmas, std::span<const float> init_latent,
                                       int batch_index, const StepObserver& observer) {
  const size_t n = init_latent.size();
  const int steps = static_cast<int>(sigmas.size()) - 1;
  std::unique_ptr<NoiseRng> rng = make_noise_rng(params.rng);
  rng->seed(static_cast<uint64_t>(params.seed + batch_index));
  std::vector<float> noise(n), x(n);
  rng->randn(noise);
  add_noise(init_latent, noise, sigmas[0], x);

  std::vector<float> unet_input(n), guided(n);
  const DenoiseFn denoise = [&](std::span<const float> xs, float sigma, std::span<float> denoised) -> Status {
    const Scalings s = scalings_for(params.prediction, sigma);
    scale_model_input(xs, s.c_in, unet_input);
    if (observer) observer(std::min(sigma_index(sigmas, sigma) + 1, steps), steps, unet_input);
    const float t = schedule.sigma_to_t(sigma);
    KILN_ASSIGN_OR_RETURN(std::vector<float> out, unet(unet_input, t, conditioning.cond));
    if (!conditioning.uncond.empty()) {
      KILN_ASSIGN_OR_RETURN(const std::vector<float> uncond_out, unet(unet_input, t, conditioning.uncond));
      apply_cfg(out, uncond_out, params.cfg_scale, guided);
      out.swap(guided);
    }
    denoised_from_output(out, xs, s, denoised);
    return ok_status();
  };
  KILN_TRY(sample(params.sampler, denoise, x, sigmas, *rng, params.eta));
  return x;
}

size_t latent_size(const TextToImageParams& params) {
  return static_cast<size_t>(kLatentChannels * (params.width / kLatentScale) *
                             (params.height / kLatentScale));
}

UnetFn unet_fn(UnetModel& unet, const TextToImageParams& params) {
  const int64_t w = params.width / kLatentScale, h = params.height / kLatentScale;
  return [&unet, w, h](std::span<const float> x, float t, std::span<const float> context) {
    return unet.eval(x, w, h, t, context);
  };
}

}  // namespace

Result<std::vector<float>> sample_latent(const UnetFn& unet, const NoiseSchedule& schedule,
                                         const Conditioning& conditioning, const TextToImageParams& params,
                                         int batch_index, const StepObserver& observer) {
  KILN_TRY(validate(params));
  KILN_ASSIGN_OR_RETURN(const std::vector<float> sigmas,
                        make_sigmas(params.scheduler, params.steps, schedule, params.family));
  const std::vector<float> zeros(latent_size(params), 0.0f);
  return sample_from(unet, schedule, conditioning, params, sigmas, zeros, batch_index, observer);
}

Result<std::vector<float>> sample_latent(UnetModel& unet, const NoiseSchedule& schedule,
                                         const Conditioning& conditioning, const TextToImageParams& params,
                                         int batch_index, const StepObserver& observer) {
  return sample_latent(unet_fn(unet, params), schedule, conditioning, params, batch_index, observer);
}

Result<std::vector<float>> sample_latent_from_image(const UnetFn& unet, const NoiseSchedule& schedule,
                                                    const Conditioning& conditioning,
                                                    const TextToImageParams& params,
                                                    std::span<const float> init_latent, float strength,
                                                    int batch_index, const StepObserver& observer) {
  KILN_TRY(validate(params));
  if (init_latent.size() != latent_size(params))
    return make_error("image to image: an init latent of ", init_latent.size(), " floats for a ",
                      params.width, " x ", params.height, " image (", latent_size(params), " expected)");
  KILN_ASSIGN_OR_RETURN(const std::vector<float> full,
                        make_sigmas(params.scheduler, params.steps, schedule, params.family));
  KILN_ASSIGN_OR_RETURN(const std::vector<float> sigmas, img2img_sigmas(full, strength));
  return sample_from(unet, schedule, conditioning, params, sigmas, init_latent, batch_index, observer);
}

Result<std::vector<float>> sample_latent_from_image(UnetModel& unet, const NoiseSchedule& schedule,
                                                    const Conditioning& conditioning,
                                                    const TextToImageParams& params,
                                                    std::span<const float> init_latent, float strength,
                                                    int batch_index, const StepObserver& observer) {
  return sample_latent_from_image(unet_fn(unet, params), schedule, conditioning, params, init_latent,
                                  strength, batch_index, observer);
}

Result<std::vector<float>> encode_init_image(LatentEncoder& encoder, std::span<const uint8_t> pixels,
                                             const TextToImageParams& params) {
  KILN_TRY(validate(params));
  const size_t plane = static_cast<size_t>(params.width * params.height);
  if (pixels.size() != plane * 3)
    return make_error("image to image: ", pixels.size(), " bytes for a ", params.width, " x ", params.height,
                      " RGB image");
  std::vector<float> image(plane * 3);
  for (size_t i = 0; i < plane; ++i)
    for (size_t c = 0; c < 3; ++c) image[c * plane + i] = static_cast<float>(pixels[i * 3 + c]) / 255.0f;
  std::unique_ptr<NoiseRng> rng = make_noise_rng(params.rng);
  rng->seed(static_cast<uint64_t>(params.seed));
  return encoder.encode(image, params.width, params.height, *rng);
}

Result<std::vector<uint8_t>> decode_to_pixels(LatentDecoder& decoder, std::span<const float> latent,
                                              const TextToImageParams& params, const TilingParams* tiling) {
  KILN_ASSIGN_OR_RETURN(
      const std::vector<float> planes,
      decoder.decode(latent, params.width / kLatentScale, params.height / kLatentScale, tiling));
  return rgb_planes_to_pixels(planes, params.width, params.height);
}

}  // namespace kiln::diffusion
