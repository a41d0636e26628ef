// What sd-cli picks when a flag is left out, for the UNet models (stable-diffusion.cpp's
// sd_sample_params_init, sd_get_default_sample_method, sd_get_default_scheduler, resolve_eta and
// its prediction detection, and the conditioner's clip_skip).
// Thread-safety: pure functions.
#pragma once

#include <optional>

#include "diffusion/model_family.h"
#include "diffusion/noise_rng.h"
#include "diffusion/prediction.h"
#include "diffusion/samplers.h"
#include "diffusion/schedulers.h"

namespace kiln::diffusion {

inline constexpr int kDefaultSteps = 20;
inline constexpr float kDefaultCfgScale = 7.0f;
inline constexpr RngKind kDefaultRng = RngKind::Cuda;

// euler_a for every UNet family.
Sampler default_sampler(ModelFamily family);
// lcm for lcm and tcd, simple for ddim_trailing, discrete otherwise.
Scheduler default_scheduler(Sampler sampler);
// 1 for the ancestral samplers (euler_a, dpm++2s_a), 0 for the others (ddim_trailing and tcd
// included: they add noise only when given an eta).
float default_eta(Sampler sampler);
// The prediction when --prediction is left out, from what the file says: SD 1.x eps; SDXL v when it
// has a `v_pred` tensor, else eps. SD 2.x: nullopt, stable-diffusion.cpp decides by running the UNet
// once (is_using_v_parameterization_for_sd2), which needs the model.
std::optional<Prediction> default_prediction(ModelFamily family, bool file_has_v_pred_tensor);
// The CLIP layer whose output conditions the UNet, counted from the last (1 = the last layer) when
// --clip-skip is left out or not positive: 2 for SD 2.x and SDXL, 1 for SD 1.x.
int default_clip_skip(ModelFamily family);

}  // namespace kiln::diffusion
