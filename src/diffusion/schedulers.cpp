#include "diffusion/schedulers.h"

#include <array>
#include <cmath>

#include "diffusion/log_linear.h"

namespace kiln::diffusion {
namespace {

constexpr int kLastTimestep = kTrainingTimesteps - 1;

struct Named {
  Scheduler scheduler;
  std::string_view name;
};

constexpr std::array<Named, 7> kNames = {{
    {Scheduler::Discrete, "discrete"},
    {Scheduler::Karras, "karras"},
    {Scheduler::Exponential, "exponential"},
    {Scheduler::Ays, "ays"},
    {Scheduler::SgmUniform, "sgm_uniform"},
    {Scheduler::Simple, "simple"},
    {Scheduler::Lcm, "lcm"},
}};

// The names' order, as a list of values.
constexpr std::array<Scheduler, kNames.size()> kAll = [] {
  std::array<Scheduler, kNames.size()> all{};
  for (size_t i = 0; i < kNames.size(); ++i) all[i] = kNames[i].scheduler;
  return all;
}();

// Timesteps 999 .. 0 evenly (in float), the last one 0 exactly.
std::vector<float> discrete(int steps, const NoiseSchedule& schedule) {
  if (steps == 1) return {schedule.t_to_sigma(static_cast<float>(kLastTimestep)), 0.0f};
  std::vector<float> sigmas;
  const float step = static_cast<float>(kLastTimestep) / static_cast<float>(steps - 1);
  for (int i = 0; i < steps; ++i) {
    sigmas.push_back(schedule.t_to_sigma(kLastTimestep - step * static_cast<float>(i)));
  }
  sigmas.push_back(0.0f);
  return sigmas;
}

// Karras et al. 2022, eq. 5, rho = 7; pow in double as stable-diffusion.cpp's unqualified pow.
std::vector<float> karras(int steps, const NoiseSchedule& schedule) {
  constexpr float kRho = 7.f;
  const float sigma_min = std::max(schedule.sigma_min(), 1e-6f);
  const auto root = [](float v) { return static_cast<float>(std::pow(double{v}, double{1.f / kRho})); };
  const float min_inv_rho = root(sigma_min);
  const float max_inv_rho = root(schedule.sigma_max());
  std::vector<float> sigmas(steps + 1);
  for (int i = 0; i < steps; ++i) {
    const float ramp = static_cast<float>(i) / (static_cast<float>(steps) - 1.f);
    sigmas[i] =
        static_cast<float>(std::pow(double{max_inv_rho + ramp * (min_inv_rho - max_inv_rho)}, double{kRho}));
  }
  sigmas[steps] = 0.0f;
  return sigmas;
}

// Evenly spaced in log sigma from sigma_max to sigma_min.
std::vector<float> exponential(int steps, const NoiseSchedule& schedule) {
  const float log_min = std::log(schedule.sigma_min());
  const float log_max = std::log(schedule.sigma_max());
  const float step = (log_max - log_min) / static_cast<float>(steps - 1);
  std::vector<float> sigmas;
  for (int i = 0; i < steps; ++i) sigmas.push_back(std::exp(log_max - step * static_cast<float>(i)));
  sigmas.push_back(0.0f);
  return sigmas;
}

// Align Your Steps (NVIDIA): ten published noise levels per family, stretched log-linearly.
std::vector<float> ays(int steps, ModelFamily family) {
  static const std::vector<float> kSd1 = {14.6146412293f, 6.4745760956f, 3.8636745985f, 2.6946151520f,
                                          1.8841921177f,  1.3943805092f, 0.9642583904f, 0.6523686016f,
                                          0.3977456272f,  0.1515232662f, 0.0291671582f};
  static const std::vector<float> kSdxl = {14.6146412293f, 6.3184485287f, 3.7681790315f, 2.1811480769f,
                                           1.3405244945f,  0.8620721141f, 0.5550693289f, 0.3798540708f,
                                           0.2332364134f,  0.1114188177f, 0.0291671582f};
  const std::vector<float>& levels = family == ModelFamily::Sdxl ? kSdxl : kSd1;
  std::vector<float> sigmas = static_cast<size_t>(steps) + 1 == levels.size()
                                  ? levels
                                  : log_linear_resample_descending(levels, static_cast<size_t>(steps) + 1);
  sigmas[steps] = 0.0f;
  return sigmas;
}

// Timesteps 999 .. 0 in steps + 1 points (accumulated in float), the last one dropped for 0.
std::vector<float> sgm_uniform(int steps, const NoiseSchedule& schedule) {
  const std::vector<float> timesteps =
      accumulated_linear_space(static_cast<float>(kLastTimestep), 0.f, static_cast<size_t>(steps) + 1);
  std::vector<float> sigmas;
  for (int i = 0; i < steps; ++i) sigmas.push_back(schedule.t_to_sigma(timesteps[i]));
  sigmas.push_back(0.0f);
  return sigmas;
}

// Every (1000 / steps)-th timestep from 999 down, truncated to whole timesteps (ComfyUI's simple).
std::vector<float> simple(int steps, const NoiseSchedule& schedule) {
  const float stride = static_cast<float>(kTrainingTimesteps) / static_cast<float>(steps);
  std::vector<float> sigmas;
  for (int i = 0; i < steps; ++i) {
    const int timestep = std::max(kLastTimestep - static_cast<int>(static_cast<float>(i) * stride), 0);
    sigmas.push_back(schedule.t_to_sigma(static_cast<float>(timestep)));
  }
  sigmas.push_back(0.0f);
  return sigmas;
}

// The LCM training schedule: 50 original steps of 20 timesteps, `steps` of them taken evenly.
std::vector<float> lcm(int steps, const NoiseSchedule& schedule) {
  constexpr int kOriginalSteps = 50;
  constexpr int kStride = kTrainingTimesteps / kOriginalSteps;
  std::vector<float> sigmas;
  for (int i = 0; i < steps; ++i) {
    const int index = (i * kOriginalSteps) / steps;
    sigmas.push_back(schedule.t_to_sigma(static_cast<float>((kOriginalSteps - index) * kStride - 1)));
  }
  sigmas.push_back(0.0f);
  return sigmas;
}

}  // namespace

std::optional<Scheduler> parse_scheduler(std::string_view name) {
  for (const Named& n : kNames) {
    if (n.name == name) return n.scheduler;
  }
  return std::nullopt;
}

std::string_view scheduler_name(Scheduler scheduler) {
  for (const Named& n : kNames) {
    if (n.scheduler == scheduler) return n.name;
  }
  return "?";
}

std::span<const Scheduler> all_schedulers() { return kAll; }

Result<std::vector<float>> make_sigmas(Scheduler scheduler, int steps, const NoiseSchedule& schedule,
                                       ModelFamily family) {
  if (steps < 1) return make_error("diffusion: the step count must be at least 1, got ", steps);
  switch (scheduler) {
    case Scheduler::Discrete:
      return discrete(steps, schedule);
    case Scheduler::Karras:
    case Scheduler::Exponential:
      if (steps < 2) {
        return make_error("diffusion: the ", scheduler_name(scheduler),
                          " scheduler needs at least 2 steps (its spacing divides by steps - 1)");
      }
      return scheduler == Scheduler::Karras ? karras(steps, schedule) : exponential(steps, schedule);
    case Scheduler::Ays:
      if (family == ModelFamily::Sd2) {
        return make_error("diffusion: the ays scheduler has no noise levels for SD 2.x models");
      }
      return ays(steps, family);
    case Scheduler::SgmUniform:
      return sgm_uniform(steps, schedule);
    case Scheduler::Simple:
      return simple(steps, schedule);
    case Scheduler::Lcm:
      return lcm(steps, schedule);
  }
  return make_error("diffusion: unknown scheduler");
}

}  // namespace kiln::diffusion
