// A server of many models (ServerOptions::models, as `kiln serve -m NAME=PATH ...`): two fixture
// models on a sim0 budget that holds one of them answer every request as a server with room for
// both does, evicting each other and restoring their prompt caches; a budget below one model's
// weights is refused with the numbers and the server goes on; a request for the other model while
// one streams waits for the stream's end (or gets 503 at --residency-timeout); unknown models are
// 404; /v1/models tells each model's state; the preset file's keys.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <variant>

#include "backends/sim/sim_device.h"
#include "image/data_uri.h"
#include "llm/device_weights.h"
#include "http_client.h"
#include "serve/model_catalog.h"
#include "serve/model_router.h"
#include "serve/server_state.h"
#include "serve/server.h"
#include "test_data.h"
#include "time_scale.h"

namespace kiln::serve {
namespace {

using nlohmann::json;

// On sim0 each fixture's weights take about 10 MiB, its KV cache (256 cells) and input buffer a
// little more; the device's one compute arena (16 rows of 151,936 logits), shared by the models,
// 9.7 MiB. 0.025 GiB (25.6 MiB) holds one model and the arena, not two models and the arena
// (about 31 MiB; with an arena per model it was about 40).
constexpr double kRoomForOne = 0.025;
constexpr double kRoomForBoth = 1.0;

ModelSpec spec(const std::string& name, const std::string& path) {
  ModelSpec m;
  m.name = name;
  m.path = path;
  return m;
}

// `residency_timeout`: long enough by default that no request of these tests waits that long.
ServerOptions options(double budget_gib, int32_t residency_timeout = test::scaled_seconds(30)) {
  ServerOptions o;
  o.n_parallel = 1;
  o.n_threads = 2;
  o.context.n_ctx = 256;
  o.context.n_ubatch = 16;  // the compute arena holds n_ubatch rows of 151,936 logits
  o.device = "sim0";
  o.sim_devices = {{.name = "sim0", .capacity = size_t{256} << 20}};
  o.budgets = {{.device = "sim0", .gib = budget_gib}};
  o.residency_timeout_seconds = residency_timeout;
  o.models = {spec("qwen2", test_data::path("models/qwen2-e64-Q8_0.gguf")),
              spec("qwen3", test_data::path("models/qwen3-e64-Q8_0.gguf"))};
  return o;
}

struct ModelsServer {
  explicit ModelsServer(const ServerOptions& o) : server(o) {
    auto bound = server.listen("127.0.0.1", 0);
    EXPECT_TRUE(bound.ok());
    port = bound.ok() ? *bound : 0;
    const Status st = server.attach_models();
    EXPECT_TRUE(st.ok()) << st.error().message;
  }
  httplib::Result post(const std::string& path, const json& body) const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(60);
    return c.Post(path.c_str(), body.dump(), "application/json");
  }
  // GET /v1/memory: sim0's owners.
  json sim0_owners() const {
    httplib::Client c("127.0.0.1", port);
    auto r = c.Get("/v1/memory");
    EXPECT_TRUE(r && r->status == 200);
    if (!r) return json::array();
    const json body = json::parse(r->body);  // a temporary's ["devices"] would dangle in the loop
    for (const json& d : body["devices"])
      if (d["device"] == "sim0") return d["owners"];
    ADD_FAILURE() << "no sim0 in " << r->body;
    return json::array();
  }
  // The compute bytes of sim0's compute arena, checking that it is the only one: one owner line
  // "compute (sim0)", and no model holds more compute than its input buffer.
  size_t arena_bytes() const {
    size_t arena = 0;
    int arenas = 0;
    const json owners = sim0_owners();
    for (const json& o : owners) {
      if (o["name"] == "compute (sim0)") {
        arena = o["compute"];
        ++arenas;
      } else {
        EXPECT_LT(o["compute"].get<size_t>(), size_t{1} << 20) << "a compute arena of its own: " << o;
      }
    }
    EXPECT_EQ(arenas, 1) << owners;
    return arena;
  }
  // GET /v1/models: each model's status value by name.
  std::map<std::string, std::string> states() const {
    httplib::Client c("127.0.0.1", port);
    auto r = c.Get("/v1/models");
    std::map<std::string, std::string> out;
    EXPECT_TRUE(r && r->status == 200);
    if (!r) return out;
    const json body = json::parse(r->body);  // a temporary's ["data"] would dangle in the loop
    for (const json& m : body["data"]) out[m["id"]] = m["status"]["value"];
    return out;
  }
  Server server;
  int port = 0;
};

json completion(const std::string& model, const std::string& prompt) {
  return {{"model", model}, {"prompt", prompt}, {"max_tokens", 6}, {"seed", 7}, {"temperature", 0.8}};
}

// The answer's text and its timings.prompt_n (prompt tokens decoded, the cached ones not).
struct Answer {
  std::string text;
  int prompt_n = -1;
  int prompt_tokens = -1;
};

Answer answer(const ModelsServer& s, const json& body) {
  auto r = s.post("/v1/completions", body);
  EXPECT_TRUE(r);
  if (!r) return {};
  EXPECT_EQ(r->status, 200) << r->body;
  if (r->status != 200) return {};
  const json j = json::parse(r->body);
  EXPECT_EQ(j["model"], body["model"]);
  return {j["choices"][0]["text"], j["timings"]["prompt_n"], j["usage"]["prompt_tokens"]};
}

// 50 alternating requests (25 turns of two conversations, which grow for 8 turns and then start
// again, so that they stay within the 256-cell context). Each answer equals the roomy server's, and
// each returning conversation reuses its restored KV cache (prompt_n counts only the new tokens).
TEST(ManyModels, AlternatingRequestsOnABudgetForOneEqualARoomyServer) {
  ModelsServer roomy(options(kRoomForBoth)), tight(options(kRoomForOne));
  const std::map<std::string, std::string> openings = {{"qwen2", "Once upon a time"}, {"qwen3", "The sea was"}};
  std::map<std::string, std::string> conversation;
  for (int turn = 0; turn < 25; ++turn) {
    if (turn % 8 == 0) conversation = openings;  // a prefix of the cached conversation: still reused
    for (const char* model : {"qwen2", "qwen3"}) {
      std::string& prompt = conversation[model];
      const Answer want = answer(roomy, completion(model, prompt));
      const Answer got = answer(tight, completion(model, prompt));
      ASSERT_EQ(got.text, want.text) << model << " turn " << turn;
      EXPECT_EQ(got.prompt_n, want.prompt_n) << model << " turn " << turn;
      if (turn > 0) {
        EXPECT_LT(got.prompt_n, got.prompt_tokens) << "the restored prompt cache was not used";
      }
      // The other model was evicted to make room, and keeps its state (sleeping, not unloaded).
      const auto states = tight.states();
      EXPECT_EQ(states.at(model), "loaded");
      if (turn > 0 || std::string(model) == "qwen3") {
        EXPECT_EQ(states.at(std::string(model) == "qwen2" ? "qwen3" : "qwen2"), "sleeping");
      }
      prompt += got.text + " and";
    }
  }
  const auto roomy_states = roomy.states();
  EXPECT_EQ(roomy_states.at("qwen2"), "loaded");
  EXPECT_EQ(roomy_states.at("qwen3"), "loaded");
  // The device never held more than the budget, restores included.
  auto sim0 = tight.server.router()->devices()->find("sim0");
  ASSERT_TRUE(sim0.ok());
  const auto* sim = dynamic_cast<const SimDevice*>(*sim0);
  ASSERT_NE(sim, nullptr);
  EXPECT_LE(sim->peak_used(), static_cast<size_t>(kRoomForOne * double(size_t{1} << 30)));
  EXPECT_GT(sim->peak_used(), size_t{16} << 20) << "the budget held less than one model: the test tests nothing";
}

// Both models split (-ngl 2: their last layer and output layer on sim0, the rest on the CPU), on
// a sim0 budget for one model's share: alternating requests answer as a roomy server of unsplit
// models does (the split computes the same bits), each request restoring only the layers it
// evicted on sim0 (the CPU shares stay), and sim0 never holds more than the budget.
TEST(ManyModels, SplitModelsOnABudgetForOneAnswerAsUnsplitOnes) {
  ServerOptions split = options(kRoomForOne);
  split.split.n_gpu_layers = 2;
  ModelsServer roomy(options(kRoomForBoth)), tight(split);
  for (int turn = 0; turn < 4; ++turn) {
    for (const char* model : {"qwen2", "qwen3"}) {
      const std::string prompt = std::string("Turn ") + std::to_string(turn) + " of the story";
      const Answer want = answer(roomy, completion(model, prompt));
      const Answer got = answer(tight, completion(model, prompt));
      ASSERT_EQ(got.text, want.text) << model << " turn " << turn;
      if (turn > 0 || std::string(model) == "qwen3") {
        EXPECT_EQ(tight.states().at(std::string(model) == "qwen2" ? "qwen3" : "qwen2"), "sleeping");
      }
    }
  }
  // Each model has an owner of its own on sim0 (named as its file names it), beside the scratch and
  // the device's arena.
  int on_sim0 = 0;
  for (const json& o : tight.sim0_owners()) {
    const std::string name = o["name"];
    on_sim0 += name.find("scratch") == std::string::npos && name != "compute (sim0)";
  }
  EXPECT_EQ(on_sim0, 2) << tight.sim0_owners();
  auto sim0 = tight.server.router()->devices()->find("sim0");
  ASSERT_TRUE(sim0.ok());
  const auto* sim = dynamic_cast<const SimDevice*>(*sim0);
  ASSERT_NE(sim, nullptr);
  EXPECT_LE(sim->peak_used(), static_cast<size_t>(kRoomForOne * double(size_t{1} << 30)));
}

// GET /v1/memory: sim0's "counted" bytes.
size_t sim0_counted(const ModelsServer& s) {
  httplib::Client c("127.0.0.1", s.port);
  auto r = c.Get("/v1/memory");
  EXPECT_TRUE(r && r->status == 200);
  if (!r) return 0;
  const json body = json::parse(r->body);
  for (const json& d : body["devices"])
    if (d["device"] == "sim0") return d["counted"];
  return 0;
}

// A model streamed through sim0 (the preset key `segmented`): on a budget for two thirds of its
// six layers beside the rest of what it holds there, its layers go in segments, each an owner of
// its own in /v1/memory; its answers equal a roomy server's and sim0 never holds more than the
// budget.
TEST(ManyModels, ASegmentedModelAnswersAsAWholeOne) {
  const std::string path = test_data::path("segmented/llama-spm-e64-l6.gguf");
  ServerOptions roomy_options = options(kRoomForBoth);
  roomy_options.models = {spec("l6", path)};
  ModelsServer roomy(roomy_options);
  const std::vector<std::string> prompts = {"Once upon a time", "The sea was", "Once upon a time there"};
  std::vector<std::string> want;
  for (const std::string& p : prompts) want.push_back(answer(roomy, completion("l6", p)).text);
  // One layer's weights on sim0 (the six are alike): the model's whole share less what the
  // segmented server keeps.
  auto model = Model::load(path);
  ASSERT_TRUE(model.ok());
  auto sim0_whole = roomy.server.router()->devices()->find("sim0");
  ASSERT_TRUE(sim0_whole.ok());
  DecoderWeights one = (*model)->weights();
  for_each_weight_slot(one, [](Weight& w, WeightUse, int64_t layer) {
    if (layer != 0) w = Weight{};
  });
  const size_t layer = DeviceWeights::footprint(one, **sim0_whole, {}, nullptr).total();
  const size_t budget = sim0_counted(roomy) - 2 * layer + (size_t{32} << 10);

  ServerOptions tight_options = options(static_cast<double>(budget) / double(size_t{1} << 30));
  tight_options.models = {spec("l6", path)};
  tight_options.models[0].segmented = true;
  ModelsServer tight(tight_options);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(answer(tight, completion("l6", prompts[i])).text, want[i]) << i;
  int segments = 0;
  for (const json& o : tight.sim0_owners()) segments += o["name"].get<std::string>().find("(layers ") != std::string::npos;
  EXPECT_GE(segments, 3) << tight.sim0_owners();
  auto sim0 = tight.server.router()->devices()->find("sim0");
  ASSERT_TRUE(sim0.ok());
  const auto* sim = dynamic_cast<const SimDevice*>(*sim0);
  ASSERT_NE(sim, nullptr);
  EXPECT_LE(sim->peak_used(), budget);
}

// The models on sim0 take turns in one compute arena: one owner line in /v1/memory whose bytes
// are the larger of the two models' worst cases (what each needs alone), not their sum. The
// answers equal those of servers of one model each.
TEST(ManyModels, TheModelsOfADeviceShareOneComputeArenaSizedForTheLargest) {
  const ServerOptions both = options(kRoomForBoth);
  ServerOptions only2 = both, only3 = both;
  only2.models = {both.models[0]};
  only3.models = {both.models[1]};
  ModelsServer pair(both), alone2(only2), alone3(only3);
  const json ask2 = completion("qwen2", "Once upon a time"), ask3 = completion("qwen3", "The sea was");
  const std::string want2 = answer(alone2, ask2).text, want3 = answer(alone3, ask3).text;
  const size_t a2 = alone2.arena_bytes(), a3 = alone3.arena_bytes();
  ASSERT_GT(a2, size_t{16 * 151936 * 4});
  ASSERT_GT(a3, size_t{16 * 151936 * 4});

  EXPECT_EQ(answer(pair, ask2).text, want2);
  EXPECT_EQ(pair.arena_bytes(), a2);
  EXPECT_EQ(answer(pair, ask3).text, want3);
  EXPECT_EQ(pair.arena_bytes(), std::max(a2, a3)) << "one arena, the larger worst case (not the sum, " << a2 + a3
                                                  << ")";
  EXPECT_EQ(pair.states(), (std::map<std::string, std::string>{{"qwen2", "loaded"}, {"qwen3", "loaded"}}));
  // Each model's backend has scratch of its own, named for its model (both were "sim0 scratch").
  std::set<std::string> names;
  for (const json& o : pair.sim0_owners())
    EXPECT_TRUE(names.insert(o["name"].get<std::string>()).second) << o;
  EXPECT_TRUE(names.count("sim0 scratch (qwen2)") && names.count("sim0 scratch (qwen3)"))
      << pair.sim0_owners();
}

// Requests for two models at once take turns in the one arena: every answer is the one each model
// gives to the same requests one at a time (the same order per model), and nothing deadlocks.
TEST(ManyModels, ConcurrentRequestsForTwoModelsTakeTurnsInTheArena) {
  ModelsServer sequential(options(kRoomForBoth)), concurrent(options(kRoomForBoth));
  const std::vector<std::string> prompts = {"One", "Two cats", "Three red birds", "Four"};
  std::map<std::string, std::vector<std::string>> want, got;
  for (const char* model : {"qwen2", "qwen3"})
    for (const std::string& p : prompts) want[model].push_back(answer(sequential, completion(model, p)).text);
  for (const char* model : {"qwen2", "qwen3"}) got[model].resize(prompts.size());  // before any thread reads `got`
  std::vector<std::thread> clients;
  for (const char* model : {"qwen2", "qwen3"}) {
    clients.emplace_back([&, model, texts = &got.at(model)] {
      for (size_t i = 0; i < prompts.size(); ++i) (*texts)[i] = answer(concurrent, completion(model, prompts[i])).text;
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(got, want);
  EXPECT_EQ(concurrent.arena_bytes(), sequential.arena_bytes());
}

// Idle sleep per model: the device's arena goes with the last model to sleep (while the other
// model is awake it may be released too: the next pass allocates it again), and comes back with
// the next request.
TEST(ManyModels, IdleSleepOfEveryModelFreesTheDevicesArena) {
  ServerOptions o = options(kRoomForBoth);
  for (ModelSpec& m : o.models) m.sleep_idle_seconds = 1;
  ModelsServer s(o);
  const json ask2 = completion("qwen2", "Once upon a time"), ask3 = completion("qwen3", "The sea was");
  EXPECT_FALSE(answer(s, ask2).text.empty());
  EXPECT_FALSE(answer(s, ask3).text.empty());
  EXPECT_GT(s.arena_bytes(), size_t{16 * 151936 * 4});
  const auto deadline = std::chrono::steady_clock::now() + test::scaled(std::chrono::seconds(10));
  while (s.states() != std::map<std::string, std::string>{{"qwen2", "sleeping"}, {"qwen3", "sleeping"}} &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(s.states(), (std::map<std::string, std::string>{{"qwen2", "sleeping"}, {"qwen3", "sleeping"}}));
  EXPECT_EQ(s.arena_bytes(), 0u) << "both models sleep, the arena stayed";
  EXPECT_FALSE(answer(s, ask2).text.empty());
  EXPECT_GT(s.arena_bytes(), size_t{16 * 151936 * 4});
}

// With --fit on (the default) a model whose weights exceed the budget loads split, its first
// layers on the CPU; with --fit off it is refused with the numbers and the server goes on.
TEST(ManyModels, ABudgetBelowOneModelsWeightsIsFittedOrRefused) {
  {
    ModelsServer fitted(options(0.01));
    const Answer a = answer(fitted, completion("qwen2", "Hello"));
    EXPECT_FALSE(a.text.empty());
    EXPECT_EQ(fitted.states().at("qwen2"), "loaded");
  }
  ServerOptions no_fit = options(0.01);
  no_fit.split.fit = false;
  ModelsServer s(no_fit);
  for (int i = 0; i < 2; ++i) {
    auto r = s.post("/v1/completions", completion("qwen2", "Hello"));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 503);
    const std::string message = json::parse(r->body)["error"]["message"];
    EXPECT_NE(message.find("cannot load model 'qwen2'"), std::string::npos) << message;
    EXPECT_NE(message.find("budget"), std::string::npos) << message;
    EXPECT_EQ(s.states().at("qwen2"), "unloaded");
  }
  httplib::Client c("127.0.0.1", s.port);
  auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

TEST(ManyModels, UnknownOrMissingModelIsAnOpenAiError) {
  ModelsServer s(options(kRoomForBoth));
  auto r = s.post("/v1/chat/completions", {{"model", "nope"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  const json e = json::parse(r->body)["error"];
  EXPECT_EQ(e["code"], 404);
  EXPECT_EQ(e["type"], "not_found_error");
  EXPECT_NE(e["message"].get<std::string>().find("'nope'"), std::string::npos);
  r = s.post("/v1/completions", {{"prompt", "hi"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  r = s.post("/models/load", {{"model", "nope"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
}

TEST(ManyModels, LoadUnloadAndModelsMax) {
  ServerOptions o = options(kRoomForBoth);
  o.models_max = 1;
  ModelsServer s(o);
  EXPECT_EQ(s.states(), (std::map<std::string, std::string>{{"qwen2", "unloaded"}, {"qwen3", "unloaded"}}));
  auto r = s.post("/models/load", {{"model", "qwen2"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body), (json{{"success", true}}));
  EXPECT_EQ(s.states().at("qwen2"), "loaded");
  r = s.post("/models/load", {{"model", "qwen2"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  // --models-max 1: loading qwen3 unloads qwen2 (no request holds it).
  EXPECT_FALSE(answer(s, completion("qwen3", "Hi")).text.empty());
  EXPECT_EQ(s.states(), (std::map<std::string, std::string>{{"qwen2", "unloaded"}, {"qwen3", "loaded"}}));
  r = s.post("/models/unload", {{"model", "qwen3"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(s.states().at("qwen3"), "unloaded");
  r = s.post("/models/unload", {{"model", "qwen3"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
}

// Streams a completion of `model`, pausing its reading after the first chunk until `release`;
// the concatenated text.
std::string stream_paused(int port, const std::string& model, const std::string& prompt, std::atomic<bool>& started,
                          std::atomic<bool>& release) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  json body = completion(model, prompt);
  body["max_tokens"] = 24;
  body["stream"] = true;
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  std::string raw;
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    raw.append(data, n);
    started = true;
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return true;
  };
  auto r = c.send(req);
  EXPECT_TRUE(r);
  std::string text;
  for (size_t at = raw.find("data: "); at != std::string::npos; at = raw.find("data: ", at + 6)) {
    const size_t end = raw.find("\n\n", at);
    const std::string payload = raw.substr(at + 6, end - at - 6);
    if (payload == "[DONE]") break;
    text += json::parse(payload)["choices"][0]["text"].get<std::string>();
  }
  return text;
}

// qwen2 pinned as a request in flight pins it: the test takes the router's lease itself, because a
// stream's own lease ends as soon as its last event is handed to the socket (a paused client does
// not hold it), and on a quiet machine 24 tokens take less time than the checks below.
std::shared_ptr<ServerState> hold(const ModelsServer& s, const std::string& model) {
  auto got = s.server.router()->acquire(model, true);
  EXPECT_TRUE(std::holds_alternative<std::shared_ptr<ServerState>>(got));
  auto* st = std::get_if<std::shared_ptr<ServerState>>(&got);
  return st ? *st : nullptr;
}

// While qwen2 streams (and its request pins it), a request for qwen3 on a budget for one waits: it
// is served once qwen2's pins end, and qwen2's tokens equal qwen2's alone.
TEST(ManyModels, ARequestForAnotherModelWaitsForTheStreamingOne) {
  ServerOptions roomy_o = options(kRoomForBoth);
  ModelsServer roomy(roomy_o), tight(options(kRoomForOne));
  json alone = completion("qwen2", "Far away");
  alone["max_tokens"] = 24;
  const std::string a_alone = answer(roomy, alone).text;
  const std::string b_alone = answer(roomy, completion("qwen3", "Near")).text;

  std::atomic<bool> started{false}, release{false}, b_done{false};
  std::string a_text;
  std::thread a([&] { a_text = stream_paused(tight.port, "qwen2", "Far away", started, release); });
  while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::shared_ptr<ServerState> held = hold(tight, "qwen2");
  ASSERT_NE(held, nullptr);
  Answer b;
  std::thread bt([&] {
    b = answer(tight, completion("qwen3", "Near"));
    b_done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  EXPECT_FALSE(b_done) << "qwen3 was served while a request for qwen2 held the room";
  release = true;
  a.join();
  held.reset();
  bt.join();
  EXPECT_EQ(a_text, a_alone);
  EXPECT_EQ(b.text, b_alone);
}

// The same with --residency-timeout 1: the waiting request gets 503 with the numbers.
TEST(ManyModels, ARequestThatCannotGetRoomInTimeGets503) {
  ModelsServer tight(options(kRoomForOne, 1));
  ASSERT_FALSE(answer(tight, completion("qwen3", "Warm")).text.empty());  // qwen3 loaded, then evicted below
  std::shared_ptr<ServerState> held = hold(tight, "qwen2");
  ASSERT_NE(held, nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = tight.post("/v1/completions", completion("qwen3", "Near"));
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  held.reset();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503) << r->body;
  const std::string message = json::parse(r->body)["error"]["message"];
  EXPECT_NE(message.find("no room for model 'qwen3'"), std::string::npos) << message;
  EXPECT_NE(message.find("budget"), std::string::npos) << message;
  EXPECT_GE(waited, 0.9);
  // Once qwen2's pin ended, qwen3 comes back.
  EXPECT_FALSE(answer(tight, completion("qwen3", "Near")).text.empty());
}

// Each model of the listing says what its requests may carry, as the one model of a server of one
// does, from its own mmproj (preset key mmproj), before it is loaded and after; the model with the
// audio mmproj answers an input_audio part.
TEST(ManyModels, EachModelReportsItsModalities) {
  const std::string text = test_data::path("models/llama-spm-e128-f32.gguf");
  const std::string data = std::string(KILN_SOURCE_DIR) + "/tests/conformance/data/";
  ServerOptions o = options(kRoomForBoth);
  o.models = {spec("plain", text), spec("hears", text), spec("sees", text)};
  o.models[1].mmproj = data + "mtmd-audio/mmproj-ultravox.gguf";
  o.models[2].mmproj = data + "mtmd/mmproj-mlp.gguf";
  o.context.n_ctx = 512;  // the audio's 375 positions
  o.chat_template_source = "{% for m in messages %}USER: {{ m['content'] }}\nASSISTANT:{% endfor %}";
  ModelsServer s(o);
  auto modalities = [&] {
    httplib::Client c("127.0.0.1", s.port);
    auto r = c.Get("/v1/models");
    EXPECT_TRUE(r && r->status == 200);
    std::map<std::string, std::pair<bool, bool>> out;  // name: vision, audio
    if (!r) return out;
    const json body = json::parse(r->body);
    for (const json& m : body["data"]) out[m["id"]] = {m["modalities"]["vision"], m["modalities"]["audio"]};
    return out;
  };
  const std::map<std::string, std::pair<bool, bool>> want = {
      {"plain", {false, false}}, {"hears", {false, true}}, {"sees", {true, false}}};
  EXPECT_EQ(modalities(), want);
  EXPECT_EQ(s.states().at("hears"), "unloaded");

  std::ifstream wav(std::string(KILN_SOURCE_DIR) + "/tests/data/audio/voiced-16k.wav", std::ios::binary);
  const std::string bytes{std::istreambuf_iterator<char>(wav), {}};
  const json audio_part = {{"type", "input_audio"},
                           {"input_audio",
                            {{"data", encode_base64(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()))},
                             {"format", "wav"}}}};
  const json chat = {{"messages", {{{"role", "user"}, {"content", {audio_part}}}}}, {"max_tokens", 2}};
  json hears = chat, plain = chat;
  hears["model"] = "hears";
  plain["model"] = "plain";
  auto r = s.post("/v1/chat/completions", hears);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  r = s.post("/v1/chat/completions", plain);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;  // no audio encoder
  EXPECT_EQ(s.states().at("hears"), "loaded");
  EXPECT_EQ(modalities(), want);
}

TEST(ModelCatalog, PresetKeysApplyPerModelAndUnknownKeysAreRefused) {
  std::vector<ModelSpec> models = {spec("a", "/m/a.gguf")};
  const std::string preset =
      "version = 1\n"
      "; comment\n"
      "[*]\n"
      "c = 512\n"
      "[a]\n"
      "np = 2\n"
      "kvu = true\n"
      "pin = true\n"
      "ngl = 10\n"
      "split-mode = layer\n"
      "ts = 1,3\n"
      "mg = 1\n"
      "override-tensor = ffn_up=cpu,ffn_down=Vulkan0\n"
      "fit = off\n"
      "mmproj = /m/a-mmproj.gguf\n"
      "[b]\n"
      "model = /m/b.gguf\n"
      "ctx-size = 1024\n"
      "parallel = -1\n"
      "LLAMA_ARG_KV_UNIFIED_PER_SLOT = 256\n"
      "load-on-startup = true\n"
      "sleep-idle-seconds = 30\n";
  ASSERT_TRUE(apply_models_preset(preset, "p.ini", models).ok());
  ASSERT_EQ(models.size(), 2u);
  EXPECT_EQ(models[0].n_ctx, 512);
  EXPECT_EQ(models[0].n_parallel, 2);
  EXPECT_EQ(models[0].kv_unified, true);
  EXPECT_EQ(models[0].n_gpu_layers, 10);
  EXPECT_EQ(models[0].split_mode, SplitMode::Layer);
  EXPECT_EQ(models[0].tensor_split, (std::vector<float>{1, 3}));
  EXPECT_EQ(models[0].main_gpu, 1);
  EXPECT_EQ(models[0].overrides, (std::vector<std::pair<std::string, std::string>>{{"ffn_up", "cpu"}, {"ffn_down", "vulkan0"}}));
  EXPECT_EQ(models[0].fit, false);
  EXPECT_EQ(models[0].mmproj, "/m/a-mmproj.gguf");
  EXPECT_EQ(models[1].mmproj, std::nullopt);
  EXPECT_EQ(models[1].n_gpu_layers, std::nullopt);
  EXPECT_FALSE(apply_models_preset("[a]\nngl = lots\n", "p.ini", models).ok());
  EXPECT_FALSE(apply_models_preset("[a]\nsm = row\n", "p.ini", models).ok());
  EXPECT_TRUE(models[0].pin);
  EXPECT_EQ(models[1].name, "b");
  EXPECT_EQ(models[1].path, "/m/b.gguf");
  EXPECT_EQ(models[1].n_ctx, 1024);
  EXPECT_EQ(models[1].n_parallel, ServerOptions::kParallelAuto);
  EXPECT_EQ(models[1].kv_unified, std::nullopt);
  EXPECT_EQ(models[1].kv_unified_per_slot, 256);
  EXPECT_TRUE(models[1].load_on_startup);
  EXPECT_EQ(models[1].sleep_idle_seconds, 30);

  auto refused = apply_models_preset("[a]\nchat-template = chatml\n", "p.ini", models);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("p.ini:2: key 'chat-template' is not supported"), std::string::npos)
      << refused.error().message;
  EXPECT_FALSE(apply_models_preset("[c]\nc = 64\n", "p.ini", models).ok());  // no model path
  EXPECT_FALSE(apply_models_preset("[a]\nnp = many\n", "p.ini", models).ok());
  // Issue 30: another format version, and a NUL byte in a value (a path cut short), were accepted.
  auto version = apply_models_preset("version = 2\n[a]\nc = 64\n", "p.ini", models);
  ASSERT_FALSE(version.ok());
  EXPECT_NE(version.error().message.find("p.ini:1: version 2 (kiln reads version = 1)"), std::string::npos)
      << version.error().message;
  auto nul = apply_models_preset(std::string("[b]\nmodel = /m/b.gguf\0.evil\n", 28), "p.ini", models);
  ASSERT_FALSE(nul.ok());
  EXPECT_NE(nul.error().message.find("p.ini:2: a NUL byte"), std::string::npos) << nul.error().message;
  EXPECT_FALSE(parse_model_flag("no-equals-sign").ok());
  EXPECT_FALSE(check_models({spec("x", "1"), spec("x", "2")}).ok());
}

}  // namespace
}  // namespace kiln::serve
