#include "services/verifier/sampling_params.h"

#include <random>
#include <string>

#include "absl/strings/str_cat.h"

namespace specd::verifier {
namespace {

absl::Status OutOfRange(const char* field, double value, const char* range) {
  return absl::InvalidArgumentError(
      absl::StrCat("sampling.", field, " = ", value, " is outside ", range));
}

}  // namespace

absl::StatusOr<model::SamplingParams> ToModelSampling(const v1::SamplingParams& params,
                                                      int64_t vocab_size,
                                                      std::span<const int64_t> eos_ids) {
  model::SamplingParams out;
  const double temperature = params.has_temperature() ? params.temperature() : 1.0;
  if (!(temperature >= 0 && temperature <= 100)) {
    return OutOfRange("temperature", temperature, "[0, 100]");
  }
  out.temperature = temperature < kGreedyTemperature ? 0 : temperature;
  if (params.has_top_p()) {
    if (!(params.top_p() > 0 && params.top_p() <= 1)) {
      return OutOfRange("top_p", params.top_p(), "(0, 1]");
    }
    out.top_p = params.top_p();
  }
  if (params.top_k() > vocab_size) {
    return OutOfRange("top_k", params.top_k(), "[0, vocabulary size]");
  }
  out.top_k = params.top_k();
  if (params.has_min_p()) {
    if (!(params.min_p() >= 0 && params.min_p() <= 1)) {
      return OutOfRange("min_p", params.min_p(), "[0, 1]");
    }
    out.min_p = params.min_p();
  }
  if (params.has_repetition_penalty()) {
    if (!(params.repetition_penalty() > 0 && params.repetition_penalty() <= 10)) {
      return OutOfRange("repetition_penalty", params.repetition_penalty(), "(0, 10]");
    }
    out.repetition_penalty = params.repetition_penalty();
  }
  if (params.has_presence_penalty()) {
    if (!(params.presence_penalty() >= -2 && params.presence_penalty() <= 2)) {
      return OutOfRange("presence_penalty", params.presence_penalty(), "[-2, 2]");
    }
    out.presence_penalty = params.presence_penalty();
  }
  if (params.has_frequency_penalty()) {
    if (!(params.frequency_penalty() >= -2 && params.frequency_penalty() <= 2)) {
      return OutOfRange("frequency_penalty", params.frequency_penalty(), "[-2, 2]");
    }
    out.frequency_penalty = params.frequency_penalty();
  }
  if (params.has_max_new_tokens() && params.min_new_tokens() > params.max_new_tokens()) {
    return OutOfRange("min_new_tokens", params.min_new_tokens(), "[0, max_new_tokens]");
  }
  out.min_new_tokens = params.min_new_tokens();
  if (params.top_logprobs() > kMaxTopLogprobs) {
    return OutOfRange("top_logprobs", params.top_logprobs(), "[0, 20]");
  }
  if (params.top_logprobs() > 0 && !params.logprobs()) {
    return absl::InvalidArgumentError("sampling.top_logprobs needs sampling.logprobs");
  }
  for (const uint32_t id : params.stop_token_ids()) {
    if (id >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("sampling.stop_token_ids has ", id,
                                                     ", outside the vocabulary of ", vocab_size));
    }
  }
  out.ending_ids =
      engine::EndingTokenIds({.max_new_tokens = 0,
                              .eos_ids = std::vector<int64_t>(eos_ids.begin(), eos_ids.end()),
                              .stop_ids = std::vector<int64_t>(params.stop_token_ids().begin(),
                                                               params.stop_token_ids().end()),
                              .stop_strings = {},
                              .ignore_eos = params.ignore_eos()});
  out.seed = params.has_seed() ? params.seed() : std::random_device()();
  return out;
}

int64_t TopLogprobsOf(const v1::SamplingParams& params) {
  return params.logprobs() ? static_cast<int64_t>(params.top_logprobs()) : -1;
}

v1::TokenLogprob ToProto(const engine::TokenLogprob& logprob) {
  v1::TokenLogprob out;
  out.set_token_id(static_cast<uint32_t>(logprob.token));
  out.set_logprob(logprob.logprob);
  for (const auto& [id, value] : logprob.top) {
    v1::TokenLogprob::Candidate& candidate = *out.add_top_logprobs();
    candidate.set_token_id(static_cast<uint32_t>(id));
    candidate.set_logprob(value);
  }
  return out;
}

engine::TokenLogprob FromProto(const v1::TokenLogprob& logprob) {
  engine::TokenLogprob out{.token = logprob.token_id(), .logprob = logprob.logprob(), .top = {}};
  for (const v1::TokenLogprob::Candidate& candidate : logprob.top_logprobs()) {
    out.top.emplace_back(candidate.token_id(), candidate.logprob());
  }
  return out;
}

}  // namespace specd::verifier
