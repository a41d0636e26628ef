// `kiln inspect`: runs the built executable ($KILN_BINARY_DIR/kiln, or $KILN_EXE) and checks its
// JSON and text against the file as GgufFile reads it. Skipped, saying so, when the executable is
// not built (test_gguf links only kiln_core; build the kiln_cli target too).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/gguf.h"
#include "malformed_cases.h"
#include "test_data.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

fs::path kiln_exe() {
  if (const char* e = std::getenv("KILN_EXE")) return e;
  return fs::path(KILN_BINARY_DIR) / "kiln";
}

RunResult run_kiln(const std::string& args) {
  const fs::path err_path = fs::path(KILN_BINARY_DIR) / "gguf-test" / "inspect-stderr.txt";
  fs::create_directories(err_path.parent_path());
  std::string cmd = "'";
  cmd.append(kiln_exe().string())
      .append("' ")
      .append(args)
      .append(" 2>'")
      .append(err_path.string())
      .append("'");
  RunResult r;
  std::FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err_path);
  std::stringstream ss;
  ss << in.rdbuf();
  r.err = ss.str();
  return r;
}

class KilnInspect : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kiln_exe())) GTEST_SKIP() << "kiln executable not built at " << kiln_exe();
  }
};

TEST_F(KilnInspect, JsonMatchesTheParsedFile) {
  const fs::path path = test_data::path("models/qwen3-e64-Q8_0.gguf");
  auto g = GgufFile::open(path.string());
  ASSERT_TRUE(g.ok()) << g.error().message;
  const RunResult r = run_kiln("inspect --json '" + path.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["file_size"].get<uint64_t>(), (*g)->bytes().size());
  EXPECT_EQ(j["version"].get<uint32_t>(), 3u);
  EXPECT_EQ(j["alignment"].get<uint64_t>(), (*g)->alignment());
  EXPECT_EQ(j["data_offset"].get<uint64_t>(), (*g)->data_offset());
  ASSERT_EQ(j["metadata"].size(), (*g)->metadata().size());
  for (size_t i = 0; i < j["metadata"].size(); ++i) {
    EXPECT_EQ(j["metadata"][i]["key"].get<std::string>(), (*g)->metadata()[i].key);
  }
  const auto& tokens = j["metadata"][15];
  ASSERT_EQ(tokens["key"], "tokenizer.ggml.tokens");
  EXPECT_EQ(tokens["count"].get<size_t>(), 151936u);
  EXPECT_EQ(tokens["first"].get<std::vector<std::string>>(),
            (std::vector<std::string>{"!", "\"", "#", "$", "%"}));
  ASSERT_EQ(j["tensors"].size(), (*g)->tensors().size());
  std::map<std::string, uint64_t> params_by_type;
  uint64_t params = 0;
  for (size_t i = 0; i < j["tensors"].size(); ++i) {
    const auto& jt = j["tensors"][i];
    const GgufTensorInfo& t = (*g)->tensors()[i];
    EXPECT_EQ(jt["name"].get<std::string>(), t.name);
    EXPECT_EQ(jt["type"].get<std::string>(), dtype_name(t.type));
    EXPECT_EQ(jt["shape"].get<std::vector<int64_t>>(),
              std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims));
    EXPECT_EQ(jt["bytes"].get<uint64_t>(), t.size);
    EXPECT_EQ(jt["offset"].get<uint64_t>(), (*g)->data_offset() + t.offset);
    params_by_type[std::string(dtype_name(t.type))] += static_cast<uint64_t>(t.nelements());
    params += static_cast<uint64_t>(t.nelements());
  }
  EXPECT_EQ(j["params"].get<uint64_t>(), params);
  EXPECT_EQ(params, 9847232u);  // 151936*64 embedding + 2 blocks of attention/MLP weights + norms
  for (const auto& [type, n] : params_by_type)
    EXPECT_EQ(j["totals_by_type"][type]["params"].get<uint64_t>(), n);
}

TEST_F(KilnInspect, TextShowsTablesAndTotals) {
  const fs::path path = test_data::path("quant/quant-Q4_K_M.gguf");
  const RunResult r = run_kiln("inspect '" + path.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* want : {"GGUF version 3, alignment 32", "tokenizer.ggml.tokens", "array<string>[512]",
                           "[\"<unk>\", \"<s>\", \"</s>\", \"<0x00>\", \"<0x01>\", ...]", "tensors: 21",
                           "token_embd.weight", "q4_K        13 tensors", "parameters: 1443072"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << "'" << want << "' not in:\n" << r.out;
  }
}

TEST_F(KilnInspect, ErrorsGoToStderrWithExitCode1) {
  const fs::path bad = fs::path(KILN_BINARY_DIR) / "gguf-test" / "inspect-bad.gguf";
  fs::create_directories(bad.parent_path());
  for (const auto& c : gguf_test::malformed_cases()) {
    if (c.name != "duplicate-tensor") continue;
    std::ofstream(bad, std::ios::binary).write(reinterpret_cast<const char*>(c.bytes.data()), c.bytes.size());
  }
  const RunResult r = run_kiln("inspect '" + bad.string() + "'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find("duplicate tensor 'tensor_a'"), std::string::npos) << r.err;
  const RunResult missing = run_kiln("inspect /nonexistent/x.gguf --json");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("cannot open '/nonexistent/x.gguf'"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace kiln
