#include "cli/specd/weight_footprint.h"

#include "common/io/checkpoint.h"

namespace specd::cli {

absl::StatusOr<WeightFootprint> MeasureWeightFootprint(const std::string& dir,
                                                       const model::Qwen35Model& target) {
  absl::StatusOr<io::Checkpoint> checkpoint = io::Checkpoint::Open(dir);
  if (!checkpoint.ok()) return checkpoint.status();
  const io::Qwen35TextConfig& config = target.config();
  const model::TokenHead& head = target.token_head();
  WeightFootprint footprint{
      .int4_bytes = static_cast<double>(target.int4_bytes()),
      .dense_bytes = 0,
      .embedding_bytes = 0,
      .head_bytes = static_cast<double>(head.head_bytes()),
      .head_is_embedding =
          config.tie_word_embeddings && target.options().head == model::HeadWeights::kStored};
  const auto dense_element = static_cast<double>(c10::elementSize(target.options().dtype));
  for (const io::TensorView& tensor : checkpoint->tensors()) {
    const std::string& name = tensor.name;
    if (!name.starts_with(config.tensor_prefix) && !name.starts_with("lm_head.")) continue;
    const auto elements = static_cast<double>(tensor.NumElements());
    const bool int4 = name.ends_with(".weight_packed") || name.ends_with(".weight_scale") ||
                      name.ends_with(".weight_g_idx") || name.ends_with(".weight_zero_point") ||
                      name.ends_with(".weight_shape");
    if (!int4) {
      // Matrices a bf16 checkpoint stores stay bf16 on a float32 model (WeightReader::Matrix).
      const bool kept_bf16 = tensor.shape.size() == 2 && tensor.dtype == io::DType::kBF16 &&
                             target.options().dtype == c10::kFloat;
      const double bytes = elements * (kept_bf16 ? 2.0 : dense_element);
      if (name.ends_with("embed_tokens.weight")) {
        footprint.embedding_bytes += bytes;
      } else if (name != "lm_head.weight") {
        footprint.dense_bytes += bytes;
      }
    }
  }
  return footprint;
}

}  // namespace specd::cli
