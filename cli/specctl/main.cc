// specctl: the command-line client of specd's gRPC services.
#include "cli/specctl/client_options.h"
#include "cli/specctl/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"specctl: the client of a specd server"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "specctl 0.1.0");
  specd::specctl::ClientOptions options;
  specd::specctl::AddClientOptions(app, options);
  specd::specctl::AddGenerateCommand(app, options);
  specd::specctl::AddHealthCommand(app, options);
  specd::specctl::AddJobsCommands(app, options);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
