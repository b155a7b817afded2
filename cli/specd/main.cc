#include <iostream>
#include <string>

#include "cli/specd/blas_kernels.h"
#include "cli/specd/commands.h"
#include "common/io/allowed_roots.h"
#include "common/model/ops/cpu_backend.h"

namespace specd::cli {

void RunOrExit(const CLI::App& command, const std::function<absl::Status()>& body) {
  const absl::Status status = body();
  if (!status.ok()) {
    // The whole command, e.g. "specd bench serve", not just its last word.
    std::string path = command.get_name();
    for (const CLI::App* parent = command.get_parent();
         parent != nullptr && parent->get_parent() != nullptr; parent = parent->get_parent()) {
      path = parent->get_name() + " " + path;
    }
    std::cerr << "specd " << path << ": " << status.message() << "\n";
    throw CLI::RuntimeError(
        status.code() == absl::StatusCode::kPermissionDenied ? io::kPermissionDeniedExitStatus : 1);
  }
}

}  // namespace specd::cli

int main(int argc, char** argv) {
  specd::cli::RunAgainOnWideBlasKernels(argv);
  CLI::App app{"specd: serve and train Qwen3.5 with a DFlash drafter (local commands)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "specd 0.1.0");
  specd::cli::AddTokenizeCommands(app);
  specd::cli::AddInspectCommand(app);
  specd::cli::AddForwardCommand(app);
  specd::cli::AddGenerateCommand(app);
  specd::cli::AddBenchCommands(app);
  specd::cli::AddDrafterCommands(app);
  specd::cli::AddQuantizeCommand(app);
  specd::cli::AddTrainCommands(app);
#ifdef SPECD_HAVE_SERVICES
  specd::cli::AddServeCommand(app);
#endif
  specd::model::ops::ConfigureCpuThreads(0);  // a command's own --threads may still resize the pool
  CLI11_PARSE(app, argc, argv);
  return 0;
}
