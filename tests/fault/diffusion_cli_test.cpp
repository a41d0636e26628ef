// `kiln image` (text to image, tools/kiln/cmd_image.cpp) on the random-weight test models
// (build/test-data/sd/): the PNG of sd-cli's defaults for "a cat" at 64x64 and 2 steps equals
// stable-diffusion.cpp's pixels (tests/data/diffusion/sdcpp-loop-refs.txt, loop/cli-defaults) within
// 1 on at least 99% of them and carries A1111's `parameters` text; the same run decoded by the VAE
// (--vae, whole and --vae-tiling) against stable-diffusion.cpp's VAE decode of its final latent
// (sdcpp-vae-refs.txt, vae/cli-defaults*), and by the VAE inside the model's files
// (first_stage_model.*); image to image from -i against stable-diffusion.cpp's img2img
// (sdcpp-img2img-refs.txt, img2img/taesd-euler_a-0.75); a .jpg output is a JPEG with the text in its EXIF; a
// VAE with a wrong-shaped tensor is an error naming it; bad flags, hostile sizes and flags for what is not
// built yet are refused with a message and exit code 2 before any work.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "diffusion/sdcpp_refs.h"
#include "image/decode.h"
#include "image/png_encode.h"
#include "shell_command.h"
#include "test_data.h"

namespace kiln {
namespace {

const std::string kKiln = std::string(KILN_BINARY_DIR) + "/kiln";
const std::string kOut = std::string(KILN_BINARY_DIR) + "/diffusion_cli_test.png";

std::string unet_and_clip() {
  return " --diffusion-model " + test_data::path("sd/unet-sd1-c32-f32.safetensors") + " --clip_l " +
         test_data::path("sd/clip-l-f32.safetensors");
}

std::string model_flags() {
  return unet_and_clip() + " --taesd " + test_data::path("sd/taesd-f32.safetensors");
}

test::CliResult image(const std::string& args) { return test::run_shell(kKiln + " image" + args + " 2>&1"); }

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// The 64x64 image in `path` against every pixel of the record `key`: within 1 on at least 99%.
void expect_pixels(const std::string& path, const std::string& key) {
  auto img = decode_image(read_file(path));
  ASSERT_TRUE(img.ok()) << img.error().message;
  ASSERT_EQ(img->width, 64);
  ASSERT_EQ(img->height, 64);
  const std::vector<uint32_t> packed = diffusion::test::ref_words(key);
  ASSERT_EQ(packed.size() * 4, img->pixels.size());
  size_t within = 0;
  for (size_t i = 0; i < img->pixels.size(); ++i) {
    const int ref = static_cast<int>((packed[i / 4] >> (8 * (i % 4))) & 0xff);
    within += std::abs(img->pixels[i] - ref) <= 1;
  }
  EXPECT_GE(within * 100, img->pixels.size() * 99) << within << " of " << img->pixels.size() << " within 1";
  std::printf("  kiln image (%s): pixels within 1 of stable-diffusion.cpp's: %zu/%zu\n", key.c_str(), within,
              img->pixels.size());
}

TEST(DiffusionCli, ACatMatchesStableDiffusionCpp) {
  std::remove(kOut.c_str());
  const test::CliResult r = image(model_flags() + " -p 'a cat' -W 64 -H 64 --steps 2 -t 2 -o " + kOut);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("SD 1.x model, TAESD decoder, euler_a sampler, discrete scheduler, 2 steps, 64x64"),
            std::string::npos)
      << r.out;
  expect_pixels(kOut, "loop/cli-defaults/pixels");
  const std::vector<uint8_t> png = read_file(kOut);

  // The tEXt chunk: keyword, NUL, A1111's text.
  const std::string bytes(png.begin(), png.end());
  const std::string text =
      std::string("parameters") + '\0' +
      "a cat\nSteps: 2, CFG scale: 7.000000, Eta: 1.000000, "
      "Seed: 42, Size: 64x64, Model: , RNG: cuda, Sampler: euler_a discrete, TE: clip-l-f32.safetensors, "
      "Unet: unet-sd1-c32-f32.safetensors, Version: kiln";
  EXPECT_NE(bytes.find(text), std::string::npos);
  std::remove(kOut.c_str());
}

TEST(DiffusionCli, VaeDecodeMatchesStableDiffusionCpp) {
  const std::string vae = " --vae " + test_data::path("sd/vae-sd1-f16.safetensors");
  const std::string run = unet_and_clip() + vae + " -p 'a cat' -W 64 -H 64 --steps 2 -t 2 -o " + kOut;
  std::remove(kOut.c_str());
  test::CliResult r = image(run);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("SD 1.x model, VAE decoder"), std::string::npos) << r.out;
  expect_pixels(kOut, "vae/cli-defaults/pixels");
  std::remove(kOut.c_str());
  r = image(run + " --vae-tiling --vae-tile-size 4");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  expect_pixels(kOut, "vae/cli-defaults-tiled4/pixels");
  std::remove(kOut.c_str());
}

// A copy of the --vae file (at `name` in the build folder) with every `from` in its safetensors header
// replaced by `to`, the data as it was (offsets count from the data's start).
std::string write_vae_copy(const std::string& name,
                           const std::vector<std::pair<std::string, std::string>>& edits) {
  const std::vector<uint8_t> file = read_file(test_data::path("sd/vae-sd1-f16.safetensors"));
  uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  std::string header(file.begin() + 8, file.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  for (const auto& [from, to] : edits) {
    for (size_t at = header.find(from); at != std::string::npos; at = header.find(from, at + to.size()))
      header.replace(at, from.size(), to);
  }
  while (header.size() % 8 != 0) header += ' ';
  const std::string path = std::string(KILN_BINARY_DIR) + "/" + name;
  std::ofstream out(path, std::ios::binary);
  const uint64_t m = header.size();
  out.write(reinterpret_cast<const char*>(&m), 8);
  out << header;
  out.write(reinterpret_cast<const char*>(file.data() + 8 + n),
            static_cast<std::streamsize>(file.size() - 8 - n));
  return path;
}

// The VAE inside the model's files (first_stage_model.*) decodes when neither --vae nor --taesd is given.
TEST(DiffusionCli, TheCheckpointsOwnVaeDecodes) {
  // As in a single-file checkpoint: the tensors under first_stage_model.
  const std::string ckpt = write_vae_copy("diffusion_cli_test_ckpt_vae.safetensors",
                                          {{"\"decoder.", "\"first_stage_model.decoder."},
                                           {"\"post_quant_conv.", "\"first_stage_model.post_quant_conv."}});
  std::remove(kOut.c_str());
  const test::CliResult r =
      image(" -m " + ckpt + unet_and_clip() + " -p 'a cat' -W 64 -H 64 --steps 2 -t 2 -o " + kOut);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("VAE decoder"), std::string::npos) << r.out;
  expect_pixels(kOut, "vae/cli-defaults/pixels");
  std::remove(kOut.c_str());
  std::remove(ckpt.c_str());
}

TEST(DiffusionCli, JpegOutputCarriesTheParametersInExif) {
  const std::string out = std::string(KILN_BINARY_DIR) + "/diffusion_cli_test.jpg";
  std::remove(out.c_str());
  const test::CliResult r = image(model_flags() + " -p 'a cat' -W 64 -H 64 --steps 1 -t 2 -o " + out);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::vector<uint8_t> jpeg = read_file(out);
  auto img = decode_image(jpeg);
  ASSERT_TRUE(img.ok()) << img.error().message;
  EXPECT_EQ(img->width, 64);
  EXPECT_EQ(img->height, 64);
  // A1111's text in UTF-16 big-endian after piexif's "UNICODE" prefix.
  std::string utf16 = "UNICODE";
  utf16 += '\0';
  for (char c : std::string("a cat\nSteps: 1, CFG scale: 7.000000")) {
    utf16 += '\0';
    utf16 += c;
  }
  EXPECT_NE(std::string(jpeg.begin(), jpeg.end()).find(utf16), std::string::npos);
  std::remove(out.c_str());
}

// sdcpp_loop_oracle.cpp's img2img init image (init_pixel()) written as a PNG at `path`.
void write_init_png(const std::string& path) {
  RgbImage img;
  img.width = img.height = 64;
  img.pixels.resize(64 * 64 * 3);
  for (int y = 0; y < 64; ++y)
    for (int x = 0; x < 64; ++x)
      for (int c = 0; c < 3; ++c)
        img.pixels[(static_cast<size_t>(y) * 64 + x) * 3 + c] =
            static_cast<uint8_t>((x * 4 + y * (2 + c) + 37 * c + (x * y) % 17 * 3) & 0xff);
  auto png = encode_png(img, {});
  ASSERT_TRUE(png.ok()) << png.error().message;
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(png->data()), static_cast<std::streamsize>(png->size()));
}

// kiln image -i: the init image's size when -W and -H are left out, sd-cli's euler_a and strength
// 0.75, TAESD's encoder; another size than -W x -H is refused.
TEST(DiffusionCli, ImageToImageMatchesStableDiffusionCpp) {
  const std::string init = std::string(KILN_BINARY_DIR) + "/diffusion_cli_init.png";
  write_init_png(init);
  std::remove(kOut.c_str());
  test::CliResult r = image(model_flags() + " -p 'a (cat:1.2) on a [red] sofa' -n 'blurry, low quality'" +
                            " --steps 4 -t 2 -i " + init + " -o " + kOut);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("euler_a sampler, discrete scheduler, 4 steps, 64x64"), std::string::npos) << r.out;
  expect_pixels(kOut, "img2img/taesd-euler_a-0.75/pixels");
  r = image(model_flags() + " -p x -W 128 -H 128 -i " + init);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("the image is 64x64, not the 128x128 asked"), std::string::npos) << r.out;
  std::remove(init.c_str());
  std::remove(kOut.c_str());
}

TEST(DiffusionCli, BadFlagsAreRefusedBeforeAnyWork) {
  const struct {
    std::string args, message;
  } cases[] = {
      {" -p x -W 0 -H 0", "width 0 must be a multiple of 64"},
      {" -p x -W 100000 -H 100000", "width 100000 must be a multiple of 64 in [64, 8192]"},
      {" -p x --steps -1", "steps -1 must be at least 1"},
      {" -p x --sampling-method nope", "unknown sampler 'nope'"},
      {" -p x --scheduler nope", "unknown scheduler 'nope'"},
      {" -p x --rng nope", "unknown generator 'nope'"},
      {" -p x --prediction flux_flow", "--prediction 'flux_flow' is not supported"},
      {" -p x --vae-tile-size 0", "must be in 1..8192"},
      {" -p x --vae-tile-size 4xq", "'q' is not an integer"},
      {" -p x --vae-tile-overlap 0.9", "--vae-tile-overlap"},
      {" -p x --strength 1.5", "--strength"},
      {" -p x --strength 0.5", "--strength is for image to image: give the init image with -i"},
      {" -p x -i no-such-image.png", "no-such-image.png"},
      {" -p x -i " + test_data::path("sd/taesd-f32.safetensors"), "taesd-f32.safetensors: "},
      {" -p x --clip_g g.safetensors", "SDXL (--clip_g) is not supported yet"},
      {" -p x --device sim0", "other devices are not supported yet"},
      {" -p x -o out.webp", "only PNG (.png) and JPEG (.jpg, .jpeg) output"},
      {" -W 64", "give the prompt with -p"},
      {" -p x --no-such-flag", "--no-such-flag"},
  };
  for (const auto& c : cases) {
    // The model files are given (real ones), so a refusal is the flags' and comes before loading.
    const test::CliResult r = image(model_flags() + c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.args << "\n" << r.out;
    EXPECT_EQ(r.out.find("model,"), std::string::npos) << c.args << ": loaded the model\n" << r.out;
  }
}

TEST(DiffusionCli, MissingOrWrongModelFilesAreErrors) {
  test::CliResult r = image(" -p x --taesd " + test_data::path("sd/taesd-f32.safetensors"));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("no model file"), std::string::npos) << r.out;
  r = image(" -p x --diffusion-model " + test_data::path("sd/unet-sd1-c32-f32.safetensors") + " --clip_l " +
            test_data::path("sd/clip-l-f32.safetensors"));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(
      r.out.find("no VAE decoder in the files given (looked for first_stage_model.decoder.conv_in.weight); "
                 "give --vae or --taesd"),
      std::string::npos)
      << r.out;
  // A VAE with a tensor of the wrong shape (the same bytes): named, nothing run.
  const std::string bad = write_vae_copy("diffusion_cli_test_bad_vae.safetensors",
                                         {{"\"shape\":[512,512,3,3],\"data_offsets\":[43056,",
                                           "\"shape\":[256,1024,3,3],\"data_offsets\":[43056,"}});
  r = image(unet_and_clip() + " -p x --vae " + bad);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("tensor 'decoder.mid.block_1.conv1.weight' has shape"), std::string::npos) << r.out;
  std::remove(bad.c_str());
  // TAESD's file as the VAE.
  r = image(unet_and_clip() + " -p x --vae " + test_data::path("sd/taesd-f32.safetensors"));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("no VAE decoder in --vae"), std::string::npos) << r.out;
  // The TAESD file as the model: no UNet.
  r = image(" -p x -m " + test_data::path("sd/taesd-f32.safetensors") + " --taesd " +
            test_data::path("sd/taesd-f32.safetensors"));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("no SD 1.x/2.x/XL UNet tensors"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace kiln
