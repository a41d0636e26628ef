// Images from `kiln serve` (issue 35): a server of many models with the tiny SD 1.x checkpoint
// (TAESD decoding) beside the qwen2 fixture. Every image its routes make equals, byte for byte,
// the file `kiln image` writes for the same settings (OpenAI's generations and edits, A1111's
// txt2img); bad fields are 400s naming the field and the server goes on; chat and image requests
// alternate on a sim0 budget that holds the text model or the image model but not both, with the
// answers of a roomy server; a client that disconnects and /sdapi/v1/interrupt stop the job within
// a step; one job at a time, the queue past --queue answered 503. 64x64 images, 2 steps.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "backends/sim/sim_device.h"
#include "http_client.h"
#include "image/data_uri.h"
#include "image/decode.h"
#include "serve/image_models.h"
#include "serve/image_request.h"
#include "serve/model_catalog.h"
#include "serve/model_router.h"
#include "serve/server.h"
#include "test_data.h"
#include "time_scale.h"

namespace kiln::serve {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string checkpoint() { return test_data::path("sd/tiny-sd1-f32.safetensors"); }
std::string taesd() { return test_data::path("sd/taesd-f32.safetensors"); }
std::string qwen2() { return test_data::path("models/qwen2-e64-Q8_0.gguf"); }

ServerOptions options() {
  ServerOptions o;
  o.n_parallel = 1;
  o.n_threads = 2;
  o.context.n_ctx = 256;
  o.context.n_ubatch = 16;
  ModelSpec text;
  text.name = "qwen2";
  text.path = qwen2();
  ModelSpec image;
  image.name = "sd";
  image.path = checkpoint();  // told an image model by its tensors (classify_models)
  image.taesd = taesd();
  o.models = {text, image};
  return o;
}

struct ImageServer {
  explicit ImageServer(const ServerOptions& o) : server(o) {
    auto bound = server.listen("127.0.0.1", 0);
    EXPECT_TRUE(bound.ok());
    port = bound.ok() ? *bound : 0;
    const Status st = server.attach_models();
    EXPECT_TRUE(st.ok()) << st.error().message;
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(120);
    return c;
  }
  httplib::Result post(const std::string& path, const json& body) const {
    return client().Post(path.c_str(), body.dump(), "application/json");
  }
  Server server;
  int port = 0;
};

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string b64_text(const json& v) {
  auto bytes = decode_base64(v.get<std::string>());
  EXPECT_TRUE(bytes.ok());
  return bytes.ok() ? std::string(bytes->begin(), bytes->end()) : std::string();
}

// `kiln image ARGS` writing OUT.png (OUT_1.png ... for a batch) in a folder of this test's own;
// the files' bytes in batch order.
std::vector<std::string> kiln_image(const std::string& args, int batch) {
  const std::string dir = testing::TempDir() + "kiln_images_test_" + std::to_string(getpid());
  std::system(("mkdir -p " + dir).c_str());
  const std::string out = dir + "/out.png";
  const std::string cmd = std::string(KILN_BINARY_DIR) + "/kiln image -m " + checkpoint() + " --taesd " + taesd() +
                          " -W 64 -H 64 " + args + " -o " + out + " 2>/dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::vector<std::string> files;
  for (int b = 0; b < batch; ++b)
    files.push_back(bytes_of(batch == 1 ? out : dir + "/out_" + std::to_string(b + 1) + ".png"));
  std::system(("rm -rf " + dir).c_str());
  return files;
}

TEST(ImageServer, OpenAiAndA1111ImagesEqualKilnImages) {
  ImageServer s(options());
  // /v1/models tells the kinds.
  auto listed = s.client().Get("/v1/models");
  ASSERT_TRUE(listed && listed->status == 200);
  std::map<std::string, std::string> kinds;
  const json listing = json::parse(listed->body);  // a temporary's ["data"] would dangle in the loop
  for (const json& m : listing["data"]) kinds[m["id"]] = m["kind"];
  EXPECT_EQ(kinds, (std::map<std::string, std::string>{{"qwen2", "text"}, {"sd", "image"}}));

  const std::vector<std::string> want = kiln_image("-p 'a red cat' --steps 2 -s 11 -b 2", 2);
  auto r = s.post("/v1/images/generations",
                  {{"model", "sd"}, {"prompt", "a red cat"}, {"n", 2}, {"size", "64x64"}, {"steps", 2}, {"seed", 11}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json got = json::parse(r->body);
  ASSERT_EQ(got["data"].size(), 2u);
  EXPECT_TRUE(got["created"].is_number());
  for (int b = 0; b < 2; ++b) EXPECT_TRUE(b64_text(got["data"][b]["b64_json"]) == want[b]) << "image " << b;

  // A1111's txt2img, its sampler under A1111's name, the model the server's first image model.
  r = s.post("/sdapi/v1/txt2img", {{"prompt", "a red cat"}, {"width", 64}, {"height", 64}, {"steps", 2},
                                   {"seed", 11}, {"sampler_name", "Euler a"}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json a1111 = json::parse(r->body);
  ASSERT_EQ(a1111["images"].size(), 1u);
  EXPECT_TRUE(b64_text(a1111["images"][0]) == want[0]);
  EXPECT_EQ(a1111["parameters"]["seed"], 11);
  EXPECT_EQ(json::parse(a1111["info"].get<std::string>())["all_seeds"], json::array({11}));

  // Image to image from the first image: OpenAI's edits form and A1111's img2img, as kiln image -i.
  const std::string init = testing::TempDir() + "kiln_images_init_" + std::to_string(getpid()) + ".png";
  std::ofstream(init, std::ios::binary) << want[0];
  const std::vector<std::string> edited = kiln_image("-p 'a blue cat' --steps 2 -s 5 -i " + init + " --strength 0.5", 1);
  std::remove(init.c_str());
  httplib::MultipartFormDataItems form = {{"image", want[0], "cat.png", "image/png"},
                                          {"prompt", "a blue cat", "", ""},
                                          {"model", "sd", "", ""},
                                          {"steps", "2", "", ""},
                                          {"seed", "5", "", ""},
                                          {"strength", "0.5", "", ""}};
  r = s.client().Post("/v1/images/edits", form);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_TRUE(b64_text(json::parse(r->body)["data"][0]["b64_json"]) == edited[0]);
  r = s.post("/sdapi/v1/img2img", {{"prompt", "a blue cat"}, {"steps", 2}, {"seed", 5}, {"denoising_strength", 0.5},
                                   {"init_images", {"data:image/png;base64," + encode_base64(std::span(
                                                        reinterpret_cast<const uint8_t*>(want[0].data()),
                                                        want[0].size()))}}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_TRUE(b64_text(json::parse(r->body)["images"][0]) == edited[0]);

  // JPEG output: a 64x64 JPEG.
  r = s.post("/v1/images/generations", {{"prompt", "a red cat"}, {"size", "64x64"}, {"steps", 1}, {"seed", 1},
                                        {"output_format", "jpeg"}, {"output_compression", 80}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const std::string jpeg = b64_text(json::parse(r->body)["data"][0]["b64_json"]);
  auto decoded = decode_image(std::span(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size()));
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(sniff_image_format(std::span(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size())), "jpeg");
  EXPECT_EQ(decoded->width, 64);
}

TEST(ImageServer, BadFieldsAre400sNamingTheFieldAndTheServerGoesOn) {
  ServerOptions o = options();
  o.max_body = size_t{64} << 20;  // the 30 MB init image reaches the parser
  ImageServer s(o);
  const json ok = {{"model", "sd"}, {"prompt", "a cat"}, {"size", "64x64"}, {"steps", 1}, {"seed", 3}};
  auto with = [&](const json& patch) {
    json b = ok;
    b.merge_patch(patch);
    return b;
  };
  const std::string huge(30u << 20, 'A');  // 30 MB of base64
  const struct {
    const char* path;
    json body;
    const char* field;
  } cases[] = {
      {"/v1/images/generations", with({{"sampler", "warp_drive"}}), "'sampler'"},
      {"/sdapi/v1/txt2img", {{"prompt", "x"}, {"sampler_name", "warp_drive"}}, "'sampler_name'"},
      {"/sdapi/v1/txt2img", {{"prompt", "x"}, {"scheduler", "sometimes"}}, "'scheduler'"},
      {"/v1/images/generations", with({{"size", "100x64"}}), "'size'"},  // not a multiple of 8
      {"/v1/images/generations", with({{"size", "72x64"}}), "'size'"},   // of 8, not of 64 (SD 1.x)
      {"/sdapi/v1/txt2img", {{"prompt", "x"}, {"width", 65}}, "'width'"},
      {"/v1/images/generations", with({{"n", kMaxImagesPerRequest + 1}}), "'n'"},
      {"/sdapi/v1/txt2img", {{"prompt", "x"}, {"batch_size", 100}}, "'batch_size'"},
      {"/v1/images/generations", with({{"response_format", "url"}}), "'response_format'"},
      {"/v1/images/generations", with({{"prompt", nullptr}}), "'prompt'"},
      {"/sdapi/v1/img2img", {{"prompt", "x"}, {"init_images", {huge}}}, "'init_images'"},
      {"/sdapi/v1/img2img", {{"prompt", "x"}, {"init_images", {"not base64!"}}}, "'init_images'"},
      {"/v1/images/generations", with({{"model", "qwen2"}}), "text model"},
      {"/v1/chat/completions", {{"model", "sd"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}}, "image model"},
  };
  for (const auto& c : cases) {
    auto r = s.post(c.path, c.body);
    ASSERT_TRUE(r) << c.path;
    EXPECT_EQ(r->status, 400) << c.path << " " << r->body.substr(0, 300);
    EXPECT_NE(r->body.find(c.field), std::string::npos) << r->body.substr(0, 300);
  }
  auto r = s.post("/v1/images/generations", ok);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

// The owners of sim0 now (GET /v1/memory): name -> resident bytes.
std::map<std::string, size_t> sim0_owners(const ImageServer& s) {
  auto r = s.client().Get("/v1/memory");
  std::map<std::string, size_t> out;
  EXPECT_TRUE(r && r->status == 200);
  if (!r) return out;
  const json body = json::parse(r->body);
  for (const json& d : body["devices"]) {
    if (d["device"] != "sim0") continue;
    for (const json& o : d["owners"])
      out[o["name"]] += o["weights"].get<size_t>() + o["kv"].get<size_t>() + o["compute"].get<size_t>();
  }
  return out;
}

TEST(ImageServer, ChatAndImagesTakeTurnsOnABudgetForOne) {
  ServerOptions roomy_options = options();
  roomy_options.device = "sim0";
  roomy_options.sim_devices = {{.name = "sim0", .capacity = size_t{2} << 30}};
  const json image = {{"model", "sd"}, {"prompt", "a cat"}, {"size", "64x64"}, {"steps", 1}, {"seed", 9}};
  auto chat = [](const std::string& prompt) {
    return json{{"model", "qwen2"}, {"prompt", prompt}, {"max_tokens", 6}, {"seed", 7}, {"temperature", 0.8}};
  };
  // The roomy server's answers, and what each model holds on sim0.
  std::vector<std::string> want_text;
  std::string want_image;
  size_t image_bytes = 0, text_bytes = 0, arena_bytes = 0;
  {
    ImageServer roomy(roomy_options);
    std::string prompt = "Once upon a time";
    for (int turn = 0; turn < 3; ++turn) {
      auto r = roomy.post("/v1/completions", chat(prompt));
      ASSERT_TRUE(r && r->status == 200);
      want_text.push_back(json::parse(r->body)["choices"][0]["text"]);
      prompt += want_text.back() + " and";
    }
    auto r = roomy.post("/v1/images/generations", image);
    ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "");
    want_image = b64_text(json::parse(r->body)["data"][0]["b64_json"]);
    for (const auto& [name, bytes] : sim0_owners(roomy)) {
      if (name.starts_with("sd ") || name.starts_with("taesd ")) image_bytes += bytes;  // "sd unet", "taesd decoder"
      else if (name.starts_with("compute")) arena_bytes = bytes;
      else text_bytes += bytes;
    }
  }
  ASSERT_GT(image_bytes, text_bytes);
  ASSERT_GT(text_bytes, size_t{1} << 20);
  // Room for the image model and the arena and half the text model: not both models.
  const size_t budget = image_bytes + arena_bytes + text_bytes / 2;
  ServerOptions tight_options = roomy_options;
  tight_options.budgets = {{.device = "sim0", .gib = double(budget) / double(size_t{1} << 30)}};
  ImageServer tight(tight_options);
  std::string prompt = "Once upon a time";
  int prompt_tokens_seen = 0;
  for (int turn = 0; turn < 3; ++turn) {
    auto r = tight.post("/v1/completions", chat(prompt));
    ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "");
    const json j = json::parse(r->body);
    ASSERT_EQ(j["choices"][0]["text"], want_text[turn]) << "turn " << turn;
    if (turn > 0) {  // the KV cache came back: only the new tokens were decoded
      EXPECT_LT(j["timings"]["prompt_n"].get<int>(), j["usage"]["prompt_tokens"].get<int>());
      EXPECT_GE(j["usage"]["prompt_tokens"].get<int>(), prompt_tokens_seen);
    }
    prompt_tokens_seen = j["usage"]["prompt_tokens"];
    prompt += want_text[turn] + " and";
    r = tight.post("/v1/images/generations", image);
    ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "");
    EXPECT_TRUE(b64_text(json::parse(r->body)["data"][0]["b64_json"]) == want_image) << "turn " << turn;
  }
  auto sim0 = tight.server.router()->devices()->find("sim0");
  ASSERT_TRUE(sim0.ok());
  const auto* sim = dynamic_cast<const SimDevice*>(*sim0);
  ASSERT_NE(sim, nullptr);
  EXPECT_LE(sim->peak_used(), budget);
  EXPECT_GT(sim->peak_used(), image_bytes) << "the budget held less than the image model: the test tests nothing";
}

// Waits until the running job reached step `step` (GET /sdapi/v1/progress); false after 60 s.
bool wait_for_step(const ImageServer& s, int step) {
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline) {
    auto r = s.client().Get("/sdapi/v1/progress");
    if (r && r->status == 200 && json::parse(r->body)["state"]["sampling_step"].get<int>() >= step) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// Waits until no job runs; the seconds it took.
double seconds_until_idle(const ImageServer& s) {
  const auto start = Clock::now();
  while (s.server.images()->progress().active) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return std::chrono::duration<double>(Clock::now() - start).count();
}

TEST(ImageServer, DisconnectAndInterruptStopTheJobWithinAStep) {
  ServerOptions o = options();
  o.queue_limit = 0;  // one job at a time, none waiting
  ImageServer s(o);
  const json long_job = {{"model", "sd"}, {"prompt", "a cat"}, {"size", "64x64"}, {"steps", 150}, {"seed", 1}};
  // One step's time: a 4-step job's less a 1-step job's, over 3 (the model opened before).
  auto timed = [&](int steps) {
    const auto t0 = Clock::now();
    auto got = s.post("/v1/images/generations", {{"prompt", "a cat"}, {"size", "64x64"}, {"steps", steps}, {"seed", 1}});
    EXPECT_TRUE(got && got->status == 200);
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  timed(1);
  const double one_step = std::max(0.0, timed(4) - timed(1)) / 3;

  // Interrupt: the request ends with 503, within a step (and a margin for the shared machine).
  std::atomic<int> status{0};
  std::thread job([&] {
    auto got = s.post("/sdapi/v1/txt2img", {{"prompt", "a cat"}, {"width", 64}, {"height", 64}, {"steps", 150}});
    status = got ? got->status : -1;
  });
  if (!wait_for_step(s, 2)) {
    job.join();
    FAIL() << "the job did not reach step 2";
  }
  // A second job while one runs, with --queue 0: 503.
  auto r = s.post("/v1/images/generations", long_job);
  EXPECT_TRUE(r && r->status == 503) << (r ? r->body : "no answer");
  auto i = s.client().Post("/sdapi/v1/interrupt", "", "application/json");
  EXPECT_TRUE(i && i->status == 200);
  const double interrupt_stop = seconds_until_idle(s);
  job.join();
  EXPECT_EQ(status, 503);
  EXPECT_LT(interrupt_stop, one_step + test::scaled_seconds(1)) << "one step took " << one_step << " s";

  // Disconnect: the client closes its connection at step 2; the job ends within a step of that.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(s.port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  const std::string body = long_job.dump();
  const std::string head = "POST /v1/images/generations HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                           "application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  const std::string request = head + body;
  ASSERT_EQ(write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  const bool reached = wait_for_step(s, 2);
  close(fd);
  ASSERT_TRUE(reached);
  const double disconnect_stop = seconds_until_idle(s);
  EXPECT_LT(disconnect_stop, one_step + test::scaled_seconds(1)) << "one step took " << one_step << " s";
  std::printf("  one step %.3f s; stopped %.3f s after the interrupt, %.3f s after the disconnect\n", one_step,
              interrupt_stop, disconnect_stop);
  // The next request is served.
  r = s.post("/v1/images/generations", {{"prompt", "a cat"}, {"size", "64x64"}, {"steps", 1}, {"seed", 1}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

TEST(ModelCatalog, ImageModelsAreToldByTheirTensorsAndPresetKeys) {
  std::vector<ModelSpec> models(2);
  models[0].name = "text";
  models[0].path = qwen2();
  models[1].name = "ckpt";
  models[1].path = checkpoint();
  ASSERT_TRUE(apply_models_preset("[parts]\ndiffusion-model = /m/unet.safetensors\nclip_l = /m/clip.safetensors\n"
                                  "taesd = /m/taesd.safetensors\n",
                                  "p.ini", models)
                  .ok());
  classify_models(models);
  ASSERT_EQ(models.size(), 3u);
  EXPECT_EQ(models[0].kind, ModelKind::Text);
  EXPECT_EQ(models[1].kind, ModelKind::Image);
  EXPECT_EQ(models[2].kind, ModelKind::Image);
  EXPECT_EQ(models[2].clip_l, "/m/clip.safetensors");
  EXPECT_EQ(models[2].taesd, "/m/taesd.safetensors");
}

}  // namespace
}  // namespace kiln::serve
