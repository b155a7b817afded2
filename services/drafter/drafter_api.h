#pragma once
// The drafter's calls (protos/specd/v1/drafter.proto) as the orchestrator's remote ports make
// them: the handler answers them in process, GrpcDrafterClient over a channel.
#include "absl/status/statusor.h"
#include "specd/v1/drafter.pb.h"

namespace specd::drafter {

class DrafterApi {
 public:
  virtual ~DrafterApi() = default;

  virtual absl::StatusOr<v1::DraftResponse> Draft(const v1::DraftRequest& request) = 0;
  virtual absl::StatusOr<v1::DrafterServiceReleaseResponse> Release(
      const v1::DrafterServiceReleaseRequest& request) = 0;
  virtual absl::StatusOr<v1::DrafterServiceInfoResponse> Info() = 0;
};

}  // namespace specd::drafter
