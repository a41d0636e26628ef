// The language cases of data/cases.json (one construct each: whitespace control, literals,
// operators, statements, tests, filters, methods, globals) render exactly as @huggingface/jinja
// renders them (data/render_cases.mjs regenerates `expected`); those of data/jinja2_cases.json
// (undefined values as keys, operands, filter and test arguments and conditions; mapping methods
// over keys; filter and test names checked when they run) exactly as Python's Jinja2 renders
// them, and where Jinja2 refuses one (`error`), kiln refuses it too
// (data/render_jinja2_cases.py regenerates both).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "template_test_util.h"
#include "text/jinja/json.h"
#include "text/jinja/template.h"

namespace kiln::jinja {
namespace {

const std::filesystem::path kData = std::filesystem::path(KILN_SOURCE_DIR) / "tests/template/data";
// A case's name in the tests: the Jinja2 ones are prefixed.
constexpr const char* kJinja2Prefix = "jinja2_";

// Every case of both files, the Jinja2 ones renamed with kJinja2Prefix.
const nlohmann::ordered_json& all_cases() {
  static const nlohmann::ordered_json cases = [] {
    auto out = nlohmann::ordered_json::parse(read_text(kData / "cases.json"));
    for (auto c : nlohmann::ordered_json::parse(read_text(kData / "jinja2_cases.json"))) {
      c["name"] = kJinja2Prefix + c["name"].get<std::string>();
      out.push_back(std::move(c));
    }
    return out;
  }();
  return cases;
}

std::vector<std::string> case_names() {
  std::vector<std::string> names;
  for (const auto& c : all_cases()) names.push_back(c["name"].get<std::string>());
  return names;
}

TEST(ReferenceCases, FilesHaveCases) {
  size_t jinja2 = 0;
  for (const std::string& name : case_names()) jinja2 += name.starts_with(kJinja2Prefix);
  EXPECT_GE(case_names().size() - jinja2, 50u);
  EXPECT_GE(jinja2, 20u);
}

class ReferenceCase : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceCase, RendersAsReference) {
  for (const auto& c : all_cases()) {
    if (c["name"] != GetParam()) continue;
    const bool jinja2 = GetParam().starts_with(kJinja2Prefix);
    ASSERT_TRUE(c.contains("expected") || (jinja2 && c.contains("error")))
        << "the reference renderer refused this case; remove it or regenerate";
    auto t = Template::parse(c["template"].get<std::string>());
    RenderOptions options;
    options.context = from_json(c["context"]).as_object();
    options.clock = fixture_clock;
    if (c.contains("error")) {
      EXPECT_FALSE(t.ok() && t->render(options).ok())
          << c["template"] << ": Jinja2 refuses it (" << c["error"] << "), kiln renders it";
      return;
    }
    ASSERT_TRUE(t.ok()) << t.error().message;
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
