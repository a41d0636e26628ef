// A fresh directory under the test's temporary folder (gtest's TempDir()), removed with the object.
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

}  // namespace kiln::test
