#include "services/drafter/drafter_grpc.h"

#include "common/rpc/unary.h"

namespace specd::drafter {

using rpc::CallUnary;
using rpc::Reply;

grpc::Status DrafterGrpcService::Draft(grpc::ServerContext*, const v1::DraftRequest* request,
                                       v1::DraftResponse* response) {
  return Reply(handler_.Draft(*request), response);
}

grpc::Status DrafterGrpcService::Release(grpc::ServerContext*,
                                         const v1::DrafterServiceReleaseRequest* request,
                                         v1::DrafterServiceReleaseResponse* response) {
  return Reply(handler_.Release(*request), response);
}

grpc::Status DrafterGrpcService::Info(grpc::ServerContext*, const v1::DrafterServiceInfoRequest*,
                                      v1::DrafterServiceInfoResponse* response) {
  return Reply(handler_.Info(), response);
}

GrpcDrafterClient::GrpcDrafterClient(const std::shared_ptr<grpc::Channel>& channel,
                                     absl::Duration timeout)
    : stub_(v1::DrafterService::NewStub(channel)), timeout_(timeout) {}

absl::StatusOr<v1::DraftResponse> GrpcDrafterClient::Draft(const v1::DraftRequest& request) {
  return CallUnary<v1::DraftResponse>(timeout_, [&](auto* context, auto* response) {
    return stub_->Draft(context, request, response);
  });
}

absl::StatusOr<v1::DrafterServiceReleaseResponse> GrpcDrafterClient::Release(
    const v1::DrafterServiceReleaseRequest& request) {
  return CallUnary<v1::DrafterServiceReleaseResponse>(timeout_, [&](auto* context, auto* response) {
    return stub_->Release(context, request, response);
  });
}

absl::StatusOr<v1::DrafterServiceInfoResponse> GrpcDrafterClient::Info() {
  return CallUnary<v1::DrafterServiceInfoResponse>(timeout_, [&](auto* context, auto* response) {
    return stub_->Info(context, v1::DrafterServiceInfoRequest(), response);
  });
}

}  // namespace specd::drafter
