#pragma once
// What a loaded target's weights take in memory and what a decode step reads of them: the INT4
// projections in their kernels' layouts as the model holds them (Qwen35Model::int4_bytes), every
// matrix a bf16 checkpoint stores in bf16, every other text-model tensor of the checkpoint at the
// model's dtype, and the LM head as the model holds it (as stored, or int8).
#include <string>

#include "absl/status/statusor.h"
#include "common/model/qwen35_model.h"

namespace specd::cli {

struct WeightFootprint {
  double int4_bytes = 0;
  double dense_bytes = 0;          // every other tensor but the embedding and the head
  double embedding_bytes = 0;      // one row read per token
  double head_bytes = 0;           // read whole per step
  bool head_is_embedding = false;  // a tied head as stored: the same bytes

  double total_bytes() const {
    return int4_bytes + dense_bytes + embedding_bytes + (head_is_embedding ? 0 : head_bytes);
  }
  double DecodeStepBytes() const { return int4_bytes + dense_bytes + head_bytes; }
};

absl::StatusOr<WeightFootprint> MeasureWeightFootprint(const std::string& dir,
                                                       const model::Qwen35Model& target);

}  // namespace specd::cli
