// The language cases of data/cases.json (one construct each: whitespace control, literals,
// operators, statements, tests, filters, methods, globals) render exactly as @huggingface/jinja
// renders them. data/render_cases.mjs regenerates `expected` from the reference renderer.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "template_test_util.h"
#include "text/jinja/json.h"
#include "text/jinja/template.h"

namespace kiln::jinja {
namespace {

const std::filesystem::path kCases =
    std::filesystem::path(KILN_SOURCE_DIR) / "tests/template/data/cases.json";

nlohmann::ordered_json load_cases() { return nlohmann::ordered_json::parse(read_text(kCases)); }

std::vector<std::string> case_names() {
  std::vector<std::string> names;
  for (const auto& c : load_cases()) names.push_back(c["name"].get<std::string>());
  return names;
}

TEST(ReferenceCases, FileHasCases) { EXPECT_GE(case_names().size(), 50u); }

class ReferenceCase : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceCase, RendersAsReference) {
  for (const auto& c : load_cases()) {
    if (c["name"] != GetParam()) continue;
    ASSERT_TRUE(c.contains("expected"))
        << "the reference renderer refused this case; remove it or regenerate";
    auto t = Template::parse(c["template"].get<std::string>());
    ASSERT_TRUE(t.ok()) << t.error().message;
    RenderOptions options;
    options.context = from_json(c["context"]).as_object();
    options.clock = fixture_clock;
    auto text = t->render(options);
    ASSERT_TRUE(text.ok()) << text.error().message;
    EXPECT_EQ(*text, c["expected"].get<std::string>()) << c["template"];
    return;
  }
  FAIL() << "no case " << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Cases, ReferenceCase, ::testing::ValuesIn(case_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kiln::jinja
