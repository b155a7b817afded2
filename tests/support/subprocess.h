#pragma once
// Runs a real program (e.g. the built `specd` binary) and captures what it prints, so integration
// tests exercise the same command lines a user types.
#include <string>
#include <vector>

namespace specd::testing {

struct ProcessResult {
  int exit_code = -1;  // the program's exit status, or 128 + signal number if a signal ended it
  std::string out;     // everything written to stdout
  std::string err;     // everything written to stderr
};

// Runs `argv[0]` (looked up on PATH when it names no directory, e.g. "curl") with `argv` (no
// shell), optionally feeding `stdin_text`, and waits for it.
ProcessResult RunProcess(const std::vector<std::string>& argv, const std::string& stdin_text = "");

}  // namespace specd::testing
