// The repository stands alone: a clone builds, runs and tests kiln with nothing beside it. No file
// that builds or tests kiln reaches for the project's shared folder (../shared on the developers'
// machines, absent from a clone) except through tests/test_data.h's optional extra fixtures, which
// CMakeLists.txt sets from KILN_SHARED_DIR; and every link in the documentation points at a file
// of the repository or a URL.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
const fs::path kRoot = KILN_SOURCE_DIR;

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Files under the root, skipping build outputs, git and npm packages.
std::vector<fs::path> repository_files() {
  std::vector<fs::path> out;
  for (auto it = fs::recursive_directory_iterator(kRoot); it != fs::recursive_directory_iterator(); ++it) {
    const std::string name = it->path().filename().string();
    if (it->is_directory() &&
        (name.starts_with("build") || name.starts_with(".git") || name == "node_modules")) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file()) out.push_back(it->path());
  }
  return out;
}

bool is_code(const fs::path& p) {
  static const std::vector<std::string> kExtensions = {".cpp", ".h",  ".c",   ".S",    ".in",
                                                       ".sh",  ".py", ".mjs", ".cmake"};
  const std::string name = p.filename().string();
  return name == "CMakeLists.txt" || name == "CMakePresets.json" || name == "run" ||
         std::find(kExtensions.begin(), kExtensions.end(), p.extension().string()) != kExtensions.end();
}

TEST(Repository, NoCodeReadsTheSharedFolder) {
  const std::vector<std::string> allowed = {"CMakeLists.txt", "tests/test_data.h",
                                            "tests/repo/standalone_test.cpp"};
  const std::vector<std::string> patterns = {"../shared", "KILN_SHARED_DIR", "/work/shared",
                                             "shared/fixtures", "shared/tools"};
  const std::regex quoted_shared(R"(["']shared["'/])");
  int scanned = 0;
  for (const fs::path& p : repository_files()) {
    if (!is_code(p)) continue;
    const std::string rel = p.lexically_relative(kRoot).string();
    ++scanned;
    if (std::find(allowed.begin(), allowed.end(), rel) != allowed.end()) continue;
    // Scripts build the path from parts (os.path.join(parent, "shared")): a quoted folder name.
    const bool script = p.extension() == ".py" || p.extension() == ".sh" || p.extension() == ".mjs";
    std::istringstream lines(read(p));
    int n = 0;
    for (std::string line; std::getline(lines, line);) {
      ++n;
      for (const std::string& pat : patterns)
        EXPECT_EQ(line.find(pat), std::string::npos)
            << rel << ":" << n << " mentions " << pat << ": " << line;
      if (script) {
        EXPECT_FALSE(std::regex_search(line, quoted_shared)) << rel << ":" << n << " names the shared folder: " << line;
      }
    }
  }
  EXPECT_GT(scanned, 300);
}

TEST(Repository, DocumentationLinksResolve) {
  const std::regex link(R"(\]\(([^)\s]+)\))");
  int checked = 0;
  for (const fs::path& p : repository_files()) {
    if (p.extension() != ".md") continue;
    const std::string text = read(p);
    for (auto m = std::sregex_iterator(text.begin(), text.end(), link); m != std::sregex_iterator(); ++m) {
      std::string target = (*m)[1];
      if (target.starts_with("http://") || target.starts_with("https://") || target.starts_with("#"))
        continue;
      target = target.substr(0, target.find('#'));
      const fs::path resolved = (p.parent_path() / target).lexically_normal();
      const std::string rel = resolved.lexically_relative(kRoot).string();
      EXPECT_FALSE(rel.starts_with(".."))
          << p.lexically_relative(kRoot) << " links outside the repository: " << target;
      EXPECT_TRUE(fs::exists(resolved))
          << p.lexically_relative(kRoot) << " links to a missing file: " << target;
      ++checked;
    }
  }
  EXPECT_GT(checked, 3);
}

}  // namespace
