#pragma once
// The public GenerationService over gRPC, on a GenerationHandler, each call behind the server's
// API key: a client's cancellation or deadline reaches the handler as `cancelled`, which it
// checks before every step.
#include <utility>

#include "common/rpc/api_key.h"
#include "services/orchestrator/generation_handler.h"
#include "specd/v1/generation.grpc.pb.h"

namespace specd::orchestrator {

class GenerationGrpcService final : public v1::GenerationService::Service {
 public:
  // `handler` must outlive the service.
  GenerationGrpcService(GenerationHandler& handler, rpc::ApiKey api_key)
      : handler_(handler), api_key_(std::move(api_key)) {}

  grpc::Status Generate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                        v1::GenerateResponse* response) override;
  grpc::Status GenerateStream(grpc::ServerContext* context,
                              const v1::GenerateStreamRequest* request,
                              grpc::ServerWriter<v1::GenerateStreamResponse>* writer) override;
  grpc::Status Abort(grpc::ServerContext* context, const v1::AbortRequest* request,
                     v1::AbortResponse* response) override;
  grpc::Status GetModelInfo(grpc::ServerContext* context, const v1::GetModelInfoRequest* request,
                            v1::GetModelInfoResponse* response) override;

 private:
  GenerationHandler& handler_;
  const rpc::ApiKey api_key_;
};

}  // namespace specd::orchestrator
