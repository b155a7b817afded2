// The CPU gated delta rule on the Qwen3.5-4B DeltaNet shape (32 value heads of 128 × 128): a
// decode step of many sequences (each state read from memory once per token), a verify block
// and a prefill chunk (a head's state stays in cache over the tokens). The counter is the
// head-tokens per second: one head's state advanced by one token.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/gated_delta_rule.h"

namespace specd::kernels::cpu {
namespace {

constexpr int64_t kHeads = 32;
constexpr int64_t kDim = 128;

std::vector<float> Random(int64_t size, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> values(size);
  for (float& value : values) value = normal(rng);
  return values;
}

// range(0) tokens per sequence, range(1) sequences in one call, each with its own state, advanced
// in place after the first range(2) tokens (the rest run on a copy in cache, as a verify block's
// do while its acceptance is not known).
void DeltaRule(benchmark::State& state) {
  const int64_t tokens = state.range(0), sequences = state.range(1), stored = state.range(2);
  const int64_t rows = tokens * sequences;
  const DeltaRuleShape shape{.tokens = rows, .heads = kHeads, .key_dim = kDim, .value_dim = kDim};
  const std::vector<float> q = Random(rows * kHeads * kDim, 0.01f, 1);
  const std::vector<float> k = Random(rows * kHeads * kDim, 0.1f, 2);
  const std::vector<float> v = Random(rows * kHeads * kDim, 1.0f, 3);
  const std::vector<float> g(rows * kHeads, -0.1f), beta(rows * kHeads, 0.5f);
  std::vector<std::vector<float>> states(sequences, Random(kHeads * kDim * kDim, 0.1f, 4));
  std::vector<DeltaRuleSequence> calls;
  for (int64_t s = 0; s < sequences; ++s) {
    calls.push_back({.tokens = tokens,
                     .stored_tokens = stored,
                     .initial_state = states[s].data(),
                     .final_state = states[s].data()});
  }
  std::vector<float> out(rows * kHeads * kDim);
  for (auto _ : state) {
    RecurrentGatedDeltaRule(shape, q.data(), k.data(), v.data(), g.data(), beta.data(), calls,
                            out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["head_tokens_per_s"] = benchmark::Counter(
      static_cast<double>(rows * kHeads), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(DeltaRule)
    ->ArgNames({"tokens", "sequences", "stored"})
    ->Args({1, 16, 1})     // a batched decode step
    ->Args({4, 16, 4})     // the same after replaying 3 accepted tokens of a verify block
    ->Args({6, 16, 0})     // a batched verify step
    ->Args({9, 16, 3})     // the same after replaying 3 accepted tokens
    ->Args({6, 16, 6})     // a verify step's tokens kept, in place
    ->Args({3, 16, 3})     // 3 tokens in place: a replay on its own
    ->Args({16, 1, 0})     // a verify block
    ->Args({512, 1, 512})  // a prefill chunk
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace specd::kernels::cpu

BENCHMARK_MAIN();
