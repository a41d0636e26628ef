// A server with an mmproj on a free loopback port for the image and audio tests, stopped by the
// destructor, with the settings of the llama.cpp references (F32 K/V, flash attention off).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "http_client.h"
#include "serve/server.h"
#include "test_data.h"

namespace kiln::serve {

// The fixture text model the mmprojs project into (loaded once per process).
inline std::shared_ptr<const Model> mmproj_text_model() {
  static auto m = Model::load(test_data::path("models/llama-spm-e128-f32.gguf"));
  EXPECT_TRUE(m.ok());
  return *m;
}

// The references' settings: 2 threads, F32 K/V, no flash attention, a 512-token context.
inline ServerOptions reference_options(const std::string& mmproj) {
  ServerOptions o;
  o.n_threads = 2;
  o.context.n_ctx = 512;
  o.context.type_k = DType::F32;
  o.context.type_v = DType::F32;
  o.context.flash_attention = FlashAttention::Off;
  o.mmproj = mmproj;
  return o;
}

struct MmprojTestServer {
  std::unique_ptr<Server> server;
  int port = 0;
  explicit MmprojTestServer(const ServerOptions& o) {
    server = std::make_unique<Server>(o);
    auto p = server->listen("127.0.0.1", 0);
    EXPECT_TRUE(p.ok());
    port = p.ok() ? *p : 0;
    const Status st = server->attach(mmproj_text_model());
    EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
  }
  ~MmprojTestServer() { server->stop(); }

  // POST `body` to `path`; the status and the parsed body.
  std::pair<int, nlohmann::json> post(const std::string& path, const nlohmann::json& body) const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(60);
    auto r = c.Post(path.c_str(), body.dump(), "application/json");
    if (!r) return {0, nlohmann::json()};
    return {r->status, nlohmann::json::parse(r->body, nullptr, false)};
  }
  nlohmann::json get(const std::string& path) const {
    httplib::Client c("127.0.0.1", port);
    auto r = c.Get(path.c_str());
    return r ? nlohmann::json::parse(r->body, nullptr, false) : nlohmann::json();
  }
};

}  // namespace kiln::serve
