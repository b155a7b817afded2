#pragma once
// The two ends of the target's vocabulary: its token embedding and its LM head. The DFlash drafter
// drafts through the target's own (it embeds the block with one and reads proposals off the
// other), so a drafter process loads these two tensors of the target checkpoint, not the model.
#include <ATen/core/Tensor.h>

#include <filesystem>
#include <vector>

#include "absl/status/statusor.h"
#include "common/io/checkpoint.h"
#include "common/io/qwen35_config.h"
#include "common/model/model_options.h"
#include "common/model/named_parameter.h"
#include "common/model/quantized_module_matcher.h"

namespace specd::model {

class TokenHead {
 public:
  TokenHead() = default;
  // [vocab, hidden] each, as stored (bf16 on a float32 model too); a tied head is the embedding
  // itself. Embeddings come out in `activations`, the model's dtype.
  TokenHead(at::Tensor embed_tokens, at::Tensor lm_head, c10::ScalarType activations);

  // Reads only the embedding and the head of the Qwen3.5 checkpoint in `dir`.
  static absl::StatusOr<TokenHead> Load(const std::filesystem::path& dir,
                                        const ModelOptions& options = {});

  // The untied `lm_head.weight`, which sits outside the text model's prefix in both layouts;
  // trainable reads are appended to `parameters`.
  static absl::StatusOr<at::Tensor> ReadUntiedHead(const io::Qwen35TextConfig& config,
                                                   const io::Checkpoint& checkpoint,
                                                   const ModelOptions& options,
                                                   const QuantizedModuleMatcher& quantized,
                                                   std::vector<NamedParameter>& parameters);

  // The embedding rows of `ids` [T, hidden].
  at::Tensor Embed(const at::Tensor& ids) const;
  // Logits [T, vocab] float32 of final hidden states [T, hidden].
  at::Tensor Head(const at::Tensor& hidden) const;

  const at::Tensor& embed_tokens() const { return embed_tokens_; }
  const at::Tensor& lm_head() const { return lm_head_; }

 private:
  at::Tensor embed_tokens_;
  at::Tensor lm_head_;
  c10::ScalarType activations_ = c10::kFloat;
};

}  // namespace specd::model
