#pragma once
// The target verifier over gRPC: the service that exposes any VerifierApi (the handler) on a
// server, and the VerifierApi that calls such a server through a channel.
#include <grpcpp/channel.h>

#include <memory>

#include "absl/time/time.h"
#include "services/verifier/verifier_api.h"
#include "specd/v1/verifier.grpc.pb.h"

namespace specd::verifier {

class VerifierGrpcService final : public v1::TargetVerifierService::Service {
 public:
  // `handler` must outlive the service.
  explicit VerifierGrpcService(VerifierApi& handler) : handler_(handler) {}

  grpc::Status Prefill(grpc::ServerContext* context, const v1::PrefillRequest* request,
                       v1::PrefillResponse* response) override;
  grpc::Status Verify(grpc::ServerContext* context, const v1::VerifyRequest* request,
                      v1::VerifyResponse* response) override;
  grpc::Status Release(grpc::ServerContext* context,
                       const v1::TargetVerifierServiceReleaseRequest* request,
                       v1::TargetVerifierServiceReleaseResponse* response) override;
  grpc::Status Info(grpc::ServerContext* context,
                    const v1::TargetVerifierServiceInfoRequest* request,
                    v1::TargetVerifierServiceInfoResponse* response) override;

 private:
  VerifierApi& handler_;
};

class GrpcVerifierClient final : public VerifierApi {
 public:
  // Each call fails with DEADLINE_EXCEEDED after `timeout`.
  GrpcVerifierClient(const std::shared_ptr<grpc::Channel>& channel, absl::Duration timeout);

  absl::StatusOr<v1::PrefillResponse> Prefill(const v1::PrefillRequest& request) override;
  absl::StatusOr<v1::VerifyResponse> Verify(const v1::VerifyRequest& request) override;
  absl::StatusOr<v1::TargetVerifierServiceReleaseResponse> Release(
      const v1::TargetVerifierServiceReleaseRequest& request) override;
  absl::StatusOr<v1::TargetVerifierServiceInfoResponse> Info() override;

 private:
  std::unique_ptr<v1::TargetVerifierService::Stub> stub_;
  absl::Duration timeout_;
};

}  // namespace specd::verifier
