// VaeEncoder: the AutoencoderKL encoder (models/sd/vae.h) run over kiln's runtime, as
// stable-diffusion.cpp's VAE::encode runs it for SD 1.x/2.x (no tiling): the image in [0, 1] mapped
// to x * 2 - 1, the encoder and quant_conv, giving the moments; and encode_first_stage's latent of
// them (gaussian_latent_sample, then vae_to_diffusion_latents). Images and latents are
// stable-diffusion.cpp's [w, h, c] planes.
//
// Devices and memory: a resident of its device under the owner "sd vae encoder"
// (diffusion/device_network.h). Ownership: shares the weight file; the Backend (and a shared arena)
// must outlive the encoder. Thread-safety: none; one encode at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "diffusion/device_network.h"
#include "models/sd/vae.h"
#include "models/sd/weight_file.h"
#include "runtime/backend.h"
#include "runtime/planner.h"

namespace kiln::diffusion {

class VaeEncoder {
 public:
  // Binds the encoder under `prefix` ("" for a standalone VAE file, sd::kSdVaePrefix in a
  // single-file checkpoint).
  static Result<std::unique_ptr<VaeEncoder>> create(std::shared_ptr<const sd::SdWeightFile> file,
                                                    const std::string& prefix, const NetworkPlacement& placement);

  // image: 3 planes of width * height floats in [0, 1] (sides multiples of 8). Returns the moments,
  // 8 planes of (width / 8) * (height / 8) floats: 4 means, then 4 log-variances.
  Result<std::vector<float>> moments(std::span<const float> image, int64_t width, int64_t height);

 private:
  VaeEncoder() = default;
  BoundNetwork<sd::VaeEncoderWeights> net_;
};

// The diffusion's latent of `moments` (8 planes of n floats) and `noise` (4 planes of n standard
// normal floats, the generator's draw): (mean + exp(0.5 clamp(logvar, -30, 20)) noise) *
// sd::kSd1VaeScale. ref: AutoEncoderKL::gaussian_latent_sample, vae_to_diffusion_latents.
std::vector<float> latent_from_moments(std::span<const float> moments, std::span<const float> noise);

}  // namespace kiln::diffusion
