// `kiln serve --embeddings --pooling P` end to end: the flags reach the embedding routes, and the
// vectors equal llm/embeddings.h's for that pooling.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "llm/cpu_engine.h"
#include "llm/embeddings.h"
#include "http_client.h"
#include "server/serve_process.h"
#include "test_data.h"

namespace kiln {
namespace {

using nlohmann::json;

const std::string kModel = kiln::test_data::path("models/qwen2-e64-Q8_0.gguf");

TEST(ServeEmbeddings, PoolingFlagReachesTheRoute) {
  std::string error;
  auto server = test::ServeProcess::start(
      {"-m", kModel, "-c", "128", "-t", "2", "--embeddings", "--pooling", "last"}, &error);
  ASSERT_TRUE(server) << error;
  httplib::Client c("127.0.0.1", server->port());
  c.set_read_timeout(60);
  const std::string text = "The last token speaks for the text";
  auto r = c.Post("/v1/embeddings", json{{"input", text}}.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const auto got = json::parse(r->body)["data"][0]["embedding"].get<std::vector<float>>();

  auto model = Model::load(kModel);
  ASSERT_TRUE(model.ok());
  CpuEngine cpu(1);
  ContextOptions co;
  co.n_ctx = 64;
  co.embeddings = true;
  auto ctx = Context::create(*model, cpu.backend, co);
  ASSERT_TRUE(ctx.ok());
  auto want = embed_tokens(**ctx, (*model)->tokenizer().tokenize(text, true, true), Pooling::Last);
  ASSERT_TRUE(want.ok());
  normalize_euclidean(*want);
  ASSERT_EQ(got.size(), want->size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], (*want)[i], 1e-5f) << i;
  EXPECT_EQ(server->terminate(std::chrono::seconds(10)), 0);
}

}  // namespace
}  // namespace kiln
