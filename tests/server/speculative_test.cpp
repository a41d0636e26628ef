// The server with speculative decoding returns the text it returns without, for the same seeds,
// greedy and at temperature 0.8, request by request: every fixture model drafting for itself (draft-simple), and the default
// model, whose greedy text loops, with ngram-simple. With several slots at once (their
// verification rows in each step's one batch) every request completes, drafts, and /metrics
// adds up their counts; their text is not compared there: prompts decoded in one batch with
// other slots' prompts may round differently from a prompt alone, with or without speculation. Responses carry llama-server's
// timings.draft_n and draft_n_accepted when something was drafted, /metrics sums them, and the
// flat request keys speculative.n_max/n_min/p_min are read and checked.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "in_process_server.h"
#include "test_data.h"

namespace kiln {
namespace {

using nlohmann::json;

constexpr int32_t kSlots = 3;

std::vector<std::string> conformance_prompts() {
  std::ifstream in(test_data::path("reference/cases.json"));
  const json cases = json::parse(in).at("cases");
  std::vector<std::string> out;
  for (const auto& c : cases) out.push_back(c.at("text").get<std::string>());
  return out;
}

std::shared_ptr<const Model> load(const std::string& path) {
  auto m = Model::load(path);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  return m.ok() ? *m : nullptr;
}

struct Served {
  std::unique_ptr<serve::Server> server;
  int port = 0;
};

// A server of `model` with kSlots slots; speculative decoding when spec has sources.
Served serve_model(std::shared_ptr<const Model> model, const SpeculativeOptions& spec = {},
                   const std::string& draft = "") {
  serve::ServerOptions o;
  o.n_parallel = kSlots;
  o.n_threads = 2;
  o.context.n_ctx = 256 * kSlots;
  o.speculative = spec;
  o.draft_model = draft;
  Served s;
  s.server = test::start_server(o, std::move(model), &s.port);
  return s;
}

// Sends every body to /completion, one after the other; the response bodies.
std::vector<json> complete_one_by_one(int port, const std::vector<json>& bodies) {
  std::vector<json> out;
  for (const json& body : bodies) {
    auto r = test::post_json(port, "/completion", body);
    out.push_back(r && r->status == 200 ? json::parse(r->body) : json{{"error", r ? r->body : "no response"}});
  }
  return out;
}

// Sends every body to /completion at once (one client thread each); the response bodies, in order.
std::vector<json> complete_concurrently(int port, const std::vector<json>& bodies) {
  std::vector<json> out(bodies.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < bodies.size(); ++i) {
    clients.emplace_back([&, i] {
      auto r = test::post_json(port, "/completion", bodies[i]);
      out[i] = r && r->status == 200 ? json::parse(r->body) : json{{"error", r ? r->body : "no response"}};
    });
  }
  for (auto& c : clients) c.join();
  return out;
}

std::vector<json> requests(const std::vector<std::string>& prompts, float temperature, int32_t n_predict) {
  std::vector<json> bodies;
  for (size_t i = 0; i < prompts.size(); ++i) {
    bodies.push_back({{"prompt", prompts[i]},
                      {"n_predict", n_predict},
                      {"temperature", temperature},
                      {"seed", 11 + i},
                      {"cache_prompt", false}});
  }
  return bodies;
}

// A counter of /metrics (-1 when missing).
double metric(int port, const std::string& name) {
  httplib::Client c("127.0.0.1", port);
  auto r = c.Get("/metrics");
  if (!r || r->status != 200) return -1;
  std::smatch m;
  const std::regex line("\n" + name + " ([0-9.e+]+)");
  return std::regex_search(r->body, m, line) ? std::stod(m[1]) : -1;
}

struct Totals {
  int64_t drafted = 0, accepted = 0;
};

// Compares the contents of `spec` with `plain` (each request alone) and adds up the draft counts
// of `spec`.
void expect_same_text(const std::vector<json>& plain, const std::vector<json>& spec, const std::string& what,
                      Totals& totals) {
  ASSERT_EQ(plain.size(), spec.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    ASSERT_TRUE(plain[i].contains("content")) << what << ": " << plain[i].dump();
    ASSERT_TRUE(spec[i].contains("content")) << what << ": " << spec[i].dump();
    EXPECT_EQ(spec[i]["content"], plain[i]["content"]) << what << ", request " << i;
    EXPECT_FALSE(plain[i]["timings"].contains("draft_n")) << "no speculation, no draft counts";
    const json& t = spec[i]["timings"];
    if (t.contains("draft_n")) {
      EXPECT_GT(t["draft_n"].get<int64_t>(), 0) << "draft_n appears only when something was drafted";
      EXPECT_LE(t["draft_n_accepted"].get<int64_t>(), t["draft_n"].get<int64_t>());
      totals.drafted += t["draft_n"].get<int64_t>();
      totals.accepted += t["draft_n_accepted"].get<int64_t>();
    }
  }
}

class ServerSpeculative : public ::testing::TestWithParam<std::string> {};

TEST_P(ServerSpeculative, SameTextWithTheModelAsItsOwnDraft) {
  const std::string path = test_data::path("models/" + GetParam() + ".gguf");
  auto model = load(path);
  ASSERT_TRUE(model);
  std::vector<std::string> prompts = conformance_prompts();
  prompts.resize(kSlots);
  SpeculativeOptions spec;
  spec.sources = {DraftSource::DraftSimple};
  spec.draft.n_max = 4;
  Served plain = serve_model(model);
  Served drafting = serve_model(model, spec, path);
  ASSERT_TRUE(plain.server && drafting.server);
  Totals all;
  for (const float temperature : {0.0f, 0.8f}) {
    const auto bodies = requests(prompts, temperature, 24);
    Totals t;
    expect_same_text(complete_one_by_one(plain.port, bodies), complete_one_by_one(drafting.port, bodies),
                     GetParam() + " at temperature " + std::to_string(temperature), t);
    std::printf("[ spec     ] %s, temp %.1f, %d slots: drafted %lld, accepted %lld\n", GetParam().c_str(),
                static_cast<double>(temperature), kSlots, static_cast<long long>(t.drafted),
                static_cast<long long>(t.accepted));
    EXPECT_GT(t.drafted, 0) << temperature;
    if (temperature > 0) {
      EXPECT_LT(t.accepted, t.drafted) << "sampling rejects some greedy drafts";
    }
    all.drafted += t.drafted;
    all.accepted += t.accepted;
  }
  // All slots at once: each completes with its drafts verified in shared batches.
  for (const json& r : complete_concurrently(drafting.port, requests(prompts, 0.8f, 24))) {
    ASSERT_TRUE(r.contains("content")) << r.dump();
    EXPECT_GT(r["timings"]["predicted_n"].get<int>(), 0) << r.dump();
    ASSERT_TRUE(r["timings"].contains("draft_n")) << r.dump();
    all.drafted += r["timings"]["draft_n"].get<int64_t>();
    all.accepted += r["timings"]["draft_n_accepted"].get<int64_t>();
  }
  EXPECT_EQ(metric(drafting.port, "llamacpp:spec_decode_num_draft_tokens_total"), static_cast<double>(all.drafted));
  EXPECT_EQ(metric(drafting.port, "llamacpp:spec_decode_num_accepted_tokens_total"),
            static_cast<double>(all.accepted));
  EXPECT_GT(metric(drafting.port, "llamacpp:spec_decode_num_drafts_total"), 0);
  EXPECT_EQ(metric(plain.port, "llamacpp:spec_decode_num_draft_tokens_total"), 0);
}

// Fixtures whose rows keep one float order in any batch (not Q4_K: without speculation its rows
// depend on the batch, so two concurrent plain runs may differ already).
INSTANTIATE_TEST_SUITE_P(Fixtures, ServerSpeculative,
                         ::testing::Values("qwen2-e64-Q8_0", "qwen3-e64-Q8_0", "llama-spm-e128-f32",
                                           "llama-spm-e256-Q4_0", "llama-spm-e256-Q6_K"));

TEST(ServerSpeculativeNgram, SameTextAndAcceptedDraftsWhereTheTextLoops) {
  auto model = load(std::string(KILN_SOURCE_DIR) + "/models/kjv-llama-q8_0.gguf");
  ASSERT_TRUE(model);
  SpeculativeOptions spec;
  spec.sources = {DraftSource::NgramSimple};
  spec.ngram_simple.size_n = 2;
  Served plain = serve_model(model);
  Served drafting = serve_model(model, spec);
  ASSERT_TRUE(plain.server && drafting.server);
  const std::vector<std::string> prompts = {"And God said unto Moses,", "And the LORD spake unto Aaron,"};
  for (const float temperature : {0.0f, 0.8f}) {
    const auto bodies = requests(prompts, temperature, 64);
    Totals t;
    expect_same_text(complete_one_by_one(plain.port, bodies), complete_one_by_one(drafting.port, bodies),
                     "ngram-simple at temperature " + std::to_string(temperature), t);
    std::printf("[ spec     ] default model, ngram-simple, temp %.1f: drafted %lld, accepted %lld\n",
                static_cast<double>(temperature), static_cast<long long>(t.drafted),
                static_cast<long long>(t.accepted));
    if (temperature == 0) {
      EXPECT_GT(t.drafted, 0);
      EXPECT_GT(t.accepted, 0) << "the greedy text loops";
    }
  }
}

TEST(ServerSpeculativeRequest, DraftLimitsFromTheRequest) {
  const std::string path = test_data::path("models/qwen2-e64-Q8_0.gguf");
  auto model = load(path);
  ASSERT_TRUE(model);
  SpeculativeOptions spec;
  spec.sources = {DraftSource::DraftSimple};
  Served s = serve_model(model, spec, path);
  ASSERT_TRUE(s.server);
  json body = {{"prompt", conformance_prompts()[0]}, {"n_predict", 16}, {"temperature", 0}};
  const auto drafted = complete_concurrently(s.port, {body}).at(0);
  ASSERT_TRUE(drafted.contains("content")) << drafted.dump();
  EXPECT_GT(drafted["timings"].value("draft_n", 0), 0);

  body["speculative.n_max"] = 0;  // no draft-model drafts: no draft counts, the same text
  const auto none = complete_concurrently(s.port, {body}).at(0);
  ASSERT_TRUE(none.contains("content")) << none.dump();
  EXPECT_EQ(none["content"], drafted["content"]);
  EXPECT_FALSE(none["timings"].contains("draft_n")) << none["timings"].dump();

  // At most one draft token a step (the default is 3): the model drafting for itself greedily is
  // always right, so fewer steps draft fewer tokens.
  body["speculative.n_max"] = 1;
  const auto one = complete_concurrently(s.port, {body}).at(0);
  ASSERT_TRUE(one.contains("content")) << one.dump();
  EXPECT_EQ(one["content"], drafted["content"]);
  EXPECT_GT(one["timings"].value("draft_n", 0), 0);
  EXPECT_LT(one["timings"].value("draft_n", 0), drafted["timings"].value("draft_n", 0));

  for (const auto& [key, value] : {std::pair<const char*, json>{"speculative.p_min", 1.5},
                                   {"speculative.n_max", -1}, {"speculative.n_min", "two"}}) {
    json bad = {{"prompt", "x"}, {"n_predict", 1}, {key, value}};
    auto r = test::post_json(s.port, "/completion", bad);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << key;
    EXPECT_NE(r->body.find(key), std::string::npos) << r->body;
  }
}

TEST(ServerSpeculativeOptions, IncompatibleDraftModelIsRefusedAtAttach) {
  serve::ServerOptions o;
  o.n_parallel = 1;
  o.context.n_ctx = 256;
  o.speculative.sources = {DraftSource::DraftSimple};
  o.draft_model = test_data::path("models/llama-spm-e128-f32.gguf");  // another vocabulary
  serve::Server server(o);
  const Status st = server.attach(test::qwen2_model());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("cannot draft"), std::string::npos) << st.error().message;
}

}  // namespace
}  // namespace kiln
