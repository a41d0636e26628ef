// Shared helpers of the template tests.
#pragma once

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace kiln {

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The clock the fixtures were rendered on: 2026-01-15 09:30:00 UTC.
inline std::chrono::system_clock::time_point fixture_clock() {
  using namespace std::chrono;
  return sys_days{year{2026} / January / 15} + hours{9} + minutes{30};
}

}  // namespace kiln
