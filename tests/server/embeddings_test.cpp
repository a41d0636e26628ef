// POST /v1/embeddings and /embeddings on in-process servers (qwen2 fixture, no pooling key: mean
// by default): float and base64 agree, inputs keep their order, vectors are normalised and equal
// what llm/embeddings.h gives directly, errors are 400s that say what is wrong, and a server
// started without embeddings refuses with 501.
#include "llm/embeddings.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>
#include <tuple>

#include "llm/cpu_engine.h"
#include "serve/embed_request.h"
#include "http_client.h"
#include "serve/server.h"
#include "test_data.h"

namespace kiln::serve {
namespace {

using nlohmann::json;

const std::string kModel = kiln::test_data::path("models/qwen2-e64-Q8_0.gguf");
constexpr int64_t kCtx = 128;  // 2 slots of 64 tokens: inputs up to 64 tokens

std::shared_ptr<const Model> model() {
  static auto m = Model::load(kModel);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  return *m;
}

// What llm/embeddings.h gives for `text` (tokenized as the server does), normalised unless None.
std::vector<float> direct(const std::string& text, Pooling p) {
  CpuEngine cpu(1);
  ContextOptions co;
  co.n_ctx = 256;
  co.embeddings = true;
  auto ctx = Context::create(model(), cpu.backend, co);
  EXPECT_TRUE(ctx.ok());
  auto v = embed_tokens(**ctx, model()->tokenizer().tokenize(text, true, true), p);
  EXPECT_TRUE(v.ok()) << v.error().message;
  if (p != Pooling::None) normalize_euclidean(*v);
  return *v;
}

std::vector<float> decode_base64_floats(const std::string& s) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  std::vector<uint8_t> bytes;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    if (c == '=') break;
    const int v = value(c);
    EXPECT_GE(v, 0) << "not base64: " << c;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      bytes.push_back(static_cast<uint8_t>(acc >> bits));
    }
  }
  EXPECT_EQ(bytes.size() % 4, 0u);
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);  // little-endian host
  return out;
}

class Servers {
 public:
  Servers() {
    for (auto [name, on, pooling] :
         {std::tuple{"default", true, ""}, std::tuple{"none", true, "none"}, std::tuple{"off", false, ""}}) {
      ServerOptions o;
      o.n_parallel = 2;
      o.n_threads = 2;
      o.context.n_ctx = kCtx;
      o.embeddings = on;
      o.pooling = pooling;
      auto s = std::make_unique<Server>(o);
      auto port = s->listen("127.0.0.1", 0);
      EXPECT_TRUE(port.ok());
      EXPECT_TRUE(s->attach(model()).ok());
      ports[name] = *port;
      servers.push_back(std::move(s));
    }
  }
  ~Servers() {
    for (auto& s : servers) s->stop();
  }
  std::map<std::string, int> ports;
  std::vector<std::unique_ptr<Server>> servers;
};

class EmbeddingsServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { servers_ = new Servers(); }
  static void TearDownTestSuite() { delete servers_; }

  static std::pair<int, json> post(const std::string& server, const std::string& path, const json& body) {
    httplib::Client c("127.0.0.1", servers_->ports.at(server));
    c.set_read_timeout(60);
    auto r = c.Post(path, body.dump(), "application/json");
    EXPECT_TRUE(r);
    if (!r) return {0, json()};
    return {r->status, json::parse(r->body, nullptr, false)};
  }
  // The 400's message, checking the error shape.
  static std::string error_of(const std::string& server, const std::string& path, const json& body,
                              int status = 400) {
    auto [code, j] = post(server, path, body);
    EXPECT_EQ(code, status) << j.dump();
    EXPECT_EQ(j["error"]["code"], status);
    return j["error"]["message"].is_string() ? j["error"]["message"].get<std::string>() : "";
  }
  static inline Servers* servers_ = nullptr;
};

double norm(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += double(x) * x;
  return std::sqrt(s);
}

TEST_F(EmbeddingsServerTest, OpenAiShapeNormalisedAndEqualToTheLlmApi) {
  auto [code, j] =
      post("default", "/v1/embeddings", {{"input", "The quick brown fox"}, {"model", "anything"}});
  ASSERT_EQ(code, 200) << j.dump();
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["model"], model()->name());
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["object"], "embedding");
  EXPECT_EQ(j["data"][0]["index"], 0);
  const auto v = j["data"][0]["embedding"].get<std::vector<float>>();
  ASSERT_EQ(v.size(), static_cast<size_t>(model()->hparams().n_embd));
  EXPECT_NEAR(norm(v), 1.0, 1e-5);
  const auto want = direct("The quick brown fox", Pooling::Mean);
  for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(v[i], want[i], 1e-6f) << i;
  const size_t n_tokens = model()->tokenizer().tokenize("The quick brown fox", true, true).size();
  EXPECT_EQ(j["usage"]["prompt_tokens"], n_tokens);
  EXPECT_EQ(j["usage"]["total_tokens"], n_tokens);
}

TEST_F(EmbeddingsServerTest, Base64IsTheSameFloats) {
  const json in = {{"input", "hello there"}};
  auto [c1, f] = post("default", "/v1/embeddings", in);
  json b64_req = in;
  b64_req["encoding_format"] = "base64";
  auto [c2, b] = post("default", "/v1/embeddings", b64_req);
  ASSERT_EQ(c1, 200);
  ASSERT_EQ(c2, 200);
  ASSERT_TRUE(b["data"][0]["embedding"].is_string());
  const auto floats = f["data"][0]["embedding"].get<std::vector<float>>();
  EXPECT_EQ(decode_base64_floats(b["data"][0]["embedding"]), floats);
  // The encoder itself on a known case: 1.0f is 00 00 80 3f.
  EXPECT_EQ(base64_floats(std::vector<float>{1.0f}), "AACAPw==");
  EXPECT_EQ(base64_floats(std::vector<float>{1.0f, -2.0f}), "AACAPwAAAMA=");
}

TEST_F(EmbeddingsServerTest, SeveralInputsKeepTheirOrderAndIndices) {
  const std::vector<std::string> texts{"alpha beta", "gamma", "delta epsilon zeta"};
  auto [code, j] = post("default", "/v1/embeddings", {{"input", texts}});
  ASSERT_EQ(code, 200) << j.dump();
  ASSERT_EQ(j["data"].size(), texts.size());
  size_t n_tokens = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(j["data"][i]["index"], i);
    const auto v = j["data"][i]["embedding"].get<std::vector<float>>();
    const auto want = direct(texts[i], Pooling::Mean);
    ASSERT_EQ(v.size(), want.size());
    for (size_t k = 0; k < v.size(); ++k) EXPECT_NEAR(v[k], want[k], 1e-6f) << texts[i];
    n_tokens += model()->tokenizer().tokenize(texts[i], true, true).size();
  }
  EXPECT_EQ(j["usage"]["prompt_tokens"], n_tokens);
}

TEST_F(EmbeddingsServerTest, TokenIdInputsEqualTheirText) {
  const std::string text = "token ids work too";
  const auto ids = model()->tokenizer().tokenize(text, true, true);
  auto [c1, by_text] = post("default", "/v1/embeddings", {{"input", text}});
  auto [c2, by_ids] = post("default", "/v1/embeddings", {{"input", ids}});
  auto [c3, nested] = post("default", "/v1/embeddings", {{"input", json::array({ids, text})}});
  ASSERT_EQ(c1, 200);
  ASSERT_EQ(c2, 200) << by_ids.dump();
  ASSERT_EQ(c3, 200) << nested.dump();
  EXPECT_EQ(by_ids["data"][0]["embedding"], by_text["data"][0]["embedding"]);
  EXPECT_EQ(nested["data"][0]["embedding"], by_text["data"][0]["embedding"]);
  EXPECT_EQ(nested["data"][1]["embedding"], by_text["data"][0]["embedding"]);
}

TEST_F(EmbeddingsServerTest, BadRequestsAre400sThatSayWhy) {
  const std::string v1 = "/v1/embeddings";
  EXPECT_EQ(error_of("default", v1, json::object()), "field 'input' is required");
  EXPECT_EQ(error_of("default", v1, {{"input", ""}}), "the input is empty (no tokens to embed)");
  EXPECT_EQ(error_of("default", v1, {{"input", json::array()}}), "field 'input' is an empty list");
  EXPECT_EQ(error_of("default", v1, {{"input", {"fine", ""}}}), "input 1 is empty (no tokens to embed)");
  const std::string shape =
      "field 'input' must be a string, a list of strings, a list of token ids or a list of lists of token "
      "ids";
  EXPECT_EQ(error_of("default", v1, {{"input", 5}}), shape);
  EXPECT_EQ(error_of("default", v1, {{"input", {1, "a"}}}), shape);
  EXPECT_EQ(error_of("default", v1, {{"input", {{"a"}}}}), shape);
  EXPECT_EQ(error_of("default", v1, {{"input", {1.5}}}), shape);
  const int64_t n_vocab = model()->hparams().n_vocab;
  EXPECT_EQ(error_of("default", v1, {{"input", {1, n_vocab}}}), "input: token id " + std::to_string(n_vocab) +
                                                                    " is outside the vocabulary [0, " +
                                                                    std::to_string(n_vocab) + ")");
  EXPECT_EQ(error_of("default", v1, {{"input", {json::array({-1})}}}),
            "input 0: token id -1 is outside the vocabulary [0, " + std::to_string(n_vocab) + ")");
  EXPECT_EQ(error_of("default", v1, {{"input", std::vector<int>(65, 100)}}),
            "the input has 65 tokens; the context allows at most 64");
  EXPECT_EQ(error_of("default", v1, {{"input", "x"}, {"encoding_format", "int8"}}),
            "field 'encoding_format' must be \"float\" or \"base64\"");
  EXPECT_EQ(error_of("default", v1, {{"input", "x"}, {"dimensions", 32}}),
            "field 'dimensions' is 32, but this model's embeddings have 64 dimensions (kiln does not shorten "
            "them)");
  EXPECT_EQ(error_of("default", v1, {{"input", "x"}, {"dimensions", "64"}}),
            "field 'dimensions' must be an integer");
  auto [ok_code, ok] = post("default", v1, {{"input", std::vector<int>(64, 100)}, {"dimensions", 64}});
  EXPECT_EQ(ok_code, 200) << ok.dump();  // exactly a slot's context, and the right dimensions
  httplib::Client c("127.0.0.1", servers_->ports.at("default"));
  auto r = c.Post(v1, "{not json", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
}

TEST_F(EmbeddingsServerTest, PoolingNoneIsRefusedByOpenAiRouteAndPerTokenOnNative) {
  EXPECT_EQ(
      error_of("none", "/v1/embeddings", {{"input", "x"}}),
      "Pooling type 'none' is not OAI compatible. Please use a different pooling type (start the server with "
      "--pooling mean|cls|last, or use POST /embeddings)");
  const std::string text = "per token vectors";
  auto [code, j] = post("none", "/embeddings", {{"content", text}});
  ASSERT_EQ(code, 200) << j.dump();
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["index"], 0);
  const size_t n_tokens = model()->tokenizer().tokenize(text, true, true).size();
  const auto rows = j[0]["embedding"];
  ASSERT_EQ(rows.size(), n_tokens);
  const auto want = direct(text, Pooling::None);  // raw rows, as llama-server (no normalisation)
  const size_t n_embd = static_cast<size_t>(model()->hparams().n_embd);
  for (size_t t = 0; t < n_tokens; ++t) {
    const auto row = rows[t].get<std::vector<float>>();
    ASSERT_EQ(row.size(), n_embd);
    for (size_t k = 0; k < n_embd; ++k) EXPECT_NEAR(row[k], want[t * n_embd + k], 1e-5f) << t;
  }
  // With pooling, /embeddings holds one normalised row per input.
  auto [c2, pooled] = post("default", "/embeddings", {{"input", {text, "x"}}});
  ASSERT_EQ(c2, 200) << pooled.dump();
  ASSERT_EQ(pooled.size(), 2u);
  EXPECT_EQ(pooled[1]["index"], 1);
  ASSERT_EQ(pooled[0]["embedding"].size(), 1u);
  EXPECT_NEAR(norm(pooled[0]["embedding"][0].get<std::vector<float>>()), 1.0, 1e-5);
}

TEST_F(EmbeddingsServerTest, EmbeddingsAndGenerationShareTheCoresSafely) {
  // Completions decode on the engine thread while embeddings run on HTTP threads: both use the
  // server's thread pool, which serializes their graph runs.
  std::vector<std::thread> gens;
  std::atomic<int> gen_ok{0};
  for (int i = 0; i < 2; ++i)
    gens.emplace_back([&] {
      auto [code, j] =
          post("default", "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 24}});
      if (code == 200) ++gen_ok;
    });
  const auto want = direct("concurrent request", Pooling::Mean);
  for (int i = 0; i < 6; ++i) {
    auto [code, j] = post("default", "/v1/embeddings", {{"input", "concurrent request"}});
    ASSERT_EQ(code, 200) << j.dump();
    const auto v = j["data"][0]["embedding"].get<std::vector<float>>();
    for (size_t k = 0; k < v.size(); ++k) ASSERT_NEAR(v[k], want[k], 1e-6f) << i;
  }
  for (auto& t : gens) t.join();
  EXPECT_EQ(gen_ok, 2);
}

TEST_F(EmbeddingsServerTest, ServerWithoutEmbeddingsRefuses) {
  for (const char* path : {"/v1/embeddings", "/embeddings"})
    EXPECT_EQ(error_of("off", path, {{"input", "x"}}, 501),
              "This server does not support embeddings. Start it with `--embeddings`");
}

}  // namespace
}  // namespace kiln::serve
