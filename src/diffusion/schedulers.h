// Schedulers: the sigmas a sampler steps through, as stable-diffusion.cpp's get_sigmas makes them
// for the UNet models, bit for bit. `steps` sigmas in decreasing order followed by a final 0
// (steps + 1 values).
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "diffusion/model_family.h"
#include "diffusion/noise_schedule.h"

namespace kiln::diffusion {

enum class Scheduler { Discrete, Karras, Exponential, Ays, SgmUniform, Simple, Lcm };

// sd-cli's --scheduler names: discrete, karras, exponential, ays, sgm_uniform, simple, lcm.
std::optional<Scheduler> parse_scheduler(std::string_view name);
std::string_view scheduler_name(Scheduler scheduler);
std::span<const Scheduler> all_schedulers();

// steps >= 1. Errors: exponential with one step (its spacing divides by steps - 1), AYS for SD 2.x
// (it has no noise levels for it; stable-diffusion.cpp reads an empty table there).
Result<std::vector<float>> make_sigmas(Scheduler scheduler, int steps, const NoiseSchedule& schedule,
                                       ModelFamily family);

}  // namespace kiln::diffusion
