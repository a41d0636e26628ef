#include "diffusion/sampling_defaults.h"

namespace kiln::diffusion {

Sampler default_sampler(ModelFamily) { return Sampler::EulerA; }

Scheduler default_scheduler(Sampler sampler) {
  if (sampler == Sampler::Lcm || sampler == Sampler::Tcd) return Scheduler::Lcm;
  if (sampler == Sampler::DdimTrailing) return Scheduler::Simple;
  return Scheduler::Discrete;
}

float default_eta(Sampler sampler) {
  return sampler == Sampler::EulerA || sampler == Sampler::Dpmpp2sA ? 1.0f : 0.0f;
}

std::optional<Prediction> default_prediction(ModelFamily family, bool file_has_v_pred_tensor) {
  switch (family) {
    case ModelFamily::Sd1:
      return Prediction::Eps;
    case ModelFamily::Sdxl:
      return file_has_v_pred_tensor ? Prediction::V : Prediction::Eps;
    case ModelFamily::Sd2:
      return std::nullopt;
  }
  return std::nullopt;
}

int default_clip_skip(ModelFamily family) { return family == ModelFamily::Sd1 ? 1 : 2; }

}  // namespace kiln::diffusion
