#include "common/engine/target_session.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/torch_errors.h"
#include "common/engine/draft_acceptance.h"

namespace specd::engine {

absl::Status CheckTokenIds(std::span<const int64_t> ids, int64_t vocab_size) {
  for (const int64_t id : ids) {
    if (id < 0 || id >= vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", id, " is outside the model's vocabulary of ", vocab_size));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TargetSession> TargetSession::Open(const model::Qwen35Model& target,
                                                  TargetSessionOptions options) {
  if (options.prompt.empty()) return absl::InvalidArgumentError("the prompt has no tokens");
  if (absl::Status ids = CheckTokenIds(options.prompt, target.config().vocab_size); !ids.ok()) {
    return ids;
  }
  const auto prompt_length = static_cast<int64_t>(options.prompt.size());
  if (prompt_length + 1 > options.max_length) {
    return absl::OutOfRangeError(absl::StrCat("a prompt of ", prompt_length,
                                              " tokens leaves no room in a session of ",
                                              options.max_length));
  }
  // The last token is sampled but never fed.
  absl::StatusOr<model::Qwen35Cache> cache = target.NewCache(options.max_length - 1);
  if (!cache.ok()) return cache.status();
  return TargetSession(target, std::move(options), *std::move(cache));
}

TargetSession::TargetSession(const model::Qwen35Model& target, TargetSessionOptions options,
                             model::Qwen35Cache cache)
    : target_(&target),
      options_(std::move(options)),
      cache_(std::move(cache)),
      sampler_(options_.sampling) {}

int64_t TargetSession::room() const {
  return options_.max_length - static_cast<int64_t>(options_.prompt.size() + generated_.size());
}

absl::Status TargetSession::BeginPrefill() {
  if (phase_ != Phase::kIdle || !generated_.empty()) {
    return absl::FailedPreconditionError("the session is prefilled");
  }
  cache_.Reset();
  prefilled_ = 0;
  prompt_rows_.clear();
  phase_ = Phase::kPrefill;
  return absl::OkStatus();
}

absl::Status TargetSession::BeginVerify(const Drafts& drafts) {
  if (phase_ != Phase::kIdle) {
    return absl::FailedPreconditionError(phase_ == Phase::kBroken
                                             ? "a failed forward left the session unusable"
                                             : "the session has a step in flight");
  }
  if (generated_.empty()) return absl::FailedPreconditionError("Verify before Prefill");
  if (absl::Status ids = CheckTokenIds(drafts.tokens, target_->config().vocab_size); !ids.ok()) {
    return ids;
  }
  if (absl::Status distributions = CheckDraftDistributions(drafts, target_->config().vocab_size);
      !distributions.ok()) {
    return distributions;
  }
  // The step may emit a token per block position.
  const auto block_length = static_cast<int64_t>(drafts.tokens.size()) + 1;
  if (block_length > room()) {
    return absl::OutOfRangeError(
        absl::StrCat("a block of ", block_length, " does not fit: ", options_.max_length - room(),
                     " of the session's ", options_.max_length, " tokens are used"));
  }
  block_ = {generated_.back()};
  block_.insert(block_.end(), drafts.tokens.begin(), drafts.tokens.end());
  draft_distributions_ = drafts.distributions;
  phase_ = Phase::kVerify;
  return absl::OkStatus();
}

int64_t TargetSession::next_rows() const {
  if (phase_ == Phase::kVerify) return static_cast<int64_t>(block_.size());
  const auto prompt_length = static_cast<int64_t>(options_.prompt.size());
  const int64_t chunk = options_.prefill_chunk > 0 ? options_.prefill_chunk : prompt_length;
  return std::min(chunk, prompt_length - prefilled_);
}

model::SequenceInput TargetSession::NextForward() {
  if (phase_ == Phase::kVerify) {
    return {
        .ids = block_,
        .cache = &cache_,
        .options = {.logit_rows = model::LogitRows::kAll, .hidden_states = options_.hidden_states},
        .keep_for_rollback = HasDrafts()};
  }
  const int64_t rows = next_rows();
  const bool last = prefilled_ + rows == static_cast<int64_t>(options_.prompt.size());
  return {.ids = std::span<const int64_t>(options_.prompt).subspan(prefilled_, rows),
          .cache = &cache_,
          .options = {.logit_rows = last ? model::LogitRows::kLast : model::LogitRows::kNone,
                      .hidden_states = options_.hidden_states},
          .keep_for_rollback = false};
}

std::optional<absl::StatusOr<TargetStep>> TargetSession::FinishForward(
    absl::StatusOr<model::ForwardOutput> output) {
  const Phase phase = phase_;
  const int64_t rows = next_rows();
  phase_ = Phase::kBroken;  // until the step ends well
  if (!output.ok()) return output.status();
  std::optional<absl::StatusOr<TargetStep>> step;
  const absl::Status status =
      base::CatchTorchErrors(phase == Phase::kVerify ? "verify" : "prefill", [&]() -> absl::Status {
        if (phase == Phase::kVerify) {
          step = FinishVerify(*output);
          return absl::OkStatus();
        }
        if (!output->hidden_states.empty()) {
          prompt_rows_.push_back(at::cat(output->hidden_states, /*dim=*/1));
        }
        prefilled_ += rows;
        if (prefilled_ < static_cast<int64_t>(options_.prompt.size())) {
          phase_ = Phase::kPrefill;  // more chunks to come
          return absl::OkStatus();
        }
        step = FinishPrefill(*output);
        return absl::OkStatus();
      });
  if (!status.ok()) return status;
  if (step.has_value() && step->ok()) phase_ = Phase::kIdle;
  return step;
}

absl::StatusOr<TargetStep> TargetSession::FinishPrefill(const model::ForwardOutput& last_chunk) {
  TargetStep step;
  step.tokens.ids = {sampler_.greedy()
                         ? sampler_
                               .GreedyTokens(last_chunk.logits.narrow(0, 0, 1), options_.prompt, {},
                                             {}, last_chunk.most_likely)
                               .front()
                         : sampler_.Sample(last_chunk.logits.select(0, 0), options_.prompt, {})};
  generated_ = step.tokens.ids;
  step.tokens.logprobs = Logprobs(last_chunk.logits, 1);
  step.context = {.begin = 0, .ids = options_.prompt, .rows = {}};
  if (!prompt_rows_.empty()) {
    step.context.rows = prompt_rows_.size() == 1 ? prompt_rows_.front() : at::cat(prompt_rows_, 0);
  }
  prompt_rows_.clear();
  return step;
}

absl::StatusOr<TargetStep> TargetSession::FinishVerify(const model::ForwardOutput& output) {
  const size_t before = generated_.size();
  absl::StatusOr<int64_t> accepted = AcceptDrafts(
      output.logits, block_, draft_distributions_, sampler_, options_.prompt, generated_,
      [this](int64_t token) -> absl::StatusOr<bool> {
        generated_.push_back(token);
        return std::find(options_.ending_ids.begin(), options_.ending_ids.end(), token) !=
               options_.ending_ids.end();
      },
      output.most_likely);
  if (!accepted.ok()) return accepted.status();
  const int64_t committed = *accepted + 1;  // the anchor and the accepted drafts
  const int64_t anchor_position = cache_.length() - static_cast<int64_t>(block_.size());
  if (HasDrafts()) {
    if (absl::Status rolled = cache_.Rollback(committed); !rolled.ok()) return rolled;
  }
  TargetStep step;
  step.tokens.ids.assign(generated_.begin() + static_cast<int64_t>(before), generated_.end());
  step.tokens.logprobs = Logprobs(output.logits, committed);
  step.context = {.begin = anchor_position,
                  .ids = std::vector<int64_t>(block_.begin(), block_.begin() + committed),
                  .rows = ContextRows(output.hidden_states, committed)};
  return step;
}

at::Tensor TargetSession::ContextRows(const std::vector<at::Tensor>& hidden_states,
                                      int64_t count) const {
  if (hidden_states.empty()) return {};
  // The taps side by side, in TargetHiddenStates() order: the features the drafter's `fc` takes.
  return at::cat(hidden_states, /*dim=*/1).narrow(0, 0, count);
}

std::vector<TokenLogprob> TargetSession::Logprobs(const at::Tensor& logits, int64_t count) const {
  if (options_.top_logprobs < 0) return {};
  // The emitted tokens are the last `count` of the output, one per row.
  const at::Tensor log_probabilities =
      at::log_softmax(logits.narrow(0, 0, count).to(at::kFloat), -1).cpu();
  const int64_t top = options_.top_logprobs;
  std::vector<TokenLogprob> out(count);
  for (int64_t i = 0; i < count; ++i) {
    const at::Tensor row = log_probabilities[i];
    out[i].token = generated_[generated_.size() - count + i];
    out[i].logprob = row[out[i].token].item<float>();
    if (top > 0) {
      const auto [values, ids] = row.topk(top);
      for (int64_t k = 0; k < top; ++k) {
        out[i].top.emplace_back(ids[k].item<int64_t>(), values[k].item<float>());
      }
    }
  }
  return out;
}

}  // namespace specd::engine
