#pragma once
// A trained model on disk, two ways:
//   - the training state: every parameter in float32 by name, fake-quant latent weights as they
//     are (off the grid), so a resumed run continues exactly where it stopped;
//   - the servable checkpoint: the source's config.json and side files (tokenizer, ...), dense
//     parameters in float32, fake-quant ones rounded onto their frozen grid and packed
//     (compressed-tensors pack-quantized), which the engine, vLLM and transformers load.
#include <filesystem>
#include <span>

#include "absl/status/status.h"
#include "common/model/named_parameter.h"

namespace specd::train {

absl::Status SaveParameters(std::span<const model::NamedParameter> parameters,
                            const std::filesystem::path& file);

// Copies the values saved under each parameter's name into it; a missing name or another shape
// is an error that changes nothing.
absl::Status LoadParameters(std::span<const model::NamedParameter> parameters,
                            const std::filesystem::path& file);

// Writes `out_dir` (created if missing) from `source_dir`, the checkpoint the model was loaded
// from. Tensors of the source that are not parameters (a vision tower, MTP) are not written.
absl::Status ExportCheckpoint(std::span<const model::NamedParameter> parameters,
                              const std::filesystem::path& source_dir,
                              const std::filesystem::path& out_dir);

}  // namespace specd::train
