#include "services/orchestrator/generation_grpc.h"

#include "common/rpc/status.h"
#include "common/rpc/unary.h"

namespace specd::orchestrator {

grpc::Status GenerationGrpcService::Generate(grpc::ServerContext* context,
                                             const v1::GenerateRequest* request,
                                             v1::GenerateResponse* response) {
  if (grpc::Status denied = api_key_.Check(*context); !denied.ok()) return denied;
  return rpc::Reply(handler_.Generate(*request, [context] { return context->IsCancelled(); }),
                    response);
}

grpc::Status GenerationGrpcService::GenerateStream(
    grpc::ServerContext* context, const v1::GenerateStreamRequest* request,
    grpc::ServerWriter<v1::GenerateStreamResponse>* writer) {
  if (grpc::Status denied = api_key_.Check(*context); !denied.ok()) return denied;
  return rpc::ToGrpcStatus(handler_.GenerateStream(
      *request, [context] { return context->IsCancelled(); },
      [writer](const v1::GenerateStreamResponse& message) { return writer->Write(message); }));
}

grpc::Status GenerationGrpcService::Abort(grpc::ServerContext* context,
                                          const v1::AbortRequest* request,
                                          v1::AbortResponse* response) {
  if (grpc::Status denied = api_key_.Check(*context); !denied.ok()) return denied;
  *response = handler_.Abort(*request);
  return grpc::Status::OK;
}

grpc::Status GenerationGrpcService::GetModelInfo(grpc::ServerContext* context,
                                                 const v1::GetModelInfoRequest*,
                                                 v1::GetModelInfoResponse* response) {
  if (grpc::Status denied = api_key_.Check(*context); !denied.ok()) return denied;
  return rpc::Reply(handler_.GetModelInfo(), response);
}

}  // namespace specd::orchestrator
