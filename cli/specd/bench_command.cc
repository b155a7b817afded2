// specd bench: measurements of the engine on this machine, one subcommand a file.
#include "cli/specd/commands.h"

namespace specd::cli {

void AddBenchCommands(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Measure the engine on this machine");
  bench->require_subcommand(1);
  AddDecodeBench(*bench);
  AddInitModelBench(*bench);
  AddSpecBench(*bench);
#ifdef SPECD_HAVE_SERVICES
  AddServeBench(*bench);
#endif
}

}  // namespace specd::cli
