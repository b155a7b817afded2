#pragma once
// How many threads this process can keep busy: std::thread::hardware_concurrency() counts the
// machine's CPUs, but a container is held to fewer — a cpuset (its affinity mask) and a CPU quota
// (a Kubernetes CPU limit is a cgroup v2 cpu.max) — and a pool sized to the node would be
// throttled on every step.
#include <string_view>

namespace specd::kernels::cpu {

// The CPUs this process may run on, capped by its cgroup's CPU quota; at least 1.
int AvailableCpus();

// Whole CPUs a cgroup v2 `cpu.max` line grants, rounded up ("250000 100000" → 3); 0 for no
// quota ("max 100000") or a line that does not parse.
int CpusOfQuota(std::string_view cpu_max);

}  // namespace specd::kernels::cpu
