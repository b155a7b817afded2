// A process sizes its kernel thread pool to the CPUs it may actually use: its affinity mask,
// capped by a cgroup v2 CPU quota such as a Kubernetes CPU limit.
#include "kernels/cpu/available_cpus.h"

#include <sched.h>

#include "gtest/gtest.h"

namespace specd::kernels::cpu {
namespace {

TEST(AvailableCpusTest, AQuotaGrantsItsCpusRoundedUp) {
  EXPECT_EQ(CpusOfQuota("200000 100000"), 2);
  EXPECT_EQ(CpusOfQuota("250000 100000"), 3);
  EXPECT_EQ(CpusOfQuota("50000 100000"), 1);
}

TEST(AvailableCpusTest, NoQuotaOrAnUnreadableLineGrantsNothing) {
  EXPECT_EQ(CpusOfQuota("max 100000"), 0);
  EXPECT_EQ(CpusOfQuota(""), 0);
  EXPECT_EQ(CpusOfQuota("200000"), 0);
  EXPECT_EQ(CpusOfQuota("0 100000"), 0);
}

TEST(AvailableCpusTest, APinnedProcessCountsOnlyItsCpus) {
  cpu_set_t all;
  ASSERT_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
  EXPECT_GE(AvailableCpus(), 1);
  EXPECT_LE(AvailableCpus(), CPU_COUNT(&all));
  // As a cpuset would: one CPU, the first this process may use.
  cpu_set_t one;
  CPU_ZERO(&one);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &all)) {
      CPU_SET(cpu, &one);
      break;
    }
  }
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  const int pinned = AvailableCpus();
  ASSERT_EQ(sched_setaffinity(0, sizeof(all), &all), 0);
  EXPECT_EQ(pinned, 1);
}

}  // namespace
}  // namespace specd::kernels::cpu
