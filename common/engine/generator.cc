#include "common/engine/generator.h"

#include <utility>

namespace specd::engine {

Generator::Generator(const model::Qwen35Model& target, const text::Tokenizer* tokenizer,
                     const RegimeThresholds& regimes)
    : Generator(target, nullptr, std::nullopt, tokenizer, regimes, /*guarded=*/false) {}

Generator::Generator(const model::Qwen35Model& target, const Drafter* drafter,
                     std::optional<DraftOptions> options, const text::Tokenizer* tokenizer,
                     const RegimeThresholds& regimes, bool guarded)
    : pair_(std::make_shared<InProcessPair>(target, drafter)),
      options_(std::move(options)),
      guard_(guarded ? std::make_shared<SpeculationGuard>() : nullptr),
      tokenizer_(tokenizer),
      regimes_(regimes) {}

absl::StatusOr<Generator> Generator::Speculative(const model::Qwen35Model& target,
                                                 const Drafter& drafter,
                                                 const text::Tokenizer* tokenizer,
                                                 const DraftOptions& options,
                                                 const RegimeThresholds& regimes, bool guarded) {
  absl::StatusOr<DraftOptions> resolved = drafter.Resolve(options);
  if (!resolved.ok()) return resolved.status();
  return Generator(target, &drafter, *resolved, tokenizer, regimes, guarded);
}

absl::StatusOr<GenerationResult> Generator::Generate(const GenerationRequest& request,
                                                     const ChunkCallback& on_chunk) const {
  if (absl::Status valid = ValidateRequest(request, tokenizer_); !valid.ok()) return valid;
  absl::StatusOr<RequestPorts> ports = pair_->Open(request, options_);
  if (!ports.ok()) return ports.status();
  DecodeHooks hooks;
  if (on_chunk) {
    hooks.on_step = [&on_chunk](const DecodeStep& step, const GenerationOutput&,
                                const AcceptanceStats&) {
      if (!step.chunk.ids.empty()) on_chunk(step.chunk);
      return true;
    };
  }
  const Regime regime = ClassifyRegime(static_cast<int64_t>(request.prompt.size()), regimes_);
  std::optional<SpeculationGuard::Request> guarded;
  if (guard_ != nullptr) {
    guarded.emplace(
        guard_->Open(regime, options_->block_size, static_cast<int64_t>(request.prompt.size())));
  }
  absl::StatusOr<GenerationResult> result =
      RunDecodeLoop(*ports->target, ports->draft.get(), tokenizer_, request.stop, hooks,
                    guarded.has_value() ? &*guarded : nullptr);
  if (!result.ok()) return result.status();
  result->regime = regime;
  return result;
}

}  // namespace specd::engine
