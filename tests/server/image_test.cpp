// A server with an mmproj (ServerOptions::mmproj, `kiln serve --mmproj`): llama-server's
// /completion multimodal_data reproduces llama.cpp's greedy tokens for both projectors, an OpenAI
// image_url part answers as the same prompt on /completion does (also after waiting for room in a
// full KV pool), a repeated image is reused from
// the slot's cache, bad images get a 400 naming the problem while the server keeps serving, and
// file:// URLs read the --media-path folder and nothing outside it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <nlohmann/json.hpp>
#include <thread>

#include "http_client.h"
#include "image/data_uri.h"
#include "image/png_header.h"
#include "mmproj_test_server.h"
#include "serve/server.h"
#include "test_data.h"

namespace kiln::serve {
namespace {

using nlohmann::json;

const std::string kMtmd = std::string(KILN_SOURCE_DIR) + "/tests/conformance/data/mtmd/";

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string base64(const std::string& bytes) {
  return encode_base64(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

// A server on a free loopback port with the references' settings (mmproj_test_server.h).
struct TestServer : MmprojTestServer {
  explicit TestServer(const std::string& mmproj, int32_t n_parallel = 1, const std::string& media_path = "",
                      size_t image_decode_bytes = ServerOptions().image_decode_bytes, bool kv_unified = false)
      : MmprojTestServer(options(mmproj, n_parallel, media_path, image_decode_bytes, kv_unified)) {}
  static ServerOptions options(const std::string& mmproj, int32_t n_parallel, const std::string& media_path,
                               size_t image_decode_bytes, bool kv_unified) {
    ServerOptions o = reference_options(mmproj);
    o.n_parallel = n_parallel;
    o.kv_unified = kv_unified;
    o.media_path = media_path;
    o.image_decode_bytes = image_decode_bytes;
    return o;
  }
};

TEST(ServerImages, CompletionMultimodalDataReproducesLlamaCppGreedyTokens) {
  const std::string png = file_bytes(kMtmd + "test-224.png");
  for (const char* proj : {"gemma3", "mlp"}) {
    TestServer s(kMtmd + "mmproj-" + proj + ".gguf");
    EXPECT_EQ(s.get("/props")["modalities"]["vision"], true);
    std::ifstream in(kMtmd + proj + "-test-224.ref.json");
    const json ref = json::parse(in);
    const json body = {{"prompt", {{"prompt_string", ref["prompt"]}, {"multimodal_data", {base64(png)}}}},
                       {"n_predict", 8},
                       {"temperature", 0},
                       {"return_tokens", true}};
    const auto [status, out] = s.post("/completion", body);
    ASSERT_EQ(status, 200) << out.dump();
    EXPECT_EQ(out["tokens"], ref["greedy_tokens"]) << proj;
    EXPECT_EQ(out["tokens_evaluated"], ref["n_past"]) << proj;  // text and image positions
  }
}

// The devices /v1/memory lists an owner named `owner` under, in its order.
std::vector<std::string> devices_holding(const json& memory, const std::string& owner) {
  std::vector<std::string> out;
  for (const json& d : memory["devices"])
    for (const json& o : d["owners"])
      if (o["name"] == owner) out.push_back(d["device"]);
  return out;
}

// With the model on sim0, the encoder goes where --mmproj-device says (here the CPU) and the draft
// model where -devd and -ngld say (its output layer on sim1, the rest on the CPU); the answers are
// llama.cpp's tokens, as with everything on sim0.
TEST(ServerImages, TheEncoderAndTheDraftModelGoWhereTheirFlagsSay) {
  const std::string png = file_bytes(kMtmd + "test-224.png");
  std::ifstream in(kMtmd + "mlp-test-224.ref.json");
  const json ref = json::parse(in);
  ServerOptions o = reference_options(kMtmd + "mmproj-mlp.gguf");
  o.n_parallel = 1;
  o.device = "sim0";
  o.sim_devices = {{.name = "sim0", .capacity = size_t{512} << 20}, {.name = "sim1", .capacity = size_t{512} << 20}};
  o.mmproj_device = "cpu";
  o.draft_model = test_data::path("models/llama-spm-e128-f32.gguf");
  o.speculative.sources = {DraftSource::DraftSimple};
  o.draft_placement = {.devices = {"sim1"}, .n_gpu_layers = 1};
  MmprojTestServer s(o);
  const json body = {{"prompt", {{"prompt_string", ref["prompt"]}, {"multimodal_data", {base64(png)}}}},
                     {"n_predict", 8},
                     {"temperature", 0},
                     {"return_tokens", true}};
  const auto [status, out] = s.post("/completion", body);
  ASSERT_EQ(status, 200) << out.dump();
  EXPECT_EQ(out["tokens"], ref["greedy_tokens"]);
  const json memory = s.get("/v1/memory");
  const std::string model = mmproj_text_model()->name();
  EXPECT_EQ(devices_holding(memory, "mmproj random-mlp-mmproj-3x64"), std::vector<std::string>{"cpu"})
      << memory.dump();
  // The draft's layers on the CPU, the target whole on sim0, the draft's output layer on sim1.
  EXPECT_EQ(devices_holding(memory, model), (std::vector<std::string>{"cpu", "sim0", "sim1"})) << memory.dump();
}

// In one KV pool that a text stream fills, an image request arriving after it is parked until
// the stream ends, then decodes its image and gives llama.cpp's tokens all the same.
TEST(ServerImages, AnImageWaitsForRoomInAFullPoolAndGivesTheSameTokens) {
  const std::string png = file_bytes(kMtmd + "test-224.png");
  TestServer s(kMtmd + "mmproj-gemma3.gguf", 2, "", ServerOptions().image_decode_bytes, /*kv_unified=*/true);
  std::ifstream in(kMtmd + "gemma3-test-224.ref.json");
  const json ref = json::parse(in);
  std::string text;
  for (int i = 0; i < 100; ++i) text += "one two three four five six ";
  const auto [t_status, tokenized] = s.post("/tokenize", {{"content", text}});
  ASSERT_EQ(t_status, 200);
  std::vector<int32_t> prompt = tokenized["tokens"].get<std::vector<int32_t>>();
  ASSERT_GT(prompt.size(), 470u);
  prompt.resize(470);
  httplib::Client c("127.0.0.1", s.port);
  c.set_read_timeout(60);
  httplib::Request req;  // a stream that holds 470 of the pool's 512 cells and grows to 500
  req.method = "POST";
  req.path = "/completion";
  req.body = json{{"prompt", prompt}, {"n_predict", 30}, {"ignore_eos", true}, {"stream", true}}.dump();
  req.set_header("Content-Type", "application/json");
  std::promise<void> first;
  bool signalled = false;
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
    if (!signalled) first.set_value();
    signalled = true;
    return true;
  };
  std::thread stream([&] {
    auto r = c.send(req);
    EXPECT_TRUE(r && r->status == 200);
    if (!signalled) first.set_value();
  });
  first.get_future().wait();
  const json body = {{"prompt", {{"prompt_string", ref["prompt"]}, {"multimodal_data", {base64(png)}}}},
                     {"n_predict", 8},
                     {"temperature", 0},
                     {"return_tokens", true}};
  const auto [status, out] = s.post("/completion", body);
  stream.join();
  ASSERT_EQ(status, 200) << out.dump();
  EXPECT_EQ(out["tokens"], ref["greedy_tokens"]);
  httplib::Client m("127.0.0.1", s.port);
  auto metrics = m.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->body.find("kiln:generations_parked_total 0\n"), std::string::npos)
      << "nothing was parked";
}

TEST(ServerImages, ChatImageUrlAnswersAsCompletionAndReusesTheCachedImage) {
  TestServer s(kMtmd + "mmproj-gemma3.gguf");
  const std::string url = "data:image/png;base64," + base64(file_bytes(kMtmd + "test-224.png"));
  const json messages = {{{"role", "user"},
                          {"content",
                           {{{"type", "image_url"}, {"image_url", {{"url", url}}}},
                            {{"type", "text"}, {"text", "What is this?"}}}}}};
  const json chat = {{"messages", messages}, {"max_tokens", 6}, {"temperature", 0}};
  const auto [status, first] = s.post("/v1/chat/completions", chat);
  ASSERT_EQ(status, 200) << first.dump();
  const std::string reply = first["choices"][0]["message"]["content"];

  // The rendered chat holds the media marker where the image part was; /completion with that
  // prompt and the image as multimodal_data decodes the same positions.
  const auto [t_status, rendered] = s.post("/apply-template", {{"messages", messages}});
  ASSERT_EQ(t_status, 200) << rendered.dump();
  const std::string prompt = rendered["prompt"];
  EXPECT_NE(prompt.find("<__media__>What is this?"), std::string::npos) << prompt;
  const json native = {
      {"prompt", {{"prompt_string", prompt}, {"multimodal_data", {url.substr(url.find(',') + 1)}}}},
      {"n_predict", 6},
      {"temperature", 0}};
  const auto [n_status, completion] = s.post("/completion", native);
  ASSERT_EQ(n_status, 200) << completion.dump();
  EXPECT_EQ(completion["content"], reply);
  EXPECT_EQ(completion["tokens_evaluated"], first["usage"]["prompt_tokens"]);

  // The same request again: the slot's cache holds the image and the text around it, so all but
  // the last prompt position are reused, and the answer is the same.
  const auto [again_status, again] = s.post("/v1/chat/completions", chat);
  ASSERT_EQ(again_status, 200) << again.dump();
  EXPECT_EQ(again["choices"][0]["message"]["content"], reply);
  EXPECT_EQ(again["usage"]["prompt_tokens_details"]["cached_tokens"],
            again["usage"]["prompt_tokens"].get<int>() - 1);
}

json image_chat(const std::string& url) {
  return {
      {"messages",
       {{{"role", "user"},
         {"content",
          {{{"type", "text"}, {"text", "Hi"}}, {{"type", "image_url"}, {"image_url", {{"url", url}}}}}}}}},
      {"max_tokens", 2}};
}

TEST(ServerImages, BadImagesGetA400AndTheServerKeepsServing) {
  TestServer s(kMtmd + "mmproj-mlp.gguf");
  const std::string png = file_bytes(kMtmd + "test-224.png");
  const std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"4\"/>";
  const struct {
    std::string url, message;
  } cases[] = {
      {"data:image/png;base64," + base64(png.substr(0, png.size() / 2)), "image 0: image: truncated PNG"},
      {"data:image/png;base64,iVBO!w0K", "image 0: image: invalid base64 character '!'"},
      {"data:image/png;base64," + base64(test::png_header_only(30000, 30000)),
       "PNG of 30000 x 30000 pixels exceeds the limit"},
      {"data:image/svg+xml;base64," + base64(svg), "image: SVG is not supported (PNG and JPEG images are)"},
      {"https://example.com/cat.png", "remote image URLs are not fetched"},
      {"/etc/passwd", "only data: and file:// URLs are read"},
      {"file://test-224.png", "file:// URLs are not allowed unless the server is started with --media-path DIR"},
  };
  for (const auto& c : cases) {
    const auto [status, out] = s.post("/v1/chat/completions", image_chat(c.url));
    EXPECT_EQ(status, 400) << c.url.substr(0, 60);
    const std::string message = out["error"]["message"];
    EXPECT_NE(message.find(c.message), std::string::npos) << message;
  }
  const auto [n_status, native] = s.post(
      "/completion",
      {{"prompt", {{"prompt_string", "<__media__><__media__>two"}, {"multimodal_data", {base64(png)}}}},
       {"n_predict", 1}});
  EXPECT_EQ(n_status, 400);
  EXPECT_NE(native["error"]["message"].get<std::string>().find("2 media markers"), std::string::npos)
      << native;
  const auto [ok_status, ok] =
      s.post("/v1/chat/completions", image_chat("data:image/png;base64," + base64(png)));
  EXPECT_EQ(ok_status, 200) << ok.dump();

  // Without --mmproj: vision is off and an image is refused with the flag to use.
  TestServer text_only("");
  EXPECT_EQ(text_only.get("/props")["modalities"]["vision"], false);
  const auto [t_status, t_out] =
      text_only.post("/v1/chat/completions", image_chat("data:image/png;base64," + base64(png)));
  EXPECT_EQ(t_status, 400);
  EXPECT_NE(t_out["error"]["message"].get<std::string>().find("--mmproj"), std::string::npos) << t_out;
}

// Issue 30: a 57-byte PNG header of 8192 x 8192 allocated 249 MiB before failing, and decodes ran
// without a bound on their memory together. A file too small for its size is a 400 before any
// pixel, and an image larger than the memory the server gives decoding is refused by name.
TEST(ServerImages, DecodeMemoryIsBounded) {
  TestServer s(kMtmd + "mmproj-mlp.gguf", 1, "", 512 << 10);
  const auto [h_status, header] =
      s.post("/v1/chat/completions", image_chat("data:image/png;base64," + base64(test::png_header_only(8192, 8192))));
  EXPECT_EQ(h_status, 400);
  EXPECT_NE(header["error"]["message"].get<std::string>().find("bytes cannot hold 8192 x 8192 pixels"),
            std::string::npos)
      << header;
  const std::string png = file_bytes(kMtmd + "test-224.png");  // 224 x 224: 0.8 MiB to decode
  const auto [status, out] = s.post("/v1/chat/completions", image_chat("data:image/png;base64," + base64(png)));
  EXPECT_EQ(status, 400);
  EXPECT_NE(out["error"]["message"].get<std::string>().find(
                "image 0: image: decoding 224 x 224 pixels takes 0.8 MiB of the 0.5 MiB the server gives image decoding"),
            std::string::npos)
      << out;
  TestServer roomy(kMtmd + "mmproj-mlp.gguf");
  EXPECT_EQ(roomy.post("/v1/chat/completions", image_chat("data:image/png;base64," + base64(png))).first, 200);
}

TEST(ServerImages, MediaPathServesFilesInItsFolderAndNothingOutsideIt) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("kiln-media-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "photos");
  fs::copy_file(kMtmd + "test-224.png", dir / "photos" / "cat.png");
  fs::create_symlink(fs::absolute(kMtmd + "test-224.png"), dir / "escape.png");  // points outside
  fs::create_symlink(dir / "photos" / "cat.png", dir / "inside.png");           // points inside
  TestServer s(kMtmd + "mmproj-gemma3.gguf", 1, dir.string());
  const std::string data_url = "data:image/png;base64," + base64(file_bytes(kMtmd + "test-224.png"));
  auto greedy = [](const std::string& url) {
    json body = image_chat(url);
    body["temperature"] = 0;
    return body;
  };
  const auto [d_status, by_data] = s.post("/v1/chat/completions", greedy(data_url));
  ASSERT_EQ(d_status, 200) << by_data.dump();
  for (const char* url : {"file://photos/cat.png", "file:///photos/cat.png", "file://inside.png"}) {
    const auto [status, out] = s.post("/v1/chat/completions", greedy(url));
    ASSERT_EQ(status, 200) << url << ": " << out.dump();
    EXPECT_EQ(out["choices"][0]["message"]["content"], by_data["choices"][0]["message"]["content"]) << url;
  }
  const struct {
    std::string url, message;
  } refused[] = {
      {"file://../kiln-media/photos/cat.png", "file path is not allowed"},
      {"file://photos/cat.png.", "file path is not allowed"},
      {"file://photos/c:at.png", "file path is not allowed"},
      {"file://photos/ca\x01t.png", "file path is not allowed"},
      {"file://", "file path is not allowed"},
      {"file://photos/dog.png", "no file 'photos/dog.png' in the media folder"},
      {"file://escape.png", "'escape.png' leads out of the media folder"},
      {"file://photos", "'photos' is not a regular file"},
  };
  for (const auto& c : refused) {
    const auto [status, out] = s.post("/v1/chat/completions", image_chat(c.url));
    EXPECT_EQ(status, 400) << c.url;
    const std::string message = out["error"]["message"];
    EXPECT_NE(message.find(c.message), std::string::npos) << c.url << ": " << message;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln::serve
