// Audio on the command line (`kiln run --mmproj --audio`, `kiln chat` with /audio and --audio):
// llama.cpp's greedy text for an audio prompt on the five fixture projectors, chat's reply equal
// to `run`'s for the prompt its template renders, and bad audio, files and flags answered with a
// message naming the problem and exit code 1.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "llm/model.h"
#include "shell_command.h"
#include "test_data.h"

namespace kiln {
namespace {

const std::string kKiln = std::string(KILN_BINARY_DIR) + "/kiln";
const std::string kModel = test_data::path("models/llama-spm-e128-f32.gguf");
const std::string kData = std::string(KILN_SOURCE_DIR) + "/tests/conformance/data/mtmd-audio/";
const std::string kWav = std::string(KILN_SOURCE_DIR) + "/tests/data/audio/voiced-16k.wav";
const std::string kVisionOnly = std::string(KILN_SOURCE_DIR) + "/tests/conformance/data/mtmd/mmproj-mlp.gguf";
const std::string kTmp = std::string(KILN_BINARY_DIR) + "/audio_cli_test";

using test::CliResult;

CliResult run(const std::string& args) { return test::run_shell(kKiln + " " + args + " < /dev/null 2>&1"); }

const std::string kPrompt = "-p 'USER: <__media__>Describe the image.\nASSISTANT:' -n 8 --temp 0 -t 2 ";

TEST(AudioCli, RunReproducesLlamaCppGreedyText) {
  auto model = Model::load(kModel);
  ASSERT_TRUE(model.ok()) << model.error().message;
  for (const char* proj : {"ultravox", "qwen2a", "voxtral", "glma", "musicflamingo"}) {
    std::ifstream in(kData + proj + "-voiced.ref.json");
    const auto ref = nlohmann::json::parse(in);
    auto text = (*model)->tokenizer().detokenize(ref["greedy_tokens"].get<std::vector<int32_t>>(), false, false);
    ASSERT_TRUE(text.ok());
    const CliResult r = run("run -m " + kModel + " --mmproj " + kData + "mmproj-" + proj + ".gguf --audio " + kWav +
                            " " + kPrompt + "-ctk f32 -ctv f32 -fa off --no-display-prompt");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find(*text), std::string::npos) << proj << ": llama.cpp '" << *text << "'\nkiln: " << r.out;
    const std::string note = "prompt " + std::to_string(ref["n_past"].get<int>()) + " tokens (1 audio chunk, " +
                             std::to_string(ref["image_embd_shape"][0].get<int>()) + " of their tokens)";
    EXPECT_NE(r.out.find(note), std::string::npos) << "want '" << note << "' in " << r.out;
  }
}

TEST(AudioCli, BadAudioAndFlagsAreRefusedWithOneLine) {
  const std::string mmproj = " --mmproj " + kData + "mmproj-ultravox.gguf";
  const std::string junk = kTmp + ".junk.wav";
  std::ofstream(junk, std::ios::binary) << "RIFF\x10\x00\x00\x00WAVEjunkjunk";
  struct Case {
    std::string args, want;
  };
  const Case cases[] = {
      {"--audio " + kWav, "--audio needs --mmproj"},
      {mmproj + " --audio " + junk, "--audio: '" + junk + "': audio: "},
      {mmproj + " --audio " + kTmp + ".missing.wav", ".missing.wav"},
      {mmproj + " --audio " + kWav + " --max-audio-seconds 0.5", "--audio: '" + kWav + "': audio: "},
      {" --mmproj " + kVisionOnly + " --audio " + kWav, "no audio encoder"},
      {mmproj + " --audio " + kWav + " --image " + kWav, "no vision encoder"},  // an audio-only mmproj
      {mmproj + " --audio " + kWav + " --max-audio-seconds -1", "--max-audio-seconds"},
  };
  for (const Case& c : cases) {
    const CliResult r = run("run -m " + kModel + " " + c.args + " " + kPrompt);
    EXPECT_NE(r.exit_code, 0) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.want), std::string::npos) << c.args << ": want '" << c.want << "' in\n" << r.out;
  }
  // `chat` reads the same flags the same way.
  for (const Case& c : {cases[0], cases[1], cases[4]}) {
    const CliResult r = run("chat -m " + kModel + " " + c.args + " -p hi -st -n 2 -t 2");
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.want), std::string::npos) << c.args << ": want '" << c.want << "' in\n" << r.out;
  }
  std::remove(junk.c_str());
}

// kiln chat's input, written to a file (the chat reads its messages from stdin).
CliResult chat(const std::string& args, const std::string& input) {
  const std::string path = kTmp + ".stdin";
  std::ofstream(path) << input;
  const CliResult r = test::run_shell(kKiln + " chat " + args + " < " + path + " 2>&1");
  std::remove(path.c_str());
  return r;
}

TEST(AudioCli, ChatAudioGoesBeforeTheNextMessage) {
  // The fixture model has no template: kiln chat uses ChatML, with the audio before the text.
  const std::string flags = "-m " + kModel + " --mmproj " + kData + "mmproj-qwen2a.gguf -n 8 --temp 0 -t 2 ";
  // `kiln run`'s reply (its stdout) to the prompt the template renders (-p takes no escapes).
  const CliResult direct = test::run_shell(
      kKiln + " run " + flags + "--audio " + kWav + " --no-display-prompt -p " +
      "'<|im_start|>user\n<__media__>Describe the image.<|im_end|>\n<|im_start|>assistant\n' < /dev/null 2>/dev/null");
  ASSERT_EQ(direct.exit_code, 0) << direct.out;
  const std::string want = direct.out.substr(0, direct.out.find('\n'));
  ASSERT_FALSE(want.empty()) << direct.out;

  const CliResult r = chat(flags, "/audio /nonexistent.wav\n/audio " + kWav + "\nDescribe the image.\n");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("/audio: cannot read '/nonexistent.wav'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("audio '" + kWav + "' ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(want), std::string::npos) << "kiln run: '" << want << "'\nkiln chat: " << r.out;
  // --audio attaches to the first message.
  const CliResult first = chat(flags + "--audio " + kWav + " -p 'Describe the image.' -st", "");
  ASSERT_EQ(first.exit_code, 0) << first.out;
  EXPECT_NE(first.out.find(want), std::string::npos) << "kiln run: '" << want << "'\nkiln chat: " << first.out;
  // /audio with an mmproj without an audio encoder says so, and the chat goes on.
  const CliResult vision = chat("-m " + kModel + " --mmproj " + kVisionOnly + " -n 2 -t 2", "/audio " + kWav + "\nhi\n");
  ASSERT_EQ(vision.exit_code, 0) << vision.out;
  EXPECT_NE(vision.out.find("/audio needs an --mmproj FILE with an audio encoder"), std::string::npos) << vision.out;
}

}  // namespace
}  // namespace kiln
