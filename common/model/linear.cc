#include "common/model/linear.h"

#include <ATen/ATen.h>

#include <vector>

namespace specd::model {

at::Tensor Project(const at::Tensor& x, const at::Tensor& weight) {
  if (x.numel() != x.size(-1)) return at::linear(x, weight);
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = weight.size(0);
  return at::mv(weight, x.reshape({-1})).view(shape);
}

at::Tensor Linear::Forward(const at::Tensor& x) const {
  if (!quantized()) return Project(x, weight_);
  // The loader admits W4A16 only for float32 CPU models, so this holds for the model's inputs.
  TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == at::kFloat,
              "W4A16 runs on the CPU kernel only for now; got ", x.device(), " ", x.scalar_type());
  TORCH_CHECK(x.size(-1) == int4_->cols(), "W4A16 linear expects ", int4_->cols(),
              " input features, got ", x.size(-1));
  const at::Tensor input = x.contiguous();
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = int4_->rows();
  at::Tensor y = at::empty(shape, x.options());
  int4_->Multiply(input.data_ptr<float>(), input.numel() / int4_->cols(), y.data_ptr<float>());
  return y;
}

}  // namespace specd::model
