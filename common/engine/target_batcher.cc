#include "common/engine/target_batcher.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <optional>
#include <utility>
#include <vector>

#include "common/base/clock.h"
#include "common/base/torch_errors.h"
#include "common/model/ops/ops.h"

namespace specd::engine {

struct TargetJob {
  TargetSession* session = nullptr;
  std::optional<absl::StatusOr<TargetStep>> result;

  int64_t rows() const { return session->next_rows(); }
  bool urgent() const { return session->verifying(); }
};

namespace {

// Every logits row's argmax in one transfer for the whole batch: a greedy session then needs
// nothing more from the device to take its step.
absl::Status ReadMostLikely(std::vector<model::ForwardOutput>& outputs) {
  return base::CatchTorchErrors("reading the most likely tokens", [&]() -> absl::Status {
    std::vector<at::Tensor> argmax;
    for (const model::ForwardOutput& output : outputs) {
      if (output.logits.defined()) argmax.push_back(model::ops::RowArgmax(output.logits));
    }
    if (argmax.empty()) return absl::OkStatus();
    const at::Tensor host = at::cat(argmax).to(at::kCPU, at::kLong).contiguous();
    const int64_t* next = host.data_ptr<int64_t>();
    for (model::ForwardOutput& output : outputs) {
      if (!output.logits.defined()) continue;
      output.most_likely.assign(next, next + output.logits.size(0));
      next += output.logits.size(0);
    }
    return absl::OkStatus();
  });
}

}  // namespace

TargetBatcher::TargetBatcher(const model::Qwen35Model& target, BatchingOptions options)
    : target_(target),
      batcher_(options, [this](std::span<TargetJob* const> batch) { return Step(batch); }) {}

absl::StatusOr<TargetStep> TargetBatcher::Prefill(TargetSession& session) {
  if (absl::Status begun = session.BeginPrefill(); !begun.ok()) return begun;
  return Run(session);
}

absl::StatusOr<TargetStep> TargetBatcher::Verify(TargetSession& session, const Drafts& drafts) {
  if (absl::Status begun = session.BeginVerify(drafts); !begun.ok()) return begun;
  return Run(session);
}

absl::StatusOr<TargetStep> TargetBatcher::Run(TargetSession& session) {
  TargetJob job{.session = &session, .result = std::nullopt};
  const auto queued = batcher_.Run(job);
  if (job.result->ok()) {
    (*job.result)->tokens.forward.queued_ms = base::Milliseconds(queued);
  }
  return *std::move(job.result);
}

std::vector<bool> TargetBatcher::Step(std::span<TargetJob* const> batch) const {
  // No autograd bookkeeping in a served forward (torch.inference_mode's): its ops dispatch
  // faster and its views carry no history. The sessions' caches were made outside it; only steps
  // like this one write them.
  const c10::InferenceMode inference;
  std::vector<model::SequenceInput> inputs;
  inputs.reserve(batch.size());
  int64_t rows = 0, logit_rows = 0, replayed_rows = 0;
  for (const TargetJob* job : batch) {
    rows += job->rows();
    const model::SequenceInput& input = inputs.emplace_back(job->session->NextForward());
    logit_rows += input.logit_row_count();
    replayed_rows += input.cache->replay_length();
  }
  absl::StatusOr<std::vector<model::ForwardOutput>> outputs = target_.ForwardBatch(inputs);
  if (outputs.ok()) {
    if (absl::Status read = ReadMostLikely(*outputs); !read.ok()) outputs = read;
  }
  std::vector<bool> done(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    TargetJob& job = *batch[i];
    job.result = job.session->FinishForward(
        outputs.ok() ? absl::StatusOr<model::ForwardOutput>(std::move((*outputs)[i]))
                     : absl::StatusOr<model::ForwardOutput>(outputs.status()));
    done[i] = job.result.has_value();
    if (done[i] && job.result->ok()) {
      TargetForward& forward = (*job.result)->tokens.forward;
      forward.rows = rows;
      forward.sequences = static_cast<int64_t>(batch.size());
      forward.logit_rows = logit_rows;
      forward.replayed_rows = replayed_rows;
    }
  }
  return done;
}

}  // namespace specd::engine
