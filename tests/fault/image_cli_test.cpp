// Images on the command line (`kiln run --mmproj --image`, `kiln chat` with /image): llama.cpp's
// greedy text for an image prompt, a chat turn with an image equal to decoding it directly, and
// bad images, files and flags answered with a message naming the problem and exit code 1.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "image/png_header.h"
#include "llm/cpu_engine.h"
#include "llm/media_prompt.h"
#include "shell_command.h"
#include "test_data.h"

namespace kiln {
namespace {

const std::string kKiln = std::string(KILN_BINARY_DIR) + "/kiln";
const std::string kModel = test_data::path("models/llama-spm-e128-f32.gguf");
const std::string kMtmd = std::string(KILN_SOURCE_DIR) + "/tests/conformance/data/mtmd/";
const std::string kTmp = std::string(KILN_BINARY_DIR) + "/image_cli_test";

using test::CliResult;

// Runs kiln with `args`, `input` piped into its standard input (a file of this process: ctest runs
// the tests of this binary in parallel processes).
CliResult run(const std::string& args, const std::string& input = "") {
  const std::string stdin_path = kTmp + "." + std::to_string(getpid()) + ".stdin";
  std::ofstream(stdin_path) << input;
  const CliResult r = test::run_shell(kKiln + " " + args + " < " + stdin_path + " 2>&1");
  std::remove(stdin_path.c_str());
  return r;
}

std::shared_ptr<const Model> model() {
  static auto m = Model::load(kModel);
  EXPECT_TRUE(m.ok());
  return *m;
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string write_file(const std::string& name, const std::string& bytes) {
  const std::string path = kTmp + "." + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST(ImageCli, RunReproducesLlamaCppGreedyText) {
  for (const char* proj : {"gemma3", "mlp"}) {
    std::ifstream in(kMtmd + proj + "-test-224.ref.json");
    const auto ref = nlohmann::json::parse(in);
    auto text = model()->tokenizer().detokenize(ref["greedy_tokens"].get<std::vector<int32_t>>(), false, false);
    ASSERT_TRUE(text.ok());
    const CliResult r = run("run -m " + kModel + " --mmproj " + kMtmd + "mmproj-" + proj + ".gguf --image " + kMtmd +
                            "test-224.png -p 'USER: <__media__>Describe the image.\nASSISTANT:' -n 8 --temp 0 -t 2 "
                            "-ctk f32 -ctv f32 -fa off --no-display-prompt");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find(*text), std::string::npos) << proj << ": llama.cpp '" << *text << "'\nkiln: " << r.out;
    EXPECT_NE(r.out.find("(1 image, "), std::string::npos) << r.out;
  }
}

// The mmproj's encoder runs on the model's device, on the CPU (--no-mmproj-offload, -mmdev none) or
// on the device -mmdev names, as llama.cpp's flags say; the text is llama.cpp's wherever it runs.
TEST(ImageCli, TheEncoderRunsWhereTheMmprojFlagsSay) {
  std::ifstream in(kMtmd + "mlp-test-224.ref.json");
  const auto ref = nlohmann::json::parse(in);
  auto text = model()->tokenizer().detokenize(ref["greedy_tokens"].get<std::vector<int32_t>>(), false, false);
  ASSERT_TRUE(text.ok());
  const std::string base = "run -m " + kModel + " --mmproj " + kMtmd + "mmproj-mlp.gguf --image " + kMtmd +
                           "test-224.png -p 'USER: <__media__>Describe the image.\nASSISTANT:' -n 8 --temp 0 -t 2 "
                           "-ctk f32 -ctv f32 -fa off --no-display-prompt -v --device sim0 --sim-capacity sim1=1";
  const std::pair<std::string, std::string> cases[] = {
      {"", "sim0"}, {" --no-mmproj-offload", "cpu"}, {" -mmdev none", "cpu"}, {" -mmdev sim1", "sim1"},
      {" -mmdev sim1 --no-mmproj-offload", "cpu"}};
  for (const auto& [flags, device] : cases) {
    const CliResult r = run(base + flags);
    ASSERT_EQ(r.exit_code, 0) << flags << "\n" << r.out;
    EXPECT_NE(r.out.find(*text), std::string::npos) << flags << ": llama.cpp '" << *text << "'\nkiln: " << r.out;
    EXPECT_EQ(test::devices_holding(r.out, "mmproj random-mlp-mmproj"), std::vector<std::string>{device})
        << flags << "\n" << r.out;
    EXPECT_EQ(test::devices_holding(r.out, "random-llama-2x128"), std::vector<std::string>{"sim0"}) << r.out;
  }
  const CliResult absent = run(base + " -mmdev sim2");
  EXPECT_EQ(absent.exit_code, 1) << absent.out;
  EXPECT_NE(absent.out.find("--mmproj-device: device 'sim2' does not exist here"), std::string::npos) << absent.out;
}

// The greedy reply (n tokens) to `prompt` decoded directly, as `kiln chat` should decode it.
std::string direct_reply(const std::string& mmproj, const std::string& chat_text, const std::string& image, int n) {
  auto vision = VisionModel::load(mmproj, *model());
  EXPECT_TRUE(vision.ok());
  CpuEngine engine(2);
  ContextOptions co;
  co.n_ctx = 512;
  co.input_embeddings = true;
  auto ctx = Context::create(model(), engine.backend, co);
  auto enc = VisionEncoder::create(*vision, engine.backend, {});
  EXPECT_TRUE(ctx.ok() && enc.ok());
  auto img = (*vision)->prepare_image(read_file(image));
  const std::shared_ptr<const PreparedImage> images[] = {*img};
  auto p = tokenize_media_prompt(model()->tokenizer(), vision->get(), chat_text, images,
                                 {.add_special = true, .parse_special = true, .collapse_bos = true});
  EXPECT_TRUE(p.ok()) << p.error().message;
  auto last = decode_media_prompt(**ctx, enc->get(), *p, 0);
  EXPECT_TRUE(last.ok());
  std::vector<int32_t> out;
  std::vector<float> logits((*ctx)->logits(*last).begin(), (*ctx)->logits(*last).end());
  for (int32_t pos = static_cast<int32_t>(p->n_positions()); static_cast<int>(out.size()) < n; ++pos) {
    out.push_back(static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
    Batch b;
    b.add(out.back(), pos, 0, true);
    EXPECT_TRUE((*ctx)->decode(b).ok());
    logits.assign((*ctx)->logits(0).begin(), (*ctx)->logits(0).end());
  }
  return *model()->tokenizer().detokenize(out, false, false);
}

TEST(ImageCli, ChatImageGoesBeforeTheNextMessage) {
  // The fixture model has no template: kiln chat uses ChatML, with the image before the text.
  const std::string mmproj = kMtmd + "mmproj-gemma3.gguf", image = kMtmd + "test-224.png";
  const std::string want = direct_reply(
      mmproj, "<|im_start|>user\n<__media__>What is this?<|im_end|>\n<|im_start|>assistant\n", image, 6);
  const CliResult r = run("chat -m " + kModel + " --mmproj " + mmproj + " -n 6 --temp 0 -t 2",
                          "/image /nonexistent.png\n/image " + image + "\nWhat is this?\n");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("/image: cannot read '/nonexistent.png'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("goes with your next message"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(want), std::string::npos) << "direct: '" << want << "'\nkiln chat: " << r.out;
  // --image attaches to the first message.
  const CliResult first = run("chat -m " + kModel + " --mmproj " + mmproj + " --image " + image +
                              " -p 'What is this?' -st -n 6 --temp 0 -t 2");
  ASSERT_EQ(first.exit_code, 0) << first.out;
  EXPECT_NE(first.out.find(want), std::string::npos) << "direct: '" << want << "'\nkiln chat: " << first.out;
}

TEST(ImageCli, BadImagesAndFlagsGetAMessage) {
  const std::vector<uint8_t> bytes = read_file(kMtmd + "test-224.png");
  const std::string png(bytes.begin(), bytes.end());
  const std::string truncated = write_file("truncated.png", png.substr(0, png.size() / 2));
  const std::string svg = write_file("image.svg", "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"4\"/>");
  const std::string huge = write_file("huge.png", test::png_header_only(30000, 30000));
  const std::string base = "run -m " + kModel + " --mmproj " + kMtmd + "mmproj-mlp.gguf -n 1 -p 'Hi'";
  struct Case {
    std::string args, message;
  };
  const Case cases[] = {
      {"run -m " + kModel + " --image " + svg + " -p hi", "--image needs --mmproj FILE"},
      {base + " --image " + truncated, "image: truncated PNG"},
      {base + " --image " + svg, "image: SVG is not supported (PNG and JPEG images are)"},
      {base + " --image " + huge, "image: PNG of 30000 x 30000 pixels exceeds the limit"},
      {base + " --image /nonexistent.png", "cannot read '/nonexistent.png'"},
      {"run -m " + kModel + " --mmproj " + kMtmd + "mmproj-mlp.gguf --image " + kMtmd +
           "test-224.png -p '<__media__><__media__>two markers'",
       "2 media markers (<__media__>) for 1 images"},
      {base + " --image " + kMtmd + "test-224.png --context-shift", "--context-shift is not supported with images"},
      {"run -m " + kModel + " --mmproj " + kMtmd + "test-224.png -p hi", "mmproj: gguf:"},
      {"run -m " + kModel + " --mmproj " + kModel + " -p hi", "not 'clip'"},
  };
  for (const auto& c : cases) {
    const CliResult r = run(c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.args << "\n" << r.out;
  }
}

}  // namespace
}  // namespace kiln
