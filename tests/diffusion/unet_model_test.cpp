// The SD 1.x UNet on kiln's runtime against stable-diffusion.cpp's UNetModelRunner
// (tests/data/diffusion/sdcpp-unet-refs.txt, from tools/fixtures/mksdcpp_net_refs.sh) for the
// random-weight 32-channel UNet tools/fixtures/mksd_unet.py makes (build/test-data/sd/): three
// 8x8 latents (64x64 images) at timesteps 999, 500 and 1, every output value. Also: the
// conditioning changes the output (the test UNet's cross-attention gain), the timestep embedding's
// layout, the widths read from the weights, and bad inputs are Errors.
#include "diffusion/unet_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "diffusion/oracle_inputs.h"
#include "llm/cpu_engine.h"
#include "sdcpp_refs.h"
#include "test_data.h"

namespace kiln::diffusion {
namespace {

// ||kiln - sd.cpp|| / ||sd.cpp|| over a case's 256 outputs (the issue asks 1e-3), and the worst
// value against the largest. Measured on an AMD EPYC (Zen 4, AVX-512): 4.5e-4 to 6.0e-4, worst
// values 6.9e-4. That is rounding to F16 at boundaries, not an op: stable-diffusion.cpp holds its
// conv weights in F16 and rounds every conv's input to F16 (kiln does the same), and GELU looks
// its input up in an F16 table; a float-order difference of 1e-7 that moves a value across an F16
// rounding boundary changes it by one F16 step (4.9e-4 relative). In kiln alone, one ulp on every
// conditioning value moves the output by 5.3e-4; with the GEGLU gates zeroed (no GELU lookups)
// the error against stable-diffusion.cpp is 3.6e-4 to 4.1e-4.
constexpr double kTolerance = 1e-3;

// sdcpp_unet_oracle.cpp's inputs (diffusion/oracle_inputs.h).
using oracle_inputs::hashed;

class UnetModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto file = sd::SdWeightFile::open(test_data::path("sd/unet-sd1-c32-f32.safetensors"));
    ASSERT_TRUE(file.ok()) << file.error().message;
    engine_ = std::make_unique<CpuEngine>(0);
    auto m = UnetModel::create(std::shared_ptr<const sd::SdWeightFile>(std::move(*file)), sd::kSdUnetPrefix,
                               {}, {&engine_->backend});
    ASSERT_TRUE(m.ok()) << m.error().message;
    unet_ = std::move(*m);
  }
  static void TearDownTestSuite() {
    unet_.reset();
    engine_.reset();
  }
  void SetUp() override {
    if (!unet_) GTEST_SKIP() << "no UNet (see the suite's set-up failure)";
  }

  static inline std::unique_ptr<CpuEngine> engine_;
  static inline std::unique_ptr<UnetModel> unet_;
};

TEST_F(UnetModelTest, WidthsComeFromTheWeights) {
  const sd::UnetHParams& hp = unet_->hparams();
  EXPECT_EQ(hp.model_channels, 32);
  EXPECT_EQ(hp.time_embed_dim, 128);
  EXPECT_EQ(hp.in_channels, 4);
  EXPECT_EQ(hp.out_channels, 4);
  EXPECT_EQ(hp.context_dim, 768);
}

TEST_F(UnetModelTest, OutputMatchesStableDiffusionCpp) {
  struct Case {
    const char* name;
    uint64_t salt;
  };
  for (const Case& c : {Case{"t999", 1}, Case{"t500", 2}, Case{"t1", 3}}) {
    SCOPED_TRACE(c.name);
    const std::string key = std::string("unet/") + c.name + "/";
    const std::vector<float> t = test::ref_floats(key + "timestep");
    const std::vector<float> ref = test::ref_floats(key + "out");
    ASSERT_EQ(t.size(), 1u);
    ASSERT_EQ(ref.size(), 256u);
    auto out = unet_->eval(hashed(256, c.salt, 1.5f), 8, 8, t[0], hashed(77 * 768, c.salt + 100, 1.0f));
    ASSERT_TRUE(out.ok()) << out.error().message;
    ASSERT_EQ(out->size(), 256u);
    const test::RelativeErrors e = test::relative_errors(*out, ref);
    EXPECT_LE(e.l2, kTolerance);
    EXPECT_LE(e.max, kTolerance);
    std::printf("  %-5s relative error %.2e, worst value %.2e\n", c.name, e.l2, e.max);
  }
}

TEST_F(UnetModelTest, ConditioningAndTimestepChangeTheOutput) {
  const std::vector<float> x = hashed(256, 7, 1.0f);
  auto a = unet_->eval(x, 8, 8, 500.0f, hashed(77 * 768, 8, 1.0f));
  auto b = unet_->eval(x, 8, 8, 500.0f, hashed(77 * 768, 9, 1.0f));
  auto c = unet_->eval(x, 8, 8, 100.0f, hashed(77 * 768, 8, 1.0f));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  // The test UNet passes its input through (mksd_unet.py's gains), so the output follows x; the
  // prompt and the timestep move it by a visible fraction.
  const double prompt = test::relative_errors(*b, *a).l2, timestep = test::relative_errors(*c, *a).l2;
  const double from_x = test::relative_errors(*a, x).l2;
  std::printf("  a new prompt moves the output by %.3f, t 500 -> 100 by %.3f; the output is %.3f from x\n",
              prompt, timestep, from_x);
  EXPECT_GT(prompt, 0.05);
  EXPECT_GT(timestep, 0.01);
  EXPECT_LT(from_x, 0.7);
}

TEST(UnetTimestepEmbedding, CosinesThenSines) {
  const std::vector<float> e = sd::timestep_embedding(3.0f, 6);
  ASSERT_EQ(e.size(), 6u);
  // freq_j = 10000^(-j / 3): 1, 10000^(-1/3), 10000^(-2/3).
  for (int j = 0; j < 3; ++j) {
    const double f = std::pow(10000.0, -j / 3.0);
    EXPECT_NEAR(e[static_cast<size_t>(j)], std::cos(3.0 * f), 1e-6) << j;
    EXPECT_NEAR(e[static_cast<size_t>(j + 3)], std::sin(3.0 * f), 1e-6) << j;
  }
  const std::vector<float> odd = sd::timestep_embedding(1.0f, 5);
  ASSERT_EQ(odd.size(), 5u);
  EXPECT_EQ(odd[4], 0.0f);
}

TEST_F(UnetModelTest, BadInputIsAnError) {
  const std::vector<float> ctx = hashed(77 * 768, 1, 1.0f);
  auto r = unet_->eval(hashed(4 * 12 * 8, 1, 1.0f), 12, 8, 1.0f, ctx);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("12 x 8"), std::string::npos) << r.error().message;
  r = unet_->eval(hashed(3 * 64, 1, 1.0f), 8, 8, 1.0f, ctx);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("192 floats"), std::string::npos) << r.error().message;
  r = unet_->eval(hashed(256, 1, 1.0f), 8, 8, 1.0f, std::span(ctx).first(700));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("rows of 768"), std::string::npos) << r.error().message;
}

// A safetensors file of zero-filled F32 tensors: (name, PyTorch shape) pairs.
std::vector<uint8_t> safetensors_of(
    const std::vector<std::pair<std::string, std::vector<int64_t>>>& tensors) {
  std::string header = "{";
  size_t offset = 0;
  for (const auto& [name, shape] : tensors) {
    size_t n = 4;
    std::string dims;
    for (int64_t d : shape) {
      n *= static_cast<size_t>(d);
      dims += (dims.empty() ? "" : ",") + std::to_string(d);
    }
    if (header.size() > 1) header += ",";
    header += "\"" + name + "\":{\"dtype\":\"F32\",\"shape\":[" + dims + "],\"data_offsets\":[" +
              std::to_string(offset) + "," + std::to_string(offset + n) + "]}";
    offset += n;
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::vector<uint8_t> bytes(8 + header.size() + offset, 0);
  const uint64_t len = header.size();
  for (int i = 0; i < 8; ++i) bytes[static_cast<size_t>(i)] = static_cast<uint8_t>(len >> (8 * i));
  std::copy(header.begin(), header.end(), bytes.begin() + 8);
  return bytes;
}

TEST(UnetBind, MissingOrMisshapenTensorsAreErrors) {
  const std::string p = std::string(sd::kSdUnetPrefix) + ".";
  const std::string to_k = p + "input_blocks.1.1.transformer_blocks.0.attn2.to_k.weight";
  struct Case {
    std::vector<std::pair<std::string, std::vector<int64_t>>> tensors;
    const char* message;
  };
  const Case cases[] = {
      {{{p + "time_embed.0.weight", {128, 32}}}, "no UNet under"},
      {{{p + "input_blocks.0.0.weight", {40, 4, 3, 3}},
        {p + "time_embed.0.weight", {160, 40}},
        {p + "out.2.weight", {4, 40, 3, 3}},
        {to_k, {40, 768}}},
       "40 base channels"},
      {{{p + "input_blocks.0.0.weight", {32, 4, 3, 3}},
        {p + "time_embed.0.weight", {128, 32}},
        {p + "out.2.weight", {4, 32, 3, 3}},
        {to_k, {32, 768}}},
       "time_embed.0.bias"},
      {{{p + "input_blocks.0.0.weight", {32, 4, 3, 3}},
        {p + "time_embed.0.weight", {128, 32}},
        {p + "time_embed.0.bias", {128}},
        {p + "time_embed.2.weight", {128, 64}},
        {p + "out.2.weight", {4, 32, 3, 3}},
        {to_k, {32, 768}}},
       "time_embed.2.weight"},
  };
  for (const Case& c : cases) {
    const std::vector<uint8_t> bytes = safetensors_of(c.tensors);
    auto file = sd::SdWeightFile::parse(bytes, "unet test file");
    ASSERT_TRUE(file.ok()) << file.error().message;
    auto w = sd::bind_unet((*file)->gguf(), sd::kSdUnetPrefix, {});
    ASSERT_FALSE(w.ok()) << c.message;
    EXPECT_NE(w.error().message.find(c.message), std::string::npos) << w.error().message;
  }
}

}  // namespace
}  // namespace kiln::diffusion
