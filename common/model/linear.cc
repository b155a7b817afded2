#include "common/model/linear.h"

#include <ATen/ATen.h>

#include <vector>

#include "common/model/kernel_registry.h"
#include "common/model/linear_input_tap.h"

namespace specd::model {

at::Tensor Project(const at::Tensor& x, const at::Tensor& weight) {
  return KernelRegistry::Get().project.For(x.device().type())(x, weight);
}

at::Tensor ProjectComposition(const at::Tensor& x, const at::Tensor& weight) {
  if (x.numel() != x.size(-1)) return at::linear(x, weight);
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = weight.size(0);
  return at::mv(weight, x.reshape({-1})).view(shape);
}

int64_t Linear::in_features() const {
  if (quantized()) return int4_->cols();
  return (fake_quant_ ? fake_quant_->weight() : weight_).size(1);
}

int64_t Linear::out_features() const {
  if (quantized()) return int4_->rows();
  return (fake_quant_ ? fake_quant_->weight() : weight_).size(0);
}

at::Tensor Linear::Forward(const at::Tensor& x) const {
  LinearInputTap::Observe(module_, x);
  if (fake_quant_) return fake_quant_->Forward(x);
  if (!quantized()) return Project(x, weight_);
  // The loader admits W4A16 only for CPU models, so this holds for the model's inputs.
  TORCH_CHECK(x.device().is_cpu(), "W4A16 runs on the CPU kernel only for now; got ", x.device());
  TORCH_CHECK(x.size(-1) == int4_->cols(), "W4A16 linear expects ", int4_->cols(),
              " input features, got ", x.size(-1));
  // The kernel takes float32 activations: a bfloat16 model converts the (small) activations at
  // its edges, never the weight.
  const at::Tensor input = x.to(at::kFloat).contiguous();
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = int4_->rows();
  at::Tensor y = at::empty(shape, input.options());
  int4_->Multiply(input.data_ptr<float>(), input.numel() / int4_->cols(), y.data_ptr<float>());
  return y.to(x.scalar_type());
}

}  // namespace specd::model
