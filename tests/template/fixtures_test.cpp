// Every chat template in ../shared/fixtures/templates renders exactly as @huggingface/jinja
// rendered it (NAME.expected.json), for each conversation, with and without the generation
// prompt, on the fixed clock the fixtures were made with.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "template_test_util.h"
#include "text/chat_template.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

const fs::path kDir = fs::path(KILN_SHARED_DIR) / "fixtures" / "templates";

std::vector<std::string> template_names() {
  std::vector<std::string> names;
  if (!fs::is_directory(kDir)) return names;
  for (const auto& e : fs::directory_iterator(kDir)) {
    if (e.path().extension() == ".jinja") names.push_back(e.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(TemplateFixtures, DirectoryHasTemplates) {
  // The fixture set is the point of this file: fail loudly instead of passing with nothing.
  ASSERT_TRUE(fs::is_directory(kDir)) << kDir;
  EXPECT_GE(template_names().size(), 20u);
}

class TemplateFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(TemplateFixture, RendersAsReference) {
  const std::string name = GetParam();
  const auto expected = nlohmann::ordered_json::parse(read_text(kDir / (name + ".expected.json")));
  auto tmpl = ChatTemplate::parse(read_text(kDir / (name + ".jinja")));
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

INSTANTIATE_TEST_SUITE_P(AllTemplates, TemplateFixture, ::testing::ValuesIn(template_names()),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return s;
                         });

}  // namespace
}  // namespace kiln
