// Every chat template in tests/data/templates (and in the extra fixtures folder, when there is one)
// renders exactly as @huggingface/jinja
// rendered it (NAME.expected.json), for each conversation, with and without the generation
// prompt, on the fixed clock the fixtures were made with.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "template_test_util.h"
#include "test_data.h"
#include "text/chat_template.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// The .jinja files; each has its NAME.expected.json beside it.
std::vector<std::string> template_paths() {
  std::vector<std::string> paths;
  for (const fs::path& p : test_data::files("templates", ".jinja", /*with_extra=*/true)) paths.push_back(p);
  return paths;
}

TEST(TemplateFixtures, DirectoryHasTemplates) {
  // The fixture set is the point of this file: fail loudly instead of passing with nothing.
  EXPECT_GE(template_paths().size(), 20u) << test_data::path("templates");
}

class TemplateFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(TemplateFixture, RendersAsReference) {
  const fs::path path = GetParam();
  const std::string name = path.stem().string();
  const auto expected =
      nlohmann::ordered_json::parse(read_text(fs::path(path).replace_extension(".expected.json")));
  auto tmpl = ChatTemplate::parse(read_text(path));
  ASSERT_TRUE(tmpl.ok()) << tmpl.error().message;
  ASSERT_EQ(expected["context"]["clock"], "2026-01-15T09:30:00.000Z");
  const auto& renders = expected["renders"];
  ASSERT_FALSE(renders.empty());
  for (const auto& [conv_name, conv] : expected["conversations"].items()) {
    auto messages = chat_messages_from_json(conv);
    ASSERT_TRUE(messages.ok()) << messages.error().message;
    for (bool gen : {true, false}) {
      const std::string key = conv_name + (gen ? "+gen" : "");
      ASSERT_TRUE(renders.contains(key)) << key;
      ChatRenderOptions options;
      options.messages = *messages;
      options.add_generation_prompt = gen;
      options.bos_token = expected["context"]["bos_token"];
      options.eos_token = expected["context"]["eos_token"];
      options.clock = fixture_clock;
      auto text = tmpl->render(options);
      ASSERT_TRUE(text.ok()) << name << " " << key << ": " << text.error().message;
      EXPECT_EQ(*text, renders[key].get<std::string>()) << name << " " << key;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTemplates, TemplateFixture, ::testing::ValuesIn(template_paths()),
                         template_param_name);

}  // namespace
}  // namespace kiln
