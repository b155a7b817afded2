#include "common/engine/target_decoder.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/engine/generation_output.h"
#include "common/engine/reusable_cache.h"

namespace specd::engine {

TargetDecoder::TargetDecoder(const model::Qwen35Model& model, const text::Tokenizer* tokenizer,
                             const RegimeThresholds& regimes)
    : model_(model), tokenizer_(tokenizer), regimes_(regimes) {}

absl::StatusOr<GenerationResult> TargetDecoder::Generate(const GenerationRequest& request,
                                                         const ChunkCallback& on_chunk) {
  if (absl::Status valid = ValidateRequest(request, model_.config(), tokenizer_); !valid.ok()) {
    return valid;
  }
  const auto prompt_length = static_cast<int64_t>(request.prompt.size());
  // The last token is sampled but never fed back, hence the -1.
  absl::StatusOr<model::Qwen35Cache*> cache =
      CacheFor(model_, cache_, prompt_length + request.stop.max_new_tokens - 1);
  if (!cache.ok()) return cache.status();

  GenerationOutput output(tokenizer_, request.stop);
  model::Sampler sampler(request.sampling);
  try {
    absl::StatusOr<model::ForwardOutput> prefill = model_.Prefill(request.prompt, **cache);
    if (!prefill.ok()) return prefill.status();
    at::Tensor logits = prefill->logits.select(0, 0);
    while (true) {
      absl::StatusOr<bool> stopped =
          output.Push(sampler.Sample(logits, request.prompt, output.ids()));
      if (!stopped.ok()) return stopped.status();
      output.EmitChunk(on_chunk);
      if (*stopped) break;
      absl::StatusOr<at::Tensor> next = model_.Decode(output.ids().back(), **cache);
      if (!next.ok()) return next.status();
      logits = *std::move(next);
    }
  } catch (const c10::Error& error) {
    (*cache)->Reset();
    return absl::InternalError(absl::StrCat("generation failed: ", error.what_without_backtrace()));
  }
  GenerationResult result = std::move(output).Finish();
  result.regime = ClassifyRegime(prompt_length, regimes_);
  return result;
}

}  // namespace specd::engine
