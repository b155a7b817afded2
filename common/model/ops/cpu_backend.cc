// The kernels/cpu backend: turns tensors into pointers and shapes, and hands a case the kernels do
// not cover (another dtype, a layout they do not take, a gradient to record) to the reference.
#include "common/model/ops/cpu_backend.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <initializer_list>
#include <vector>

#include "kernels/cpu/available_cpus.h"
#include "kernels/cpu/dense_gemm.h"
#include "kernels/cpu/gated_delta_rule.h"
#include "kernels/cpu/thread_pool.h"

namespace specd::model::ops {
namespace {
namespace kernels_cpu {

// Whether the kernels take these inputs: float32, and no gradient to record (the kernels are
// not differentiable; training goes through the reference).
bool KernelsTake(std::initializer_list<const at::Tensor*> tensors) {
  for (const at::Tensor* tensor : tensors) {
    if (tensor->scalar_type() != at::kFloat) return false;
    if (tensor->requires_grad() && at::GradMode::is_enabled()) return false;
  }
  return true;
}

// float32 rows against a contiguous bf16 weight, or one against a float32 weight (the decode
// step's GEMV: BLAS sgemm would first pack, i.e. copy, the whole weight). Several rows against a
// float32 weight stay with BLAS, as the trainable model computes them; a bf16 weight always takes
// the kernel, where BLAS would need it widened, a copy of the whole matrix per call.
at::Tensor Project(const at::Tensor& x, const at::Tensor& weight) {
  const bool bf16 = weight.scalar_type() == at::kBFloat16;
  const int64_t rows = x.size(-1) == 0 ? 0 : x.numel() / x.size(-1);
  const bool recorded = weight.requires_grad() && at::GradMode::is_enabled();
  const bool takes = KernelsTake({&x}) && weight.is_contiguous() &&
                     (bf16 ? !recorded : KernelsTake({&weight}) && rows == 1);
  if (!takes) return ReferenceOps().project(x, weight);
  TORCH_CHECK(weight.dim() == 2 && weight.size(1) == x.size(-1), "Project: weight ", weight.sizes(),
              " does not take ", x.size(-1), " input features");
  const at::Tensor input = x.contiguous();
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = weight.size(0);
  at::Tensor y = at::empty(shape, x.options());
  kernels::cpu::DenseGemm(
      input.data_ptr<float>(), rows,
      {.data = weight.data_ptr(), .bf16 = bf16, .rows = weight.size(0), .cols = weight.size(1)},
      y.data_ptr<float>());
  return y;
}

// The fused W4A16 kernel on float32 activations: a bfloat16 model converts the (small)
// activations at its edges, never the weight.
at::Tensor ProjectInt4(const at::Tensor& x, const quant::Int4KernelWeight& weight) {
  TORCH_CHECK(x.size(-1) == weight.cols(), "W4A16 projection expects ", weight.cols(),
              " input features, got ", x.size(-1));
  const at::Tensor input = x.to(at::kFloat).contiguous();
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = weight.rows();
  at::Tensor y = at::empty(shape, input.options());
  weight.Multiply(input.data_ptr<float>(), input.numel() / weight.cols(), y.data_ptr<float>());
  return y.to(x.scalar_type());
}

at::Tensor RecurrentGatedDeltaRule(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   const at::Tensor& g, const at::Tensor& beta,
                                   const at::Tensor& initial_state, at::Tensor& final_state) {
  if (!KernelsTake({&q, &k, &v, &g, &beta, &initial_state, &final_state}) ||
      !final_state.is_contiguous()) {
    return ReferenceOps().recurrent_gated_delta_rule(q, k, v, g, beta, initial_state, final_state);
  }
  const kernels::cpu::DeltaRuleShape shape{
      .tokens = q.size(0), .heads = q.size(1), .key_dim = q.size(2), .value_dim = v.size(2)};
  TORCH_CHECK(
      k.sizes() == q.sizes() && v.size(0) == shape.tokens && v.size(1) == shape.heads &&
          g.sizes() == at::IntArrayRef({shape.tokens, shape.heads}) && beta.sizes() == g.sizes() &&
          final_state.sizes() == at::IntArrayRef({shape.heads, shape.key_dim, shape.value_dim}) &&
          initial_state.sizes() == final_state.sizes(),
      "RecurrentGatedDeltaRule: inconsistent shapes");
  if (!initial_state.is_same(final_state)) final_state.copy_(initial_state);
  const at::Tensor qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous();
  const at::Tensor gc = g.contiguous(), bc = beta.contiguous();
  at::Tensor out = at::empty({shape.tokens, shape.heads, shape.value_dim}, v.options());
  kernels::cpu::RecurrentGatedDeltaRule(
      shape, qc.data_ptr<float>(), kc.data_ptr<float>(), vc.data_ptr<float>(), gc.data_ptr<float>(),
      bc.data_ptr<float>(), final_state.data_ptr<float>(), out.data_ptr<float>());
  return out;
}

}  // namespace kernels_cpu
}  // namespace

const Backend& CpuBackend() {
  static const Backend backend{
      .name = "cpu",
      .device = c10::DeviceType::CPU,
      .ops = {.project = &kernels_cpu::Project,
              .project_int4 = &kernels_cpu::ProjectInt4,
              .recurrent_gated_delta_rule = &kernels_cpu::RecurrentGatedDeltaRule}};
  return backend;
}

bool ConfigureCpuThreads(int threads) {
  const int pool_size = threads > 0 ? threads : kernels::cpu::AvailableCpus();
  if (!kernels::cpu::ThreadPool::SetSharedSize(pool_size)) return false;
  at::set_num_threads(1);
  return true;
}

}  // namespace specd::model::ops
