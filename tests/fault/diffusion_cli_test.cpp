// `kiln image` (text to image, tools/kiln/cmd_image.cpp) on the random-weight test models
// (build/test-data/sd/): the PNG of sd-cli's defaults for "a cat" at 64x64 and 2 steps equals
// stable-diffusion.cpp's pixels (tests/data/diffusion/sdcpp-loop-refs.txt, loop/cli-defaults) within
// 1 on at least 99% of them and carries A1111's `parameters` text; the same pixels, bit for bit,
// from the single-file checkpoint as safetensors and as a GGUF with stable-diffusion.cpp's names, on
// sim0, and on sim0 with a budget smaller than the networks. Bad flags, hostile sizes and flags for
// what is not built yet are refused with a message and exit code 2 before any work; hostile files
// (truncated, a header that lies, a wrong shape, a pickle), a quantized file (not supported yet) and
// a budget too small for a network are one-line errors, exit code 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/gguf.h"
#include "diffusion/sdcpp_refs.h"
#include "image/decode.h"
#include "shell_command.h"
#include "temp_dir.h"
#include "test_data.h"

namespace kiln {
namespace {

const std::string kKiln = std::string(KILN_BINARY_DIR) + "/kiln";
const std::string kOut = std::string(KILN_BINARY_DIR) + "/diffusion_cli_test.png";

std::string model_flags() {
  return " --diffusion-model " + test_data::path("sd/unet-sd1-c32-f32.safetensors") + " --clip_l " +
         test_data::path("sd/clip-l-f32.safetensors") + " --taesd " +
         test_data::path("sd/taesd-f32.safetensors");
}

test::CliResult image(const std::string& args) { return test::run_shell(kKiln + " image" + args + " 2>&1"); }

// The pixels of the PNG at `path` (64x64 RGB), empty when it does not decode.
std::vector<uint8_t> read_pixels(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> png{std::istreambuf_iterator<char>(in), {}};
  auto img = decode_image(png);
  EXPECT_TRUE(img.ok()) << path << ": " << img.error().message;
  if (!img.ok()) return {};
  EXPECT_EQ(img->width, 64);
  EXPECT_EQ(img->height, 64);
  return img->pixels;
}

// How many of `pixels` are within 1 of stable-diffusion.cpp's for sd-cli's defaults.
size_t within_one_of_sdcpp(const std::vector<uint8_t>& pixels) {
  const std::vector<uint32_t> packed = diffusion::test::ref_words("loop/cli-defaults/pixels");
  EXPECT_EQ(packed.size() * 4, pixels.size());
  if (packed.size() * 4 != pixels.size()) return 0;
  size_t within = 0;
  for (size_t i = 0; i < pixels.size(); ++i) {
    const int ref = static_cast<int>((packed[i / 4] >> (8 * (i % 4))) & 0xff);
    within += std::abs(pixels[i] - ref) <= 1;
  }
  return within;
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
  std::remove(kOut.c_str());
  const test::CliResult r = image(model_flags() + " -p 'a cat' -W 64 -H 64 --steps 2 -t 2 -o " + kOut);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("SD 1.x model, euler_a sampler, discrete scheduler, 2 steps, 64x64"),
            std::string::npos)
      << r.out;
  std::ifstream in(kOut, std::ios::binary);
  const std::vector<uint8_t> png{std::istreambuf_iterator<char>(in), {}};
  const std::vector<uint8_t> pixels = read_pixels(kOut);
  ASSERT_EQ(pixels.size(), size_t{64 * 64 * 3});
  const size_t within = within_one_of_sdcpp(pixels);
  EXPECT_GE(within * 100, pixels.size() * 99) << within << " of " << pixels.size() << " within 1";
  std::printf("  kiln image: pixels within 1 of stable-diffusion.cpp's: %zu/%zu\n", within, pixels.size());

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
      {" -p x --vae vae.safetensors", "the VAE is not supported yet"},
      {" -p x --vae-tiling", "tiled decoding (--vae-tiling) is not supported yet"},
      {" -p x -i in.png", "image to image (-i/--init-img) is not supported yet"},
      {" -p x --strength 0.5", "image to image (--strength) is not supported yet"},
      {" -p x --clip_g g.safetensors", "SDXL (--clip_g) is not supported yet"},
      {" -p x --device sim0,sim1", "the networks run on one device"},
      {" -p x --device nosuch", "nosuch"},
      {" -p x -o out.jpg", "only PNG output"},
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
  EXPECT_NE(r.out.find("needs --taesd"), std::string::npos) << r.out;
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
    std::remove(kOut.c_str());
    const test::CliResult r = image(run + " -p 'a cat' -W 64 -H 64 --steps 2 -t 2 -o " + kOut);
    ASSERT_EQ(r.exit_code, 0) << run << "\n" << r.out;
    const std::vector<uint8_t> pixels = read_pixels(kOut);
    ASSERT_EQ(pixels.size(), size_t{64 * 64 * 3}) << run;
    if (first.empty()) {
      first = pixels;
      EXPECT_GE(within_one_of_sdcpp(pixels) * 100, pixels.size() * 99) << run;
    } else {
      EXPECT_EQ(pixels, first) << run;
    }
    if (run.ends_with(tight)) {
      // -v's breakdown: sim0's budget, and a network evicted to make room for another.
      EXPECT_NE(r.out.find("sim0"), std::string::npos) << r.out;
      EXPECT_NE(r.out.find("sd text encoder"), std::string::npos) << r.out;
    }
  }
  std::remove(kOut.c_str());
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
    const test::CliResult r = image(c.args + " -p x -W 64 -H 64 --steps 1 -o " + kOut);
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.args << "\n" << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << c.args << ": not one line\n" << r.out;
  }
}

}  // namespace
}  // namespace kiln
