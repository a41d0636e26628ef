#include "diffusion/prediction.h"

#include <cmath>

namespace kiln::diffusion {

Scalings scalings_for(Prediction prediction, float sigma) {
  constexpr float kSigmaData = 1.0f;
  const float norm_sq = sigma * sigma + kSigmaData * kSigmaData;
  const float c_in = 1.0f / std::sqrt(norm_sq);
  if (prediction == Prediction::V) {
    return {kSigmaData * kSigmaData / norm_sq, -sigma * kSigmaData / std::sqrt(norm_sq), c_in};
  }
  return {1.0f, -sigma, c_in};
}

std::optional<Prediction> parse_prediction(std::string_view name) {
  if (name == "eps") return Prediction::Eps;
  if (name == "v") return Prediction::V;
  return std::nullopt;
}

}  // namespace kiln::diffusion
