#include "common/rpc/shared_memory_region.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace specd::rpc {
namespace {

bool InDevShm(const std::string& name) { return std::filesystem::exists("/dev/shm" + name); }

TEST(SharedMemoryRegion, CreateNamesObjectAfterPidAndCounter) {
  absl::StatusOr<SharedMemoryRegion> first = SharedMemoryRegion::Create(64);
  absl::StatusOr<SharedMemoryRegion> second = SharedMemoryRegion::Create(64);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  const std::string prefix = absl::StrCat("/specd.", getpid(), ".");
  EXPECT_EQ(first->name().rfind(prefix, 0), 0u) << first->name();
  EXPECT_EQ(second->name().rfind(prefix, 0), 0u) << second->name();
  EXPECT_NE(first->name(), second->name());
  EXPECT_TRUE(first->owner());
  EXPECT_EQ(first->size(), 64u);
}

TEST(SharedMemoryRegion, CreateZeroFillsAndReaderSeesOwnerWrites) {
  absl::StatusOr<SharedMemoryRegion> owner = SharedMemoryRegion::Create(4096);
  ASSERT_TRUE(owner.ok()) << owner.status();
  for (uint64_t i = 0; i < owner->size(); ++i) ASSERT_EQ(owner->data()[i], std::byte{0}) << i;

  absl::StatusOr<SharedMemoryRegion> reader =
      SharedMemoryRegion::OpenReadOnly(owner->name(), owner->size());
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_FALSE(reader->owner());
  // Written after the reader mapped: the two mappings share pages, nothing is copied.
  std::memcpy(owner->data() + 100, "specd", 5);
  EXPECT_EQ(std::memcmp(std::as_const(*reader).data() + 100, "specd", 5), 0);
}

TEST(SharedMemoryRegion, ObjectExistsWhileOwnerLivesAndDestructorUnlinksIt) {
  std::string name;
  {
    absl::StatusOr<SharedMemoryRegion> owner = SharedMemoryRegion::Create(128);
    ASSERT_TRUE(owner.ok()) << owner.status();
    name = owner->name();
    EXPECT_TRUE(InDevShm(name));
  }
  EXPECT_FALSE(InDevShm(name));
}

TEST(SharedMemoryRegion, ReaderDestructorLeavesObjectInPlace) {
  absl::StatusOr<SharedMemoryRegion> owner = SharedMemoryRegion::Create(128);
  ASSERT_TRUE(owner.ok()) << owner.status();
  {
    absl::StatusOr<SharedMemoryRegion> reader =
        SharedMemoryRegion::OpenReadOnly(owner->name(), 128);
    ASSERT_TRUE(reader.ok()) << reader.status();
  }
  EXPECT_TRUE(InDevShm(owner->name()));
}

TEST(SharedMemoryRegion, ReaderKeepsItsMappingAfterOwnerUnlinks) {
  absl::StatusOr<SharedMemoryRegion> created = SharedMemoryRegion::Create(16);
  ASSERT_TRUE(created.ok()) << created.status();
  std::optional<SharedMemoryRegion> owner(*std::move(created));
  const std::string name = owner->name();
  owner->data()[3] = std::byte{42};
  absl::StatusOr<SharedMemoryRegion> reader = SharedMemoryRegion::OpenReadOnly(name, 16);
  ASSERT_TRUE(reader.ok()) << reader.status();
  owner.reset();
  EXPECT_FALSE(InDevShm(name));
  EXPECT_EQ(std::as_const(*reader).data()[3], std::byte{42});
}

TEST(SharedMemoryRegion, MoveHandsUnlinkingToTheNewOwner) {
  absl::StatusOr<SharedMemoryRegion> original = SharedMemoryRegion::Create(32);
  ASSERT_TRUE(original.ok()) << original.status();
  const std::string name = original->name();
  {
    SharedMemoryRegion moved = *std::move(original);
    { SharedMemoryRegion discarded = *std::move(original); }  // moved-from: owns nothing
    EXPECT_TRUE(InDevShm(name));
    EXPECT_EQ(moved.name(), name);
  }
  EXPECT_FALSE(InDevShm(name));
}

TEST(SharedMemoryRegion, OpenReadOnlyOfMissingNameIsNotFound) {
  const absl::StatusOr<SharedMemoryRegion> reader =
      SharedMemoryRegion::OpenReadOnly(absl::StrCat("/specd.", getpid(), ".missing"), 16);
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kNotFound) << reader.status();
  EXPECT_NE(reader.status().message().find("missing"), absl::string_view::npos);
}

TEST(SharedMemoryRegion, OpenReadOnlyBeyondObjectSizeIsInvalidArgument) {
  absl::StatusOr<SharedMemoryRegion> owner = SharedMemoryRegion::Create(16);
  ASSERT_TRUE(owner.ok()) << owner.status();
  const absl::StatusOr<SharedMemoryRegion> reader =
      SharedMemoryRegion::OpenReadOnly(owner->name(), 17);
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kInvalidArgument) << reader.status();
  EXPECT_NE(reader.status().message().find(owner->name()), absl::string_view::npos);
}

TEST(SharedMemoryRegion, OpenReadOnlyRejectsNamesThatAreNotOneLevel) {
  EXPECT_EQ(SharedMemoryRegion::OpenReadOnly("specd.1.0", 16).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SharedMemoryRegion::OpenReadOnly("/../etc/passwd", 16).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SharedMemoryRegion, CreateOfZeroBytesIsInvalidArgument) {
  EXPECT_EQ(SharedMemoryRegion::Create(0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SharedMemoryRegion, CreateLargerThanDevShmIsResourceExhausted) {
  const absl::StatusOr<SharedMemoryRegion> region = SharedMemoryRegion::Create(uint64_t{1} << 62);
  EXPECT_EQ(region.status().code(), absl::StatusCode::kResourceExhausted) << region.status();
}

}  // namespace
}  // namespace specd::rpc
