// The noise schedule, the scalings and every scheduler against stable-diffusion.cpp, bit for bit:
// the 1000-entry sigma table, sigma->t and t->sigma at probes, eps and v scalings, and the sigmas of
// discrete, karras, exponential, ays (SD 1.x and SDXL levels), sgm_uniform, simple and lcm for
// 1..50 steps.
#include "diffusion/schedulers.h"

#include <gtest/gtest.h>

#include <string>

#include "diffusion/prediction.h"
#include "sdcpp_refs.h"

namespace kiln::diffusion {
namespace {

using test::bits_equal;
using test::ref_floats;

TEST(NoiseScheduleRef, SigmaTableEqualsStableDiffusionCpp) {
  const NoiseSchedule schedule;
  std::vector<float> table;
  for (int t = 0; t < kTrainingTimesteps; ++t) table.push_back(schedule.sigma_at(t));
  EXPECT_TRUE(bits_equal(ref_floats("table/sigmas"), table));
}

TEST(NoiseScheduleRef, SigmaToTAndBack) {
  const NoiseSchedule schedule;
  std::vector<float> ts;
  for (float s : ref_floats("probe/sigmas")) ts.push_back(schedule.sigma_to_t(s));
  EXPECT_TRUE(bits_equal(ref_floats("probe/sigma_to_t"), ts));
  std::vector<float> sigmas;
  for (float t : ref_floats("probe/ts")) sigmas.push_back(schedule.t_to_sigma(t));
  EXPECT_TRUE(bits_equal(ref_floats("probe/t_to_sigma"), sigmas));
}

TEST(NoiseScheduleRef, ScalingsOfBothPredictions) {
  for (Prediction p : {Prediction::Eps, Prediction::V}) {
    std::vector<float> got;
    for (float s : ref_floats("probe/sigmas")) {
      const Scalings c = scalings_for(p, s);
      got.insert(got.end(), {c.c_skip, c.c_out, c.c_in});
    }
    EXPECT_TRUE(bits_equal(ref_floats(p == Prediction::V ? "probe/scalings/v" : "probe/scalings/eps"), got));
  }
}

TEST(NoiseSchedule, FileAlphasAreValidated) {
  EXPECT_FALSE(NoiseSchedule::from_alphas_cumprod(std::vector<float>(999, 0.5f)).ok());
  std::vector<float> alphas(kTrainingTimesteps, 0.5f);
  EXPECT_TRUE(NoiseSchedule::from_alphas_cumprod(alphas).ok());
  alphas[3] = 0.0f;
  EXPECT_FALSE(NoiseSchedule::from_alphas_cumprod(alphas).ok());
}

// Every record sigmas/<scheduler>/<family>/<steps> the oracle wrote.
TEST(SchedulersRef, EveryCaseEqualsStableDiffusionCpp) {
  const NoiseSchedule schedule;
  const std::vector<std::string> keys = test::ref_keys("sigmas/");
  ASSERT_GE(keys.size(), 60u);
  for (const std::string& key : keys) {
    const size_t a = key.find('/', 7), b = key.find('/', a + 1);
    const auto scheduler = parse_scheduler(key.substr(7, a - 7));
    ASSERT_TRUE(scheduler.has_value()) << key;
    const ModelFamily family = key.substr(a + 1, b - a - 1) == "sdxl" ? ModelFamily::Sdxl : ModelFamily::Sd1;
    const int steps = std::stoi(key.substr(b + 1));
    const auto sigmas = make_sigmas(*scheduler, steps, schedule, family);
    ASSERT_TRUE(sigmas.ok()) << key << ": " << sigmas.error().message;
    EXPECT_TRUE(bits_equal(ref_floats(key), *sigmas)) << key;
  }
}

TEST(Schedulers, RefusesWhatStableDiffusionCppGetsWrong) {
  const NoiseSchedule schedule;
  EXPECT_FALSE(make_sigmas(Scheduler::Karras, 1, schedule, ModelFamily::Sd1).ok());
  EXPECT_FALSE(make_sigmas(Scheduler::Exponential, 1, schedule, ModelFamily::Sd1).ok());
  EXPECT_FALSE(make_sigmas(Scheduler::Ays, 10, schedule, ModelFamily::Sd2).ok());
  EXPECT_FALSE(make_sigmas(Scheduler::Discrete, 0, schedule, ModelFamily::Sd1).ok());
  EXPECT_FALSE(make_sigmas(Scheduler::Discrete, -3, schedule, ModelFamily::Sd1).ok());
}

TEST(Schedulers, NamesRoundTrip) {
  for (Scheduler s : all_schedulers()) EXPECT_EQ(parse_scheduler(scheduler_name(s)), s);
  EXPECT_FALSE(parse_scheduler("beta").has_value());
}

}  // namespace
}  // namespace kiln::diffusion
