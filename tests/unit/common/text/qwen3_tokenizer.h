#pragma once
// The Qwen3 tokenizer from the set-up cache, loaded once per test binary.
#include <gtest/gtest.h>

#include "common/text/tokenizer.h"
#include "tests/support/paths.h"

namespace specd::text {

inline const Tokenizer& Qwen3Tokenizer() {
  static const Tokenizer* const tokenizer = [] {
    absl::StatusOr<Tokenizer> loaded =
        Tokenizer::FromFile(specd::testing::CacheDir() / "tokenizer/qwen3/tokenizer.json");
    if (!loaded.ok()) {
      ADD_FAILURE() << "run scripts/setup.sh to fetch the tokenizer: " << loaded.status();
      std::abort();
    }
    return new Tokenizer(*std::move(loaded));
  }();
  return *tokenizer;
}

}  // namespace specd::text
