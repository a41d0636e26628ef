// SD 2.x against stable-diffusion.cpp (tests/data/diffusion/sdcpp-sd2-refs.txt, from
// tools/fixtures/mksdcpp_sd2_refs.sh) on the random-weight test models (build/test-data/sd/: the
// full-size OpenCLIP-H encoder in OpenCLIP's spelling, q, k and v fused; the 64-channel SD 2.x UNet
// with linear projections and heads of 64 channels; TAESD), opened as sd-cli's --clip_l and
// --diffusion-model: the version detected, the conditioning (the default clip_skip 2; clip_skip 1,
// the same in stable-diffusion.cpp, which never loads the last layer; one layer, emphasis, two
// chunks with the pad token 0), the UNet's output, the prediction
// stable-diffusion.cpp's rule picks (is_using_v_parameterization_for_sd2), and whole 64x64 runs
// (euler, euler_a, dpm++2m at 2 steps with CFG 7, sd-cli's defaults, and v-prediction): every
// step's UNet input, the final latent and TAESD's pixels.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "diffusion/clip_tokenizer.h"
#include "diffusion/oracle_inputs.h"
#include "diffusion/sampling_defaults.h"
#include "diffusion/sd_models.h"
#include "diffusion/text_to_image.h"
#include "llm/cpu_engine.h"
#include "sd_models_suite.h"
#include "sdcpp_refs.h"
#include "test_data.h"

namespace kiln::diffusion {
namespace {

using oracle_inputs::hashed;

constexpr size_t kClipSampleStride = 97;  // sdcpp_clip_oracle.cpp's
constexpr size_t kPixelStride = 5;        // sdcpp_loop_oracle.cpp's, for every case but cli-defaults
// Tolerances (||kiln - sd.cpp|| / ||sd.cpp||; measured values in the tests' output, on an AMD EPYC
// Zen 4). The conditioning: 8.9e-5 after one layer, at most 4.6e-4 after 23 (the issue asks 1e-4,
// which CLIP-L's 12 F32 layers meet within 1.3e-4): about sqrt(23) times one layer's, differences
// that add up as independent ones do, as F16 rounding at boundaries does (the matrices are F16, so
// both round each product's input to F16, and GELU looks its input up in an F16 table; see
// clip_text_encoder_test.cpp). The UNet and the latents as unet_model_test.cpp and
// text_to_image_test.cpp explain them (F16 rounding in the convolutions, multiplied by CFG 7).
constexpr double kConditioningTolerance = 1e-3;
constexpr double kRowSumTolerance = 3e-3;  // sums cancel: larger relative errors (at most 1.2e-3)
constexpr double kUnetTolerance = 1e-3;
constexpr double kGuidedLatentTolerance = 6e-3;

class Sd2Test : public test::SdModelsSuite {
 protected:
  static void SetUpTestSuite() { open_models("sd/clip-h-sd2.safetensors", "sd/unet-sd2-c64-f32.safetensors"); }
};

TEST_F(Sd2Test, DetectsSd2AndItsNetworks) {
  EXPECT_EQ(describe(models_->version()), "SD 2.x");
  EXPECT_EQ(models_->text_encoder().hparams().n_embd, 1024);
  EXPECT_EQ(models_->text_encoder().hparams().n_layer, 24);
  EXPECT_EQ(models_->text_encoder().hparams().n_layer_run, 23);
  const sd::UnetHParams& hp = models_->unet().hparams();
  EXPECT_EQ(hp.context_dim, 1024);
  EXPECT_EQ(hp.arch.head_channels, 64);
  EXPECT_EQ(default_clip_skip(models_->version().family), 2);
}

TEST_F(Sd2Test, ConditioningMatchesStableDiffusionCpp) {
  std::vector<std::string> cases;
  for (const std::string& k : test::ref_keys("sd2/clip/"))
    if (k.ends_with("/prompt")) cases.push_back(k.substr(0, k.size() - 7));
  ASSERT_EQ(cases.size(), 5u);
  for (const std::string& c : cases) {
    SCOPED_TRACE(c);
    const int recorded_skip = static_cast<int>(test::ref_words(c + "/clip_skip").at(0));
    const int clip_skip = recorded_skip > 0 ? recorded_skip : default_clip_skip(ModelFamily::Sd2);
    auto cond = encode_prompt(models_->text_encoder(), ClipTokenizer::instance(),
                              test::ref_text(c + "/prompt"), clip_skip, ModelFamily::Sd2);
    ASSERT_TRUE(cond.ok()) << cond.error().message;
    const std::vector<uint32_t> shape = test::ref_words(c + "/shape");
    const size_t rows = shape.at(0), cols = shape.at(1);
    ASSERT_EQ(cond->size(), rows * cols);
    std::vector<float> sums(rows), samples;
    for (size_t r = 0; r < rows; ++r) {
      double s = 0;
      for (size_t k = 0; k < cols; ++k) s += (*cond)[r * cols + k];
      sums[r] = static_cast<float>(s);
    }
    for (size_t i = 0; i < cond->size(); i += kClipSampleStride) samples.push_back((*cond)[i]);
    const test::RelativeErrors e_sums = test::relative_errors(sums, test::ref_floats(c + "/row_sums"));
    const test::RelativeErrors e = test::relative_errors(samples, test::ref_floats(c + "/samples"));
    EXPECT_LE(e_sums.l2, kRowSumTolerance);
    EXPECT_LE(e.l2, kConditioningTolerance);
    std::printf("  %-20s %3zu rows: relative error %.2e (row sums), %.2e (values), worst value %.2e\n",
                c.c_str(), rows, e_sums.l2, e.l2, e.max);
  }
}

TEST_F(Sd2Test, UnetMatchesStableDiffusionCpp) {
  struct Case {
    const char* name;
    uint64_t salt;
  };
  for (const Case& c : {Case{"t999", 1}, Case{"t500", 2}, Case{"t1", 3}}) {
    SCOPED_TRACE(c.name);
    const std::string key = std::string("sd2/unet/") + c.name + "/";
    const std::vector<float> t = test::ref_floats(key + "timestep");
    const std::vector<float> ref = test::ref_floats(key + "out");
    ASSERT_EQ(t.size(), 1u);
    auto out =
        models_->unet().eval(hashed(256, c.salt, 1.5f), 8, 8, t[0], hashed(77 * 1024, c.salt + 100, 1.0f));
    ASSERT_TRUE(out.ok()) << out.error().message;
    ASSERT_EQ(out->size(), ref.size());
    const test::RelativeErrors e = test::relative_errors(*out, ref);
    EXPECT_LE(e.l2, kUnetTolerance);
    std::printf("  %-5s relative error %.2e, worst value %.2e\n", c.name, e.l2, e.max);
  }
}

TEST_F(Sd2Test, PredictionIsStableDiffusionCppsChoice) {
  // stable-diffusion.cpp's rule on its own output for the fixed input: v when mean(out - 0.5) < -1.
  const std::vector<float> out = test::ref_floats("sd2/unet/vtest/out");
  ASSERT_EQ(out.size(), 256u);
  double sum = 0;
  for (float v : out) sum += static_cast<double>(v) - 0.5;
  const Prediction expected = sum / 256.0 < -1.0 ? Prediction::V : Prediction::Eps;
  auto p = models_->default_prediction();
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(*p, expected);
  std::printf("  sd.cpp's mean(out - x) %.3f: %s\n", sum / 256.0, expected == Prediction::V ? "v" : "eps");
}

// sdcpp_loop_oracle.cpp's sd2 case `name`: its settings.
TextToImageParams loop_params(const std::string& name) {
  TextToImageParams p;
  p.family = ModelFamily::Sd2;
  p.clip_skip = default_clip_skip(ModelFamily::Sd2);
  p.width = p.height = 64;
  p.steps = 2;
  if (name == "cli-defaults") {
    p.prompt = "a cat";
  } else {
    p.prompt = "a (cat:1.2) on a [red] sofa";
    p.negative_prompt = "blurry, low quality";
    p.sampler = name.starts_with("euler_a")   ? Sampler::EulerA
                : name.starts_with("dpm++2m") ? Sampler::Dpmpp2m
                                              : Sampler::Euler;
  }
  p.scheduler = default_scheduler(p.sampler);
  p.eta = default_eta(p.sampler);
  return p;
}

TEST_F(Sd2Test, ImagesMatchStableDiffusionCpp) {
  auto detected = models_->default_prediction();
  ASSERT_TRUE(detected.ok()) << detected.error().message;
  for (const std::string name : {"euler-2", "euler_a-2", "dpm++2m-2", "cli-defaults", "v-euler-2"}) {
    SCOPED_TRACE(name);
    TextToImageParams p = loop_params(name);
    p.prediction = name.starts_with("v-") ? Prediction::V : *detected;
    expect_matches_sdcpp("sd2/loop/" + name + "/", run(p), 2, kGuidedLatentTolerance,
                         name == "cli-defaults" ? 1 : kPixelStride);
  }
}

}  // namespace
}  // namespace kiln::diffusion
