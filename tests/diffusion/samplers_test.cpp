// Every sampler against stable-diffusion.cpp's sample_k_diffusion, bit for bit, with a stand-in for
// the UNet (sdcpp_oracle.cpp): output = in * 0.9 + t * 1e-4 (cond), in * 0.8 - t * 1e-4 (uncond),
// through kiln's scalings, sigma_to_t and CFG. A txt2img start from seed 42 on a 4x4x4 latent, the
// sampler's default scheduler and eta, 1, 2 and 4 steps with both RNGs, v-prediction, no CFG and
// other etas at 3 steps. Compared: the sigma and latent of every model call, then the result.
#include "diffusion/samplers.h"

#include <gtest/gtest.h>

#include <string>

#include "diffusion/denoise_step.h"
#include "diffusion/sampling_defaults.h"
#include "sdcpp_refs.h"

namespace kiln::diffusion {
namespace {

struct Case {
  Sampler sampler;
  RngKind rng;
  Prediction prediction;
  int steps;
  float cfg_scale = 7.f;
  float eta = 0.f;
};

// sample/<sampler>/<rng>/<prediction>/<steps>[/nocfg|/eta<value>]
Case parse_key(const std::string& key) {
  std::vector<std::string> parts;
  for (size_t start = 0, end; start <= key.size(); start = end + 1) {
    end = key.find('/', start);
    if (end == std::string::npos) end = key.size();
    parts.push_back(key.substr(start, end - start));
  }
  Case c{*parse_sampler(parts.at(1)), *parse_rng_kind(parts.at(2)), *parse_prediction(parts.at(3)),
         std::stoi(parts.at(4))};
  c.eta = default_eta(c.sampler);
  if (parts.size() > 5 && parts[5] == "nocfg") c.cfg_scale = 1.f;
  if (parts.size() > 5 && parts[5].starts_with("eta")) c.eta = std::stof(parts[5].substr(3));
  return c;
}

// The record the oracle writes: (sigma, latent) per model call, then the final latent.
std::vector<float> run_case(const Case& c) {
  constexpr size_t kLatentSize = 4 * 4 * 4;
  const NoiseSchedule schedule;
  const auto sigmas = make_sigmas(default_scheduler(c.sampler), c.steps, schedule, ModelFamily::Sd1);
  EXPECT_TRUE(sigmas.ok());
  auto rng = make_noise_rng(c.rng);
  rng->seed(42);
  std::vector<float> noise(kLatentSize), x(kLatentSize);
  rng->randn(noise);
  add_noise(std::vector<float>(kLatentSize, 0.f), noise, (*sigmas)[0], x);

  std::vector<float> record;
  const DenoiseFn denoise = [&](std::span<const float> in, float sigma, std::span<float> denoised) -> Status {
    record.push_back(sigma);
    record.insert(record.end(), in.begin(), in.end());
    const Scalings scalings = scalings_for(c.prediction, sigma);
    const float t = schedule.sigma_to_t(sigma);
    std::vector<float> model_in(in.size()), cond(in.size()), uncond(in.size()), guided(in.size());
    scale_model_input(in, scalings.c_in, model_in);
    for (size_t k = 0; k < in.size(); ++k) {
      cond[k] = model_in[k] * 0.9f + t * 1e-4f;
      uncond[k] = model_in[k] * 0.8f - t * 1e-4f;
    }
    if (c.cfg_scale == 1.f) {
      guided = cond;
    } else {
      apply_cfg(cond, uncond, c.cfg_scale, guided);
    }
    denoised_from_output(guided, in, scalings, denoised);
    return ok_status();
  };
  const Status status = sample(c.sampler, denoise, x, *sigmas, *rng, c.eta);
  EXPECT_TRUE(status.ok()) << status.error().message;
  record.insert(record.end(), x.begin(), x.end());
  return record;
}

TEST(SamplersRef, EveryCaseEqualsStableDiffusionCpp) {
  const std::vector<std::string> keys = test::ref_keys("sample/");
  ASSERT_GE(keys.size(), 11u * 8u);
  for (const std::string& key : keys) {
    EXPECT_TRUE(test::bits_equal(test::ref_floats(key), run_case(parse_key(key)))) << key;
  }
}

TEST(Samplers, EveryNameHasReferenceCases) {
  for (Sampler s : all_samplers()) {
    EXPECT_EQ(parse_sampler(sampler_name(s)), s);
    EXPECT_FALSE(test::ref_keys("sample/" + std::string(sampler_name(s)) + "/").empty()) << sampler_name(s);
  }
  EXPECT_FALSE(parse_sampler("euler_a_cfg_pp").has_value());
}

TEST(Samplers, StopAtTheCallbacksError) {
  const NoiseSchedule schedule;
  const auto sigmas = make_sigmas(Scheduler::Discrete, 4, schedule, ModelFamily::Sd1);
  auto rng = make_noise_rng(RngKind::Cuda);
  for (Sampler s : all_samplers()) {
    int calls = 0;
    const DenoiseFn failing = [&](std::span<const float>, float, std::span<float>) -> Status {
      ++calls;
      return make_error("cancelled");
    };
    std::vector<float> x(16, 1.f);
    const Status status = sample(s, failing, x, *sigmas, *rng, default_eta(s));
    ASSERT_FALSE(status.ok()) << sampler_name(s);
    EXPECT_EQ(status.error().message, "cancelled");
    EXPECT_EQ(calls, 1) << sampler_name(s);
  }
}

TEST(Samplers, RefuseTooFewSigmas) {
  auto rng = make_noise_rng(RngKind::Cpu);
  std::vector<float> x(4, 0.f);
  const float one_sigma[] = {1.f};
  const DenoiseFn identity = [](std::span<const float>, float, std::span<float>) { return ok_status(); };
  EXPECT_FALSE(sample(Sampler::Euler, identity, x, one_sigma, *rng, 0.f).ok());
}

TEST(SamplingDefaults, AsSdCliPicksThem) {
  EXPECT_EQ(default_sampler(ModelFamily::Sd1), Sampler::EulerA);
  EXPECT_EQ(default_sampler(ModelFamily::Sdxl), Sampler::EulerA);
  EXPECT_EQ(default_scheduler(Sampler::EulerA), Scheduler::Discrete);
  EXPECT_EQ(default_scheduler(Sampler::Lcm), Scheduler::Lcm);
  EXPECT_EQ(default_scheduler(Sampler::Tcd), Scheduler::Lcm);
  EXPECT_EQ(default_scheduler(Sampler::DdimTrailing), Scheduler::Simple);
  EXPECT_EQ(default_eta(Sampler::EulerA), 1.f);
  EXPECT_EQ(default_eta(Sampler::Dpmpp2sA), 1.f);
  EXPECT_EQ(default_eta(Sampler::Tcd), 0.f);
  EXPECT_EQ(default_prediction(ModelFamily::Sd1, false), Prediction::Eps);
  EXPECT_EQ(default_prediction(ModelFamily::Sdxl, true), Prediction::V);
  EXPECT_FALSE(default_prediction(ModelFamily::Sd2, false).has_value());
  EXPECT_EQ(default_clip_skip(ModelFamily::Sd1), 1);
  EXPECT_EQ(default_clip_skip(ModelFamily::Sd2), 2);
  EXPECT_EQ(default_clip_skip(ModelFamily::Sdxl), 2);
  EXPECT_EQ(kDefaultSteps, 20);
  EXPECT_EQ(kDefaultCfgScale, 7.f);
  EXPECT_EQ(kDefaultRng, RngKind::Cuda);
}

}  // namespace
}  // namespace kiln::diffusion
