// The kernels/cuda backend: turns CUDA tensors into device pointers, shapes and the current
// stream, and hands a case the kernels do not cover (another dtype, a gradient to record) to the
// reference, which runs on the device through LibTorch (cuBLAS for its products).
#include "common/model/ops/cuda_backend.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <vector>

#include "kernels/cuda/causal_conv1d.h"
#include "kernels/cuda/gated_delta_rule.h"
#include "kernels/cuda/rms_norm.h"
#include "kernels/cuda/rotary.h"
#include "kernels/cuda/w4a16_gemm.h"

namespace specd::model::ops {
namespace {
namespace kernels_cuda {

// Whether the kernels take these inputs: `dtype`, and no gradient to record.
bool KernelsTake(at::ScalarType dtype, std::initializer_list<const at::Tensor*> tensors) {
  for (const at::Tensor* tensor : tensors) {
    if (tensor->scalar_type() != dtype) return false;
    if (tensor->requires_grad() && at::GradMode::is_enabled()) return false;
  }
  return true;
}

cudaStream_t CurrentStream() { return c10::cuda::getCurrentCUDAStream().stream(); }

// Rows the W4A16 kernel multiplies in one read of the weight; more run as a bf16 weight
// dequantised once and a cuBLAS GEMM (prefill chunks), where the products, not the bytes, bound.
constexpr int64_t kInt4KernelRows = 32;

// bf16 activations (the model's dtype on a GPU) against the weight resident on their device.
at::Tensor ProjectInt4Tensors(const at::Tensor& x, const Int4Tensors& weight) {
  if (!KernelsTake(at::kBFloat16, {&x})) return ReferenceOps().project_int4_tensors(x, weight);
  const c10::cuda::CUDAGuard on_device(x.device());
  at::Tensor input =
      weight.input_order.defined() ? x.index_select(-1, weight.input_order) : x.contiguous();
  // The kernel loads x 16 bytes at a time: a view into a larger buffer may start in between.
  if (reinterpret_cast<std::uintptr_t>(input.data_ptr()) % 16 != 0) input = input.clone();
  const int64_t rows = input.numel() / weight.cols();
  const kernels::cuda::Int4MatrixDevice matrix{
      .packed = weight.packed.data_ptr<int32_t>(),
      .scales = reinterpret_cast<const __nv_bfloat16*>(weight.scales.data_ptr<at::BFloat16>()),
      .zero_points = weight.zero_points.defined() ? weight.zero_points.data_ptr<int8_t>() : nullptr,
      .rows = weight.rows(),
      .cols = weight.cols(),
      .group_size = weight.group_size};
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = weight.rows();
  if (rows > kInt4KernelRows) {
    at::Tensor dense = at::empty({weight.rows(), weight.cols()}, x.options());
    C10_CUDA_CHECK(kernels::cuda::DequantizeToBf16(
        matrix, reinterpret_cast<__nv_bfloat16*>(dense.data_ptr<at::BFloat16>()), CurrentStream()));
    return at::matmul(input, dense.t()).view(shape);
  }
  at::Tensor y = at::empty(shape, x.options());
  C10_CUDA_CHECK(kernels::cuda::W4A16Gemm(
      reinterpret_cast<const __nv_bfloat16*>(input.data_ptr<at::BFloat16>()), rows, matrix,
      reinterpret_cast<__nv_bfloat16*>(y.data_ptr<at::BFloat16>()), CurrentStream()));
  return y;
}

// The fused recurrent kernel for every length, as on the CPU, if it takes these inputs (float32,
// no gradient, a contiguous state to write): a decode step, a verify block, a prefill chunk and a
// replay make the same arithmetic per token, so a sequence's output does not depend on how its
// tokens were grouped into forwards.
std::optional<at::Tensor> DeltaRuleKernel(const at::Tensor& q, const at::Tensor& k,
                                          const at::Tensor& v, const at::Tensor& g,
                                          const at::Tensor& beta, const at::Tensor& initial_state,
                                          at::Tensor& final_state) {
  const kernels::cuda::DeltaRuleShape shape{
      .tokens = q.size(0), .heads = q.size(1), .key_dim = q.size(2), .value_dim = v.size(2)};
  if (!KernelsTake(at::kFloat, {&q, &k, &v, &g, &beta, &initial_state, &final_state}) ||
      !final_state.is_contiguous() || !kernels::cuda::DeltaRuleTakes(shape)) {
    return std::nullopt;
  }
  const c10::cuda::CUDAGuard on_device(q.device());
  const at::Tensor qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous();
  const at::Tensor gc = g.contiguous(), bc = beta.contiguous(), sc = initial_state.contiguous();
  at::Tensor out = at::empty({shape.tokens, shape.heads, shape.value_dim}, v.options());
  C10_CUDA_CHECK(kernels::cuda::RecurrentGatedDeltaRule(
      shape, qc.data_ptr<float>(), kc.data_ptr<float>(), vc.data_ptr<float>(), gc.data_ptr<float>(),
      bc.data_ptr<float>(), sc.data_ptr<float>(), final_state.data_ptr<float>(),
      out.data_ptr<float>(), CurrentStream()));
  return out;
}

// The element type of a tensor the elementwise kernels take: float32 or bf16, no gradient.
std::optional<kernels::cuda::ElementType> ElementTypeOf(const at::Tensor& t) {
  if (t.requires_grad() && at::GradMode::is_enabled()) return std::nullopt;
  if (t.scalar_type() == at::kFloat) return kernels::cuda::ElementType::kFloat32;
  if (t.scalar_type() == at::kBFloat16) return kernels::cuda::ElementType::kBfloat16;
  return std::nullopt;
}

// One kernel per norm, if it takes these inputs (float32 or bf16, a gate of x's type, no
// gradient), else nothing.
std::optional<at::Tensor> NormKernel(kernels::cuda::NormKind kind, const at::Tensor& x,
                                     const at::Tensor* gate, const at::Tensor& weight, double eps) {
  const std::optional<kernels::cuda::ElementType> type = ElementTypeOf(x);
  const std::optional<kernels::cuda::ElementType> weight_type = ElementTypeOf(weight);
  if (!type || !weight_type || weight.dim() != 1 || weight.size(0) != x.size(-1) ||
      (gate != nullptr && (ElementTypeOf(*gate) != type || gate->sizes() != x.sizes()))) {
    return std::nullopt;
  }
  const c10::cuda::CUDAGuard on_device(x.device());
  const at::Tensor xc = x.contiguous(), wc = weight.contiguous();
  const at::Tensor gc = gate != nullptr ? gate->contiguous() : at::Tensor();
  at::Tensor out = at::empty_like(xc);
  C10_CUDA_CHECK(kernels::cuda::RmsNorm({.kind = kind,
                                         .type = *type,
                                         .weight_type = *weight_type,
                                         .x = xc.data_ptr(),
                                         .gate = gc.defined() ? gc.data_ptr() : nullptr,
                                         .weight = wc.data_ptr(),
                                         .out = out.data_ptr(),
                                         .rows = x.size(-1) == 0 ? 0 : x.numel() / x.size(-1),
                                         .dim = x.size(-1),
                                         .eps = static_cast<float>(eps)},
                                        CurrentStream()));
  return out;
}

at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps, NormWeight kind) {
  const kernels::cuda::NormKind norm = kind == NormWeight::kZeroCentred
                                           ? kernels::cuda::NormKind::kZeroCentred
                                           : kernels::cuda::NormKind::kPlain;
  if (std::optional<at::Tensor> out = NormKernel(norm, x, nullptr, weight, eps)) return *out;
  return ReferenceOps().rms_norm(x, weight, eps, kind);
}

at::Tensor GatedRmsNorm(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& weight,
                        double eps) {
  if (std::optional<at::Tensor> out =
          NormKernel(kernels::cuda::NormKind::kGated, x, &gate, weight, eps)) {
    return *out;
  }
  return ReferenceOps().gated_rms_norm(x, gate, weight, eps);
}

at::Tensor Rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const std::optional<kernels::cuda::ElementType> type = ElementTypeOf(x);
  const int64_t rotary_dim = cos.size(-1);
  if (!type || ElementTypeOf(cos) != type || ElementTypeOf(sin) != type || x.dim() != 3 ||
      cos.sizes() != at::IntArrayRef({x.size(0), rotary_dim}) || sin.sizes() != cos.sizes() ||
      rotary_dim % 2 != 0 || rotary_dim > x.size(2)) {
    return ReferenceOps().rotary(x, cos, sin);
  }
  const c10::cuda::CUDAGuard on_device(x.device());
  const at::Tensor xc = x.contiguous(), cc = cos.contiguous(), sc = sin.contiguous();
  at::Tensor out = at::empty_like(xc);
  C10_CUDA_CHECK(kernels::cuda::Rotary({.type = *type,
                                        .x = xc.data_ptr(),
                                        .cos = cc.data_ptr(),
                                        .sin = sc.data_ptr(),
                                        .out = out.data_ptr(),
                                        .tokens = x.size(0),
                                        .heads = x.size(1),
                                        .head_dim = x.size(2),
                                        .rotary_dim = rotary_dim},
                                       CurrentStream()));
  return out;
}

at::Tensor CausalConv1d(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& state) {
  const std::optional<kernels::cuda::ElementType> type = ElementTypeOf(x);
  const std::optional<kernels::cuda::ElementType> weight_type = ElementTypeOf(weight);
  if (!type || !weight_type || ElementTypeOf(state) != type || x.dim() != 2 || weight.dim() != 2 ||
      weight.size(0) != x.size(1) ||
      state.sizes() != at::IntArrayRef({weight.size(1) - 1, x.size(1)})) {
    return ReferenceOps().causal_conv1d(x, weight, state);
  }
  const c10::cuda::CUDAGuard on_device(x.device());
  const at::Tensor xc = x.contiguous(), wc = weight.contiguous(), sc = state.contiguous();
  at::Tensor out = at::empty_like(xc);
  C10_CUDA_CHECK(kernels::cuda::CausalConv1d({.type = *type,
                                              .weight_type = *weight_type,
                                              .x = xc.data_ptr(),
                                              .weight = wc.data_ptr(),
                                              .state = sc.data_ptr(),
                                              .out = out.data_ptr(),
                                              .tokens = x.size(0),
                                              .channels = x.size(1),
                                              .taps = weight.size(1)},
                                             CurrentStream()));
  return out;
}

// LibTorch's fused attention (its FlashAttention or memory-efficient kernels, chosen by shape and
// mask): no [heads, Tq, Tk] float32 scores in memory, GQA read in place (enable_gqa), the
// softmax accumulated in float32 inside the kernel. The visibility becomes a boolean mask where a
// query does not see every key.
at::Tensor Attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const Visibility& visibility) {
  if (!KernelsTake(at::kBFloat16, {&q, &k, &v})) {
    return ReferenceOps().attention(q, k, v, visibility);
  }
  std::optional<at::Tensor> seen;
  if (const at::Tensor hidden = Hidden(visibility, q.size(0), k.size(1), q.device());
      hidden.defined()) {
    seen = hidden.logical_not();
  }
  const at::Tensor out = at::scaled_dot_product_attention(
      q.permute({1, 0, 2}).unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), seen,
      /*dropout_p=*/0.0, /*is_causal=*/false, /*scale=*/std::nullopt, /*enable_gqa=*/true);
  return out.squeeze(0).permute({1, 0, 2});  // [Tq, heads, head_dim]
}

}  // namespace kernels_cuda
}  // namespace

const Backend& CudaBackend() {
  static const Backend backend{
      .name = "cuda",
      .device = c10::DeviceType::CUDA,
      .ops = {
          .project_int4_tensors = &kernels_cuda::ProjectInt4Tensors,
          .recurrent_gated_delta_rule = &RecurrentGatedDeltaRuleOr<&kernels_cuda::DeltaRuleKernel>,
          .chunked_gated_delta_rule = &ChunkedGatedDeltaRuleOr<&kernels_cuda::DeltaRuleKernel>,
          .attention = &kernels_cuda::Attention,
          .rms_norm = &kernels_cuda::RmsNorm,
          .gated_rms_norm = &kernels_cuda::GatedRmsNorm,
          .rotary = &kernels_cuda::Rotary,
          .causal_conv1d = &kernels_cuda::CausalConv1d}};
  return backend;
}

}  // namespace specd::model::ops
