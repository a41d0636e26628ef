#include "diffusion/text_to_image.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "diffusion/clip_tokenizer.h"
#include "diffusion/denoise_step.h"

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
  KILN_ASSIGN_OR_RETURN(c.cond, encode_prompt(encoder, tokenizer, params.prompt, params.clip_skip));
  if (params.cfg_scale != 1.0f) {
    KILN_ASSIGN_OR_RETURN(c.uncond,
                          encode_prompt(encoder, tokenizer, params.negative_prompt, params.clip_skip));
  }
  return c;
}

Result<std::vector<float>> sample_latent(const UnetFn& unet, const NoiseSchedule& schedule,
                                         const Conditioning& conditioning, const TextToImageParams& params,
                                         int batch_index, const StepObserver& observer) {
  KILN_TRY(validate(params));
  KILN_ASSIGN_OR_RETURN(const std::vector<float> sigmas,
                        make_sigmas(params.scheduler, params.steps, schedule, ModelFamily::Sd1));
  const int64_t w = params.width / kLatentScale, h = params.height / kLatentScale;
  const size_t n = static_cast<size_t>(kLatentChannels * w * h);

  std::unique_ptr<NoiseRng> rng = make_noise_rng(params.rng);
  rng->seed(static_cast<uint64_t>(params.seed + batch_index));
  std::vector<float> noise(n), x(n);
  rng->randn(noise);
  add_noise(std::vector<float>(n, 0.0f), noise, sigmas[0], x);

  std::vector<float> unet_input(n), guided(n);
  const DenoiseFn denoise = [&](std::span<const float> xs, float sigma, std::span<float> denoised) -> Status {
    const Scalings s = scalings_for(params.prediction, sigma);
    scale_model_input(xs, s.c_in, unet_input);
    if (observer) observer(std::min(sigma_index(sigmas, sigma) + 1, params.steps), params.steps, unet_input);
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

Result<std::vector<float>> sample_latent(UnetModel& unet, const NoiseSchedule& schedule,
                                         const Conditioning& conditioning, const TextToImageParams& params,
                                         int batch_index, const StepObserver& observer) {
  const int64_t w = params.width / kLatentScale, h = params.height / kLatentScale;
  const UnetFn eval = [&unet, w, h](std::span<const float> x, float t, std::span<const float> context) {
    return unet.eval(x, w, h, t, context);
  };
  return sample_latent(eval, schedule, conditioning, params, batch_index, observer);
}

Result<std::vector<uint8_t>> decode_to_pixels(LatentDecoder& decoder, std::span<const float> latent,
                                              const TextToImageParams& params, const TilingParams* tiling) {
  KILN_ASSIGN_OR_RETURN(
      const std::vector<float> planes,
      decoder.decode(latent, params.width / kLatentScale, params.height / kLatentScale, tiling));
  return rgb_planes_to_pixels(planes, params.width, params.height);
}

}  // namespace kiln::diffusion
