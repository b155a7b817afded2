#include "services/verifier/verifier_grpc.h"

#include "common/rpc/unary.h"

namespace specd::verifier {

using rpc::CallUnary;
using rpc::Reply;

grpc::Status VerifierGrpcService::Prefill(grpc::ServerContext* context,
                                          const v1::PrefillRequest* request,
                                          v1::PrefillResponse* response) {
  return Reply(handler_.PrefillCancellable(*request, [context] { return context->IsCancelled(); }),
               response);
}

grpc::Status VerifierGrpcService::Verify(grpc::ServerContext*, const v1::VerifyRequest* request,
                                         v1::VerifyResponse* response) {
  return Reply(handler_.Verify(*request), response);
}

grpc::Status VerifierGrpcService::Release(grpc::ServerContext*,
                                          const v1::TargetVerifierServiceReleaseRequest* request,
                                          v1::TargetVerifierServiceReleaseResponse* response) {
  return Reply(handler_.Release(*request), response);
}

grpc::Status VerifierGrpcService::Info(grpc::ServerContext*,
                                       const v1::TargetVerifierServiceInfoRequest*,
                                       v1::TargetVerifierServiceInfoResponse* response) {
  return Reply(handler_.Info(), response);
}

GrpcVerifierClient::GrpcVerifierClient(const std::shared_ptr<grpc::Channel>& channel,
                                       absl::Duration timeout)
    : stub_(v1::TargetVerifierService::NewStub(channel)), timeout_(timeout) {}

absl::StatusOr<v1::PrefillResponse> GrpcVerifierClient::Prefill(const v1::PrefillRequest& request) {
  return CallUnary<v1::PrefillResponse>(timeout_, [&](auto* context, auto* response) {
    return stub_->Prefill(context, request, response);
  });
}

absl::StatusOr<v1::VerifyResponse> GrpcVerifierClient::Verify(const v1::VerifyRequest& request) {
  return CallUnary<v1::VerifyResponse>(timeout_, [&](auto* context, auto* response) {
    return stub_->Verify(context, request, response);
  });
}

absl::StatusOr<v1::TargetVerifierServiceReleaseResponse> GrpcVerifierClient::Release(
    const v1::TargetVerifierServiceReleaseRequest& request) {
  return CallUnary<v1::TargetVerifierServiceReleaseResponse>(
      timeout_,
      [&](auto* context, auto* response) { return stub_->Release(context, request, response); });
}

absl::StatusOr<v1::TargetVerifierServiceInfoResponse> GrpcVerifierClient::Info() {
  return CallUnary<v1::TargetVerifierServiceInfoResponse>(
      timeout_, [&](auto* context, auto* response) {
        return stub_->Info(context, v1::TargetVerifierServiceInfoRequest(), response);
      });
}

}  // namespace specd::verifier
