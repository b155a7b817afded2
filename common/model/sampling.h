#pragma once
// Picks the next token from a row of logits the way serving engines do: penalties for tokens
// already seen, then temperature, top-k, top-p and min-p, then a draw from a per-request random
// stream, so that the same seed gives the same tokens. The processed distribution is exposed too:
// speculative decoding accepts draft tokens against it.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace specd::model {

struct SamplingParams {
  double temperature = 0;  // 0 picks the most likely token (greedy)
  int64_t top_k = 0;       // keep the k most likely tokens; 0 keeps all
  double top_p = 1;        // keep the smallest set whose probability reaches top_p
  double min_p = 0;        // drop tokens below min_p × the most likely token's probability
  // > 1 makes every token of the prompt or the output less likely: positive logits are divided
  // by it, negative ones multiplied (transformers' and vLLM's definition).
  double repetition_penalty = 1;
  // Subtracted once from the logit of every token the output already contains.
  double presence_penalty = 0;
  // Subtracted from a token's logit once per time the output already contains it.
  double frequency_penalty = 0;
  uint64_t seed = 0;
  // Until the output holds min_new_tokens tokens, these (the ids that would end it) get none of
  // the probability.
  int64_t min_new_tokens = 0;
  std::vector<int64_t> ending_ids = {};
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // Penalised logits [vocab] float32 of the next token after `prompt` and `generated`.
  at::Tensor PenalisedLogits(const at::Tensor& logits, std::span<const int64_t> prompt,
                             std::span<const int64_t> generated) const;

  // The distribution [vocab] float32 a draw uses: penalties, temperature, top-k, top-p, min-p.
  // For greedy sampling, all mass on the most likely token.
  at::Tensor Probabilities(const at::Tensor& logits, std::span<const int64_t> prompt,
                           std::span<const int64_t> generated) const;

  // The next token; advances the random stream unless greedy.
  int64_t Sample(const at::Tensor& logits, std::span<const int64_t> prompt,
                 std::span<const int64_t> generated);

  // Greedy only: the token Sample would pick at each row of `logits` [rows, vocab], row i after
  // `generated` and then continuation[0, i) (the drafts a verify block accepts before row i is
  // reached), read back to the host at once: one device sync for a verify block, none when
  // `most_likely` already holds the rows' argmax and no penalty applies.
  std::vector<int64_t> GreedyTokens(const at::Tensor& logits, std::span<const int64_t> prompt,
                                    std::span<const int64_t> generated,
                                    std::span<const int64_t> continuation,
                                    std::span<const int64_t> most_likely = {}) const;

  // An index drawn from `probabilities` [n] (summing to 1) with one uniform of the stream.
  int64_t Draw(const at::Tensor& probabilities);

  // A uniform draw in [0, 1) from the request's stream (also used to accept draft tokens).
  double Uniform();

  bool greedy() const { return params_.temperature <= 0; }

 private:
  SamplingParams params_;
  std::mt19937_64 random_;
};

}  // namespace specd::model
