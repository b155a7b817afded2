#include "training/adamw_8bit.h"

#include <ATen/core/grad_mode.h>

#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace specd::train {
namespace {

// x flattened and zero-padded to whole blocks: [blocks, block_size].
at::Tensor Blocks(const at::Tensor& x, int64_t block_size) {
  const int64_t n = x.numel();
  const int64_t blocks = (n + block_size - 1) / block_size;
  return at::constant_pad_nd(x.reshape(-1), {0, blocks * block_size - n}).view({blocks, -1});
}

// Codes of x / absmax · levels per block, and the absmax scales (1 for an all-zero block).
std::pair<at::Tensor, at::Tensor> ScaledCodes(const at::Tensor& x, int64_t block_size,
                                              double levels) {
  const at::Tensor blocks = Blocks(x, block_size);
  const at::Tensor absmax = blocks.abs().amax(1);
  const at::Tensor scales = at::where(absmax > 0, absmax, at::ones_like(absmax));
  at::Tensor codes = (blocks / scales.unsqueeze(1) * levels).round().reshape(-1);
  return {codes.slice(0, 0, x.numel()), scales};
}

at::Tensor Dequantize(const BlockQuantized& q, int64_t block_size, double levels) {
  const at::Tensor blocks = Blocks(q.codes.to(at::kFloat), block_size);
  return (blocks * (q.scales / levels).unsqueeze(1)).reshape(-1).slice(0, 0, q.codes.numel());
}

void Append(std::vector<std::byte>& out, const void* data, size_t size) {
  const auto* bytes = static_cast<const std::byte*>(data);
  out.insert(out.end(), bytes, bytes + size);
}

void AppendTensor(std::vector<std::byte>& out, const at::Tensor& t) {
  Append(out, t.data_ptr(), t.nbytes());
}

// Reads fixed-size fields in order; fails once the input runs short.
class Reader {
 public:
  explicit Reader(const std::vector<std::byte>& in) : in_(in) {}
  bool Read(void* data, size_t size) {
    if (in_.size() - offset_ < size) return false;
    std::memcpy(data, in_.data() + offset_, size);
    offset_ += size;
    return true;
  }
  bool ReadTensor(at::Tensor& t) { return Read(t.data_ptr(), t.nbytes()); }
  bool AtEnd() const { return offset_ == in_.size(); }

 private:
  const std::vector<std::byte>& in_;
  size_t offset_ = 0;
};

}  // namespace

BlockQuantized QuantizeFirstMoment(const at::Tensor& m, int64_t block_size) {
  auto [codes, scales] = ScaledCodes(m.sign() * m.abs().sqrt(), block_size, 127);
  return {.codes = codes.clamp(-127, 127).to(at::kChar), .scales = scales};
}

at::Tensor DequantizeFirstMoment(const BlockQuantized& q, int64_t block_size) {
  const at::Tensor root = Dequantize(q, block_size, 127);
  return root * root.abs();
}

BlockQuantized QuantizeSecondMoment(const at::Tensor& v, int64_t block_size) {
  const at::Tensor root = v.sqrt().reshape(-1);
  auto [codes, scales] = ScaledCodes(root, block_size, 255);
  codes = at::where(root > 0, codes.clamp(1, 255), at::zeros_like(codes));
  return {.codes = codes.to(at::kByte), .scales = scales};
}

at::Tensor DequantizeSecondMoment(const BlockQuantized& q, int64_t block_size) {
  return Dequantize(q, block_size, 255).square();
}

absl::StatusOr<AdamW8bit> AdamW8bit::Create(std::vector<at::Tensor> params,
                                            const AdamW8bitOptions& options) {
  if (options.block_size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("block_size ", options.block_size));
  }
  for (const at::Tensor& p : params) {
    if (p.scalar_type() != at::kFloat || !p.device().is_cpu() || !p.is_contiguous()) {
      return absl::InvalidArgumentError("AdamW8bit takes contiguous float32 CPU parameters");
    }
  }
  return AdamW8bit(std::move(params), options);
}

AdamW8bit::AdamW8bit(std::vector<at::Tensor> params, const AdamW8bitOptions& options)
    : params_(std::move(params)), options_(options) {
  for (const at::Tensor& p : params_) {
    const at::Tensor zeros = at::zeros({p.numel()}, at::kFloat);
    moments_.push_back({.m = QuantizeFirstMoment(zeros, options_.block_size),
                        .v = QuantizeSecondMoment(zeros, options_.block_size)});
  }
}

void AdamW8bit::Step(double lr) {
  at::NoGradGuard no_grad;
  ++steps_;
  const double bias1 = 1 - std::pow(options_.beta1, steps_);
  const double bias2 = 1 - std::pow(options_.beta2, steps_);
  for (size_t i = 0; i < params_.size(); ++i) {
    at::Tensor& p = params_[i];
    if (!p.grad().defined()) continue;
    const at::Tensor g = p.grad().reshape(-1);
    Moments& moments = moments_[i];
    at::Tensor m = DequantizeFirstMoment(moments.m, options_.block_size);
    at::Tensor v = DequantizeSecondMoment(moments.v, options_.block_size);
    m.mul_(options_.beta1).add_(g, 1 - options_.beta1);
    v.mul_(options_.beta2).addcmul_(g, g, 1 - options_.beta2);
    // torch.optim.AdamW's order and formula, so that the 32-bit reference differs only by the
    // moments' rounding.
    p.mul_(1 - lr * options_.weight_decay);
    const at::Tensor denom = (v.sqrt() / std::sqrt(bias2)).add_(options_.eps);
    p.view(-1).addcdiv_(m, denom, -lr / bias1);
    moments = {.m = QuantizeFirstMoment(m, options_.block_size),
               .v = QuantizeSecondMoment(v, options_.block_size)};
  }
}

void AdamW8bit::ZeroGrad() {
  for (at::Tensor& p : params_) {
    if (p.grad().defined()) p.mutable_grad().zero_();
  }
}

// Native byte order: steps, block size, parameter count, then per parameter its element count,
// m codes, v codes, m scales, v scales.
std::vector<std::byte> AdamW8bit::State() const {
  std::vector<std::byte> out;
  const int64_t count = static_cast<int64_t>(params_.size());
  Append(out, &steps_, sizeof(steps_));
  Append(out, &options_.block_size, sizeof(options_.block_size));
  Append(out, &count, sizeof(count));
  for (size_t i = 0; i < params_.size(); ++i) {
    const int64_t numel = params_[i].numel();
    Append(out, &numel, sizeof(numel));
    AppendTensor(out, moments_[i].m.codes);
    AppendTensor(out, moments_[i].v.codes);
    AppendTensor(out, moments_[i].m.scales);
    AppendTensor(out, moments_[i].v.scales);
  }
  return out;
}

absl::Status AdamW8bit::LoadState(const std::vector<std::byte>& state) {
  Reader reader(state);
  int64_t steps = 0, block_size = 0, count = 0;
  if (!reader.Read(&steps, sizeof(steps)) || !reader.Read(&block_size, sizeof(block_size)) ||
      !reader.Read(&count, sizeof(count))) {
    return absl::InvalidArgumentError("AdamW8bit state: truncated header");
  }
  if (block_size != options_.block_size || count != static_cast<int64_t>(params_.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("AdamW8bit state for ", count, " parameters in blocks of ", block_size,
                     ", expected ", params_.size(), " in blocks of ", options_.block_size));
  }
  std::vector<Moments> moments;
  for (const at::Tensor& p : params_) {
    int64_t numel = 0;
    if (!reader.Read(&numel, sizeof(numel)) || numel != p.numel()) {
      return absl::InvalidArgumentError("AdamW8bit state: parameter sizes differ");
    }
    const int64_t blocks = (numel + block_size - 1) / block_size;
    Moments next{.m = {.codes = at::empty({numel}, at::kChar), .scales = at::empty({blocks})},
                 .v = {.codes = at::empty({numel}, at::kByte), .scales = at::empty({blocks})}};
    if (!reader.ReadTensor(next.m.codes) || !reader.ReadTensor(next.v.codes) ||
        !reader.ReadTensor(next.m.scales) || !reader.ReadTensor(next.v.scales)) {
      return absl::InvalidArgumentError("AdamW8bit state: truncated moments");
    }
    moments.push_back(std::move(next));
  }
  if (!reader.AtEnd()) return absl::InvalidArgumentError("AdamW8bit state: trailing bytes");
  moments_ = std::move(moments);
  steps_ = steps;
  return absl::OkStatus();
}

}  // namespace specd::train
