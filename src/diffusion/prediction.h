// What the UNet predicts and how its output becomes a denoised latent (k-diffusion's CompVis
// wrappers, as stable-diffusion.cpp computes them, sigma_data = 1): the model sees x * c_in at
// timestep sigma_to_t(sigma), and denoised = output * c_out + x * c_skip.
#pragma once

#include <optional>
#include <string_view>

namespace kiln::diffusion {

enum class Prediction { Eps, V };

struct Scalings {
  float c_skip;
  float c_out;
  float c_in;
};

Scalings scalings_for(Prediction prediction, float sigma);

// "eps" or "v" (sd-cli's --prediction names for these models); nullopt for anything else.
std::optional<Prediction> parse_prediction(std::string_view name);

}  // namespace kiln::diffusion
