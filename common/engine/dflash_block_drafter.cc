#include "common/engine/dflash_block_drafter.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/torch_errors.h"
#include "common/model/ops/ops.h"

namespace specd::engine {
namespace {

class DFlashDraftSession final : public DraftSession {
 public:
  DFlashDraftSession(const DFlashBlockDrafter& drafter, model::DFlashCache cache)
      : drafter_(drafter), cache_(std::move(cache)) {}

  int64_t length() const override { return cache_.length(); }

  absl::Status Append(const CommittedContext& context) override {
    const DraftCall call{.session = this,
                         .context = {&context, 1},
                         .anchor = 0,
                         .count = 0,
                         .options = {},
                         .report_confidence = false};
    return drafter_.ProposeBatch({&call, 1}).front().status();
  }

  absl::StatusOr<DraftProposal> Propose(int64_t anchor, int64_t count, const DraftOptions& options,
                                        bool report_confidence) override {
    const DraftCall call{.session = this,
                         .context = {},
                         .anchor = anchor,
                         .count = count,
                         .options = options,
                         .report_confidence = report_confidence};
    return std::move(drafter_.ProposeBatch({&call, 1}).front());
  }

  // Forgets the positions from context.begin on, the target having rewritten them; the rows to
  // take in next (undefined: none).
  absl::StatusOr<at::Tensor> Rewind(const CommittedContext& context) {
    if (context.begin > cache_.length()) {
      return absl::OutOfRangeError(absl::StrCat("context from position ", context.begin,
                                                " leaves a gap after the drafter's ",
                                                cache_.length()));
    }
    if (context.begin < cache_.length()) {
      if (absl::Status truncated = cache_.Truncate(context.begin); !truncated.ok()) {
        return truncated;
      }
    }
    if (!context.rows.defined() || context.rows.size(0) == 0) return at::Tensor();
    return context.rows;
  }

  model::DFlashCache& cache() { return cache_; }
  const DFlashBlockDrafter& drafter() const { return drafter_; }

 private:
  const DFlashBlockDrafter& drafter_;
  model::DFlashCache cache_;
};

// Target ids of what `proposal` holds as indices into `vocab` (a pruned head's ids).
void ToTargetIds(const at::Tensor& vocab, DraftProposal& proposal) {
  const int64_t* ids = vocab.data_ptr<int64_t>();
  for (int64_t& token : proposal.tokens) token = ids[token];
  for (DraftDistribution& distribution : proposal.distributions) {
    for (int64_t& id : distribution.ids) id = ids[id];
  }
}

// What a draft step reads back of the head's logits [rows, vocab], every call's rows at once (one
// device sync): each row's most likely token, and where a call asked for confidences, the token
// and probability of the largest softmax entry (the same token but for ties that rounding made).
struct MostLikely {
  std::vector<int64_t> tokens;
  std::vector<int64_t> softmax_tokens;  // empty unless confidences were asked for
  std::vector<float> confidence;

  static MostLikely Read(const at::Tensor& logits, bool with_confidence) {
    const int64_t rows = logits.size(0);
    std::vector<at::Tensor> parts = {model::ops::RowArgmax(logits).to(at::kDouble)};
    if (with_confidence) {
      // The probabilities (a softmax over the vocabulary per token) only when they are used.
      const auto [probability, token] = at::softmax(logits, -1).max(-1);
      parts.push_back(token.to(at::kDouble));
      parts.push_back(probability.to(at::kDouble));
    }
    // Ids and float32 probabilities are exact in double: one transfer for all of them.
    const at::Tensor host = at::cat(parts).cpu().contiguous();
    const double* values = host.data_ptr<double>();
    MostLikely read;
    for (int64_t i = 0; i < rows; ++i) read.tokens.push_back(static_cast<int64_t>(values[i]));
    if (with_confidence) {
      for (int64_t i = 0; i < rows; ++i) {
        read.softmax_tokens.push_back(static_cast<int64_t>(values[rows + i]));
        read.confidence.push_back(static_cast<float>(values[2 * rows + i]));
      }
    }
    return read;
  }
};

// The proposal of one call, whose block is anchored after `position`, from its `count` rows of
// the head's logits (over `vocab` when the head is pruned; undefined: the whole vocabulary),
// which begin at row `first` of the step's logits and of `read`.
DraftProposal ProposalOf(const at::Tensor& logits, const MostLikely& read, int64_t first,
                         const at::Tensor& vocab, const DraftCall& call, int64_t position) {
  DraftProposal proposal;
  const int64_t count = call.count;
  int64_t kept = count;
  const bool confident = call.options.min_confidence > 0 || call.report_confidence;
  if (confident) {
    const auto begin = read.confidence.begin() + first;
    if (call.options.min_confidence > 0) {
      // The first position below the threshold and everything after it are dropped.
      kept = std::find_if(begin, begin + count,
                          [&](float c) { return !(c >= call.options.min_confidence); }) -
             begin;
    }
    if (call.report_confidence) proposal.confidence.assign(begin, begin + kept);
  }
  if (call.options.sampling.temperature > 0) {
    // Drawn from the drafter's distributions rather than their most likely tokens.
    model::Sampler sampler(call.options.sampling.ForBlock(position));
    for (int64_t i = 0; i < kept; ++i) {
      auto [token, distribution] = DrawDraft(logits[first + i], sampler);
      proposal.tokens.push_back(token);
      proposal.distributions.push_back(std::move(distribution));
    }
  } else {
    const auto tokens = (confident ? read.softmax_tokens : read.tokens).begin() + first;
    proposal.tokens.assign(tokens, tokens + kept);
  }
  if (vocab.defined()) ToTargetIds(vocab, proposal);
  return proposal;
}

}  // namespace

std::vector<absl::StatusOr<DraftProposal>> DFlashBlockDrafter::ProposeBatch(
    std::span<const DraftCall> batch) const {
  std::vector<absl::StatusOr<DraftProposal>> results(batch.size(), DraftProposal());
  std::vector<DFlashDraftSession*> sessions(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    sessions[i] = dynamic_cast<DFlashDraftSession*>(batch[i].session);
    if (sessions[i] == nullptr || &sessions[i]->drafter() != this) {
      results[i] = absl::InvalidArgumentError("a draft call names another drafter's session");
    }
  }
  const model::ModelOptions& model_options = drafter_.options();
  const absl::Status ran = base::CatchTorchErrors("draft", [&]() -> absl::Status {
    // The context, a round per piece: pieces of one call follow each other.
    size_t rounds = 0;
    for (const DraftCall& call : batch) rounds = std::max(rounds, call.context.size());
    for (size_t round = 0; round < rounds; ++round) {
      std::vector<model::ContextInput> inputs;
      for (size_t i = 0; i < batch.size(); ++i) {
        if (!results[i].ok() || round >= batch[i].context.size()) continue;
        absl::StatusOr<at::Tensor> rows = sessions[i]->Rewind(batch[i].context[round]);
        if (!rows.ok()) {
          results[i] = rows.status();
        } else if (rows->defined()) {
          inputs.push_back({.target_hidden = rows->to(model_options.device, model_options.dtype),
                            .cache = &sessions[i]->cache()});
        }
      }
      if (absl::Status appended = drafter_.AppendContexts(inputs); !appended.ok()) return appended;
    }
    // The blocks: always whole (attention is non-causal, so a shorter block would change the
    // proposals that are kept), [anchor, MASK × (B − 1)].
    std::vector<size_t> drafting;
    std::vector<int64_t> ids;
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!results[i].ok() || batch[i].count <= 0) continue;
      drafting.push_back(i);
      ids.push_back(batch[i].anchor);
      ids.insert(ids.end(), batch[i].options.block_size - 1, drafter_.config().mask_token_id);
    }
    if (drafting.empty()) return absl::OkStatus();
    const at::Tensor embeddings =
        head_.Embed(at::tensor(ids, at::kLong).to(head_.embed_tokens().device()));
    std::vector<model::BlockInput> blocks;
    int64_t row = 0;
    for (const size_t i : drafting) {
      const int64_t block_size = batch[i].options.block_size;
      blocks.push_back({.embeddings = embeddings.narrow(0, row, block_size),
                        .cache = &sessions[i]->cache(),
                        .options = {.window = batch[i].options.window}});
      row += block_size;
    }
    absl::StatusOr<at::Tensor> hidden = drafter_.DraftBlocks(blocks);
    if (!hidden.ok()) return hidden.status();
    // Rows 1 … count of each block are its proposals: one head product over all of them.
    std::vector<int64_t> proposal_rows;
    row = 0;
    for (const size_t i : drafting) {
      for (int64_t t = 1; t <= batch[i].count; ++t) proposal_rows.push_back(row + t);
      row += batch[i].options.block_size;
    }
    const at::Tensor logits =
        Logits(hidden->index_select(0, at::tensor(proposal_rows, at::kLong).to(hidden->device())));
    const bool confidences = std::any_of(drafting.begin(), drafting.end(), [&](size_t i) {
      return batch[i].options.min_confidence > 0 || batch[i].report_confidence;
    });
    const MostLikely read = MostLikely::Read(logits, confidences);
    int64_t offset = 0;
    for (const size_t i : drafting) {
      results[i] =
          ProposalOf(logits, read, offset, drafter_.draft_vocab(), batch[i], sessions[i]->length());
      offset += batch[i].count;
    }
    return absl::OkStatus();
  });
  if (!ran.ok()) {
    for (absl::StatusOr<DraftProposal>& result : results) {
      if (result.ok()) result = ran;
    }
  }
  return results;
}

absl::StatusOr<std::unique_ptr<DFlashBlockDrafter>> DFlashBlockDrafter::Create(
    model::DFlashDrafter drafter, model::TokenHead head,
    const io::Qwen35TextConfig& target_config) {
  if (absl::Status fits = drafter.CheckTarget(target_config); !fits.ok()) return fits;
  at::Tensor draft_head;
  if (const at::Tensor& vocab = drafter.draft_vocab(); vocab.defined()) {
    if (!head.lm_head().defined()) {
      return absl::InvalidArgumentError(
          "a drafter with a pruned vocabulary needs the head as stored, not rounded to int8");
    }
    const absl::Status copied = base::CatchTorchErrors("pruning the draft head", [&] {
      draft_head = head.lm_head()
                       .index_select(0, vocab.to(head.lm_head().device()))
                       .to(drafter.options().dtype)
                       .contiguous();
      return absl::OkStatus();
    });
    if (!copied.ok()) return copied;
  }
  return std::unique_ptr<DFlashBlockDrafter>(
      new DFlashBlockDrafter(std::move(drafter), std::move(head), std::move(draft_head)));
}

DFlashBlockDrafter::DFlashBlockDrafter(model::DFlashDrafter drafter, model::TokenHead head,
                                       at::Tensor draft_head)
    : drafter_(std::move(drafter)), head_(std::move(head)), draft_head_(std::move(draft_head)) {}

at::Tensor DFlashBlockDrafter::Logits(const at::Tensor& hidden) const {
  if (!draft_head_.defined()) return head_.Head(hidden);
  return at::linear(hidden.to(draft_head_.scalar_type()), draft_head_).to(at::kFloat);
}

std::vector<int64_t> DFlashBlockDrafter::TargetHiddenStates() const {
  return drafter_.TargetHiddenStates();
}

absl::StatusOr<DraftOptions> DFlashBlockDrafter::Resolve(const DraftOptions& options) const {
  return ResolveDraftOptions(options, block_size(), drafter_.config().sliding_window);
}

absl::StatusOr<std::unique_ptr<DraftSession>> DFlashBlockDrafter::OpenSession(
    int64_t max_length) const {
  absl::StatusOr<model::DFlashCache> cache = drafter_.NewCache(max_length);
  if (!cache.ok()) return cache.status();
  return std::make_unique<DFlashDraftSession>(*this, *std::move(cache));
}

model::CacheFootprint DFlashBlockDrafter::SessionFootprint() const {
  return drafter_.SequenceFootprint();
}

}  // namespace specd::engine
