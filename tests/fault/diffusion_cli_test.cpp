// `kiln image` (text to image, tools/kiln/cmd_image.cpp) on the random-weight test models
// (build/test-data/sd/): the PNG of sd-cli's defaults for "a cat" at 64x64 and 2 steps equals
// stable-diffusion.cpp's pixels (tests/data/diffusion/sdcpp-loop-refs.txt, loop/cli-defaults) within
// 1 on at least 99% of them and carries A1111's `parameters` text; the same pixels, bit for bit,
// from the single-file checkpoint as safetensors and as a GGUF with stable-diffusion.cpp's names, on
// sim0, and on sim0 with a budget smaller than the networks; the same run decoded by the VAE
// (--vae, whole and --vae-tiling) against stable-diffusion.cpp's VAE decode of its final latent
// (sdcpp-vae-refs.txt, vae/cli-defaults*), and by the VAE inside the model's files
// (first_stage_model.*); image to image from -i against stable-diffusion.cpp's img2img
// (sdcpp-img2img-refs.txt, img2img/taesd-euler_a-0.75); a .jpg output is a JPEG with the text in
// its EXIF. Bad flags, hostile sizes and flags for what is not built yet are refused with a
// message and exit code 2 before any work; hostile files (truncated, a header that lies, a wrong
// shape, a pickle, a VAE with a wrong-shaped tensor), a quantized file (not supported yet) and a
// budget too small for a network are one-line errors, exit code 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "core/gguf.h"
#include "diffusion/sdcpp_refs.h"
#include "image/decode.h"
#include "image/png_encode.h"
#include "shell_command.h"
#include "temp_dir.h"
#include "test_data.h"

namespace kiln {
namespace {

const std::string kKiln = std::string(KILN_BINARY_DIR) + "/kiln";
// The running test's output image, a file of its own: ctest runs these tests in parallel.
std::string out_png() {
  return std::string(KILN_BINARY_DIR) + "/diffusion_cli_" +
         ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".png";
}

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

// The pixels of the image at `path` (64x64 RGB), empty when it does not decode.
std::vector<uint8_t> read_pixels(const std::string& path) {
  auto img = decode_image(read_file(path));
  EXPECT_TRUE(img.ok()) << path << ": " << img.error().message;
  if (!img.ok()) return {};
  EXPECT_EQ(img->width, 64);
  EXPECT_EQ(img->height, 64);
  return img->pixels;
}

// How many of `pixels` are within 1 of the record `key`'s.
size_t within_one_of(const std::vector<uint8_t>& pixels, const std::string& key) {
  const std::vector<uint32_t> packed = diffusion::test::ref_words(key);
  EXPECT_EQ(packed.size() * 4, pixels.size());
  if (packed.size() * 4 != pixels.size()) return 0;
  size_t within = 0;
  for (size_t i = 0; i < pixels.size(); ++i) {
    const int ref = static_cast<int>((packed[i / 4] >> (8 * (i % 4))) & 0xff);
    within += std::abs(pixels[i] - ref) <= 1;
  }
  return within;
}

// The 64x64 image in `path` against every pixel of the record `key`: within 1 on at least 99%.
void expect_pixels(const std::string& path, const std::string& key) {
  const std::vector<uint8_t> pixels = read_pixels(path);
  ASSERT_EQ(pixels.size(), size_t{64 * 64 * 3});
  const size_t within = within_one_of(pixels, key);
  EXPECT_GE(within * 100, pixels.size() * 99) << within << " of " << pixels.size() << " within 1";
  std::printf("  kiln image (%s): pixels within 1 of stable-diffusion.cpp's: %zu/%zu\n", key.c_str(), within,
              pixels.size());
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A safetensors file: the header's JSON, then `data`.
std::string safetensors(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  for (size_t i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

TEST(DiffusionCli, ACatMatchesStableDiffusionCpp) {
  std::remove(out_png().c_str());
  const test::CliResult r = image(model_flags() + " -p 'a cat' -W 64 -H 64 --steps 2 -t 2 -o " + out_png());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("SD 1.x model (eps prediction), TAESD decoder, euler_a sampler, discrete scheduler, 2 "
                       "steps, 64x64"),
            std::string::npos)
      << r.out;
  expect_pixels(out_png(), "loop/cli-defaults/pixels");
  const std::vector<uint8_t> png = read_file(out_png());

  // The tEXt chunk: keyword, NUL, A1111's text.
  const std::string bytes(png.begin(), png.end());
  const std::string text =
      std::string("parameters") + '\0' +
      "a cat\nSteps: 2, CFG scale: 7.000000, Eta: 1.000000, "
      "Seed: 42, Size: 64x64, Model: , RNG: cuda, Sampler: euler_a discrete, TE: clip-l-f32.safetensors, "
      "Unet: unet-sd1-c32-f32.safetensors, Version: kiln";
  EXPECT_NE(bytes.find(text), std::string::npos);
  std::remove(out_png().c_str());
}

TEST(DiffusionCli, Sd2ACatMatchesStableDiffusionCpp) {
  // OpenCLIP-H in an SD 2.x checkpoint's names and the SD 2.x UNet: the version, clip_skip 2 and
  // the prediction (the UNet asked, as sd-cli does) are the model's.
  const std::string run = " --diffusion-model " + test_data::path("sd/unet-sd2-c64-f32.safetensors") +
                          " --clip_l " + test_data::path("sd/clip-h-sd2.safetensors") + " --taesd " +
                          test_data::path("sd/taesd-f32.safetensors") +
                          " -p 'a cat' -W 64 -H 64 --steps 2 -t 2 -o " + out_png();
  std::remove(out_png().c_str());
  const test::CliResult r = image(run);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("SD 2.x model (eps prediction), TAESD decoder, euler_a sampler"), std::string::npos)
      << r.out;
  expect_pixels(out_png(), "sd2/loop/cli-defaults/pixels");
  std::remove(out_png().c_str());
}

TEST(DiffusionCli, VaeDecodeMatchesStableDiffusionCpp) {
  const std::string vae = " --vae " + test_data::path("sd/vae-sd1-f16.safetensors");
  const std::string run = unet_and_clip() + vae + " -p 'a cat' -W 64 -H 64 --steps 2 -t 2 -o " + out_png();
  std::remove(out_png().c_str());
  test::CliResult r = image(run);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("SD 1.x model (eps prediction), VAE decoder"), std::string::npos) << r.out;
  expect_pixels(out_png(), "vae/cli-defaults/pixels");
  std::remove(out_png().c_str());
  r = image(run + " --vae-tiling --vae-tile-size 4");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  expect_pixels(out_png(), "vae/cli-defaults-tiled4/pixels");
  std::remove(out_png().c_str());
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
  std::remove(out_png().c_str());
  const test::CliResult r =
      image(" -m " + ckpt + unet_and_clip() + " -p 'a cat' -W 64 -H 64 --steps 2 -t 2 -o " + out_png());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("VAE decoder"), std::string::npos) << r.out;
  expect_pixels(out_png(), "vae/cli-defaults/pixels");
  std::remove(out_png().c_str());
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
  std::remove(out_png().c_str());
  test::CliResult r = image(model_flags() + " -p 'a (cat:1.2) on a [red] sofa' -n 'blurry, low quality'" +
                            " --steps 4 -t 2 -i " + init + " -o " + out_png());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("euler_a sampler, discrete scheduler, 4 steps, 64x64"), std::string::npos) << r.out;
  expect_pixels(out_png(), "img2img/taesd-euler_a-0.75/pixels");
  r = image(model_flags() + " -p x -W 128 -H 128 -i " + init);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("the image is 64x64, not the 128x128 asked"), std::string::npos) << r.out;
  std::remove(init.c_str());
  std::remove(out_png().c_str());
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
      {" -p x --device sim0,sim1", "the networks run on one device"},
      {" -p x --device nosuch", "nosuch"},
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

// The single-file checkpoint (safetensors, then the same weights as a GGUF with
// stable-diffusion.cpp's names), on the CPU, on sim0, and on sim0 with a budget smaller than the
// three networks: the same pixels, bit for bit, within 1 of stable-diffusion.cpp's.
TEST(DiffusionCli, CheckpointGgufAndDevicesGiveTheSamePixels) {
  const std::string taesd = " --taesd " + test_data::path("sd/taesd-f32.safetensors");
  const std::string st = " -m " + test_data::path("sd/tiny-sd1-f32.safetensors") + taesd;
  const std::string gguf = " -m " + test_data::path("sd/tiny-sd1-f32.gguf") + taesd;
  // The networks hold about 470 MiB (CLIP-L), 40 MiB (the UNet) and 5 MiB (TAESD) at F32; the
  // budget holds the text encoder and the arena, not the rest beside them.
  const std::string tight = " --device sim0 --max-mem sim0=0.49 -v";
  const std::string runs[] = {st, gguf, st + " --device sim0", gguf + tight};
  std::vector<uint8_t> first;
  for (const std::string& run : runs) {
    std::remove(out_png().c_str());
    const test::CliResult r = image(run + " -p 'a cat' -W 64 -H 64 --steps 2 -t 2 -o " + out_png());
    ASSERT_EQ(r.exit_code, 0) << run << "\n" << r.out;
    const std::vector<uint8_t> pixels = read_pixels(out_png());
    ASSERT_EQ(pixels.size(), size_t{64 * 64 * 3}) << run;
    if (first.empty()) {
      first = pixels;
      EXPECT_GE(within_one_of(pixels, "loop/cli-defaults/pixels") * 100, pixels.size() * 99) << run;
    } else {
      EXPECT_EQ(pixels, first) << run;
    }
    if (run.ends_with(tight)) {
      // -v's breakdown: sim0's budget, and a network evicted to make room for another.
      EXPECT_NE(r.out.find("sim0"), std::string::npos) << r.out;
      EXPECT_NE(r.out.find("sd text encoder"), std::string::npos) << r.out;
    }
  }
  std::remove(out_png().c_str());
}

// Files that are not what they say: a one-line error naming the problem, exit code 1, before any
// network computes; a budget too small for a network is refused with the numbers.
TEST(DiffusionCli, HostileFilesAreOneLineErrors) {
  const test::TempDir dir("diffusion_cli");
  const std::string clip_unet = " --diffusion-model " + test_data::path("sd/unet-sd1-c32-f32.safetensors") +
                                " --clip_l " + test_data::path("sd/clip-l-f32.safetensors");
  std::ifstream in(test_data::path("sd/taesd-f32.safetensors"), std::ios::binary);
  const std::string taesd{std::istreambuf_iterator<char>(in), {}};
  const std::string truncated = dir.path() + "/truncated.safetensors";
  write_file(truncated, taesd.substr(0, taesd.size() / 2));
  const std::string lies = dir.path() + "/lies.safetensors";  // 64 MiB claimed, 16 bytes there
  write_file(lies, safetensors(R"({"decoder.layers.0.weight":{"dtype":"F32","shape":[4096,4096],)"
                               R"("data_offsets":[0,67108864]}})",
                               std::string(16, '\0')));
  const std::string past = dir.path() + "/past.safetensors";  // offsets past the data
  write_file(past, safetensors(R"({"decoder.layers.0.weight":{"dtype":"F32","shape":[2,2],)"
                               R"("data_offsets":[1024,1040]}})",
                               std::string(16, '\0')));
  const std::string shape = dir.path() + "/shape.safetensors";  // a 2x2 first conv
  write_file(shape, safetensors(R"({"decoder.layers.0.weight":{"dtype":"F32","shape":[2,2],)"
                                R"("data_offsets":[0,16]}})",
                                std::string(16, '\0')));
  const std::string pickle = dir.path() + "/model.ckpt";
  write_file(pickle, std::string("PK\x03\x04", 4) + std::string(60, '\0'));
  const std::string gguf = dir.path() + "/truncated.gguf";
  std::ifstream gin(test_data::path("sd/tiny-sd1-f32.gguf"), std::ios::binary);
  std::string head(1 << 20, '\0');
  gin.read(head.data(), static_cast<std::streamsize>(head.size()));
  write_file(gguf, head);

  const std::string quantized = dir.path() + "/q8_0.gguf";  // one Q8_0 block of the UNet's first conv
  {
    GgufWriter w;
    const int64_t ne[] = {32, 1};
    ASSERT_TRUE(w.add_tensor("model.diffusion_model.input_blocks.0.0.weight", DType::Q8_0, ne).ok());
    ASSERT_TRUE(w.begin(quantized).ok());
    ASSERT_TRUE(w.write_tensor_data(std::vector<uint8_t>(34, 0)).ok());
    ASSERT_TRUE(w.finish().ok());
  }

  const struct {
    std::string args, message;
  } cases[] = {
      {" -m " + quantized + " --taesd " + test_data::path("sd/taesd-f32.safetensors"),
       "quantized SD files are not supported yet"},
      {clip_unet + " --taesd " + truncated, "truncated.safetensors"},
      {clip_unet + " --taesd " + lies, "67108864"},
      {clip_unet + " --taesd " + past, "past the end of the data buffer"},
      {clip_unet + " --taesd " + shape, "has shape"},
      {" -m " + pickle + " --taesd " + truncated, "Convert it to .safetensors"},
      {" -m " + gguf + " --taesd " + test_data::path("sd/taesd-f32.safetensors"), "truncated.gguf"},
      {clip_unet + " --taesd " + test_data::path("sd/taesd-f32.safetensors") +
           " --device sim0 --max-mem sim0=0.1",
       "do not fit"},
  };
  for (const auto& c : cases) {
    const test::CliResult r = image(c.args + " -p x -W 64 -H 64 --steps 1 -o " + out_png());
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.args << "\n" << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << c.args << ": not one line\n" << r.out;
  }
}

}  // namespace
}  // namespace kiln
