#include "common/rpc/grpc_server.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/support/channel_arguments.h>
#include <grpcpp/support/server_interceptor.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/rpc/status.h"

namespace specd::rpc {
namespace {

// Counts each call once, when its status goes out: labels grpc_service ("specd.v1.X"),
// grpc_method and grpc_code, as go-grpc-prometheus names them.
class HandledCounter final : public grpc::experimental::Interceptor {
 public:
  HandledCounter(prometheus::Family<prometheus::Counter>& handled, std::string method)
      : handled_(handled) {
    // "/specd.v1.GenerationService/Generate" → service and method.
    const size_t slash = method.rfind('/');
    service_ = method.substr(1, slash == std::string::npos ? 0 : slash - 1);
    method_ = slash == std::string::npos ? method : method.substr(slash + 1);
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      handled_
          .Add({{"grpc_service", service_},
                {"grpc_method", method_},
                {"grpc_code", StatusCodeName(methods->GetSendStatus().error_code())}})
          .Increment();
    }
    methods->Proceed();
  }

 private:
  prometheus::Family<prometheus::Counter>& handled_;
  std::string service_;
  std::string method_;
};

class HandledCounterFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit HandledCounterFactory(prometheus::Family<prometheus::Counter>& handled)
      : handled_(handled) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new HandledCounter(handled_, info->method());
  }

 private:
  prometheus::Family<prometheus::Counter>& handled_;
};

}  // namespace

absl::StatusOr<GrpcServer> StartGrpcServer(const std::string& address,
                                           const std::vector<grpc::Service*>& services,
                                           const std::vector<std::string>& health_names,
                                           prometheus::Registry& registry, bool serving,
                                           const TlsFiles& tls) {
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = ServerCredentialsOf(tls);
  if (!credentials.ok()) return credentials.status();
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  prometheus::Family<prometheus::Counter>& handled =
      prometheus::BuildCounter()
          .Name("specd_grpc_server_handled_total")
          .Help("gRPC calls completed on the server, by method and status code.")
          .Register(registry);
  GrpcServer result;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, *credentials, &result.port);
  for (grpc::Service* service : services) builder.RegisterService(service);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<HandledCounterFactory>(handled));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  result.server = builder.BuildAndStart();
  if (result.server == nullptr || result.port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address));
  }
  grpc::HealthCheckServiceInterface* health = result.server->GetHealthCheckService();
  health->SetServingStatus(serving);  // "" (the whole server)
  for (const std::string& name : health_names) health->SetServingStatus(name, serving);
  return result;
}

void SetServing(grpc::Server& server, bool serving) {
  if (grpc::HealthCheckServiceInterface* health = server.GetHealthCheckService()) {
    health->SetServingStatus(serving);
  }
}

std::shared_ptr<grpc::Channel> Connect(const std::string& address,
                                       const std::shared_ptr<grpc::ChannelCredentials>& credentials,
                                       const std::string& server_name) {
  grpc::ChannelArguments arguments;
  if (!server_name.empty()) arguments.SetSslTargetNameOverride(server_name);
  return grpc::CreateCustomChannel(address, credentials, arguments);
}

}  // namespace specd::rpc
