// Greedy text under a grammar equals llama.cpp's: every case of tests/grammar/data/greedy_cases.json
// (GBNF grammars and JSON schemas, each with a prompt and n_predict) sent to kiln's /completion as
// make_greedy_refs.py sent it to llama-server, on the models that script ran (the greedy-reference
// fixtures and the default model), compared byte for byte with greedy_refs.json (the pairs listed
// under known_differences in greedy_cases.json are asserted to still differ, so a fix shows).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "in_process_server.h"
#include "test_data.h"

namespace kiln::test {
namespace {

using ordered_json = nlohmann::ordered_json;  // a schema's property order shapes its grammar

const std::string kData = std::string(KILN_SOURCE_DIR) + "/tests/grammar/data/";

ordered_json load(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  return ordered_json::parse(in);
}

const ordered_json& refs() {
  static const ordered_json r = load(kData + "greedy_refs.json");
  return r;
}

// The models make_greedy_refs.py runs, in its order.
const std::vector<std::string> kModels = {
    "llama-spm-e128-f32", "llama-spm-e256-Q4_0", "llama-spm-e256-Q4_K_M", "llama-spm-e256-Q6_K",
    "qwen2-e64-Q8_0",     "qwen3-e64-Q8_0",      "kjv-llama-q8_0"};

std::string model_path(const std::string& name) {
  if (name == "kjv-llama-q8_0") return std::string(KILN_SOURCE_DIR) + "/models/kjv-llama-q8_0.gguf";
  return test_data::path("models/" + name + ".gguf");
}

// The request make_greedy_refs.py sends for `c`.
ordered_json request_of(const ordered_json& c, const ordered_json& schemas) {
  ordered_json body = {
      {"prompt", c["prompt"]}, {"n_predict", c["n_predict"]}, {"temperature", 0}, {"cache_prompt", false}};
  if (c.contains("grammar")) {
    body["grammar"] = c["grammar"];
  } else if (c.contains("schema")) {
    body["json_schema"] = c["schema"];
  } else {
    for (const auto& s : schemas) {
      if (s["name"] == c["schema_ref"]) body["json_schema"] = s["schema"];
    }
    EXPECT_TRUE(body.contains("json_schema")) << "no schema named " << c["schema_ref"];
  }
  return body;
}

class GrammarConformance : public ::testing::TestWithParam<std::string> {};

TEST_P(GrammarConformance, GreedyTextEqualsLlamaServers) {
  const std::string& name = GetParam();
  ASSERT_TRUE(refs()["models"].contains(name))
      << "greedy_refs.json has no outputs for " << name << " (rerun make_greedy_refs.py)";
  const auto& expected = refs()["models"][name];
  const auto cases = load(kData + "greedy_cases.json")["cases"];
  const auto schemas = load(kData + "schemas.json");
  auto model = Model::load(model_path(name));
  ASSERT_TRUE(model.ok()) << model.error().message;

  // llama-server's settings in the script: one slot, a 1024-cell context, two threads, defaults
  // otherwise (F16 KV cache, flash attention auto).
  serve::ServerOptions o;
  o.n_parallel = 1;
  o.n_threads = 2;
  o.context.n_ctx = 1024;
  int port = 0;
  auto server = start_server(o, *model, &port);
  ASSERT_NE(server, nullptr);
  const auto known = load(kData + "greedy_cases.json")["known_differences"];
  auto known_difference = [&](const std::string& case_name) {
    for (const auto& k : known) {
      if (k["model"] == name && k["case"] == case_name) return true;
    }
    return false;
  };
  int compared = 0;
  for (const auto& c : cases) {
    const std::string case_name = c["name"];
    ASSERT_TRUE(expected.contains(case_name)) << name << ": no reference for " << case_name;
    // Sent as ordered JSON text (post_json's nlohmann::json would sort the schema's properties).
    httplib::Client client("127.0.0.1", port);
    client.set_read_timeout(60);
    auto r = client.Post("/completion", request_of(c, schemas).dump(), "application/json");
    ASSERT_TRUE(r) << case_name;
    ASSERT_EQ(r->status, 200) << case_name << ": " << r->body;
    const auto got = nlohmann::json::parse(r->body)["content"].get<std::string>();
    const auto want = expected[case_name]["content"].get<std::string>();
    if (known_difference(case_name)) {
      // Listed in greedy_cases.json with what is known of it; when kiln agrees, drop the entry.
      EXPECT_NE(got, want) << name << " / " << case_name << " now agrees: remove it from known_differences";
    } else {
      EXPECT_EQ(got, want) << name << " / " << case_name;
    }
    ++compared;
  }
  EXPECT_EQ(compared, static_cast<int>(expected.size()));
  server->stop();
}

INSTANTIATE_TEST_SUITE_P(Models, GrammarConformance, ::testing::ValuesIn(kModels),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           for (char& ch : n) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace kiln::test
