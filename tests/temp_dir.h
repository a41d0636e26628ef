// A fresh directory under the test's temporary folder (gtest's TempDir()), removed with the object;
// open_files_in() counts this process's open files in a directory (unnamed ones too).
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

#include "core/check.h"

namespace kiln::test {

class TempDir {
 public:
  // `prefix`: the directory's name before mkdtemp's six random characters.
  explicit TempDir(const std::string& prefix) {
    std::string tmpl = (std::filesystem::path(testing::TempDir()) / (prefix + "XXXXXX")).string();
    KILN_ASSERT(mkdtemp(tmpl.data()) != nullptr, "mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Files this process has open whose path is in `dir`, named or not (an O_TMPFILE file reads as
// "DIR/#INODE (deleted)" in /proc/self/fd).
inline int open_files_in(const std::string& dir) {
  int n = 0;
  for (const auto& fd : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const std::string target = std::filesystem::read_symlink(fd.path(), ec).string();
    n += !ec && target.starts_with(dir + "/");
  }
  return n;
}

}  // namespace kiln::test
