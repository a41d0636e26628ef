// The SD 1.x VAE decoder on kiln's runtime against stable-diffusion.cpp's AutoEncoderKL
// (tests/data/diffusion/sdcpp-vae-refs.txt, from tools/fixtures/mksdcpp_net_refs.sh) for the
// random-weight full-size decoder tools/fixtures/mksd_vae.py makes (build/test-data/sd/): two 8x8
// latents decoded to 64x64, every 97th float of the raw decoder output and of the image within
// kTolerance, the sampled pixels (every 6th byte of the RGB image) within 1 of sd-cli's on at least
// 99% (the bar).
#include "diffusion/vae_decoder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "diffusion/oracle_inputs.h"
#include "diffusion/taesd_decoder.h"
#include "llm/cpu_engine.h"
#include "sdcpp_refs.h"
#include "test_data.h"

namespace kiln::diffusion {
namespace {

constexpr size_t kSampleStride = 97, kPixelStride = 6;  // sdcpp_vae_oracle.cpp's
// ||kiln - sd.cpp|| / ||sd.cpp|| of the sampled floats (the issue asks 1e-3 of the latents).
// Measured on an AMD EPYC (Zen 4, AVX-512): the raw output 5.9e-4 and 5.0e-4 (the worst value
// 5.3e-4 of the largest), the image 1.8e-4 and 1.6e-4; every sampled pixel within 1, 2021 and 2009
// of 2048 equal. Of the same order as the UNet's (unet_model_test.cpp): both round every conv's
// input to F16 as stable-diffusion.cpp does, 30 times here, so a float-order difference that moves a
// value across an F16 rounding boundary changes it by one F16 step (4.9e-4 relative); not traced
// further to one op.
constexpr double kTolerance = 1e-3;

// sdcpp_vae_oracle.cpp's latents.
std::vector<float> latent(uint64_t salt) { return oracle_inputs::hashed(256, salt, 1.5f); }

std::unique_ptr<VaeDecoder> open_decoder(CpuEngine& e) {
  auto file = sd::SdWeightFile::open(test_data::path("sd/vae-sd1-f16.safetensors"));
  EXPECT_TRUE(file.ok()) << file.error().message;
  if (!file.ok()) return nullptr;
  auto d = VaeDecoder::create(std::shared_ptr<const sd::SdWeightFile>(std::move(*file)), "", {&e.backend});
  EXPECT_TRUE(d.ok()) << d.error().message;
  return d.ok() ? std::move(*d) : nullptr;
}

test::RelativeErrors sampled_errors(const std::vector<float>& out, const std::string& key) {
  const std::vector<uint32_t> bits = test::ref_words(key);
  std::vector<float> ref(bits.size()), got;
  std::memcpy(ref.data(), bits.data(), bits.size() * 4);
  for (size_t i = 0; i < out.size(); i += kSampleStride) got.push_back(out[i]);
  EXPECT_EQ(got.size(), ref.size()) << key;
  if (got.size() != ref.size()) return {1, 1};
  return test::relative_errors(got, ref);
}

// The sampled pixels of a 64x64 image against the record `key`: the count within 1 (asserted >= 99%).
void expect_pixels(const std::vector<float>& planes, const std::string& key) {
  const std::vector<uint8_t> pixels = rgb_planes_to_pixels(planes, 64, 64);
  const test::PixelMatch m = test::match_pixels(pixels, key, kPixelStride);
  ASSERT_EQ(m.n, 2048u);
  EXPECT_TRUE(m.within_one_on_99_percent()) << m.within_one << " of " << m.n;
  EXPECT_LT(m.saturated, m.n / 10);  // the image depends on the latent, not clipped
  std::printf("  %s within 1: %zu/%zu, equal %zu, saturated %zu\n", key.c_str(), m.within_one, m.n, m.equal,
              m.saturated);
}

TEST(VaeDecoder, ImageMatchesStableDiffusionCpp) {
  CpuEngine engine(0);
  std::unique_ptr<VaeDecoder> dec = open_decoder(engine);
  ASSERT_NE(dec, nullptr);
  for (uint64_t salt : {11, 12}) {
    const std::string key = "vae/z" + std::to_string(salt) + "/";
    SCOPED_TRACE(key);
    std::vector<float> vae_z = latent(salt);
    for (float& v : vae_z) v /= sd::kSd1VaeScale;
    auto raw = dec->decode_raw(vae_z, 8, 8);
    ASSERT_TRUE(raw.ok()) << raw.error().message;
    ASSERT_EQ(raw->size(), 64u * 64u * 3u);
    const test::RelativeErrors er = sampled_errors(*raw, key + "raw");
    EXPECT_LE(er.l2, kTolerance);

    auto image = dec->decode(latent(salt), 8, 8);
    ASSERT_TRUE(image.ok()) << image.error().message;
    const test::RelativeErrors ei = sampled_errors(*image, key + "samples");
    EXPECT_LE(ei.l2, kTolerance);
    std::printf("  %s relative error: raw %.2e (max %.2e), image %.2e\n", key.c_str(), er.l2, er.max, ei.l2);
    expect_pixels(*image, key + "pixels");
  }
}

// --vae-tiling --vae-tile-size 4 on the 8x8 latent: 3 x 3 tiles of 4 cells overlapping by 2, blended.
TEST(VaeDecoder, TiledImageMatchesStableDiffusionCpp) {
  CpuEngine engine(0);
  std::unique_ptr<VaeDecoder> dec = open_decoder(engine);
  ASSERT_NE(dec, nullptr);
  const TilingParams tiling{4, 4};
  auto image = dec->decode(latent(12), 8, 8, &tiling);
  ASSERT_TRUE(image.ok()) << image.error().message;
  const test::RelativeErrors e = sampled_errors(*image, "vae/tiled4_z12/samples");
  EXPECT_LE(e.l2, kTolerance);
  std::printf("  tiled relative error %.2e (max %.2e)\n", e.l2, e.max);
  expect_pixels(*image, "vae/tiled4_z12/pixels");
  EXPECT_EQ(dec->auto_tile_size(), 0);
}

// A compute limit below the whole latent's graph: the decode goes tiled by itself (4-cell tiles: the
// 256 ... 8 sizes are the whole 8x8 latent), the same image as --vae-tile-size 4.
TEST(VaeDecoder, DecodeOverTheComputeLimitGoesTiled) {
  CpuEngine engine(0);
  std::unique_ptr<VaeDecoder> dec = open_decoder(engine);
  ASSERT_NE(dec, nullptr);
  auto whole = dec->graph_bytes(8, 8);
  ASSERT_TRUE(whole.ok()) << whole.error().message;
  dec->set_compute_limit(*whole - 1);
  auto image = dec->decode(latent(12), 8, 8);
  ASSERT_TRUE(image.ok()) << image.error().message;
  EXPECT_EQ(dec->auto_tile_size(), 4);
  const TilingParams tiling{4, 4};
  auto tiled = dec->decode(latent(12), 8, 8, &tiling);
  ASSERT_TRUE(tiled.ok()) << tiled.error().message;
  EXPECT_TRUE(test::bits_equal(*tiled, *image));
  dec->set_compute_limit(*whole);
  ASSERT_TRUE(dec->decode(latent(12), 8, 8).ok());
  EXPECT_EQ(dec->auto_tile_size(), 0);
}

TEST(VaeDecoder, WrongFilesAreErrors) {
  CpuEngine engine(0);
  auto taesd = sd::SdWeightFile::open(test_data::path("sd/taesd-f32.safetensors"));
  ASSERT_TRUE(taesd.ok()) << taesd.error().message;
  auto d =
      VaeDecoder::create(std::shared_ptr<const sd::SdWeightFile>(std::move(*taesd)), "", {&engine.backend});
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("decoder.conv_in.weight"), std::string::npos) << d.error().message;
  std::unique_ptr<VaeDecoder> dec = open_decoder(engine);
  ASSERT_NE(dec, nullptr);
  auto r = dec->decode(latent(1), 8, 4);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("256 floats"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace kiln::diffusion
