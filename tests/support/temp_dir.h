#pragma once
// A fresh directory per test, removed with everything in it when the test ends. Its name is the
// test's plus a unique suffix, so two runs of the same test at once (two checkouts built on one
// machine) never share it.
#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "gtest/gtest.h"

namespace specd::testing {

class TempDir {
 public:
  TempDir() {
    const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name =
        std::string("specd_") + test->test_suite_name() + "_" + test->name() + "_XXXXXX";
    std::replace(name.begin(), name.end(), '/', '_');  // parameterised tests' names have slashes
    std::string path = (std::filesystem::path(::testing::TempDir()) / name).string();
    if (mkdtemp(path.data()) == nullptr) {
      ADD_FAILURE() << "cannot create " << path << ": " << std::strerror(errno);
    }
    path_ = path;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace specd::testing
