#include "common/engine/speculative_decoder.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <span>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/engine/draft_acceptance.h"
#include "common/engine/elapsed.h"
#include "common/engine/reusable_cache.h"

namespace specd::engine {
namespace {

// The first `count` rows of each hidden state.
std::vector<at::Tensor> FirstRows(const std::vector<at::Tensor>& hidden_states, int64_t count) {
  std::vector<at::Tensor> rows;
  for (const at::Tensor& state : hidden_states) rows.push_back(state.narrow(0, 0, count));
  return rows;
}

}  // namespace

SpeculativeDecoder::SpeculativeDecoder(const model::Qwen35Model& target, BlockDrafter& drafter,
                                       const text::Tokenizer* tokenizer,
                                       const RegimeThresholds& regimes)
    : target_(target), drafter_(drafter), tokenizer_(tokenizer), regimes_(regimes) {}

absl::StatusOr<GenerationResult> SpeculativeDecoder::Generate(const GenerationRequest& request,
                                                              const ChunkCallback& on_chunk) {
  if (absl::Status valid = ValidateRequest(request, target_.config(), tokenizer_); !valid.ok()) {
    return valid;
  }
  const auto prompt_length = static_cast<int64_t>(request.prompt.size());
  // As for target-only decoding: the last token is never fed. Blocks are cut to fit.
  const int64_t max_length = prompt_length + request.stop.max_new_tokens - 1;
  absl::StatusOr<model::Qwen35Cache*> cache = CacheFor(target_, cache_, max_length);
  if (!cache.ok()) return cache.status();

  GenerationOutput output(tokenizer_, request.stop);
  model::Sampler sampler(request.sampling);
  AcceptanceStats stats;
  try {
    absl::StatusOr<model::ForwardOutput> prefill = target_.Prefill(
        request.prompt, **cache,
        {.logit_rows = model::LogitRows::kLast, .hidden_states = drafter_.TargetHiddenStates()});
    if (!prefill.ok()) return prefill.status();
    // The drafter takes in the prompt before the first token is out, so that the time to the
    // first token holds all the prompt's work and the decode time only the steps'.
    absl::Status started = drafter_.Start(
        {.ids = request.prompt, .hidden_states = std::move(prefill->hidden_states)}, max_length);
    if (!started.ok()) return started;
    absl::StatusOr<bool> stopped =
        output.Push(sampler.Sample(prefill->logits.select(0, 0), request.prompt, output.ids()));
    if (!stopped.ok()) return stopped.status();
    output.EmitChunk(on_chunk);
    while (!output.stopped()) {
      if (absl::Status step = Step(request, sampler, **cache, output, stats); !step.ok()) {
        return step;
      }
      output.EmitChunk(on_chunk);
    }
  } catch (const c10::Error& error) {
    (*cache)->Reset();
    return absl::InternalError(
        absl::StrCat("speculative generation failed: ", error.what_without_backtrace()));
  }
  GenerationResult result = std::move(output).Finish();
  result.regime = ClassifyRegime(prompt_length, regimes_);
  result.acceptance = std::move(stats);
  return result;
}

absl::Status SpeculativeDecoder::Step(const GenerationRequest& request, model::Sampler& sampler,
                                      model::Qwen35Cache& cache, GenerationOutput& output,
                                      AcceptanceStats& stats) {
  // The step emits at most one token per block position: the block stops where the output must
  // (max tokens) and where the cache ends.
  const int64_t room =
      std::min(request.stop.max_new_tokens - output.size(), cache.max_length() - cache.length());
  std::vector<int64_t> block = {output.ids().back()};

  Clock::time_point start = Clock::now();
  absl::StatusOr<std::vector<int64_t>> drafts = drafter_.Propose(block[0], room - 1);
  if (!drafts.ok()) return drafts.status();
  stats.draft_ms += MillisecondsSince(start);
  const auto proposed = static_cast<int64_t>(std::min<size_t>(drafts->size(), room - 1));
  block.insert(block.end(), drafts->begin(), drafts->begin() + proposed);

  start = Clock::now();
  absl::StatusOr<model::ForwardOutput> verify = target_.ForwardBlock(
      block, cache,
      {.logit_rows = model::LogitRows::kAll, .hidden_states = drafter_.TargetHiddenStates()});
  if (!verify.ok()) return verify.status();
  const int64_t before = output.size();
  absl::StatusOr<int64_t> accepted =
      AcceptDrafts(verify->logits, block, sampler, request.prompt, output.ids(),
                   [&output](int64_t token) { return output.Push(token); });
  if (!accepted.ok()) return accepted.status();
  const int64_t committed = *accepted + 1;  // the anchor and the accepted drafts
  if (!output.stopped()) {
    if (absl::Status rolled = cache.Rollback(committed); !rolled.ok()) return rolled;
  }
  stats.verify_ms += MillisecondsSince(start);
  stats.RecordStep(proposed, *accepted, output.size() - before);
  if (output.stopped()) return absl::OkStatus();

  start = Clock::now();
  absl::Status appended =
      drafter_.Commit({.ids = std::span(block).first(committed),
                       .hidden_states = FirstRows(verify->hidden_states, committed)});
  stats.draft_ms += MillisecondsSince(start);
  return appended;
}

}  // namespace specd::engine
