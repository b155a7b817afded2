#include "kernels/cpu/available_cpus.h"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <string>
#include <thread>

namespace specd::kernels::cpu {

int CpusOfQuota(std::string_view cpu_max) {
  const size_t space = cpu_max.find(' ');
  if (space == std::string_view::npos) return 0;
  const std::string_view quota = cpu_max.substr(0, space);
  const std::string_view period = cpu_max.substr(space + 1);
  long long quota_us = 0, period_us = 0;
  if (std::from_chars(quota.data(), quota.data() + quota.size(), quota_us).ec != std::errc() ||
      std::from_chars(period.data(), period.data() + period.size(), period_us).ec != std::errc() ||
      quota_us <= 0 || period_us <= 0) {
    return 0;  // "max": no quota
  }
  return static_cast<int>((quota_us + period_us - 1) / period_us);
}

int AvailableCpus() {
  cpu_set_t set;
  int cpus = sched_getaffinity(0, sizeof(set), &set) == 0
                 ? CPU_COUNT(&set)
                 : static_cast<int>(std::thread::hardware_concurrency());
  // A container sees its own cgroup at the root of /sys/fs/cgroup (cgroup v2 namespaces).
  std::ifstream file("/sys/fs/cgroup/cpu.max");
  if (std::string line; std::getline(file, line)) {
    if (const int quota = CpusOfQuota(line); quota > 0) cpus = std::min(cpus, quota);
  }
  return std::max(cpus, 1);
}

}  // namespace specd::kernels::cpu
