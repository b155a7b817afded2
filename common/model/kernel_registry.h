#pragma once
// The model's hot operations, each with its LibTorch composition — the reference, runs on any
// device — and the kernels that replace it on a device type: kernels/cpu through
// cpu_kernels.cc, and so on per backend. Layers call the op (Project, RecurrentGatedDeltaRule);
// the op runs whatever the registry holds for its input's device. Every replacement is tested
// against the composition it replaces (tests/unit/common/model/kernel_registry_test.cc).
#include <ATen/core/Tensor.h>
#include <c10/core/DeviceType.h>

#include <array>
#include <cstddef>

namespace specd::model {

// The implementations of one op, a function type such as at::Tensor(const at::Tensor&).
template <typename Fn>
class KernelChoice {
 public:
  explicit KernelChoice(Fn* composition) : composition_(composition) {}

  Fn* composition() const { return composition_; }
  // The replacement registered for `device`, else the composition.
  Fn* For(c10::DeviceType device) const {
    Fn* kernel = kernels_[static_cast<size_t>(device)];
    return kernel != nullptr ? kernel : composition_;
  }
  // nullptr puts the composition back.
  void Replace(c10::DeviceType device, Fn* kernel) {
    kernels_[static_cast<size_t>(device)] = kernel;
  }
  void RemoveReplacements() { kernels_.fill(nullptr); }

 private:
  Fn* composition_;
  std::array<Fn*, static_cast<size_t>(c10::DeviceType::COMPILE_TIME_MAX_DEVICE_TYPES)> kernels_{};
};

// y = x Wᵀ for a dense weight [out, in].
using ProjectFn = at::Tensor(const at::Tensor& x, const at::Tensor& weight);
// The token-by-token gated delta rule (gated_delta_rule.h).
using RecurrentGatedDeltaRuleFn = at::Tensor(const at::Tensor& q, const at::Tensor& k,
                                             const at::Tensor& v, const at::Tensor& g,
                                             const at::Tensor& beta,
                                             const at::Tensor& initial_state,
                                             at::Tensor& final_state);

struct KernelRegistry {
  KernelChoice<ProjectFn> project;
  KernelChoice<RecurrentGatedDeltaRuleFn> recurrent_gated_delta_rule;

  // The process's registry: every op's composition, replaced by the kernels of every backend
  // this build has. Change it only while no model runs (tests, benchmarks, start-up flags).
  static KernelRegistry& Get();
  // Every op back to its composition, e.g. to measure what the kernels gain.
  void UseCompositions();
};

// What kernels/cpu replaces (cpu_kernels.cc).
void RegisterCpuKernels(KernelRegistry& registry);

// Gives the CPU kernels' pool `threads` threads (0: one per CPU the process may use, its cgroup
// quota included: kernels::cpu::AvailableCpus) and LibTorch's intra-op parallelism one:
// LibTorch's OpenMP threads call into OpenBLAS, which runs a pool of its own, and the two pools
// on the same cores made prefill 2.7x and decode 3.5x slower than this (measured on 2 cores).
// Call before any model runs; false, changing nothing, once the pool has started.
bool ConfigureCpuThreads(int threads);

}  // namespace specd::model
