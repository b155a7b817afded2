#include "common/engine/regime.h"

namespace specd::engine {

const char* RegimeName(Regime regime) {
  switch (regime) {
    case Regime::kShort:
      return "short";
    case Regime::kMedium:
      return "medium";
    case Regime::kLong:
      return "long";
  }
  return "";
}

Regime ClassifyRegime(int64_t prompt_length, const RegimeThresholds& thresholds) {
  if (prompt_length >= thresholds.long_from) return Regime::kLong;
  if (prompt_length >= thresholds.medium_from) return Regime::kMedium;
  return Regime::kShort;
}

std::vector<RegimeWorkload> NominalWorkloads() {
  return {{.regime = Regime::kShort, .prompt_tokens = 64, .new_tokens = 128},
          {.regime = Regime::kMedium, .prompt_tokens = 2048, .new_tokens = 256},
          {.regime = Regime::kLong, .prompt_tokens = 8192, .new_tokens = 256}};
}

}  // namespace specd::engine
