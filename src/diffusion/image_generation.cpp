#include "diffusion/image_generation.h"

#include <utility>

#include "diffusion/sampling_defaults.h"

namespace kiln::diffusion {
namespace {
constexpr int64_t kLatentScale = 8;  // image pixels per latent cell, each way (text_to_image.h)
}  // namespace

TextToImageParams sd_settings(std::optional<Sampler> sampler, std::optional<Scheduler> scheduler) {
  TextToImageParams p;
  p.steps = kDefaultSteps;
  p.cfg_scale = kDefaultCfgScale;
  p.sampler = sampler.value_or(default_sampler(ModelFamily::Sd1));
  p.scheduler = scheduler.value_or(default_scheduler(p.sampler));
  p.eta = default_eta(p.sampler);
  p.rng = kDefaultRng;
  return p;
}

Status resolve_for_model(SdModels& models, TextToImageParams& params, int clip_skip,
                         std::optional<Prediction> prediction) {
  params.family = models.version().family;
  params.clip_skip = clip_skip > 0 ? clip_skip : default_clip_skip(params.family);
  if (prediction) {
    params.prediction = *prediction;
  } else {
    KILN_ASSIGN_OR_RETURN(params.prediction, models.default_prediction());
  }
  return ok_status();
}

Status generate_images(SdModels& models, const ImageJob& job, const ImageHooks& hooks) {
  const TextToImageParams& params = job.params;
  KILN_TRY(validate(params));
  if (job.batch < 1) return make_error("image generation: batch ", job.batch, " must be at least 1");
  const bool from_image = !job.init_pixels.empty();

  // Every UNet evaluation asks the cancel first: a cancel lands within one evaluation.
  const int64_t w = params.width / kLatentScale, h = params.height / kLatentScale;
  UnetModel& unet = models.unet();
  const UnetFn unet_fn = [&](std::span<const float> x, float t,
                             std::span<const float> context) -> Result<std::vector<float>> {
    if (hooks.cancelled && hooks.cancelled()) return make_error(kImagesCancelled);
    if (hooks.between_passes) hooks.between_passes();
    return unet.eval(x, w, h, t, context);
  };
  if (hooks.cancelled && hooks.cancelled()) return make_error(kImagesCancelled);
  KILN_ASSIGN_OR_RETURN(const Conditioning conditioning, encode_conditioning(models.text_encoder(), params));
  std::vector<float> init_latent;
  if (from_image) {
    KILN_ASSIGN_OR_RETURN(LatentEncoder * encoder, models.encoder());
    KILN_ASSIGN_OR_RETURN(init_latent, encode_init_image(*encoder, job.init_pixels, params));
  }
  LatentDecoder& decoder = models.decoder();
  decoder.set_compute_limit(job.decode_compute_limit);
  for (int b = 0; b < job.batch; ++b) {
    const StepObserver observe = [&hooks, b](int step, int steps, std::span<const float>) {
      if (hooks.step) hooks.step(b, step, steps);
    };
    KILN_ASSIGN_OR_RETURN(
        const std::vector<float> latent,
        from_image ? sample_latent_from_image(unet_fn, models.schedule(), conditioning, params, init_latent,
                                              job.strength, b, observe)
                   : sample_latent(unet_fn, models.schedule(), conditioning, params, b, observe));
    if (hooks.cancelled && hooks.cancelled()) return make_error(kImagesCancelled);
    KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> pixels, decode_to_pixels(decoder, latent, params, job.tiling));
    if (hooks.image) KILN_TRY(hooks.image(b, std::move(pixels)));
  }
  return ok_status();
}

}  // namespace kiln::diffusion
