// TAESD's decoder on kiln's runtime against stable-diffusion.cpp's TinyImageAutoEncoder
// (tests/data/diffusion/sdcpp-taesd-refs.txt, from tools/fixtures/mksdcpp_net_refs.sh) for the
// random-weight decoder tools/fixtures/mksd_taesd.py makes (build/test-data/sd/): two 8x8 latents
// decoded to 64x64, every 97th float of the output within kTolerance and the sampled pixels (every
// 6th byte of the RGB image) within 1 of sd-cli's on at least 99% (the bar). Also: the
// pixel conversion's edges and bad latents are Errors.
#include "diffusion/taesd_decoder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "llm/cpu_engine.h"
#include "sdcpp_refs.h"
#include "test_data.h"

namespace kiln::diffusion {
namespace {

constexpr size_t kSampleStride = 97, kPixelStride = 6;  // sdcpp_taesd_oracle.cpp's
// ||kiln - sd.cpp|| / ||sd.cpp|| of the sampled floats. Measured on an AMD EPYC (Zen 4, AVX-512):
// 1.6e-5 and 1.9e-5; every sampled pixel within 1, 2042 and 2043 of 2048 equal.
constexpr double kTolerance = 1e-4;

// sdcpp_taesd_oracle.cpp's latents (sdcpp_unet_oracle.cpp's hash).
std::vector<float> latent(uint64_t salt) {
  std::vector<float> z(256);
  for (size_t i = 0; i < z.size(); ++i) {
    uint64_t x = i + salt * 0x9e3779b97f4a7c15ull + 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    z[i] = (static_cast<float>(x >> 40) / 16777216.0f * 2.0f - 1.0f) * 1.5f;
  }
  return z;
}

std::unique_ptr<TaesdDecoder> open_decoder(CpuEngine& e) {
  auto file = sd::SdWeightFile::open(test_data::path("sd/taesd-f32.safetensors"));
  EXPECT_TRUE(file.ok()) << file.error().message;
  if (!file.ok()) return nullptr;
  auto d = TaesdDecoder::create(std::shared_ptr<const sd::SdWeightFile>(std::move(*file)),
                                sd::kTaesdDecoderPrefix, {&e.backend});
  EXPECT_TRUE(d.ok()) << d.error().message;
  return d.ok() ? std::move(*d) : nullptr;
}

TEST(TaesdDecoder, ImageMatchesStableDiffusionCpp) {
  CpuEngine engine(0);
  std::unique_ptr<TaesdDecoder> dec = open_decoder(engine);
  ASSERT_NE(dec, nullptr);
  for (uint64_t salt : {11, 12}) {
    const std::string key = "taesd/z" + std::to_string(salt) + "/";
    SCOPED_TRACE(key);
    auto out = dec->decode(latent(salt), 8, 8);
    ASSERT_TRUE(out.ok()) << out.error().message;
    ASSERT_EQ(out->size(), 64u * 64u * 3u);
    const std::vector<uint32_t> ref_bits = test::ref_words(key + "samples");
    std::vector<float> ref(ref_bits.size()), got;
    std::memcpy(ref.data(), ref_bits.data(), ref_bits.size() * 4);
    for (size_t i = 0; i < out->size(); i += kSampleStride) got.push_back((*out)[i]);
    ASSERT_EQ(got.size(), ref.size());
    const test::RelativeErrors e = test::relative_errors(got, ref);
    EXPECT_LE(e.l2, kTolerance);

    const std::vector<uint8_t> pixels = rgb_planes_to_pixels(*out, 64, 64);
    const test::PixelMatch m = test::match_pixels(pixels, key + "pixels", kPixelStride);
    ASSERT_EQ(m.n, 2048u);
    EXPECT_TRUE(m.within_one_on_99_percent()) << m.within_one << " of " << m.n;
    // The image must depend on the latent: not mostly clipped to 0 or 255.
    EXPECT_LT(m.saturated, m.n / 2);
    std::printf("  %s relative error %.2e; pixels within 1: %zu/%zu, equal %zu, saturated %zu\n", key.c_str(),
                e.l2, m.within_one, m.n, m.equal, m.saturated);
  }
}

TEST(TaesdDecoder, PixelsAsSdCliWritesThem) {
  // Planes R, G, B of a 2x1 image.
  const std::vector<float> planes{-0.5f, 0.0f, 1.0f, 2.0f, 0.5f, 0.0019607f};
  const std::vector<uint8_t> px = rgb_planes_to_pixels(planes, 2, 1);
  EXPECT_EQ(px, (std::vector<uint8_t>{0, 255, 128, 0, 255, 0}));
}

TEST(TaesdDecoder, BadLatentsAreErrors) {
  CpuEngine engine(0);
  std::unique_ptr<TaesdDecoder> dec = open_decoder(engine);
  ASSERT_NE(dec, nullptr);
  auto r = dec->decode(latent(1), 8, 4);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("256 floats"), std::string::npos) << r.error().message;
  r = dec->decode({}, 0, 8);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("0 x 8"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace kiln::diffusion
