// The text-to-image and img2img loop for SD 1.x and 2.x as stable-diffusion.cpp's generate_image runs it, in
// its order:
//   1. the conditioning: the prompt's (encode_prompt) and, when cfg_scale != 1, the negative
//      prompt's, computed once for a batch (encode_conditioning);
//   2. per image b of a batch: the generator seeded with seed + b, the initial noise drawn from it
//      (one randn over the latent), x = noise * sigmas[0];
//   3. the sampler over the scheduler's sigmas, each denoise step one UNet evaluation per
//      conditioning at timestep sigma_to_t(sigma) on x * c_in, classifier-free guidance, then the
//      prediction's scalings (denoise_step.h); the ancestral samplers draw their noise from the same
//      generator, after the initial noise (sample_latent);
//   4. the final latent decoded (TAESD or the VAE) into sd-cli's 8-bit pixels (decode_to_pixels).
// img2img (sample_latent_from_image): before 1, the init image encoded once for a batch with the
// generator seeded with the seed (encode_init_image; the VAE's sample draws from it); in 2, x =
// init_latent + noise * sigmas[0]; in 3, the sigmas cut by the strength (img2img_sigmas.h).
// Latents are stable-diffusion.cpp's [w, h, c] planes: 4 planes of (width / 8) * (height / 8) floats.
//
// Ownership: borrows the networks for the call. Thread-safety: none (the networks run one graph at a
// time).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "diffusion/clip_text_encoder.h"
#include "diffusion/latent_decoder.h"
#include "diffusion/latent_encoder.h"
#include "diffusion/model_family.h"
#include "diffusion/noise_rng.h"
#include "diffusion/noise_schedule.h"
#include "diffusion/prediction.h"
#include "diffusion/samplers.h"
#include "diffusion/schedulers.h"
#include "diffusion/unet_model.h"

namespace kiln::diffusion {

// Image sides kiln takes: multiples of 64 (the UNet halves an eighth of the side three times) up to
// kMaxImageSide, checked before anything is allocated.
inline constexpr int64_t kImageSideStep = 64;
inline constexpr int64_t kMaxImageSide = 8192;

// One text-to-image request, every field resolved (sampling_defaults.h gives sd-cli's defaults).
struct TextToImageParams {
  std::string prompt;
  std::string negative_prompt;
  int64_t width = 512;  // pixels, a multiple of kImageSideStep in [kImageSideStep, kMaxImageSide]
  int64_t height = 512;
  int steps = 20;  // >= 1
  float cfg_scale = 7.0f;
  Sampler sampler = Sampler::EulerA;
  Scheduler scheduler = Scheduler::Discrete;
  float eta = 1.0f;   // the ancestral noise amount (default_eta)
  int64_t seed = 42;  // image b of a batch uses seed + b
  RngKind rng = RngKind::Cuda;
  int clip_skip = 1;  // counted from the last layer (1: the last)
  Prediction prediction = Prediction::Eps;
  ModelFamily family = ModelFamily::Sd1;  // the model's: its prompt padding and its ays sigmas
};

// An Error naming the first field out of range (sizes, steps, a cfg_scale or eta that is not
// finite, clip_skip < 1).
Status validate(const TextToImageParams& params);

// The UNet's context for the prompt and for the negative prompt: rows of context_dim floats, 77 per
// chunk. `uncond` is empty when cfg_scale == 1 (stable-diffusion.cpp runs no unconditional pass).
struct Conditioning {
  std::vector<float> cond;
  std::vector<float> uncond;
};

Result<Conditioning> encode_conditioning(ClipTextEncoder& encoder, const TextToImageParams& params);

// Called before each denoise step's UNet evaluations: the step (1-based, by the sigma's index in the
// schedule), the number of steps and the UNet's input x * c_in.
using StepObserver = std::function<void(int step, int steps, std::span<const float> unet_input)>;

// One UNet evaluation: the prediction for `unet_input` (a latent of params' size, already x * c_in)
// at `timestep` under `context` (one of the Conditioning's). UnetModel::eval behind it, or recorded
// outputs in tests.
using UnetFn = std::function<Result<std::vector<float>>(std::span<const float> unet_input, float timestep,
                                                        std::span<const float> context)>;

// The final latent of image `batch_index` (params validated). Per denoise step the UNet runs on the
// prompt's context, then on the negative prompt's when there is one.
Result<std::vector<float>> sample_latent(const UnetFn& unet, const NoiseSchedule& schedule,
                                         const Conditioning& conditioning, const TextToImageParams& params,
                                         int batch_index, const StepObserver& observer = {});
// The same with `unet` evaluated on params' latent size.
Result<std::vector<float>> sample_latent(UnetModel& unet, const NoiseSchedule& schedule,
                                         const Conditioning& conditioning, const TextToImageParams& params,
                                         int batch_index, const StepObserver& observer = {});

// img2img: the final latent of image `batch_index` started from `init_latent` (a latent of params'
// size, encode_init_image's) with the schedule cut by `strength` in [0, 1] (img2img_sigmas.h). Errors
// as sample_latent's, a strength out of range, an init latent of another size.
Result<std::vector<float>> sample_latent_from_image(const UnetFn& unet, const NoiseSchedule& schedule,
                                                    const Conditioning& conditioning,
                                                    const TextToImageParams& params,
                                                    std::span<const float> init_latent, float strength,
                                                    int batch_index, const StepObserver& observer = {});
Result<std::vector<float>> sample_latent_from_image(UnetModel& unet, const NoiseSchedule& schedule,
                                                    const Conditioning& conditioning,
                                                    const TextToImageParams& params,
                                                    std::span<const float> init_latent, float strength,
                                                    int batch_index, const StepObserver& observer = {});

// img2img's init latent: `pixels` (params.width * params.height RGB bytes, row-major) as [0, 1]
// planes through `encoder`, its generator seeded with params.seed (once for a batch, as
// generate_image encodes before the per-image seeds).
Result<std::vector<float>> encode_init_image(LatentEncoder& encoder, std::span<const uint8_t> pixels,
                                             const TextToImageParams& params);

// A final latent of params' size to params.width * params.height RGB bytes, row-major; tiled by
// `tiling` when not null (LatentDecoder::decode).
Result<std::vector<uint8_t>> decode_to_pixels(LatentDecoder& decoder, std::span<const float> latent,
                                              const TextToImageParams& params,
                                              const TilingParams* tiling = nullptr);

}  // namespace kiln::diffusion
