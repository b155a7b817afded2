#include "common/spec/target_decoder.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <chrono>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/text/streaming_detokenizer.h"

namespace specd::spec {
namespace {

using Clock = std::chrono::steady_clock;

double MillisecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace

TargetDecoder::TargetDecoder(const model::Qwen35Model& model, const text::Tokenizer* tokenizer)
    : model_(model), tokenizer_(tokenizer) {}

absl::Status TargetDecoder::Validate(const GenerationRequest& request) const {
  if (request.prompt.empty()) return absl::InvalidArgumentError("the prompt has no tokens");
  if (request.stop.max_new_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max new tokens must be at least 1, not ", request.stop.max_new_tokens));
  }
  if (!request.stop.stop_strings.empty() && tokenizer_ == nullptr) {
    return absl::InvalidArgumentError("stop strings need a tokenizer");
  }
  const int64_t vocab = model_.config().vocab_size;
  for (const int64_t id : request.prompt) {
    if (id < 0 || id >= vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("prompt token ", id, " is outside the model's vocabulary of ", vocab));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<model::Qwen35Cache*> TargetDecoder::CacheFor(int64_t length) {
  if (!cache_.has_value() || cache_->max_length() < length) {
    cache_.reset();  // free the old one before allocating its successor
    absl::StatusOr<model::Qwen35Cache> cache = model_.NewCache(length);
    if (!cache.ok()) return cache.status();
    cache_.emplace(*std::move(cache));
  }
  return &*cache_;
}

absl::StatusOr<GenerationResult> TargetDecoder::Generate(const GenerationRequest& request,
                                                         const ChunkCallback& on_chunk) {
  if (absl::Status valid = Validate(request); !valid.ok()) return valid;
  const auto prompt_length = static_cast<int64_t>(request.prompt.size());
  // The last token is sampled but never fed back, hence the -1.
  absl::StatusOr<model::Qwen35Cache*> cache =
      CacheFor(prompt_length + request.stop.max_new_tokens - 1);
  if (!cache.ok()) return cache.status();

  const Clock::time_point start = Clock::now();
  model::Sampler sampler(request.sampling);
  StopCriteria stop(request.stop);
  std::optional<text::StreamingDetokenizer> detokenizer;
  if (tokenizer_ != nullptr) {
    detokenizer.emplace(*tokenizer_, text::DecodeOptions{.skip_special_tokens = true});
  }
  GenerationResult result;
  double decode_ms = 0;
  try {
    absl::StatusOr<model::ForwardOutput> prefill = model_.Prefill(request.prompt, **cache);
    if (!prefill.ok()) return prefill.status();
    at::Tensor logits = prefill->logits.select(0, 0);
    while (true) {
      const int64_t token = sampler.Sample(logits, request.prompt, result.ids);
      if (result.ids.empty()) result.timings.prefill_ms = MillisecondsSince(start);
      result.ids.push_back(token);
      std::string piece;
      if (detokenizer.has_value()) {
        absl::StatusOr<std::string> text = detokenizer->Push(static_cast<text::TokenId>(token));
        if (!text.ok()) return text.status();
        piece = *std::move(text);
      }
      StopCriteria::Step step = stop.Push(token, piece);
      if (step.reason != StopReason::kNone) {
        if (step.reason != StopReason::kStopString && detokenizer.has_value()) {
          step.released_text += stop.Finish() + detokenizer->Flush();
        }
        result.stop_reason = step.reason;
      }
      result.text += step.released_text;
      if (on_chunk) on_chunk({.id = token, .text = std::move(step.released_text)});
      if (result.stop_reason != StopReason::kNone) break;

      const Clock::time_point step_start = Clock::now();
      absl::StatusOr<at::Tensor> next = model_.Decode(token, **cache);
      if (!next.ok()) return next.status();
      logits = *std::move(next);
      decode_ms += MillisecondsSince(step_start);
    }
  } catch (const c10::Error& error) {
    (*cache)->Reset();
    return absl::InternalError(absl::StrCat("generation failed: ", error.what_without_backtrace()));
  }

  GenerationTimings& timings = result.timings;
  timings.total_ms = MillisecondsSince(start);
  const auto decode_steps = static_cast<double>(result.ids.size() - 1);
  timings.decode_ms_per_token = decode_steps > 0 ? decode_ms / decode_steps : 0;
  timings.tokens_per_s = 1000.0 * static_cast<double>(result.ids.size()) / timings.total_ms;
  return result;
}

}  // namespace specd::spec
