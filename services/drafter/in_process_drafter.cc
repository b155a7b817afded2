#include "services/drafter/in_process_drafter.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/rpc/random_id.h"

namespace specd::drafter {

InProcessDrafter::InProcessDrafter(std::unique_ptr<engine::Drafter> drafter, std::string name,
                                   const io::Qwen35TextConfig& target_config)
    : drafter_(std::move(drafter)),
      name_(std::move(name)),
      hidden_size_(target_config.hidden_size),
      vocab_size_(target_config.vocab_size),
      instance_id_(rpc::NewInstanceId()) {}

absl::StatusOr<v1::DraftResponse> InProcessDrafter::Draft(const v1::DraftRequest&) {
  return absl::FailedPreconditionError(absl::StrCat(
      "the ", name_, " drafter runs in the orchestrator's process only (serve --role all)"));
}

absl::StatusOr<v1::DrafterServiceReleaseResponse> InProcessDrafter::Release(
    const v1::DrafterServiceReleaseRequest&) {
  return v1::DrafterServiceReleaseResponse();  // it holds no sessions of its own
}

absl::StatusOr<v1::DrafterServiceInfoResponse> InProcessDrafter::Info() {
  v1::DrafterServiceInfoResponse info;
  info.set_instance_id(instance_id_);
  info.set_model_name(name_);
  info.set_block_size(static_cast<uint32_t>(drafter_->block_size()));
  info.set_max_block_size(static_cast<uint32_t>(drafter_->block_size()));
  const std::vector<int64_t> taps = drafter_->TargetHiddenStates();
  info.mutable_target_layer_ids()->Assign(taps.begin(), taps.end());
  info.set_hidden_size(static_cast<uint32_t>(hidden_size_));
  info.set_vocab_size(static_cast<uint32_t>(vocab_size_));
  info.set_device("cpu");
  return info;
}

}  // namespace specd::drafter
