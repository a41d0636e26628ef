// img2img's shortened schedule, as stable-diffusion.cpp cuts it for --strength below 1: with
// t_enc = (size_t)(steps * strength), at most steps - 1, the sigmas from index steps - t_enc - 1 are
// kept (t_enc + 1 steps); the start latent is then init + noise * the first kept sigma. Strength 1
// keeps every sigma.
// Thread-safety: pure function.
#pragma once

#include <span>
#include <vector>

#include "core/result.h"

namespace kiln::diffusion {

// `sigmas`: a scheduler's steps + 1 values. Errors: strength outside [0, 1] (or NaN), fewer than 2
// sigmas.
Result<std::vector<float>> img2img_sigmas(std::span<const float> sigmas, float strength);

}  // namespace kiln::diffusion
