#pragma once
// Fields that every Hugging Face config.json spells the same way whatever the model, including
// the places transformers has moved them between versions.
#include <string>

#include "common/io/json_field_reader.h"

namespace specd::io {

// The first entry of `architectures` (e.g. "Qwen3_5ForCausalLM"), or "" when absent.
std::string ReadArchitecture(JsonFieldReader& config);

// `rope_parameters.rope_theta` (transformers 5), else the older top-level `rope_theta`.
double ReadRopeTheta(JsonFieldReader& config);

// `dtype` (transformers 5), else the older `torch_dtype`; "" when neither names one.
std::string ReadTorchDType(JsonFieldReader& config);

}  // namespace specd::io
