#include "in_process_server.h"

#include <gtest/gtest.h>

#include "test_data.h"

namespace kiln::test {

std::shared_ptr<const Model> qwen2_model() {
  static auto m = Model::load(test_data::path("models/qwen2-e64-Q8_0.gguf"));
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  return m.ok() ? *m : nullptr;
}

std::unique_ptr<serve::Server> start_server(const serve::ServerOptions& options,
                                            std::shared_ptr<const Model> model, int* port) {
  auto server = std::make_unique<serve::Server>(options);
  auto bound = server->listen("127.0.0.1", 0);
  EXPECT_TRUE(bound.ok()) << (bound.ok() ? "" : bound.error().message);
  if (!bound.ok() || !model) return nullptr;
  *port = *bound;
  auto attached = server->attach(std::move(model));
  EXPECT_TRUE(attached.ok()) << (attached.ok() ? "" : attached.error().message);
  return attached.ok() ? std::move(server) : nullptr;
}

httplib::Result post_json(int port, const std::string& path, const nlohmann::json& body) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60);
  return c.Post(path.c_str(), body.dump(), "application/json");
}

}  // namespace kiln::test
