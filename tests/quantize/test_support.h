// Helpers shared by the quantize tests: fixture paths, models made on demand with the project's
// tools/fixtures/mkmodel.py, and structural comparison of GGUF metadata values.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "core/gguf.h"
#include "test_data.h"

namespace kiln::quantize::testing {

// A file of the quantizer fixtures (committed references, or the generated GGUFs).
inline std::string quant_fixture(const std::string& file) { return test_data::path("quant/" + file); }

// A scratch folder for this test binary's outputs under the build folder.
inline std::filesystem::path scratch_dir() {
  const std::filesystem::path dir = std::filesystem::path(KILN_BINARY_DIR) / "quantize_test_files";
  std::filesystem::create_directories(dir);
  return dir;
}

// A llama-shaped random model made by tools/fixtures/mkmodel.py with vocab512.gguf (cached in the
// build folder; made under a temporary name and renamed, so parallel test processes are safe).
// Returns "" after recording a test failure when Python or numpy is missing.
inline std::string make_model(const std::string& stem, const std::string& mkmodel_args) {
  const std::filesystem::path out = scratch_dir() / (stem + ".gguf");
  if (std::filesystem::exists(out)) return out.string();
  const std::filesystem::path tmp = scratch_dir() / (stem + ".tmp" + std::to_string(getpid()) + ".gguf");
  const std::string cmd = "/usr/bin/python3 " KILN_SOURCE_DIR "/tools/fixtures/mkmodel.py --vocab " +
                          quant_fixture("vocab512.gguf") + " --out " + tmp.string() + " " + mkmodel_args +
                          " > /dev/null";
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    ADD_FAILURE() << "could not make model '" << stem << "' (needs /usr/bin/python3 with numpy): " << cmd;
    return "";
  }
  std::filesystem::rename(tmp, out);
  return out.string();
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return {};
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  std::ifstream f(path, std::ios::binary);
  f.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return bytes;
}

inline bool same_value(const GgufValue& a, const GgufValue& b) {
  if (a.type != b.type) return false;
  switch (a.type) {
    case GgufType::STRING:
      return a.str == b.str;
    case GgufType::ARRAY:
      if (a.elem_type != b.elem_type || a.arr.size() != b.arr.size()) return false;
      for (size_t i = 0; i < a.arr.size(); ++i) {
        if (!same_value(a.arr[i], b.arr[i])) return false;
      }
      return true;
    case GgufType::F32:
    case GgufType::F64:
      return std::memcmp(&a.num.f, &b.num.f, sizeof a.num.f) == 0;
    case GgufType::I8:
    case GgufType::I16:
    case GgufType::I32:
    case GgufType::I64:
      return a.num.i == b.num.i;
    default:
      return a.num.u == b.num.u;
  }
}

}  // namespace kiln::quantize::testing
