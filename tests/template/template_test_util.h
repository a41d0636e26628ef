// Shared helpers of the template tests.
#pragma once

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "text/chat_template.h"

namespace kiln {

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The clock the fixtures were rendered on: 2026-01-15 09:30:00 UTC.
inline std::chrono::system_clock::time_point fixture_clock() {
  using namespace std::chrono;
  return sys_days{year{2026} / January / 15} + hours{9} + minutes{30};
}

// Renders a case's context (messages, add_generation_prompt, bos_token, eos_token, and every other
// key as an extra variable: tools, ...) with the template on the fixture clock.
inline Result<std::string> render_case(const ChatTemplate& tmpl, const nlohmann::ordered_json& context) {
  auto messages = chat_messages_from_json(context["messages"]);
  if (!messages.ok()) return messages.error();
  ChatRenderOptions options;
  options.messages = *messages;
  options.add_generation_prompt = context["add_generation_prompt"].get<bool>();
  options.bos_token = context["bos_token"];
  options.eos_token = context["eos_token"];
  options.clock = fixture_clock;
  for (const auto& [k, v] : context.items()) {
    if (k != "messages" && k != "add_generation_prompt" && k != "bos_token" && k != "eos_token") {
      options.extra_context[k] = v;
    }
  }
  return tmpl.render(options);
}

// A test name for a template path parameter: its file stem, other characters than [A-Za-z0-9] as '_'.
inline std::string template_param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = std::filesystem::path(info.param).stem().string();
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return s;
}

}  // namespace kiln
