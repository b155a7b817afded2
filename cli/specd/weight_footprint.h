#pragma once
// What a loaded target's weights take in memory and what a decode step reads of them, from its
// checkpoint's tensors: ½ byte per INT4 weight plus the float32 scales, int8 zero points and
// act-order permutation the CPU kernel keeps, every matrix a bf16 checkpoint stores in bf16, and
// every other text-model tensor at the model's dtype.
#include <string>

#include "absl/status/statusor.h"
#include "common/model/qwen35_model.h"

namespace specd::cli {

struct WeightFootprint {
  double int4_bytes = 0;
  double dense_bytes = 0;      // including the input embedding
  double embedding_bytes = 0;  // read whole per step only as a tied head (else one row)
  bool tied_head = false;

  double total_bytes() const { return int4_bytes + dense_bytes; }
  double DecodeStepBytes() const { return total_bytes() - (tied_head ? 0 : embedding_bytes); }
};

absl::StatusOr<WeightFootprint> MeasureWeightFootprint(const std::string& dir,
                                                       const model::Qwen35Model& target);

}  // namespace specd::cli
