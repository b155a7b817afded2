#include "common/io/allowed_roots.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "absl/strings/match.h"
#include "tests/support/temp_dir.h"

namespace specd::io {
namespace {

class AllowedRootsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(root() / "runs" / "data");
    std::filesystem::create_directories(outside());
  }
  std::filesystem::path root() const { return dir_.path() / "root"; }
  std::filesystem::path outside() const { return dir_.path() / "outside"; }
  AllowedRoots Roots() const { return *AllowedRoots::Create({root()}); }

  specd::testing::TempDir dir_;
};

TEST_F(AllowedRootsTest, PathsUnderARootPassWhetherOrNotTheyExistYet) {
  EXPECT_TRUE(Roots().Check(root(), "out").ok());
  EXPECT_TRUE(Roots().Check(root() / "runs" / "data", "data").ok());
  EXPECT_TRUE(Roots().Check(root() / "jobs" / "job-1" / "model", "out").ok());
  EXPECT_TRUE(Roots().Check(root() / "runs" / ".." / "runs" / "new", "out").ok());
}

TEST_F(AllowedRootsTest, AnAbsolutePathOutsideIsDeniedNamingTheKeyAndTheRoots) {
  const absl::Status status = Roots().Check("/etc/passwd", "config: input");
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(absl::StartsWith(status.message(), "config: input: /etc/passwd is outside"))
      << status;
  EXPECT_TRUE(absl::StrContains(status.message(), std::filesystem::canonical(root()).string()))
      << status;
}

TEST_F(AllowedRootsTest, DotDotCannotClimbOutOfARoot) {
  EXPECT_EQ(Roots().Check(root() / "runs" / ".." / ".." / "outside", "out").code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Roots().Check(root() / "not-yet" / ".." / ".." / "outside", "out").code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(AllowedRootsTest, ASymlinkInsideThatPointsOutsideIsDenied) {
  std::filesystem::create_directory_symlink(outside(), root() / "escape");
  EXPECT_EQ(Roots().Check(root() / "escape", "out").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Roots().Check(root() / "escape" / "new-file", "out").code(),
            absl::StatusCode::kPermissionDenied);
  std::filesystem::create_directory_symlink(root() / "runs", root() / "inside");
  EXPECT_TRUE(Roots().Check(root() / "inside" / "data", "data").ok());
}

TEST_F(AllowedRootsTest, ASiblingWhoseNameExtendsTheRootsIsOutside) {
  std::filesystem::create_directories(dir_.path() / "root-other");
  EXPECT_EQ(Roots().Check(dir_.path() / "root-other", "out").code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(AllowedRootsTest, AnyOfSeveralRootsWillDoAndEachMustBeADirectory) {
  const absl::StatusOr<AllowedRoots> both = AllowedRoots::Create({root(), outside()});
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_TRUE(both->Check(outside() / "file", "data").ok());
  EXPECT_EQ(AllowedRoots::Create({}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AllowedRoots::Create({root() / "missing"}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace specd::io
