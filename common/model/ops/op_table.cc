#include "common/model/ops/op_table.h"

#include <array>
#include <cstddef>

#include "common/model/ops/cpu_backend.h"
#ifdef SPECD_CUDA_BACKEND
#include "common/model/ops/cuda_backend.h"
#endif

namespace specd::model::ops {
namespace {

constexpr size_t kDeviceTypes = static_cast<size_t>(c10::DeviceType::COMPILE_TIME_MAX_DEVICE_TYPES);

// `backend`'s entries over the reference's.
OpTable Merged(const OpTable& backend) {
  OpTable merged = ReferenceOps();
  auto take = [](auto& entry, auto replacement) {
    if (replacement != nullptr) entry = replacement;
  };
  take(merged.project, backend.project);
  take(merged.project_int4, backend.project_int4);
  take(merged.project_int4_tensors, backend.project_int4_tensors);
  take(merged.project_int8, backend.project_int8);
  take(merged.recurrent_gated_delta_rule, backend.recurrent_gated_delta_rule);
  take(merged.chunked_gated_delta_rule, backend.chunked_gated_delta_rule);
  take(merged.batched_gated_delta_rule, backend.batched_gated_delta_rule);
  take(merged.gated_delta_net_gates, backend.gated_delta_net_gates);
  take(merged.attention, backend.attention);
  take(merged.rms_norm, backend.rms_norm);
  take(merged.gated_rms_norm, backend.gated_rms_norm);
  take(merged.silu_mul, backend.silu_mul);
  take(merged.row_argmax, backend.row_argmax);
  take(merged.truncated_softmax, backend.truncated_softmax);
  take(merged.inverse_cdf, backend.inverse_cdf);
  take(merged.rotary, backend.rotary);
  take(merged.causal_conv1d, backend.causal_conv1d);
  take(merged.causal_conv1d_advance, backend.causal_conv1d_advance);
  return merged;
}

struct Dispatch {
  std::array<OpTable, kDeviceTypes> by_device;

  void Fill(bool reference_only) {
    by_device.fill(ReferenceOps());
    if (reference_only) return;
    for (const Backend& backend : Backends()) {
      by_device[static_cast<size_t>(backend.device)] = Merged(backend.ops);
    }
  }
};

Dispatch& TheDispatch() {
  static Dispatch dispatch = [] {
    Dispatch built;
    built.Fill(/*reference_only=*/false);
    return built;
  }();
  return dispatch;
}

}  // namespace

std::span<const Backend> Backends() {
#ifdef SPECD_CUDA_BACKEND
  static const std::array<Backend, 2> backends = {CpuBackend(), CudaBackend()};
#else
  static const std::array<Backend, 1> backends = {CpuBackend()};
#endif
  return backends;
}

const OpTable& OpsFor(c10::DeviceType device) {
  return TheDispatch().by_device[static_cast<size_t>(device)];
}

void UseReferenceOnly(bool reference_only) { TheDispatch().Fill(reference_only); }

}  // namespace specd::model::ops
