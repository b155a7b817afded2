#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "common/rpc/shared_memory_region.h"

namespace specd::rpc {
namespace {

bool InDevShm(const std::string& name) { return std::filesystem::exists("/dev/shm" + name); }

// A running shm_owner_for_test and the region names it printed.
struct Owner {
  pid_t pid = -1;
  std::vector<std::string> names;
  // The helper closes its stdout after the names; EOF then means no other process (the reaper)
  // kept a copy of it.
  bool output_closed = false;
};

// Starts the helper (in a process group of its own when `own_group`) and reads its output to EOF,
// for at most 10 s.
Owner StartOwner(bool own_group) {
  Owner owner;
  int output[2];
  if (pipe(output) != 0) return owner;
  owner.pid = fork();
  if (owner.pid == 0) {
    if (own_group) setpgid(0, 0);
    dup2(output[1], STDOUT_FILENO);
    close(output[0]);
    close(output[1]);
    execl(SPECD_SHM_OWNER_FOR_TEST, SPECD_SHM_OWNER_FOR_TEST, static_cast<char*>(nullptr));
    _exit(127);
  }
  close(output[1]);
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd readable{output[0], POLLIN, 0};
    if (poll(&readable, 1, 100) <= 0) continue;
    char buffer[256];
    const ssize_t bytes = read(output[0], buffer, sizeof(buffer));
    if (bytes <= 0) {
      owner.output_closed = bytes == 0;
      break;
    }
    text.append(buffer, bytes);
  }
  close(output[0]);
  owner.names = absl::StrSplit(text, '\n', absl::SkipEmpty());
  return owner;
}

bool VanishWithin(const std::vector<std::string>& names, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    bool any_left = false;
    for (const std::string& name : names) any_left = any_left || InDevShm(name);
    if (!any_left) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

void KillAndWait(pid_t target, int signal_number) {
  kill(target, signal_number);
  int wait_status = 0;
  waitpid(target > 0 ? target : -target, &wait_status, 0);
  EXPECT_TRUE(WIFSIGNALED(wait_status));
}

TEST(SharedMemoryReaper, UnlinksRegionsOfAnOwnerKilledWithSigkill) {
  const Owner owner = StartOwner(/*own_group=*/false);
  ASSERT_GT(owner.pid, 0);
  ASSERT_EQ(owner.names.size(), 2u) << "the helper's output ended before two names";
  for (const std::string& name : owner.names) EXPECT_TRUE(InDevShm(name)) << name;
  EXPECT_TRUE(owner.output_closed) << "something still holds the helper's stdout";

  KillAndWait(owner.pid, SIGKILL);
  EXPECT_TRUE(VanishWithin(owner.names, std::chrono::seconds(3)));
}

TEST(SharedMemoryReaper, SurvivesCtrlCToTheOwnersProcessGroupAndCleansUp) {
  const Owner owner = StartOwner(/*own_group=*/true);
  ASSERT_GT(owner.pid, 0);
  ASSERT_EQ(owner.names.size(), 2u) << "the helper's output ended before two names";

  KillAndWait(-owner.pid, SIGINT);
  EXPECT_TRUE(VanishWithin(owner.names, std::chrono::seconds(3)));
}

TEST(SharedMemoryReaper, LeavesOtherProcessesRegionsAlone) {
  absl::StatusOr<SharedMemoryRegion> ours = SharedMemoryRegion::Create(64);
  ASSERT_TRUE(ours.ok()) << ours.status();
  const Owner owner = StartOwner(/*own_group=*/false);
  ASSERT_EQ(owner.names.size(), 2u) << "the helper's output ended before two names";

  KillAndWait(owner.pid, SIGKILL);
  ASSERT_TRUE(VanishWithin(owner.names, std::chrono::seconds(3)));
  EXPECT_TRUE(InDevShm(ours->name()));
}

}  // namespace
}  // namespace specd::rpc
