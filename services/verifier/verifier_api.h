#pragma once
// The target verifier's calls (protos/specd/v1/verifier.proto) as the orchestrator's remote ports
// make them: the handler answers them in process, GrpcVerifierClient over a channel.
#include <functional>

#include "absl/status/statusor.h"
#include "specd/v1/verifier.pb.h"

namespace specd::verifier {

class VerifierApi {
 public:
  virtual ~VerifierApi() = default;

  virtual absl::StatusOr<v1::PrefillResponse> Prefill(const v1::PrefillRequest& request) = 0;
  // Prefill for a server's call: a wait (for the session's memory) ends once `cancelled()`, its
  // client having gone. Where nothing waits, Prefill.
  virtual absl::StatusOr<v1::PrefillResponse> PrefillCancellable(
      const v1::PrefillRequest& request, const std::function<bool()>& /*cancelled*/) {
    return Prefill(request);
  }
  virtual absl::StatusOr<v1::VerifyResponse> Verify(const v1::VerifyRequest& request) = 0;
  virtual absl::StatusOr<v1::TargetVerifierServiceReleaseResponse> Release(
      const v1::TargetVerifierServiceReleaseRequest& request) = 0;
  virtual absl::StatusOr<v1::TargetVerifierServiceInfoResponse> Info() = 0;
};

}  // namespace specd::verifier
