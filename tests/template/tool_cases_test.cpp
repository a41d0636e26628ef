// Every chat template llama.cpp ships that mentions tools (tests/template/data/llama_cpp, with the
// ones tests/chat/data/templates and tests/data/templates already hold) renders tool definitions
// whose schemas real clients send (an enum-only property, anyOf, a list of types, nested items,
// $ref, no description) exactly as Python's Jinja2 renders them (data/tool_cases.json, made by
// data/render_tool_cases.py with transformers' environment). Where Jinja2 refuses a case, kiln
// may refuse it too or render it; nothing is compared. The templates of kDivergent render
// otherwise than Jinja2 for the reason given there (they must render all the same), those of
// kRefused not at all.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "template_test_util.h"
#include "test_data.h"
#include "text/chat_template.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

const fs::path kSource = KILN_SOURCE_DIR;
const fs::path kCases = kSource / "tests/template/data/tool_cases.json";

// The folders render_tool_cases.py read, in its order.
fs::path template_path(const std::string& name) {
  for (const fs::path& dir :
       {kSource / "tests/template/data/llama_cpp", kSource / "tests/chat/data/templates",
        fs::path(test_data::path("templates"))}) {
    if (fs::exists(dir / name)) return dir / name;
  }
  return {};
}

// Templates whose renders differ from Jinja2's for a reason other than the tool schemas, with
// that reason. kiln follows llama.cpp's engine and @huggingface/jinja there.
const std::map<std::string, std::string> kDivergent = {
    {"Apriel-1.6-15b-Thinker-fixed.jinja",
     "prints a mapping: Python's repr in Jinja2 ({'a': 1}), JSON in kiln"},
    {"unsloth-Apriel-1.5.jinja", "prints a mapping: Python's repr in Jinja2, JSON in kiln"},
    {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja",
     "prints a list of types: Python's repr in Jinja2, JSON in kiln"},
    {"Qwen3-Coder.jinja", "prints a list of types: Python's repr in Jinja2, JSON in kiln"},
    {"google-gemma-4-31B-it.jinja", "prints a list of types: Python's repr in Jinja2, JSON in kiln"},
    {"google-gemma-4-31B-it-interleaved.jinja",
     "prints a list of types: Python's repr in Jinja2, JSON in kiln"},
    {"meetkai-functionary-medium-v3.1.jinja",
     "`'text'|safe + tool|tojson`: markupsafe HTML-escapes the JSON in Jinja2 (&#34;), kiln has no markup "
     "strings"},
};

// Templates kiln cannot render yet, though Jinja2 does, with the reason.
const std::map<std::string, std::string> kRefused = {
    {"ByteDance-Seed-OSS.jinja", "a dict literal with integer keys: kiln's mappings have string keys only"},
};

const nlohmann::ordered_json& cases() {
  static const auto j = nlohmann::ordered_json::parse(read_text(kCases));
  return j;
}

// The templates with at least one case Jinja2 renders.
std::vector<std::string> template_names() {
  std::vector<std::string> names;
  for (const auto& c : cases()["cases"]) {
    const std::string name = c["template"];
    if (c.contains("expected") && (names.empty() || names.back() != name)) names.push_back(name);
  }
  return names;
}

// Where two long renders part: the offset and a few characters of each from there.
std::string first_difference(const std::string& got, const std::string& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  const size_t from = i < 40 ? 0 : i - 40;
  return "they differ at byte " + std::to_string(i) +
         ":\n  kiln:   " + nlohmann::json(got.substr(from, 120)).dump() +
         "\n  Jinja2: " + nlohmann::json(want.substr(from, 120)).dump();
}

TEST(ToolCases, CoverTheNamedTemplates) {
  // The acceptance set of issue 32, and every case file entry names a template that is here.
  const auto names = template_names();
  for (const char* must :
       {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", "meta-llama-Llama-3.1-8B-Instruct.jinja",
        "meta-llama-Llama-3.2-3B-Instruct.jinja", "meta-llama-Llama-3.3-70B-Instruct.jinja",
        "meetkai-functionary-medium-v3.2.jinja", "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), must), names.end()) << must;
  }
  EXPECT_GE(names.size(), 60u);
  for (const std::string& name : names) EXPECT_FALSE(template_path(name).empty()) << name;
}

class ToolCase : public ::testing::TestWithParam<std::string> {};

TEST_P(ToolCase, RendersAsJinja2) {
  const fs::path path = template_path(GetParam());
  ASSERT_FALSE(path.empty()) << GetParam();
  auto tmpl = ChatTemplate::parse(read_text(path));
  ASSERT_TRUE(tmpl.ok()) << tmpl.error().message;
  const bool divergent = kDivergent.contains(GetParam());
  bool differs = false;
  for (const auto& c : cases()["cases"]) {
    if (c["template"] != GetParam() || !c.contains("expected")) continue;
    const std::string scenario = c["scenario"];
    auto text = render_case(*tmpl, cases()["contexts"][scenario]);
    if (kRefused.contains(GetParam())) {
      EXPECT_FALSE(text.ok()) << scenario << ": renders now; take it off kRefused";
      continue;
    }
    ASSERT_TRUE(text.ok()) << scenario << ": " << text.error().message;
    const std::string want = c["expected"];
    if (divergent) {
      differs = differs || *text != want;
      continue;
    }
    EXPECT_TRUE(*text == want) << scenario << ": " << first_difference(*text, want);
  }
  if (divergent) {
    EXPECT_TRUE(differs) << "renders as Jinja2 now; take it off kDivergent";
  }
}

INSTANTIATE_TEST_SUITE_P(LlamaCppTemplates, ToolCase, ::testing::ValuesIn(template_names()),
                         template_param_name);

}  // namespace
}  // namespace kiln
