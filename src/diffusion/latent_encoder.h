// LatentEncoder: what turns an init image into the diffusion's latent for img2img, as
// stable-diffusion.cpp's encode_first_stage does for SD 1.x: the VAE's moments sampled with the
// generator (one randn over the latent after the encode) and scaled, or TAESD's latent as it comes
// (no sampling, no scale). Images are 3 planes (R, G, B) of width * height floats in [0, 1]; latents
// 4 planes of (width / 8) * (height / 8) floats.
//
// Ownership: owns its encoder network. Thread-safety: none; one encode at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/result.h"
#include "diffusion/noise_rng.h"
#include "diffusion/taesd_encoder.h"
#include "diffusion/vae_encoder.h"

namespace kiln::diffusion {

class LatentEncoder {
 public:
  explicit LatentEncoder(std::unique_ptr<VaeEncoder> vae) : vae_(std::move(vae)) {}
  explicit LatentEncoder(std::unique_ptr<TaesdEncoder> taesd) : taesd_(std::move(taesd)) {}

  // `rng` gives the VAE's sample noise (TAESD draws nothing).
  Result<std::vector<float>> encode(std::span<const float> image, int64_t width, int64_t height,
                                    NoiseRng& rng);

 private:
  std::unique_ptr<VaeEncoder> vae_;
  std::unique_ptr<TaesdEncoder> taesd_;
};

}  // namespace kiln::diffusion
