// Audio in chat requests (`kiln serve --mmproj` with an audio mmproj): an OpenAI input_audio part
// reproduces llama.cpp's greedy text on the five fixture projectors, /props reports the audio
// modality, and bad audio, missing fields and servers without an audio encoder get a 400 naming
// the problem while the server keeps serving. POST /v1/audio/transcriptions answers what the chat
// route answers for llama-server's transcription message, as JSON, plain text and a stream.
#include <gtest/gtest.h>

#include <cstring>
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

std::string wav_bytes() {
  std::ifstream in(kWav, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string wav_base64() {
  const std::string bytes = wav_bytes();
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
  for (const char* proj : {"ultravox", "qwen2a", "voxtral", "glma", "musicflamingo"}) {
    TestServer s(kData + "mmproj-" + proj + ".gguf");
    EXPECT_EQ(s.get("/props")["modalities"]["audio"], true) << proj;
    EXPECT_EQ(s.get("/props")["modalities"]["vision"], false) << proj;  // the fixture files hold audio only
    EXPECT_EQ(s.get("/v1/models")["data"][0]["modalities"]["audio"], true) << proj;
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
    EXPECT_EQ(other.get("/v1/models")["data"][0]["modalities"]["audio"], false);
    const auto [status, out] = other.post("/v1/chat/completions", audio_chat({{"data", wav_base64()}}));
    EXPECT_EQ(status, 400) << out.dump();
    EXPECT_NE(out.dump().find("audio input needs an mmproj with an audio encoder"), std::string::npos) << out.dump();
  }
}

// A counter of /metrics: the value of the line that starts with `sample` ("name{labels}"), -1 if none.
double metric(const MmprojTestServer& s, const std::string& sample) {
  httplib::Client c("127.0.0.1", s.port);
  auto r = c.Get("/metrics");
  EXPECT_TRUE(r && r->status == 200);
  if (!r) return -1;
  const size_t at = r->body.find("\n" + sample + " ");
  return at == std::string::npos ? -1 : std::stod(r->body.substr(at + sample.size() + 2));
}

// The audio encoder's embedding cache (keyed by the audio bytes' content id): the same audio sent
// again (a conversation's next turn) is not encoded again and gives the same answer; other audio is.
TEST(ServerAudio, ARepeatedAudioIsServedFromTheEmbeddingCache) {
  TestServer s(kData + "mmproj-qwen2a.gguf");
  const std::string encoded = "kiln:media_encoded_total{modality=\"audio\"}";
  const std::string hits = "kiln:media_cache_hits_total{modality=\"audio\"}";
  EXPECT_EQ(metric(s, encoded), 0);
  EXPECT_EQ(metric(s, hits), 0);
  EXPECT_EQ(metric(s, "kiln:media_encoded_total{modality=\"image\"}"), -1);  // no vision encoder
  const json chat = audio_chat({{"data", wav_base64()}, {"format", "wav"}});
  const auto [status1, first] = s.post("/v1/chat/completions", chat);
  const auto [status2, again] = s.post("/v1/chat/completions", chat);
  ASSERT_EQ(status1, 200) << first.dump();
  ASSERT_EQ(status2, 200) << again.dump();
  EXPECT_EQ(again["choices"][0]["message"]["content"], first["choices"][0]["message"]["content"]);
  EXPECT_EQ(metric(s, encoded), 1);
  EXPECT_EQ(metric(s, hits), 1);
  // Other bytes (the same samples with one more at the end): another id, encoded.
  std::string longer = wav_bytes();
  longer.append(2, '\0');
  const uint32_t riff = static_cast<uint32_t>(longer.size() - 8), data = static_cast<uint32_t>(longer.size() - 44);
  std::memcpy(longer.data() + 4, &riff, 4);
  std::memcpy(longer.data() + 40, &data, 4);
  const std::string b64 = encode_base64(std::span(reinterpret_cast<const uint8_t*>(longer.data()), longer.size()));
  const auto [status3, other] = s.post("/v1/chat/completions", audio_chat({{"data", b64}, {"format", "wav"}}));
  ASSERT_EQ(status3, 200) << other.dump();
  EXPECT_EQ(metric(s, encoded), 2);
  EXPECT_EQ(metric(s, hits), 1);
}

// A transcription form: the fixture WAV as `file`, then `fields`.
httplib::MultipartFormDataItems transcription_form(const std::vector<std::pair<std::string, std::string>>& fields) {
  httplib::MultipartFormDataItems form = {{"file", wav_bytes(), "voiced-16k.wav", "audio/wav"}};
  for (const auto& [name, value] : fields) form.push_back({name, value, "", ""});
  return form;
}

httplib::Result post_form(const MmprojTestServer& s, const httplib::MultipartFormDataItems& form) {
  httplib::Client c("127.0.0.1", s.port);
  c.set_read_timeout(60);
  return c.Post("/v1/audio/transcriptions", form);
}

// The chat route's answer to llama-server's transcription message: "PROMPT<__media__>".
std::string chat_transcription(const MmprojTestServer& s, const std::string& prompt, int max_tokens) {
  const json content = {{{"type", "text"}, {"text", prompt}},
                        {{"type", "input_audio"}, {"input_audio", {{"data", wav_base64()}}}}};
  const auto [status, out] = s.post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", content}}}},
                                                             {"max_tokens", max_tokens},
                                                             {"temperature", 0}});
  EXPECT_EQ(status, 200) << out.dump();
  return out["choices"][0]["message"]["content"].get<std::string>();
}

TEST(ServerAudio, TranscriptionAnswersTheChatRoutesText) {
  TestServer s(kData + "mmproj-qwen2a.gguf");
  const std::string want = chat_transcription(s, "Transcribe audio to text", 8);
  ASSERT_FALSE(want.empty());

  auto r = post_form(s, transcription_form({{"model", "any"}, {"temperature", "0"}, {"max_tokens", "8"}}));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json out = json::parse(r->body);
  EXPECT_EQ(out["type"], "transcript.text.done");
  EXPECT_EQ(out["text"], want);
  EXPECT_EQ(out["usage"]["type"], "tokens");
  EXPECT_EQ(out["usage"]["output_tokens"], 8);
  EXPECT_EQ(out["usage"]["total_tokens"], out["usage"]["input_tokens"].get<int>() + 8);

  // response_format text: the text alone.
  r = post_form(s, transcription_form({{"temperature", "0"}, {"max_tokens", "8"}, {"response_format", "text"}}));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/plain; charset=utf-8");
  EXPECT_EQ(r->body, want);

  // A prompt and a language make llama-server's "PROMPT (language: L)" text.
  const std::string with_language = chat_transcription(s, "Write it down (language: fr)", 8);
  r = post_form(s, transcription_form(
                       {{"prompt", "Write it down"}, {"language", "fr"}, {"temperature", "0"}, {"max_tokens", "8"}}));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["text"], with_language);
  EXPECT_GT(json::parse(r->body)["usage"]["input_tokens"].get<int>(), out["usage"]["input_tokens"].get<int>());

  // Streamed: the deltas add up to the text, then the done event and [DONE].
  r = post_form(s, transcription_form({{"temperature", "0"}, {"max_tokens", "8"}, {"stream", "true"}}));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  std::string deltas;
  std::vector<json> events;
  size_t pos = 0;
  while ((pos = r->body.find("data: ", pos)) != std::string::npos) {
    const size_t end = r->body.find("\n\n", pos);
    const std::string data = r->body.substr(pos + 6, end - pos - 6);
    pos = end;
    if (data == "[DONE]") break;
    events.push_back(json::parse(data));
    if (events.back()["type"] == "transcript.text.delta") deltas += events.back()["delta"].get<std::string>();
  }
  ASSERT_GE(events.size(), 2u) << r->body;
  EXPECT_EQ(deltas, want);
  EXPECT_EQ(events.back()["type"], "transcript.text.done");
  EXPECT_EQ(events.back()["text"], want);
  EXPECT_TRUE(r->body.ends_with("data: [DONE]\n\n")) << r->body;
}

TEST(ServerAudio, BadTranscriptionRequestsGetA400AndTheServerKeepsServing) {
  TestServer s(kData + "mmproj-ultravox.gguf");
  httplib::Client c("127.0.0.1", s.port);
  c.set_read_timeout(60);
  const std::string cut = "--b\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nRIFF";
  struct Case {
    std::string content_type, body, want;
  };
  const Case cases[] = {
      {"application/json", "{}", "multipart/form-data"},
      {"multipart/form-data", "x", "no boundary"},
      {"multipart/form-data; boundary=b", cut, "does not end with a delimiter"},
      {"multipart/form-data; boundary=b", "--b\r\nX: y\r\n\r\n1\r\n--b--", "has no Content-Disposition"},
  };
  for (const Case& bad : cases) {
    auto r = c.Post("/v1/audio/transcriptions", bad.body, bad.content_type.c_str());
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    EXPECT_NE(r->body.find(bad.want), std::string::npos) << "want '" << bad.want << "' in " << r->body;
  }
  struct FormCase {
    httplib::MultipartFormDataItems form;
    std::string want;
  };
  const FormCase forms[] = {
      {{{"model", "x", "", ""}}, "form part named 'file'"},
      {transcription_form({{"response_format", "srt"}}), "must be json or text"},
      {transcription_form({{"response_format", "text"}, {"stream", "true"}}), "not streamed"},
      {transcription_form({{"temperature", "warm"}}), "field 'temperature' must be a number"},
      {transcription_form({{"stream", "yes"}}), "field 'stream' must be true or false"},
      {transcription_form({{"max_tokens", "1"}, {"max_tokens", "2"}}), "given more than once"},
      {transcription_form({{"timestamp_granularities[]", "word"}}), "timestamps"},
      {transcription_form({{"prompt", "caf\xC3"}}), "field 'prompt' must be UTF-8 text"},
      {transcription_form({{"language", "\xB7"}}), "field 'language' must be UTF-8 text"},
      {{{"file", "RIFF", "a.wav", "audio/wav"}}, "audio 0: "},
  };
  for (const FormCase& f : forms) {
    auto r = post_form(s, f.form);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    EXPECT_NE(r->body.find(f.want), std::string::npos) << "want '" << f.want << "' in " << r->body;
  }
  auto ok = post_form(s, transcription_form({{"max_tokens", "2"}}));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;

  for (const std::string& mmproj : {std::string(), kVisionOnly}) {  // no audio encoder
    TestServer other(mmproj);
    auto r = post_form(other, transcription_form({{"max_tokens", "2"}}));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    EXPECT_NE(r->body.find("audio input needs an mmproj with an audio encoder"), std::string::npos) << r->body;
  }
}

}  // namespace
}  // namespace kiln::serve
