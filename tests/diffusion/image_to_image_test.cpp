// img2img (text_to_image.h: encode_init_image, sample_latent_from_image) against
// stable-diffusion.cpp's generate_image with an init image (tests/data/diffusion/
// sdcpp-img2img-refs.txt, from tools/fixtures/mksdcpp_loop_refs.sh ... img2img) on the random-weight
// test models at 64x64, 4 steps cut by the strength, CFG 7: euler_a at strength 0.75 and euler at 0.5
// encoded by TAESD, euler_a at 0.5 and euler at 0.75 by the VAE (its latent sampled with the
// generator seeded with the seed).
// - Replay: from stable-diffusion.cpp's encoder output and its UNet outputs, the loop gives its UNet
//   inputs at every cut step and the decoder's input bit for bit (the sigmas' cut, the noise and its
//   order after the VAE's sample, x = init + noise * sigma).
// - End to end with kiln's encoders, UNet and decoders: every step's UNet input, the final latent and
//   the pixels, within text_to_image_test.cpp's CFG 7 tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "diffusion/sampling_defaults.h"
#include "diffusion/sd_models.h"
#include "diffusion/text_to_image.h"
#include "diffusion/vae_decoder.h"
#include "llm/cpu_engine.h"
#include "models/sd/vae.h"
#include "sdcpp_refs.h"
#include "test_data.h"

namespace kiln::diffusion {
namespace {

constexpr double kGuidedLatentTolerance = 6e-3;  // CFG 7, as text_to_image_test.cpp
constexpr size_t kPixelStride = 5;               // sdcpp_loop_oracle.cpp's (1 for taesd-euler_a-0.75)
constexpr int kSide = 64;

struct Img2imgCase {
  std::string name;
  Sampler sampler;
  float strength;
  bool vae;
};

const Img2imgCase kCases[] = {{"taesd-euler_a-0.75", Sampler::EulerA, 0.75f, false},
                              {"taesd-euler-0.5", Sampler::Euler, 0.5f, false},
                              {"vae-euler_a-0.5", Sampler::EulerA, 0.5f, true},
                              {"vae-euler-0.75", Sampler::Euler, 0.75f, true}};

// sdcpp_loop_oracle.cpp's init_pixel(): the init image, row-major RGB.
std::vector<uint8_t> init_pixels() {
  std::vector<uint8_t> p(static_cast<size_t>(kSide) * kSide * 3);
  for (int y = 0; y < kSide; ++y)
    for (int x = 0; x < kSide; ++x)
      for (int c = 0; c < 3; ++c)
        p[(static_cast<size_t>(y) * kSide + x) * 3 + c] =
            static_cast<uint8_t>((x * 4 + y * (2 + c) + 37 * c + (x * y) % 17 * 3) & 0xff);
  return p;
}

TextToImageParams case_params(const Img2imgCase& c) {
  TextToImageParams p;
  p.prompt = "a (cat:1.2) on a [red] sofa";
  p.negative_prompt = "blurry, low quality";
  p.width = p.height = kSide;
  p.steps = 4;
  p.sampler = c.sampler;
  p.scheduler = default_scheduler(c.sampler);
  p.eta = default_eta(c.sampler);
  return p;
}

int cut_steps(const Img2imgCase& c) { return static_cast<int>(4 * c.strength) + 1; }

std::string key(const Img2imgCase& c, const std::string& what) { return "img2img/" + c.name + "/" + what; }

// The decoder's input for a final latent: the VAE's divides by its scale factor; TAESD takes it as is.
std::vector<float> decoder_input(std::vector<float> latent, bool vae) {
  if (vae)
    for (float& v : latent) v = v / sd::kSd1VaeScale;
  return latent;
}

// stable-diffusion.cpp's init latent from its encoder output: TAESD's as is, the VAE's moments
// sampled with the generator seeded with the seed.
std::vector<float> sdcpp_init_latent(const Img2imgCase& c, const TextToImageParams& p) {
  std::vector<float> out = test::ref_floats(key(c, "encoder_out"));
  if (!c.vae) return out;
  std::unique_ptr<NoiseRng> rng = make_noise_rng(p.rng);
  rng->seed(static_cast<uint64_t>(p.seed));
  std::vector<float> noise(out.size() / 2);
  rng->randn(noise);
  return latent_from_moments(out, noise);
}

TEST(ImageToImage, ReplayingStableDiffusionCppsNetworksGivesItsLatentsBitForBit) {
  for (const Img2imgCase& c : kCases) {
    SCOPED_TRACE(c.name);
    const TextToImageParams p = case_params(c);
    size_t call = 0;
    const UnetFn recorded = [&](std::span<const float>, float,
                                std::span<const float>) -> Result<std::vector<float>> {
      return test::ref_floats(key(c, "unet_out" + std::to_string(call++)));
    };
    Conditioning cond;
    cond.cond.assign(1, 0.0f);
    cond.uncond.assign(1, 0.0f);
    std::vector<std::vector<float>> inputs;
    const StepObserver observe = [&](int, int, std::span<const float> in) {
      inputs.emplace_back(in.begin(), in.end());
    };
    auto latent = sample_latent_from_image(recorded, NoiseSchedule(), cond, p, sdcpp_init_latent(c, p),
                                           c.strength, 0, observe);
    ASSERT_TRUE(latent.ok()) << latent.error().message;
    ASSERT_EQ(inputs.size(), static_cast<size_t>(cut_steps(c)));
    for (size_t k = 0; k < inputs.size(); ++k)
      EXPECT_TRUE(test::bits_equal(test::ref_floats(key(c, "unet_in" + std::to_string(k))), inputs[k])) << k;
    EXPECT_TRUE(test::bits_equal(test::ref_floats(key(c, "decoder_in")), decoder_input(*latent, c.vae)));
    EXPECT_EQ(call, 2 * inputs.size());
  }
}

TEST(ImageToImage, OutOfRangeRequestsAreErrors) {
  TextToImageParams p = case_params(kCases[0]);
  const UnetFn never = [](std::span<const float>, float,
                          std::span<const float>) -> Result<std::vector<float>> {
    return make_error("not reached");
  };
  const std::vector<float> init(4 * 8 * 8, 0.0f);
  for (float strength : {-0.1f, 1.5f})
    EXPECT_FALSE(sample_latent_from_image(never, NoiseSchedule(), {}, p, init, strength, 0).ok()) << strength;
  EXPECT_FALSE(sample_latent_from_image(never, NoiseSchedule(), {}, p, std::vector<float>(10), 0.5f, 0).ok());
}

TEST(ImageToImage, MatchesStableDiffusionCpp) {
  CpuEngine engine(0);
  SdModelPaths paths;
  paths.clip_l = test_data::path("sd/clip-l-f32.safetensors");
  paths.diffusion_model = test_data::path("sd/unet-sd1-c32-f32.safetensors");
  paths.taesd = test_data::path("sd/taesd-f32.safetensors");
  auto models = SdModels::open(paths, {&engine.backend});
  ASSERT_TRUE(models.ok()) << models.error().message;
  auto taesd_encoder = (*models)->encoder();
  ASSERT_TRUE(taesd_encoder.ok()) << taesd_encoder.error().message;
  auto vae_file = sd::SdWeightFile::open(test_data::path("sd/vae-sd1-f16.safetensors"));
  ASSERT_TRUE(vae_file.ok()) << vae_file.error().message;
  const std::shared_ptr<const sd::SdWeightFile> vae(std::move(*vae_file));
  auto vae_encoder = VaeEncoder::create(vae, "", {&engine.backend});
  ASSERT_TRUE(vae_encoder.ok()) << vae_encoder.error().message;
  LatentEncoder vae_latent_encoder(std::move(*vae_encoder));
  auto vae_decoder = VaeDecoder::create(vae, "", {&engine.backend});
  ASSERT_TRUE(vae_decoder.ok()) << vae_decoder.error().message;

  const TextToImageParams p0 = case_params(kCases[0]);
  auto cond = encode_conditioning((*models)->text_encoder(), p0);
  ASSERT_TRUE(cond.ok()) << cond.error().message;
  const std::vector<uint8_t> pixels = init_pixels();
  for (const Img2imgCase& c : kCases) {
    SCOPED_TRACE(c.name);
    const TextToImageParams p = case_params(c);
    auto init = encode_init_image(c.vae ? vae_latent_encoder : **taesd_encoder, pixels, p);
    ASSERT_TRUE(init.ok()) << init.error().message;
    std::vector<std::vector<float>> inputs;
    const StepObserver observe = [&](int, int, std::span<const float> in) {
      inputs.emplace_back(in.begin(), in.end());
    };
    auto latent = sample_latent_from_image((*models)->unet(), (*models)->schedule(), *cond, p, *init,
                                           c.strength, 0, observe);
    ASSERT_TRUE(latent.ok()) << latent.error().message;
    ASSERT_EQ(inputs.size(), static_cast<size_t>(cut_steps(c)));
    double worst_step = 0;
    for (size_t k = 0; k < inputs.size(); ++k) {
      const test::RelativeErrors e =
          test::relative_errors(inputs[k], test::ref_floats(key(c, "unet_in" + std::to_string(k))));
      EXPECT_LE(e.l2, kGuidedLatentTolerance) << "the UNet's input at step " << k;
      worst_step = std::max(worst_step, e.l2);
    }
    const test::RelativeErrors e =
        test::relative_errors(decoder_input(*latent, c.vae), test::ref_floats(key(c, "decoder_in")));
    EXPECT_LE(e.l2, kGuidedLatentTolerance) << "the final latent";
    LatentDecoder& decoder = c.vae ? static_cast<LatentDecoder&>(**vae_decoder) : (*models)->decoder();
    auto image = decode_to_pixels(decoder, *latent, p);
    ASSERT_TRUE(image.ok()) << image.error().message;
    const std::vector<uint32_t> packed = test::ref_words(key(c, "pixels"));
    const size_t stride = c.name == "taesd-euler_a-0.75" ? 1 : kPixelStride;
    size_t n = 0, within = 0;
    for (size_t i = 0; i < image->size(); i += stride, ++n) {
      ASSERT_LT(n / 4, packed.size());
      within += std::abs((*image)[i] - static_cast<int>((packed[n / 4] >> (8 * (n % 4))) & 0xff)) <= 1;
    }
    EXPECT_EQ((n + 3) / 4, packed.size());
    EXPECT_GE(within * 100, n * 99) << within << " of " << n << " pixels within 1";
    std::printf("  %-18s steps' UNet inputs %.2e, final latent %.2e; pixels within 1: %zu/%zu\n",
                c.name.c_str(), worst_step, e.l2, within, n);
  }
}

}  // namespace
}  // namespace kiln::diffusion
