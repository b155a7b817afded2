#pragma once
// A drafter that runs only inside the orchestrator's process: the suffix drafter
// (common/engine/suffix_drafter.h) reads the committed token ids, which a DraftRequest does not
// carry, so `serve --role all` reaches it through the in-process pair, which calls its sessions
// directly. As the DrafterApi of that pair, it describes the drafter (Info) to the orchestrator
// and refuses Draft.
#include <memory>
#include <string>

#include "common/engine/draft_session.h"
#include "common/io/qwen35_config.h"
#include "services/drafter/drafter_api.h"

namespace specd::drafter {

class InProcessDrafter final : public DrafterApi {
 public:
  // `name` is reported as its model name; it drafts for the target of `target_config`.
  InProcessDrafter(std::unique_ptr<engine::Drafter> drafter, std::string name,
                   const io::Qwen35TextConfig& target_config);

  absl::StatusOr<v1::DraftResponse> Draft(const v1::DraftRequest& request) override;
  absl::StatusOr<v1::DrafterServiceReleaseResponse> Release(
      const v1::DrafterServiceReleaseRequest& request) override;
  absl::StatusOr<v1::DrafterServiceInfoResponse> Info() override;

  const engine::Drafter& drafter() const { return *drafter_; }

 private:
  const std::unique_ptr<const engine::Drafter> drafter_;
  const std::string name_;
  const int64_t hidden_size_;
  const int64_t vocab_size_;
  const std::string instance_id_;
};

}  // namespace specd::drafter
