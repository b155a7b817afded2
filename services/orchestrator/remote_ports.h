#pragma once
// The decode loop's ports over a verifier + drafter pair reached through their client interfaces
// (gRPC, or the handlers themselves): the target port keeps the session's generation, its newest
// context handle and the committed ids, which the draft port sends with every Draft (the ids
// the drafter has not had). Destroying a port releases its session on the service.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/engine/draft_session.h"
#include "common/engine/ports.h"
#include "services/drafter/drafter_api.h"
#include "services/verifier/verifier_api.h"

namespace specd::orchestrator {

class RemoteTargetPort final : public engine::TargetPort {
 public:
  // Prefill sends `prefill`, whose session_id names the session. `verifier` must outlive it.
  RemoteTargetPort(verifier::VerifierApi& verifier, v1::PrefillRequest prefill);
  ~RemoteTargetPort() override;

  absl::StatusOr<engine::EmittedTokens> Prefill() override;
  absl::StatusOr<engine::EmittedTokens> Verify(const engine::Drafts& drafts) override;

  const std::string& session_id() const { return prefill_.session_id(); }
  // The handle to the rows committed so far (unset without tapped layers).
  const v1::TensorHandle& context() const { return context_; }
  // The ids of the positions committed so far: the prompt's, then each step's anchor and
  // accepted drafts.
  std::span<const uint32_t> committed() const { return committed_; }
  uint32_t max_session_length() const { return prefill_.max_session_length(); }

 private:
  verifier::VerifierApi& verifier_;
  const v1::PrefillRequest prefill_;
  uint64_t generation_ = 0;
  v1::TensorHandle context_;
  std::vector<uint32_t> committed_;
  uint32_t anchor_ = 0;
};

class RemoteDraftPort final : public engine::DraftPort {
 public:
  // `drafter` and `target` must outlive it; `options` are resolved.
  RemoteDraftPort(drafter::DrafterApi& drafter, const RemoteTargetPort& target,
                  const engine::DraftOptions& options);
  ~RemoteDraftPort() override;

  absl::StatusOr<engine::Drafts> Propose(int64_t anchor, int64_t max_tokens) override;

 private:
  drafter::DrafterApi& drafter_;
  const RemoteTargetPort& target_;
  const engine::DraftOptions options_;
  bool opened_ = false;         // a Draft was sent, so the drafter may hold a session
  int64_t drafter_length_ = 0;  // committed positions the drafter's session holds
};

// One request's ports on `verifier` and, with `draft` (resolved), `drafter`.
engine::RequestPorts OpenRemotePorts(verifier::VerifierApi& verifier, drafter::DrafterApi* drafter,
                                     v1::PrefillRequest prefill,
                                     const std::optional<engine::DraftOptions>& draft);

}  // namespace specd::orchestrator
