// Where the tests find their data. Two folders, one namespace of relative paths:
//   tests/data/        committed: llama.cpp's reference outputs (reference/), chat templates
//                      (templates/), tokenizer vectors (vocab/*.inp|.out), quantizer references (quant/)
//   build/test-data/   made by tools/fixtures/make_test_data.py (scripts/test.sh and the ctest fixture
//                      `test_data` run it): llama.cpp's vocabularies (vocab/*.gguf), the random-weight
//                      models (models/), the quantizer fixtures (quant/*.gguf), vision projectors (mtmd/)
// test_data::path("models/qwen2-e64-Q8_0.gguf") finds a file in either. A folder of extra fixtures
// (the project's ../shared/fixtures, when it sits beside the checkout) only ever adds cases to tests
// that iterate over files; no test needs it.
#pragma once

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::test_data {

// The two folders (functions, not variables: other files' static initializers call path()).
inline std::filesystem::path committed_dir() { return KILN_TEST_DATA_DIR; }
inline std::filesystem::path generated_dir() { return KILN_TEST_DATA_GEN_DIR; }

// The file `rel` under tests/data, else under the generated folder (also when it is in neither: the
// caller's error then names the generated path, and stderr says how to make it).
inline std::string path(std::string_view rel) {
  const std::filesystem::path committed = committed_dir() / rel;
  if (std::filesystem::exists(committed)) return committed.string();
  const std::filesystem::path generated = generated_dir() / rel;
  if (!std::filesystem::exists(generated)) {
    std::fprintf(stderr,
                 "test data '%s' is missing: run tools/fixtures/make_test_data.py --kiln build/release/kiln "
                 "(scripts/test.sh does)\n",
                 generated.c_str());
  }
  return generated.string();
}

// The extra fixtures folder, or "" when there is none.
inline std::string extra_dir() {
  const std::filesystem::path dir = KILN_EXTRA_FIXTURES_DIR;
  return !dir.empty() && std::filesystem::is_directory(dir) ? dir.string() : std::string();
}

// Every regular file ending in `suffix` below `sub` in the committed and generated folders, sorted;
// with `with_extra`, also those of the extra fixtures folder whose relative path neither holds.
inline std::vector<std::filesystem::path> files(std::string_view sub, std::string_view suffix,
                                                bool with_extra = false) {
  namespace fs = std::filesystem;
  std::vector<fs::path> out;
  std::vector<fs::path> seen;  // paths relative to their root
  const auto scan = [&](const fs::path& root, bool extra) {
    if (!fs::is_directory(root / sub)) return;
    for (const auto& e : fs::recursive_directory_iterator(root / sub)) {
      if (!e.is_regular_file() || !e.path().string().ends_with(suffix)) continue;
      const fs::path rel = e.path().lexically_relative(root);
      if (extra && std::find(seen.begin(), seen.end(), rel) != seen.end()) continue;
      seen.push_back(rel);
      out.push_back(e.path());
    }
  };
  scan(committed_dir(), false);
  scan(generated_dir(), false);
  if (with_extra && !extra_dir().empty()) scan(extra_dir(), true);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace kiln::test_data
