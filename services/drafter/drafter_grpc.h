#pragma once
// The drafter over gRPC: the service that exposes any DrafterApi (the handler) on a server,
// and the DrafterApi that calls such a server through a channel.
#include <grpcpp/channel.h>

#include <memory>

#include "absl/time/time.h"
#include "services/drafter/drafter_api.h"
#include "specd/v1/drafter.grpc.pb.h"

namespace specd::drafter {

class DrafterGrpcService final : public v1::DrafterService::Service {
 public:
  // `handler` must outlive the service.
  explicit DrafterGrpcService(DrafterApi& handler) : handler_(handler) {}

  grpc::Status Draft(grpc::ServerContext* context, const v1::DraftRequest* request,
                     v1::DraftResponse* response) override;
  grpc::Status Release(grpc::ServerContext* context,
                       const v1::DrafterServiceReleaseRequest* request,
                       v1::DrafterServiceReleaseResponse* response) override;
  grpc::Status Info(grpc::ServerContext* context, const v1::DrafterServiceInfoRequest* request,
                    v1::DrafterServiceInfoResponse* response) override;

 private:
  DrafterApi& handler_;
};

class GrpcDrafterClient final : public DrafterApi {
 public:
  // Each call fails with DEADLINE_EXCEEDED after `timeout`.
  GrpcDrafterClient(const std::shared_ptr<grpc::Channel>& channel, absl::Duration timeout);

  absl::StatusOr<v1::DraftResponse> Draft(const v1::DraftRequest& request) override;
  absl::StatusOr<v1::DrafterServiceReleaseResponse> Release(
      const v1::DrafterServiceReleaseRequest& request) override;
  absl::StatusOr<v1::DrafterServiceInfoResponse> Info() override;

 private:
  std::unique_ptr<v1::DrafterService::Stub> stub_;
  absl::Duration timeout_;
};

}  // namespace specd::drafter
