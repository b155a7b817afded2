#pragma once
// The `specctl` command line: each file in this folder adds one group of subcommands.
#include "CLI/CLI.hpp"
#include "cli/specctl/client_options.h"

namespace specd::specctl {

// generate (generate_command.cc)
void AddGenerateCommand(CLI::App& app, const ClientOptions& options);
// health (health_command.cc)
void AddHealthCommand(CLI::App& app, const ClientOptions& options);
// jobs submit | list | get | logs | cancel (jobs_command.cc)
void AddJobsCommands(CLI::App& app, const ClientOptions& options);

}  // namespace specd::specctl
