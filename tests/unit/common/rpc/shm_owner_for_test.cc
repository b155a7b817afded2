// Test helper for shared_memory_reaper_test: starts the reaper, creates two shared-memory
// regions, prints their names (one a line), closes stdout and blocks until it is killed.
#include <unistd.h>

#include <cstdio>
#include <vector>

#include "common/rpc/shared_memory_region.h"

int main() {
  if (!specd::rpc::StartSharedMemoryReaper().ok()) return 1;
  std::vector<specd::rpc::SharedMemoryRegion> regions;
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<specd::rpc::SharedMemoryRegion> region =
        specd::rpc::SharedMemoryRegion::Create(4096);
    if (!region.ok()) return 1;
    std::printf("%s\n", region->name().c_str());
    regions.push_back(*std::move(region));
  }
  // EOF on the test's end of stdout then also shows that the reaper kept no copy of it.
  std::fclose(stdout);
  for (;;) pause();
}
