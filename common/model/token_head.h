#pragma once
// The two ends of the target's vocabulary: its token embedding and its LM head. The DFlash drafter
// drafts through the target's own (it embeds the block with one and reads proposals off the
// other), so a drafter process loads these two tensors of the target checkpoint, not the model.
#include <ATen/core/Tensor.h>

#include <filesystem>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/io/checkpoint.h"
#include "common/io/qwen35_config.h"
#include "common/model/model_options.h"
#include "common/model/named_parameter.h"
#include "common/model/quantized_module_matcher.h"
#include "kernels/cpu/vnni_gemm.h"

namespace specd::model {

class TokenHead {
 public:
  TokenHead() = default;
  // [vocab, hidden] each, as stored (bf16 on a float32 model too); a tied head is the embedding
  // itself. Embeddings come out in the model's dtype; `options.head` int8 rounds the head (not the
  // embedding) to 8 bits per row, which needs a float32 model on a CPU with AVX2 or AVX-512 VNNI
  // that does not train (a c10::Error otherwise).
  TokenHead(at::Tensor embed_tokens, at::Tensor lm_head, const ModelOptions& options);

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

  // Lets the checkpoint's pages of the embedding and the untied head leave this process's resident
  // memory once a TokenHead is made of them: loading read them whole (into the head's own copy or
  // int8 rows, or a device), and a still mapped embedding is read back a few rows a step.
  static void ReleaseCheckpointPages(const io::Qwen35TextConfig& config,
                                     const io::Checkpoint& checkpoint);

  // The embedding rows of `ids` [T, hidden].
  at::Tensor Embed(const at::Tensor& ids) const;
  // Logits [T, vocab] float32 of final hidden states [T, hidden].
  at::Tensor Head(const at::Tensor& hidden) const;

  const at::Tensor& embed_tokens() const { return embed_tokens_; }
  // The head as stored; undefined when it is int8 and not tied to the embedding.
  const at::Tensor& lm_head() const { return lm_head_; }
  // What one Head call reads of the head's weights.
  int64_t head_bytes() const;

 private:
  at::Tensor embed_tokens_;
  at::Tensor lm_head_;
  // options.head int8: the head's rows rounded to 8 bits, shared by copies of this head.
  std::shared_ptr<const kernels::cpu::VnniMatrix> int8_head_;
  c10::ScalarType activations_ = c10::kFloat;
};

}  // namespace specd::model
