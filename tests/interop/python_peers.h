#pragma once
// Runs one of tests/interop's Python scripts with the interpreter of the Python peers' virtual
// environment (.cache/python, which scripts/setup.sh fills from scripts/python-requirements.txt),
// offline: what the peers load is local, so they must never wait on a model hub.
#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/paths.h"
#include "tests/support/subprocess.h"

namespace specd::testing {

inline ProcessResult RunPeerScript(const std::string& script, std::vector<std::string> args) {
  const std::filesystem::path python = CacheDir() / "python" / "bin" / "python";
  if (!std::filesystem::exists(python)) {
    return {.exit_code = -1,
            .out = "",
            .err = python.string() + " is missing: scripts/setup.sh installs the Python peers"};
  }
  args.insert(args.begin(),
              {"env", "HF_HUB_OFFLINE=1", "HF_DATASETS_OFFLINE=1", "TRANSFORMERS_VERBOSITY=error",
               python.string(), (SourceDir() / "tests" / "interop" / script).string()});
  return RunProcess(args);
}

}  // namespace specd::testing
