// The whole SD 1.x text-to-image loop (text_to_image.h) against stable-diffusion.cpp's generate_image
// (tests/data/diffusion/sdcpp-loop-refs.txt, from tools/fixtures/mksdcpp_loop_refs.sh) on the
// random-weight test models (build/test-data/sd/: CLIP-L, the 32-channel UNet, TAESD) at 64x64:
// euler, euler_a, dpm++2m and lcm at 1, 2 and 4 steps with a weighted prompt, a negative prompt and
// CFG 7, the same at 4 steps with CFG 1, and sd-cli's defaults for "a cat".
// - Replay: the loop fed stable-diffusion.cpp's own UNet outputs gives its UNet inputs at every step
//   and its final latent bit for bit, so any step's arithmetic (noise, sigmas, scalings, CFG, the
//   sampler, the order of UNet calls) that differs fails here, whatever the UNet's rounding.
// - End to end with kiln's networks: every step's UNet input, the final latent and the pixels.
// Also: the sampler, scheduler, CFG scale, prompt and seed each change the picture, and
// out-of-range requests are Errors before anything runs.
#include "diffusion/text_to_image.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "diffusion/sampling_defaults.h"
#include "diffusion/sd_models.h"
#include "llm/cpu_engine.h"
#include "sd_models_suite.h"
#include "sdcpp_refs.h"
#include "test_data.h"

namespace kiln::diffusion {
namespace {

// ||kiln - sd.cpp|| / ||sd.cpp|| of a latent; pixels within 1 of stable-diffusion.cpp's on at
// least 99% of them. The issue asks 1e-3 for the latents: met with CFG 1 (measured on an AMD EPYC,
// Zen 4, AVX-512: at most 5.5e-4). With CFG 7 the UNet's own difference from stable-diffusion.cpp's
// (within 6.1e-4: F16 rounding at boundaries, see unet_model_test.cpp) is multiplied by the
// guidance, uncond + 7 * (cond - uncond): the guided output of the first step differs by 3.4e-3
// when each of its two UNet outputs differs by 5.4e-4 and 6.1e-4 (measured), and the latents by
// at most 4.3e-3. The replay test shows that none of it comes from the loop.
constexpr double kLatentTolerance = 1e-3;
constexpr double kGuidedLatentTolerance = 6e-3;  // CFG 7
constexpr size_t kPixelStride = 5;               // sdcpp_loop_oracle.cpp's, for every case but cli-defaults

// The oracle's cases: loop/<name>/...
struct OracleCase {
  std::string name;
  Sampler sampler;
  int steps;
  float cfg_scale;
};

std::vector<OracleCase> oracle_cases() {
  std::vector<OracleCase> cases;
  const std::pair<Sampler, const char*> samplers[] = {{Sampler::Euler, "euler"},
                                                      {Sampler::EulerA, "euler_a"},
                                                      {Sampler::Dpmpp2m, "dpm++2m"},
                                                      {Sampler::Lcm, "lcm"}};
  for (const auto& [sampler, name] : samplers) {
    for (int steps : {1, 2, 4})
      cases.push_back({std::string(name) + "-" + std::to_string(steps), sampler, steps, 7.0f});
    cases.push_back({std::string(name) + "-4-cfg1", sampler, 4, 1.0f});
  }
  return cases;
}

// sdcpp_loop_oracle.cpp's settings for a case.
TextToImageParams oracle_params(const OracleCase& c) {
  TextToImageParams p;
  p.prompt = "a (cat:1.2) on a [red] sofa";
  p.negative_prompt = c.cfg_scale != 1.0f ? "blurry, low quality" : "";
  p.width = p.height = 64;
  p.steps = c.steps;
  p.cfg_scale = c.cfg_scale;
  p.sampler = c.sampler;
  p.scheduler = default_scheduler(c.sampler);
  p.eta = default_eta(c.sampler);
  return p;
}

// sd-cli -p "a cat" -W 64 -H 64 --steps 2 and nothing else: euler_a, discrete, CFG 7, seed 42.
TextToImageParams cli_defaults_params() {
  TextToImageParams p;
  p.prompt = "a cat";
  p.width = p.height = 64;
  p.steps = 2;
  return p;
}

std::vector<float> from_step(std::span<const float> in) { return {in.begin(), in.end()}; }

// Replays the case recorded under `record` ("loop/euler-2"): the UNet's outputs are
// stable-diffusion.cpp's, in the order it ran them.
void expect_replay_is_exact(const std::string& record, const TextToImageParams& p) {
  SCOPED_TRACE(record);
  const std::string key = record + "/";
  size_t call = 0;
  const UnetFn recorded = [&](std::span<const float>, float,
                              std::span<const float>) -> Result<std::vector<float>> {
    return test::ref_floats(key + "unet_out" + std::to_string(call++));
  };
  Conditioning c;  // only which passes run matters: the recorded outputs stand for the UNet
  c.cond.assign(1, 0.0f);
  if (p.cfg_scale != 1.0f) c.uncond.assign(1, 0.0f);
  std::vector<std::vector<float>> inputs;
  const StepObserver observe = [&](int, int, std::span<const float> in) { inputs.push_back(from_step(in)); };
  auto latent = sample_latent(recorded, NoiseSchedule(), c, p, 0, observe);
  ASSERT_TRUE(latent.ok()) << latent.error().message;
  ASSERT_EQ(inputs.size(), static_cast<size_t>(p.steps));
  for (int k = 0; k < p.steps; ++k)
    EXPECT_TRUE(test::bits_equal(test::ref_floats(key + "unet_in" + std::to_string(k)), inputs[k]))
        << "step " << k;
  EXPECT_TRUE(test::bits_equal(test::ref_floats(key + "latent"), *latent));
  EXPECT_EQ(call, static_cast<size_t>(p.steps) * (p.cfg_scale != 1.0f ? 2 : 1));
}

TEST(TextToImage, ReplayingStableDiffusionCppsUnetGivesItsLatentsBitForBit) {
  for (const OracleCase& c : oracle_cases()) expect_replay_is_exact("loop/" + c.name, oracle_params(c));
  expect_replay_is_exact("loop/cli-defaults", cli_defaults_params());
}

TEST(TextToImage, ReplayingSd2RunsGivesTheirLatentsBitForBit) {
  // tests/diffusion/sd2_test.cpp's records of an SD 2.x model: eps (stable-diffusion.cpp's choice for
  // the test UNet) and --prediction v, whose scalings only this loop applies.
  for (const auto& [name, prediction] :
       {std::pair{"euler-2", Prediction::Eps}, std::pair{"v-euler-2", Prediction::V}}) {
    TextToImageParams p = oracle_params({name, Sampler::Euler, 2, 7.0f});
    p.family = ModelFamily::Sd2;
    p.prediction = prediction;
    expect_replay_is_exact(std::string("sd2/loop/") + name, p);
  }
}

class TextToImageTest : public test::SdModelsSuite {
 protected:
  static void SetUpTestSuite() {
    open_models("sd/clip-l-f32.safetensors", "sd/unet-sd1-c32-f32.safetensors");
  }

  static size_t differing_pixels(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
    EXPECT_EQ(a.size(), b.size());
    size_t d = 0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) d += a[i] != b[i];
    return d;
  }
};

TEST_F(TextToImageTest, DetectsTheTestModelAsSd1) { EXPECT_EQ(describe(models_->version()), "SD 1.x"); }

TEST_F(TextToImageTest, SamplersMatchStableDiffusionCpp) {
  for (const OracleCase& c : oracle_cases()) {
    SCOPED_TRACE(c.name);
    expect_matches_sdcpp("loop/" + c.name + "/", run(oracle_params(c)), c.steps,
                         c.cfg_scale == 1.0f ? kLatentTolerance : kGuidedLatentTolerance, kPixelStride);
  }
}

TEST_F(TextToImageTest, SdCliDefaultsMatchStableDiffusionCpp) {
  expect_matches_sdcpp("loop/cli-defaults/", run(cli_defaults_params()), 2, kGuidedLatentTolerance, 1);
}

TEST_F(TextToImageTest, SettingsChangeThePicture) {
  const TextToImageParams base = oracle_params({"euler_a-4", Sampler::EulerA, 4, 7.0f});
  const Run ref = run(base);
  ASSERT_FALSE(ref.pixels.empty());
  // The image must not be mostly clipped: then nothing could change it.
  size_t saturated = 0;
  for (uint8_t v : ref.pixels) saturated += v == 0 || v == 255;
  EXPECT_LT(saturated, ref.pixels.size() / 2);

  std::vector<std::pair<std::string, TextToImageParams>> variants;
  variants.emplace_back("sampler euler", base);
  variants.back().second.sampler = Sampler::Euler;
  variants.back().second.eta = 0.0f;
  variants.emplace_back("scheduler karras", base);
  variants.back().second.scheduler = Scheduler::Karras;
  variants.emplace_back("cfg 3", base);
  variants.back().second.cfg_scale = 3.0f;
  variants.emplace_back("prompt", base);
  variants.back().second.prompt = "a dog in the snow";
  variants.emplace_back("seed", base);
  variants.back().second.seed = 43;
  for (const auto& [what, p] : variants) {
    const size_t d = differing_pixels(run(p).pixels, ref.pixels);
    EXPECT_GT(d, ref.pixels.size() / 100)
        << what << " changes only " << d << " of " << ref.pixels.size() << " bytes";
    std::printf("  %-16s changes %zu of %zu bytes\n", what.c_str(), d, ref.pixels.size());
  }
}

TEST(TextToImage, OutOfRangeRequestsAreErrors) {
  TextToImageParams ok;
  EXPECT_TRUE(validate(ok).ok());
  const auto error_of = [](TextToImageParams p) {
    const Status s = validate(p);
    return s.ok() ? std::string("(ok)") : s.error().message;
  };
  TextToImageParams p = ok;
  p.width = 0;
  EXPECT_NE(error_of(p).find("width 0 must be a multiple of 64"), std::string::npos) << error_of(p);
  p = ok;
  p.width = p.height = 100000;
  EXPECT_NE(error_of(p).find("width 100000"), std::string::npos) << error_of(p);
  p = ok;
  p.height = 100;
  EXPECT_NE(error_of(p).find("height 100"), std::string::npos) << error_of(p);
  p = ok;
  p.steps = -3;
  EXPECT_NE(error_of(p).find("steps -3"), std::string::npos) << error_of(p);
  p = ok;
  p.cfg_scale = NAN;
  EXPECT_NE(error_of(p).find("cfg_scale"), std::string::npos) << error_of(p);
  p = ok;
  p.clip_skip = 0;
  EXPECT_NE(error_of(p).find("clip_skip 0"), std::string::npos) << error_of(p);
}

}  // namespace
}  // namespace kiln::diffusion
