#pragma once
// What the orchestrator calls on a drafter (protos/specd/v1/drafter.proto). The drafter's handler
// implements it directly (the embedded default) and GrpcDrafterClient over a channel.
#include "absl/status/statusor.h"
#include "specd/v1/drafter.pb.h"

namespace specd::drafter {

class DrafterClient {
 public:
  virtual ~DrafterClient() = default;

  virtual absl::StatusOr<v1::DraftResponse> Draft(const v1::DraftRequest& request) = 0;
  virtual absl::StatusOr<v1::DrafterServiceReleaseResponse> Release(
      const v1::DrafterServiceReleaseRequest& request) = 0;
  virtual absl::StatusOr<v1::DrafterServiceInfoResponse> Info() = 0;
};

}  // namespace specd::drafter
