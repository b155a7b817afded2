#include "common/engine/generator.h"

#include <memory>
#include <optional>
#include <utility>

#include "common/engine/in_process_ports.h"
#include "common/engine/target_session.h"

namespace specd::engine {

Generator::Generator(const model::Qwen35Model& target, const text::Tokenizer* tokenizer,
                     const RegimeThresholds& regimes)
    : target_(&target), tokenizer_(tokenizer), regimes_(regimes) {}

absl::StatusOr<Generator> Generator::Speculative(const model::Qwen35Model& target,
                                                 const Drafter& drafter,
                                                 const text::Tokenizer* tokenizer,
                                                 const DraftOptions& options,
                                                 const RegimeThresholds& regimes) {
  absl::StatusOr<DraftOptions> resolved = drafter.Resolve(options);
  if (!resolved.ok()) return resolved.status();
  Generator generator(target, tokenizer, regimes);
  generator.drafter_ = &drafter;
  generator.options_ = *resolved;
  return generator;
}

absl::StatusOr<GenerationResult> Generator::Generate(const GenerationRequest& request,
                                                     const ChunkCallback& on_chunk) const {
  if (absl::Status valid = ValidateRequest(request, tokenizer_); !valid.ok()) return valid;
  const auto prompt_length = static_cast<int64_t>(request.prompt.size());
  const int64_t max_length = prompt_length + request.stop.max_new_tokens;
  absl::StatusOr<TargetSession> session = TargetSession::Open(
      *target_, {.prompt = request.prompt,
                 .sampling = request.sampling,
                 .ending_ids = EndingTokenIds(request.stop),
                 .hidden_states =
                     drafter_ == nullptr ? std::vector<int64_t>() : drafter_->TargetHiddenStates(),
                 .max_length = max_length,
                 .top_logprobs = request.top_logprobs});
  if (!session.ok()) return session.status();
  InProcessTargetPort target(*std::move(session));
  std::optional<InProcessDraftPort> draft;
  if (drafter_ != nullptr) {
    absl::StatusOr<std::unique_ptr<DraftSession>> draft_session = drafter_->OpenSession(max_length);
    if (!draft_session.ok()) return draft_session.status();
    draft.emplace(target, *std::move(draft_session), options_);
  }
  DecodeHooks hooks;
  if (on_chunk) {
    hooks.on_step = [&on_chunk](const DecodeStep& step, const GenerationOutput&,
                                const AcceptanceStats&) {
      if (!step.chunk.ids.empty()) on_chunk(step.chunk);
      return true;
    };
  }
  absl::StatusOr<GenerationResult> result =
      RunDecodeLoop(target, draft.has_value() ? &*draft : nullptr, tokenizer_, request.stop, hooks);
  if (!result.ok()) return result.status();
  result->regime = ClassifyRegime(prompt_length, regimes_);
  return result;
}

}  // namespace specd::engine
