#include "diffusion/vae_encoder.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "diffusion/plane_graph.h"

namespace kiln::diffusion {

Result<std::unique_ptr<VaeEncoder>> VaeEncoder::create(std::shared_ptr<const sd::SdWeightFile> file,
                                                       const std::string& prefix, const NetworkPlacement& placement) {
  std::unique_ptr<VaeEncoder> e(new VaeEncoder());
  const std::string top = prefix.empty() ? "" : prefix + ".";
  KILN_ASSIGN_OR_RETURN(e->net_, bind_network("sd vae encoder", std::move(file), sd::bind_vae_encoder, prefix, {top + "encoder.", top + "quant_conv."}, placement));
  return e;
}

Result<std::vector<float>> VaeEncoder::moments(std::span<const float> image, int64_t width, int64_t height) {
  if (width % 8 != 0 || height % 8 != 0)
    return make_error("sd vae encoder: an image of ", width, " x ", height,
                      ": each side must be a multiple of 8");
  // ref: VAE::encode's scale_tensor_to_minus1_1.
  std::vector<float> x(image.begin(), image.end());
  for (float& v : x) v = v * 2.0f - 1.0f;
  const GridBody body = [this](Graph& g, Tensor grid) { return sd::vae_encoder_graph(g, net_.weights, grid); };
  return run_on_planes(*net_.net, x, width, height, 3, body);
}

std::vector<float> latent_from_moments(std::span<const float> moments, std::span<const float> noise) {
  KILN_ASSERT(moments.size() == 2 * noise.size(),
              "latent_from_moments: not 8 planes of moments for 4 of noise");
  const size_t n = noise.size();
  std::vector<float> latent(n);
  for (size_t i = 0; i < n; ++i) {
    // ref: sd::ops::exp computes in double.
    const float half_logvar = 0.5f * std::max(-30.0f, std::min(20.0f, moments[n + i]));
    const auto stddev = static_cast<float>(std::exp(static_cast<double>(half_logvar)));
    latent[i] = (moments[i] + stddev * noise[i]) * sd::kSd1VaeScale;
  }
  return latent;
}

}  // namespace kiln::diffusion
