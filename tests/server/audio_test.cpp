// Audio in chat requests (`kiln serve --mmproj` with an audio mmproj): an OpenAI input_audio part
// reproduces llama.cpp's greedy text on the three fixture projectors, /props reports the audio
// modality, and bad audio, missing fields and servers without an audio encoder get a 400 naming
// the problem while the server keeps serving.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "mmproj_test_server.h"
#include "image/data_uri.h"

namespace kiln::serve {
namespace {

using nlohmann::json;

const std::string kData = std::string(KILN_SOURCE_DIR) + "/tests/conformance/data/mtmd-audio/";
const std::string kWav = std::string(KILN_SOURCE_DIR) + "/tests/data/audio/voiced-16k.wav";
const std::string kVisionOnly = std::string(KILN_SOURCE_DIR) + "/tests/conformance/data/mtmd/mmproj-mlp.gguf";
// Renders the references' prompt "USER: <__media__>Describe the image.\nASSISTANT:" from one user
// message whose parts are the audio and the text.
const std::string kTemplate = "{% for m in messages %}USER: {{ m['content'] }}\nASSISTANT:{% endfor %}";

std::shared_ptr<const Model> text_model() { return mmproj_text_model(); }

std::string wav_base64() {
  std::ifstream in(kWav, std::ios::binary);
  const std::string bytes{std::istreambuf_iterator<char>(in), {}};
  return encode_base64(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

// A server with the references' settings (mmproj_test_server.h), one slot of 1024 tokens and the
// references' prompt format.
struct TestServer : MmprojTestServer {
  explicit TestServer(const std::string& mmproj) : MmprojTestServer(options(mmproj)) {}
  static ServerOptions options(const std::string& mmproj) {
    ServerOptions o = reference_options(mmproj);
    o.n_parallel = 1;
    o.context.n_ctx = 1024;
    o.chat_template_source = kTemplate;
    return o;
  }
};

json audio_chat(const json& input_audio, int max_tokens = 8) {
  const json content = {{{"type", "input_audio"}, {"input_audio", input_audio}},
                        {{"type", "text"}, {"text", "Describe the image."}}};
  return {{"messages", {{{"role", "user"}, {"content", content}}}}, {"max_tokens", max_tokens}, {"temperature", 0}};
}

TEST(ServerAudio, ChatInputAudioReproducesLlamaCppGreedyText) {
  const std::string b64 = wav_base64();
  for (const char* proj : {"ultravox", "qwen2a", "voxtral"}) {
    TestServer s(kData + "mmproj-" + proj + ".gguf");
    EXPECT_EQ(s.get("/props")["modalities"]["audio"], true) << proj;
    EXPECT_EQ(s.get("/props")["modalities"]["vision"], false) << proj;  // the fixture files hold audio only
    std::ifstream in(kData + proj + "-voiced.ref.json");
    const json ref = json::parse(in);
    auto text = text_model()->tokenizer().detokenize(ref["greedy_tokens"].get<std::vector<int32_t>>(), false, false);
    ASSERT_TRUE(text.ok());
    const auto [status, out] = s.post("/v1/chat/completions", audio_chat({{"data", b64}, {"format", "wav"}}));
    ASSERT_EQ(status, 200) << out.dump();
    // The detokenized reference lacks the first token's leading space (SPM), the reply keeps it.
    std::string content = out["choices"][0]["message"]["content"].get<std::string>();
    if (content.starts_with(' ') && !text->starts_with(' ')) content.erase(0, 1);
    EXPECT_EQ(content, *text) << proj;
    EXPECT_EQ(out["usage"]["prompt_tokens"], ref["n_past"]) << proj;  // text and audio positions
  }
}

TEST(ServerAudio, BadAudioGetsA400AndTheServerKeepsServing) {
  TestServer s(kData + "mmproj-ultravox.gguf");
  struct Case {
    json input_audio;
    std::string want;
  };
  const Case cases[] = {
      {{{"data", "UklGRiQAAABXQVZF"}, {"format", "wav"}}, "audio 0: audio: "},  // a RIFF header and nothing else
      {{{"data", "not base64!"}, {"format", "wav"}}, "audio 0: "},
      {{{"format", "wav"}}, "an input_audio part needs"},
      {{{"data", wav_base64()}, {"format", 3}}, "an input_audio part needs"},
      {json("text"), "an input_audio part needs"},
  };
  for (const Case& c : cases) {
    const auto [status, out] = s.post("/v1/chat/completions", audio_chat(c.input_audio));
    EXPECT_EQ(status, 400) << c.input_audio.dump() << "\n" << out.dump();
    EXPECT_NE(out.dump().find(c.want), std::string::npos) << "want '" << c.want << "' in " << out.dump();
  }
  const auto [ok_status, ok] = s.post("/v1/chat/completions", audio_chat({{"data", wav_base64()}}, 2));
  EXPECT_EQ(ok_status, 200) << ok.dump();

  for (const std::string& mmproj : {std::string(), kVisionOnly}) {  // no audio encoder
    TestServer other(mmproj);
    EXPECT_EQ(other.get("/props")["modalities"]["audio"], false);
    const auto [status, out] = other.post("/v1/chat/completions", audio_chat({{"data", wav_base64()}}));
    EXPECT_EQ(status, 400) << out.dump();
    EXPECT_NE(out.dump().find("audio input needs an mmproj with an audio encoder"), std::string::npos) << out.dump();
  }
}

}  // namespace
}  // namespace kiln::serve
