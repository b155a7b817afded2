#include "common/model/kernel_registry.h"

#include "common/model/gated_delta_rule.h"
#include "common/model/linear.h"

namespace specd::model {

KernelRegistry& KernelRegistry::Get() {
  static KernelRegistry registry = [] {
    KernelRegistry built{.project = KernelChoice<ProjectFn>(&ProjectComposition),
                         .recurrent_gated_delta_rule = KernelChoice<RecurrentGatedDeltaRuleFn>(
                             &RecurrentGatedDeltaRuleComposition)};
    RegisterCpuKernels(built);
    return built;
  }();
  return registry;
}

void KernelRegistry::UseCompositions() {
  project.RemoveReplacements();
  recurrent_gated_delta_rule.RemoveReplacements();
}

}  // namespace specd::model
