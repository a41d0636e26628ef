// Test support for the server tests that run kiln's Server inside the test binary: the qwen2
// fixture (loaded once), a Server on a free loopback port with it attached, and a JSON POST.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "http_client.h"
#include "llm/model.h"
#include "serve/server.h"

namespace kiln::test {

// The qwen2 fixture model, loaded on first use (a test failure when it does not load).
std::shared_ptr<const Model> qwen2_model();

// Listens on 127.0.0.1 (a free port, written to *port) and attaches `model`. Null, with a test
// failure naming the reason, when either fails.
std::unique_ptr<serve::Server> start_server(const serve::ServerOptions& options,
                                            std::shared_ptr<const Model> model, int* port);

// POST `body` as JSON to 127.0.0.1:port (60 s read timeout).
httplib::Result post_json(int port, const std::string& path, const nlohmann::json& body);

}  // namespace kiln::test
