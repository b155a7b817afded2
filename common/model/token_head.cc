#include "common/model/token_head.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/io/qwen35_checkpoint_config.h"
#include "common/model/ops/ops.h"
#include "common/model/weight_reader.h"
#include "kernels/cpu/huge_pages.h"
#include "kernels/cpu/parallel_copy.h"
#include "kernels/cpu/thread_pool.h"

namespace specd::model {
namespace {

// A copy of `weight` in memory of its own on huge pages (kernels/cpu/huge_pages.h): a decode step
// reads the whole head, the model's largest matrix (1.2 GiB in bf16 on the 4B shape), and a
// mapped checkpoint's pages are 4 KiB ones; the bf16 GEMV of w4a16_gemv_bench ran 1.2–1.5x faster
// on huge pages.
at::Tensor CopyOntoHugePages(const at::Tensor& weight) {
  const at::Tensor stored = weight.contiguous();
  const size_t bytes = stored.nbytes();
  void* buffer = kernels::cpu::AllocateHugePageBuffer(bytes);
  at::Tensor copy = at::from_blob(
      buffer, stored.sizes(),
      [bytes](void* data) { kernels::cpu::FreeHugePageBuffer(data, bytes); }, stored.options());
  kernels::cpu::ParallelCopy(static_cast<std::byte*>(buffer),
                             static_cast<const std::byte*>(stored.data_ptr()), bytes,
                             kernels::cpu::ThreadPool::Shared().size());
  return copy;
}

}  // namespace

TokenHead::TokenHead(at::Tensor embed_tokens, at::Tensor lm_head, const ModelOptions& options)
    : embed_tokens_(std::move(embed_tokens)),
      lm_head_(std::move(lm_head)),
      activations_(options.dtype) {
  if (options.head == HeadWeights::kStored) {
    if (options.trainable || !options.device.is_cpu()) return;
    const bool tied = lm_head_.is_same(embed_tokens_);
    lm_head_ = CopyOntoHugePages(lm_head_);
    if (tied) embed_tokens_ = lm_head_;
    return;
  }
  TORCH_CHECK(!options.trainable && options.device.is_cpu() && options.dtype == at::kFloat,
              "an int8 LM head needs a float32 model on the CPU that does not train");
  TORCH_CHECK(kernels::cpu::BestVnniGemmIsa() != kernels::cpu::VnniGemmIsa::kNone,
              "an int8 LM head needs a CPU with AVX2 or AVX-512 VNNI");
  TORCH_CHECK(lm_head_.size(1) % kernels::cpu::kVnniMinActivationBlock == 0,
              "an int8 LM head needs a hidden size that is a multiple of ",
              kernels::cpu::kVnniMinActivationBlock, ", not ", lm_head_.size(1));
  const at::Tensor stored = lm_head_.contiguous();
  TORCH_CHECK(stored.scalar_type() == at::kFloat || stored.scalar_type() == at::kBFloat16,
              "an int8 LM head is made from a float32 or bf16 one, not ", stored.scalar_type());
  int8_head_ = std::make_shared<const kernels::cpu::VnniMatrix>(
      kernels::cpu::QuantizeRowsForVnni({.data = stored.data_ptr(),
                                         .bf16 = stored.scalar_type() == at::kBFloat16,
                                         .rows = stored.size(0),
                                         .cols = stored.size(1)}));
  if (!lm_head_.is_same(embed_tokens_)) lm_head_.reset();  // an untied head's stored copy goes
}

absl::StatusOr<TokenHead> TokenHead::Load(const std::filesystem::path& dir,
                                          const ModelOptions& options) {
  absl::StatusOr<io::Qwen35CheckpointConfig> config = io::ReadQwen35CheckpointConfig(dir);
  if (!config.ok()) return config.status();
  absl::StatusOr<io::Checkpoint> checkpoint = io::Checkpoint::Open(dir);
  if (!checkpoint.ok()) return checkpoint.status();
  const io::Qwen35TextConfig& text = config->text;
  try {
    WeightReader reader(*checkpoint, text.tensor_prefix, options);
    at::Tensor embed = reader.Matrix("embed_tokens.weight", text.vocab_size, text.hidden_size);
    if (!reader.status().ok()) return reader.status();
    at::Tensor head = embed;
    if (!text.tie_word_embeddings) {
      absl::StatusOr<QuantizedModuleMatcher> quantized =
          QuantizedModuleMatcher::FromConfig(config->quantization);
      if (!quantized.ok()) return quantized.status();
      std::vector<NamedParameter> parameters;
      absl::StatusOr<at::Tensor> untied =
          ReadUntiedHead(text, *checkpoint, options, *quantized, parameters);
      if (!untied.ok()) return untied.status();
      head = *std::move(untied);
    }
    TokenHead token_head(std::move(embed), std::move(head), options);
    ReleaseCheckpointPages(text, *checkpoint);
    return token_head;
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("loading the embedding and head of ", dir.string(),
                                            ": ", e.what_without_backtrace()));
  }
}

absl::StatusOr<at::Tensor> TokenHead::ReadUntiedHead(const io::Qwen35TextConfig& config,
                                                     const io::Checkpoint& checkpoint,
                                                     const ModelOptions& options,
                                                     const QuantizedModuleMatcher& quantized,
                                                     std::vector<NamedParameter>& parameters) {
  if (quantized.Contains("lm_head")) {
    return absl::UnimplementedError("a quantized lm_head is not supported");
  }
  WeightReader reader(checkpoint, "", options);
  at::Tensor head = reader.Matrix("lm_head.weight", config.vocab_size, config.hidden_size);
  if (!reader.status().ok()) return reader.status();
  parameters.insert(parameters.end(), reader.parameters().begin(), reader.parameters().end());
  return head;
}

void TokenHead::ReleaseCheckpointPages(const io::Qwen35TextConfig& config,
                                       const io::Checkpoint& checkpoint) {
  for (const std::string& name :
       {config.tensor_prefix + "embed_tokens.weight", std::string("lm_head.weight")}) {
    if (const io::TensorView* tensor = checkpoint.Find(name)) {
      checkpoint.ReleaseResidentPages(*tensor);
    }
  }
}

at::Tensor TokenHead::Embed(const at::Tensor& ids) const {
  return at::embedding(embed_tokens_, ids).to(activations_);
}

at::Tensor TokenHead::Head(const at::Tensor& hidden) const {
  if (int8_head_ != nullptr) return ops::ProjectInt8(hidden, *int8_head_);
  return ops::Project(hidden, lm_head_).to(at::kFloat);
}

int64_t TokenHead::head_bytes() const {
  return int8_head_ != nullptr ? int8_head_->ByteSize() : static_cast<int64_t>(lm_head_.nbytes());
}

}  // namespace specd::model
