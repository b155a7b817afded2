// specctl health [--service NAME]: the grpc.health.v1 status of a server (or of one of its
// services). Prints SERVING, NOT_SERVING, …; exits 0 only when SERVING.
#include <iostream>
#include <string>

#include "cli/specctl/commands.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace specd::specctl {

void AddHealthCommand(CLI::App& app, const ClientOptions& options) {
  auto service = std::make_shared<std::string>();
  CLI::App* health = app.add_subcommand("health", "check that the server is serving");
  health->add_option("--service", *service,
                     "one service, e.g. specd.v1.GenerationService (default: the server)");
  health->callback([service, &options] {
    auto stub = grpc::health::v1::Health::NewStub(Connect(options));
    grpc::ClientContext context;
    ConfigureCall(context, options);
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(*service);
    grpc::health::v1::HealthCheckResponse response;
    ExitOnError(stub->Check(&context, request, &response));
    std::cout << grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status())
              << std::endl;
    if (response.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
      throw CLI::RuntimeError(1);
    }
  });
}

}  // namespace specd::specctl
