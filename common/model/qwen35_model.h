#pragma once
// The Qwen3.5 text model (Qwen3_5ForCausalLM, or the text half of
// Qwen3_5ForConditionalGeneration) and the three ways an engine runs it on a sequence's cache:
// a prefill, one decode step, and a verify block on a warm cache that can be rolled back.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "common/io/checkpoint.h"
#include "common/io/qwen35_config.h"
#include "common/model/cache_footprint.h"
#include "common/model/decoder_layer.h"
#include "common/model/forward_context.h"
#include "common/model/model_options.h"
#include "common/model/named_parameter.h"
#include "common/model/quantized_module_matcher.h"
#include "common/model/qwen35_cache.h"
#include "common/model/rms_norm.h"
#include "common/model/rope.h"
#include "common/model/token_head.h"

namespace specd::model {

class StepGraphs;

enum class LogitRows { kLast, kAll, kNone };  // kNone: no head product (a prefill chunk)

struct ForwardOptions {
  LogitRows logit_rows = LogitRows::kLast;
  // Indices into transformers' `hidden_states` list: 0 is the embeddings, i the output of
  // decoder layer i − 1, and num_hidden_layers the output after the final norm.
  std::vector<int64_t> hidden_states;
};

struct ForwardOutput {
  at::Tensor logits;                      // [1 or T, vocab] float32; undefined for kNone
  std::vector<at::Tensor> hidden_states;  // [T, hidden] each, in the order asked for
  // Each logits row's argmax on the host, where the caller read them (engine::TargetBatcher does,
  // for a whole batch in one transfer); empty otherwise.
  std::vector<int64_t> most_likely;
};

// One sequence's part of a batched forward: `ids` fed after what `cache` holds.
struct SequenceInput {
  std::span<const int64_t> ids;
  Qwen35Cache* cache = nullptr;
  ForwardOptions options = {};
  // A verify block: until the cache's next forward, cache->Rollback(k) can keep a prefix of it.
  bool keep_for_rollback = false;

  // Rows of `ids` the head runs over, as options.logit_rows asks.
  int64_t logit_row_count() const;
};

// The execution calls check their inputs before touching `cache`; a call that fails later (a
// LibTorch error) may leave it part-way through a forward, so Reset it before reusing it.
class Qwen35Model {
 public:
  // Reads `dir`/config.json and the safetensors beside it, with the Linears its compressed-tensors
  // quantization_config names (if any) in W4A16.
  static absl::StatusOr<Qwen35Model> Load(const std::filesystem::path& dir,
                                          const ModelOptions& options = {});
  // Tensors are named under config.tensor_prefix; vision and MTP tensors are not read.
  static absl::StatusOr<Qwen35Model> Load(const io::Qwen35TextConfig& config,
                                          const io::Checkpoint& checkpoint,
                                          const ModelOptions& options = {},
                                          const QuantizedModuleMatcher& quantized = {});

  const io::Qwen35TextConfig& config() const { return config_; }
  const ModelOptions& options() const { return options_; }
  // The weights, when loaded with ModelOptions::trainable (a tied head is the embedding's).
  const std::vector<NamedParameter>& parameters() const { return parameters_; }
  // Bytes of the INT4 projections in their kernels' layouts (WeightReader::int4_bytes).
  int64_t int4_bytes() const { return int4_bytes_; }

  // A cache for sequences of up to `max_length` tokens.
  absl::StatusOr<Qwen35Cache> NewCache(int64_t max_length) const;
  // What NewCache allocates.
  CacheFootprint SequenceFootprint() const;

  // Starts `cache` over with `ids`.
  absl::StatusOr<ForwardOutput> Prefill(std::span<const int64_t> ids, Qwen35Cache& cache,
                                        const ForwardOptions& options = {}) const;

  // Feeds `ids` after what `cache` holds: the rest of a prompt prefilled in pieces (attention
  // materialises [heads, T, context] scores, so long prompts go in pieces).
  absl::StatusOr<ForwardOutput> Extend(std::span<const int64_t> ids, Qwen35Cache& cache,
                                       const ForwardOptions& options = {}) const;

  // Feeds one token; returns its next-token logits [vocab] float32.
  absl::StatusOr<at::Tensor> Decode(int64_t token, Qwen35Cache& cache) const;

  // Feeds `ids` after what `cache` holds, in one forward (the verify path); until the next call,
  // cache.Rollback(k) can keep just the first k of them.
  absl::StatusOr<ForwardOutput> ForwardBlock(std::span<const int64_t> ids, Qwen35Cache& cache,
                                             const ForwardOptions& options = {}) const;

  // Every sequence of `batch` in one forward (continuous batching): the projections, norms and
  // MLPs run over all their rows at once, each sequence's attention and DeltaNet recurrence
  // against its own cache. Output i is what feeding input i alone gives, up to the float
  // rounding of larger matrix products. The caches must be distinct.
  absl::StatusOr<std::vector<ForwardOutput>> ForwardBatch(
      std::span<const SequenceInput> batch) const;

  // The embedding rows of `ids` [T, hidden]; the head is tied to them or not.
  at::Tensor Embed(const at::Tensor& ids) const { return head_.Embed(ids); }
  // Logits [T, vocab] float32 of final hidden states [T, hidden].
  at::Tensor Head(const at::Tensor& hidden) const { return head_.Head(hidden); }
  const TokenHead& token_head() const { return head_; }

 private:
  Qwen35Model() = default;

  // What a batch's layers give: the head's rows some sequence wants, in row order, and
  // transformers' hidden_states at the indices some sequence asked for (undefined elsewhere).
  struct BatchOutput {
    at::Tensor logits;
    std::vector<at::Tensor> states;
  };

  absl::StatusOr<ForwardOutput> Run(std::span<const int64_t> ids, Qwen35Cache& cache,
                                    const ForwardOptions& options, bool keep_for_rollback) const;
  absl::Status CheckInput(const SequenceInput& input) const;
  std::vector<ForwardOutput> Forward(std::span<const SequenceInput> batch) const;
  // The device's work of a forward on `ids` (on the device), leaving the caches' lengths as
  // they were.
  BatchOutput RunLayers(std::span<const SequenceInput> batch, const ForwardContext& context,
                        const at::Tensor& ids) const;
  // A decode step or verify block of `batch` through step_graphs_.
  BatchOutput RunGraph(std::span<const SequenceInput> batch, const ForwardContext& context,
                       const at::Tensor& ids) const;

  io::Qwen35TextConfig config_;
  ModelOptions options_;
  std::vector<DecoderLayer> layers_;
  ZeroCentredRmsNorm norm_;
  TokenHead head_;
  RotaryEmbedding rotary_;
  // With ModelOptions::cuda_graphs; shared by the model's copies.
  std::shared_ptr<StepGraphs> step_graphs_;
  std::vector<NamedParameter> parameters_;
  int64_t int4_bytes_ = 0;
};

}  // namespace specd::model
