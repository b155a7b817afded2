#pragma once
// A model the text and chat paths run on: the qwen35-tiny-a shape with the Qwen3 tokenizer's
// vocabulary and random weights, written by `specd bench init-model` (SPECD_BINARY, defined for
// the interop tests).
#include <filesystem>
#include <fstream>
#include <string>

#include "nlohmann/json.hpp"
#include "tests/support/paths.h"
#include "tests/support/subprocess.h"

namespace specd::testing {

// Writes the model into `dir`/model and returns that directory; the error `specd` printed, if it
// failed, goes to `error`.
inline std::filesystem::path WriteChatModel(const std::filesystem::path& dir, std::string& error) {
  std::ifstream fixture(FixtureDir("qwen35-tiny-a") / "config.json");
  nlohmann::json config = nlohmann::json::parse(fixture);
  config["vocab_size"] = 151936;
  std::ofstream(dir / "config.json") << config.dump();
  const ProcessResult written =
      RunProcess({SPECD_BINARY, "bench", "init-model", "--config", (dir / "config.json").string(),
                  "--out", (dir / "model").string()});
  if (written.exit_code != 0) error = written.err;
  return dir / "model";
}

}  // namespace specd::testing
