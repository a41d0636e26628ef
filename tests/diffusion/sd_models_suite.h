// SdModelsSuite: the fixture of a test suite that runs whole text-to-image cases on random-weight
// test models (build/test-data/sd/: a text encoder, a UNet, TAESD) and checks them against
// stable-diffusion.cpp's records of sdcpp_loop_oracle.cpp. The derived suite's SetUpTestSuite calls
// open_models(); the models are opened once on the CPU for the suite and closed after its last
// test. A model that does not open fails the suite's set-up, and its tests then skip.
// Thread-safety: gtest runs a suite's tests one at a time.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "diffusion/sd_models.h"
#include "diffusion/text_to_image.h"
#include "llm/cpu_engine.h"
#include "sdcpp_refs.h"
#include "test_data.h"

namespace kiln::diffusion::test {

class SdModelsSuite : public ::testing::Test {
 protected:
  // clip, unet: paths under the test data (sd-cli's --clip_l and --diffusion-model); TAESD decodes.
  static void open_models(const char* clip, const char* unet) {
    engine_ = std::make_unique<CpuEngine>(0);
    SdModelPaths paths;
    paths.clip_l = test_data::path(clip);
    paths.diffusion_model = test_data::path(unet);
    paths.taesd = test_data::path("sd/taesd-f32.safetensors");
    auto m = SdModels::open(paths, {&engine_->backend});
    ASSERT_TRUE(m.ok()) << m.error().message;
    models_ = std::move(*m);
  }
  static void TearDownTestSuite() {
    conditionings_.clear();
    models_.reset();
    engine_.reset();
  }
  void SetUp() override {
    if (!models_) GTEST_SKIP() << "no models (see the suite's set-up failure)";
  }

  // The conditioning of params' prompts, encoded once per prompt pair and CFG use in the suite.
  static const Conditioning& conditioning(const TextToImageParams& p) {
    const std::string key = p.prompt + '\n' + p.negative_prompt + (p.cfg_scale == 1.0f ? "\n1" : "\n");
    auto it = conditionings_.find(key);
    if (it == conditionings_.end()) {
      auto c = encode_conditioning(models_->text_encoder(), p);
      EXPECT_TRUE(c.ok()) << c.error().message;
      it = conditionings_.emplace(key, c.ok() ? std::move(*c) : Conditioning{}).first;
    }
    return it->second;
  }

  struct Run {
    std::vector<std::vector<float>> unet_inputs;  // one per step
    std::vector<float> latent;
    std::vector<uint8_t> pixels;
  };
  // The first image of `p`: its steps' UNet inputs, the final latent and TAESD's pixels.
  static Run run(const TextToImageParams& p) {
    Run r;
    const StepObserver observe = [&](int, int, std::span<const float> in) {
      r.unet_inputs.emplace_back(in.begin(), in.end());
    };
    auto latent = sample_latent(models_->unet(), models_->schedule(), conditioning(p), p, 0, observe);
    EXPECT_TRUE(latent.ok()) << latent.error().message;
    if (!latent.ok()) return r;
    r.latent = std::move(*latent);
    auto pixels = decode_to_pixels(models_->decoder(), r.latent, p);
    EXPECT_TRUE(pixels.ok()) << pixels.error().message;
    if (pixels.ok()) r.pixels = std::move(*pixels);
    return r;
  }

  // Checks a run against the records under `key` ("loop/euler-2/", ...): every step's UNet input
  // and the final latent within `tolerance` (relative L2), every `pixel_stride`-th pixel byte
  // within 1 on at least 99%; prints the measured errors.
  static void expect_matches_sdcpp(const std::string& key, const Run& r, int steps, double tolerance,
                                   size_t pixel_stride) {
    ASSERT_EQ(r.unet_inputs.size(), static_cast<size_t>(steps));
    double worst_step = 0;
    for (int k = 0; k < steps; ++k) {
      const std::vector<float> ref = ref_floats(key + "unet_in" + std::to_string(k));
      ASSERT_EQ(r.unet_inputs[k].size(), ref.size()) << key << "unet_in" << k;
      const RelativeErrors e = relative_errors(r.unet_inputs[k], ref);
      EXPECT_LE(e.l2, tolerance) << key << " the UNet's input at step " << k;
      worst_step = std::max(worst_step, e.l2);
    }
    const std::vector<float> ref = ref_floats(key + "latent");
    ASSERT_EQ(r.latent.size(), ref.size());
    const RelativeErrors e = relative_errors(r.latent, ref);
    EXPECT_LE(e.l2, tolerance) << key << "latent";

    const PixelMatch m = match_pixels(r.pixels, key + "pixels", pixel_stride);
    EXPECT_TRUE(m.within_one_on_99_percent()) << key << " pixels within 1: " << m.within_one << " of " << m.n;
    std::printf("  %-24s steps' UNet inputs %.2e, latent %.2e (worst value %.2e); pixels within 1: %zu/%zu, "
                "equal %zu\n",
                key.c_str(), worst_step, e.l2, e.max, m.within_one, m.n, m.equal);
  }

  static inline std::unique_ptr<CpuEngine> engine_;
  static inline std::unique_ptr<SdModels> models_;
  static inline std::map<std::string, Conditioning> conditionings_;
};

}  // namespace kiln::diffusion::test
