#include "diffusion/latent_encoder.h"

namespace kiln::diffusion {

Result<std::vector<float>> LatentEncoder::encode(std::span<const float> image, int64_t width, int64_t height,
                                                 NoiseRng& rng) {
  if (taesd_) return taesd_->encode(image, width, height);
  KILN_ASSIGN_OR_RETURN(const std::vector<float> moments, vae_->moments(image, width, height));
  std::vector<float> noise(moments.size() / 2);
  rng.randn(noise);
  return latent_from_moments(moments, noise);
}

}  // namespace kiln::diffusion
