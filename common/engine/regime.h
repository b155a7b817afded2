#pragma once
// Input-length regimes: every request is classified by its prompt length so that acceptance and
// latency can be reported per regime (the `regime` metric label), since drafting pays off
// differently on short chats and long contexts.
//
// The nominal workloads are short 64 → 128, medium 2048 → 256 and long 8192 → 256
// (prompt → new tokens). A prompt is classified by the nominal length it is nearest to on a log
// scale: the boundaries are the geometric means of neighbouring nominal lengths, rounded up to a
// power of two, √(64·2048) ≈ 362 → 512 and √(2048·8192) = 4096.
#include <cstdint>
#include <vector>

namespace specd::engine {

enum class Regime { kShort, kMedium, kLong };

// "short", "medium", "long".
const char* RegimeName(Regime regime);

struct RegimeThresholds {
  int64_t medium_from = 512;  // prompt tokens
  int64_t long_from = 4096;
};

Regime ClassifyRegime(int64_t prompt_length, const RegimeThresholds& thresholds = {});

// A nominal workload of one regime.
struct RegimeWorkload {
  Regime regime;
  int64_t prompt_tokens;
  int64_t new_tokens;
};

// short 64 → 128, medium 2048 → 256, long 8192 → 256.
std::vector<RegimeWorkload> NominalWorkloads();

}  // namespace specd::engine
