// detect_model_version on tensor lists shaped like real checkpoints (single-file SD 1.x, 2.x and XL,
// their inpainting, pix2pix and distilled variants, diffusers names) and on what it must refuse.
// The rules are stable-diffusion.cpp's get_sd_version; these cases are written by hand, not
// recorded from it.
#include "diffusion/model_version.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kiln::diffusion {
namespace {

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;
};

constexpr const char* kUnetIn = "model.diffusion_model.input_blocks.0.0.weight";
constexpr const char* kMiddle = "model.diffusion_model.middle_block.1.proj_in.weight";
constexpr const char* kOut71Key =
    "model.diffusion_model.output_blocks.7.1.transformer_blocks.0.attn1.to_k.weight";
constexpr const char* kOut31Second =
    "model.diffusion_model.output_blocks.3.1.transformer_blocks.1.attn1.to_k.weight";
constexpr const char* kClipL = "cond_stage_model.transformer.text_model.embeddings.token_embedding.weight";
constexpr const char* kOpenClipH = "cond_stage_model.model.token_embedding.weight";
constexpr const char* kXlClipL =
    "conditioner.embedders.0.transformer.text_model.embeddings.token_embedding.weight";
constexpr const char* kXlClipG = "conditioner.embedders.1.model.token_embedding.weight";

Result<ModelVersion> detect(const std::vector<Tensor>& tensors) {
  std::vector<NamedShape> view;
  for (const Tensor& t : tensors) view.push_back({t.name, t.shape});
  return detect_model_version(view);
}

std::vector<Tensor> sd1(int64_t in_channels = 4, bool middle = true, bool out71 = true) {
  std::vector<Tensor> t = {{kUnetIn, {320, in_channels, 3, 3}}, {kClipL, {49408, 768}}};
  if (middle) t.push_back({kMiddle, {320, 320, 1, 1}});
  if (out71) t.push_back({kOut71Key, {640, 640}});
  return t;
}

std::vector<Tensor> sd2(int64_t in_channels = 4, bool middle = true, int64_t attn71_width = 640) {
  return {{kUnetIn, {320, in_channels, 3, 3}},
          {kOpenClipH, {49408, 1024}},
          {kOut71Key, {640, attn71_width}},
          middle ? Tensor{kMiddle, {320}} : Tensor{"model.diffusion_model.time_embed.0.weight", {1280, 320}}};
}

std::vector<Tensor> sdxl(int64_t in_channels = 4, bool middle = true, bool out31_second = true) {
  std::vector<Tensor> t = {
      {kXlClipL, {49408, 768}}, {kXlClipG, {49408, 1280}}, {kUnetIn, {320, in_channels, 3, 3}}};
  if (middle) t.push_back({kMiddle, {640}});
  if (out31_second) t.push_back({kOut31Second, {1280, 1280}});
  return t;
}

void expect_version(const std::vector<Tensor>& tensors, ModelFamily family, UnetVariant variant) {
  const auto v = detect(tensors);
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_EQ(*v, (ModelVersion{family, variant})) << describe(*v);
}

TEST(ModelVersion, Sd1AndItsVariants) {
  expect_version(sd1(), ModelFamily::Sd1, UnetVariant::Standard);
  expect_version(sd1(9), ModelFamily::Sd1, UnetVariant::Inpaint);
  expect_version(sd1(8), ModelFamily::Sd1, UnetVariant::Pix2Pix);
  expect_version(sd1(4, false), ModelFamily::Sd1, UnetVariant::TinyUnet);
  expect_version(sd1(4, false, false), ModelFamily::Sd1, UnetVariant::Sdxs);
}

TEST(ModelVersion, Sd2AndItsVariants) {
  expect_version(sd2(), ModelFamily::Sd2, UnetVariant::Standard);
  expect_version(sd2(9), ModelFamily::Sd2, UnetVariant::Inpaint);
  expect_version(sd2(8), ModelFamily::Sd2,
                 UnetVariant::Standard);  // no SD 2.x pix2pix in stable-diffusion.cpp
  expect_version(sd2(4, false), ModelFamily::Sd2, UnetVariant::TinyUnet);
  expect_version(sd2(4, false, 1024), ModelFamily::Sd2, UnetVariant::Sdxs);
}

TEST(ModelVersion, SdxlAndItsVariants) {
  expect_version(sdxl(), ModelFamily::Sdxl, UnetVariant::Standard);
  expect_version(sdxl(9), ModelFamily::Sdxl, UnetVariant::Inpaint);
  expect_version(sdxl(8), ModelFamily::Sdxl, UnetVariant::Pix2Pix);
  expect_version(sdxl(4, false), ModelFamily::Sdxl, UnetVariant::Ssd1b);
  expect_version(sdxl(4, false, false), ModelFamily::Sdxl, UnetVariant::Vega);
}

TEST(ModelVersion, DiffusersNames) {
  expect_version({{"unet.conv_in.weight", {320, 4, 3, 3}},
                  {"unet.down_blocks.0.resnets.0.conv1.weight", {320, 320, 3, 3}},
                  {"unet.mid_block.resnets.1.conv1.weight", {1280, 1280, 3, 3}},
                  {"text_model.embeddings.token_embedding.weight", {49408, 768}}},
                 ModelFamily::Sd1, UnetVariant::Standard);
}

TEST(ModelVersion, TheLastTextEmbeddingCounts) {
  std::vector<Tensor> t = sd1();
  t.push_back({kOpenClipH, {49408, 1024}});
  expect_version(t, ModelFamily::Sd2, UnetVariant::Standard);
}

TEST(ModelVersion, RefusesWhatIsNoUnetModel) {
  EXPECT_FALSE(detect({}).ok());
  EXPECT_FALSE(detect({{kClipL, {49408, 768}}}).ok());     // a text encoder alone
  EXPECT_FALSE(detect({{kUnetIn, {320, 4, 3, 3}}}).ok());  // a UNet without its text encoder
  EXPECT_FALSE(detect({{kUnetIn, {320, 4, 3, 3}}, {kClipL, {49408, 1280}}}).ok());
  EXPECT_FALSE(detect({{"model.diffusion_model.double_blocks.0.img_attn.qkv.weight", {9216, 3072}},
                       {kClipL, {49408, 768}}})
                   .ok());  // Flux
}

TEST(ModelVersion, Describes) {
  EXPECT_EQ(describe({ModelFamily::Sd1, UnetVariant::Standard}), "SD 1.x");
  EXPECT_EQ(describe({ModelFamily::Sd1, UnetVariant::Sdxs}), "SD 1.x (SDXS-512)");
  EXPECT_EQ(describe({ModelFamily::Sdxl, UnetVariant::Ssd1b}), "SDXL (SSD-1B)");
}

}  // namespace
}  // namespace kiln::diffusion
