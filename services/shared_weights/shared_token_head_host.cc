// ShareTokenHead and MapTokenHead where LibTorch has no CUDA: nothing is in device memory.
#include "services/shared_weights/shared_token_head.h"

namespace specd::shared_weights {

absl::StatusOr<std::map<std::string, v1::TensorHandle>> ShareTokenHead(const model::TokenHead&,
                                                                       const std::string&,
                                                                       uint64_t) {
  return std::map<std::string, v1::TensorHandle>();
}

absl::StatusOr<model::TokenHead> MapTokenHead(
    const google::protobuf::Map<std::string, v1::TensorHandle>&, const io::Qwen35TextConfig&,
    const model::ModelOptions&) {
  return absl::FailedPreconditionError(
      "mapping a verifier's embedding and head needs a build against a CUDA LibTorch");
}

}  // namespace specd::shared_weights
