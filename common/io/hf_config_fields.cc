#include "common/io/hf_config_fields.h"

#include <optional>
#include <vector>

namespace specd::io {

std::string ReadArchitecture(JsonFieldReader& config) {
  const std::optional<std::vector<std::string>> architectures =
      config.OptionalStringList("architectures");
  return architectures && !architectures->empty() ? architectures->front() : "";
}

double ReadRopeTheta(JsonFieldReader& config) {
  if (config.Has("rope_parameters")) {
    JsonFieldReader rope = config.Object("rope_parameters");
    if (rope.Has("rope_theta")) return rope.Number("rope_theta");
  }
  return config.Number("rope_theta");
}

std::string ReadTorchDType(JsonFieldReader& config) {
  if (config.Has("dtype")) return config.String("dtype");
  return config.StringOr("torch_dtype", "");
}

}  // namespace specd::io
