#pragma once
// What the orchestrator calls on a target verifier (protos/specd/v1/verifier.proto). The
// verifier's handler implements it directly (the embedded default calls it in process) and
// GrpcVerifierClient implements it over a channel, so both paths run the same orchestrator code.
#include "absl/status/statusor.h"
#include "specd/v1/verifier.pb.h"

namespace specd::verifier {

class VerifierClient {
 public:
  virtual ~VerifierClient() = default;

  virtual absl::StatusOr<v1::PrefillResponse> Prefill(const v1::PrefillRequest& request) = 0;
  virtual absl::StatusOr<v1::VerifyResponse> Verify(const v1::VerifyRequest& request) = 0;
  virtual absl::StatusOr<v1::TargetVerifierServiceReleaseResponse> Release(
      const v1::TargetVerifierServiceReleaseRequest& request) = 0;
  virtual absl::StatusOr<v1::TargetVerifierServiceInfoResponse> Info() = 0;
};

}  // namespace specd::verifier
