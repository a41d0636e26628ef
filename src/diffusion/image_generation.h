// generate_images: one image request, text to image or image to image, from resolved parameters to
// 8-bit pixels: the conditioning encoded once, the init image (if any) encoded once, then per image
// of the batch the sampler's steps and the decode (text_to_image.h has the order of operations).
// `kiln image` and `kiln serve`'s image routes both call it, so the same settings give the same
// pixels from either.
//
// Progress and cancellation: `hooks.step` is called before each denoise step; `hooks.cancelled` is
// asked before every UNet evaluation and, when it says true, the job ends with an Error whose
// message is kImagesCancelled (the memory the job allocated is freed on return).
//
// Ownership: borrows the models for the call. Thread-safety: none (one job per SdModels at a time).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "core/result.h"
#include "diffusion/sd_models.h"
#include "diffusion/text_to_image.h"
#include "diffusion/tiling.h"

namespace kiln::diffusion {

struct ImageJob {
  TextToImageParams params;  // validated by generate_images
  int batch = 1;             // images, seeds params.seed, params.seed + 1, ...; >= 1
  // Image to image when not empty: params.width * params.height RGB bytes, row-major.
  std::span<const uint8_t> init_pixels;
  float strength = 0.75f;             // image to image: the share of the schedule run, in [0, 1]
  const TilingParams* tiling = nullptr;  // the decode's tiles; null: whole, tiled only when it does not fit
  size_t decode_compute_limit = 0;       // LatentDecoder::set_compute_limit; 0: no limit
};

struct ImageHooks {
  // Before image `image`'s denoise step `step` of `steps` (1-based).
  std::function<void(int image, int step, int steps)> step;
  // True: stop the job at the next UNet evaluation.
  std::function<bool()> cancelled;
  // Called before every UNet evaluation (after `cancelled`), outside any pass: a server lets other
  // work waiting for the device's compute arena take its turn here.
  std::function<void()> between_passes;
  // Each finished image, in batch order: its index and params.width * params.height RGB bytes.
  // An Error ends the job with it.
  std::function<Status(int image, std::vector<uint8_t> pixels)> image;
};

// sd-cli's settings that do not depend on the model (sampling_defaults.h): `sampler` and
// `scheduler` when given, else the defaults (the scheduler and eta follow the sampler), the default
// RNG, kDefaultSteps, kDefaultCfgScale and 512 x 512; the caller then sets what its request gives
// (prompt, size, steps, seed, ...) and, once the model is open, resolve_for_model.
TextToImageParams sd_settings(std::optional<Sampler> sampler, std::optional<Scheduler> scheduler);

// The settings that depend on the model, as sd-cli resolves them once it is open: its family, the
// CLIP layer (`clip_skip` when positive, else the family's), the prediction (`prediction` when
// given, else the model's: SdModels::default_prediction, which may run the UNet once for SD 2.x).
Status resolve_for_model(SdModels& models, TextToImageParams& params, int clip_skip,
                         std::optional<Prediction> prediction);

// The message of the Error a cancelled job ends with.
inline constexpr const char* kImagesCancelled = "image generation cancelled";

// Errors: params out of range (validate), a batch below 1, init pixels of another size, a model
// without the encoder image to image needs, the networks' errors, a cancel.
Status generate_images(SdModels& models, const ImageJob& job, const ImageHooks& hooks);

}  // namespace kiln::diffusion
