// Helpers of the chat-format tests: the templates they run on (tests/data/templates and the few
// more in tests/chat/data/templates) and a parsed template with its detected syntax.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "text/chat/chat_syntax.h"
#include "text/chat_template.h"
#include "test_data.h"

namespace kiln::chat::testing {

inline std::string template_path(const std::string& name) {
  std::ifstream probe(std::string(KILN_SOURCE_DIR) + "/tests/chat/data/templates/" + name);
  if (probe.good()) return std::string(KILN_SOURCE_DIR) + "/tests/chat/data/templates/" + name;
  return test_data::path("templates/" + name);
}

inline ChatTemplate load_template(const std::string& name) {
  std::ifstream in(template_path(name), std::ios::binary);
  EXPECT_TRUE(in.good()) << name;
  std::ostringstream ss;
  ss << in.rdbuf();
  auto t = ChatTemplate::parse(ss.str());
  KILN_ASSERT(t.ok(), t.ok() ? "" : t.error().message);
  return std::move(*t);
}

}  // namespace kiln::chat::testing
