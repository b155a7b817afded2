#include "common/engine/forced_acceptance_drafter.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace specd::engine {
namespace {

// The model's session, its proposals forced along the reference its committed ids follow.
class ForcedDraftSession final : public DraftSession {
 public:
  ForcedDraftSession(const ForcedAcceptanceDrafter& drafter, std::unique_ptr<DraftSession> model)
      : drafter_(drafter), model_(std::move(model)) {}

  int64_t length() const override { return model_->length(); }
  absl::Status Append(const CommittedContext& context) override {
    Follow(context);
    return model_->Append(context);
  }
  absl::StatusOr<DraftProposal> Propose(int64_t anchor, int64_t count, const DraftOptions& options,
                                        bool report_confidence) override {
    absl::StatusOr<DraftProposal> proposal =
        model_->Propose(anchor, count, options, report_confidence);
    if (!proposal.ok()) return proposal;
    if (absl::Status forced = drafter_.Force(reference_, anchor, length(), options, *proposal);
        !forced.ok()) {
      return forced;
    }
    return proposal;
  }

  // Takes in the ids of `context` (which the model's session takes in too) and finds the
  // reference they follow.
  void Follow(const CommittedContext& context) {
    const size_t begin = std::min<size_t>(ids_.size(), context.begin);
    ids_.resize(begin);
    ids_.insert(ids_.end(), context.ids.begin(), context.ids.end());
    const bool still_follows =
        ids_.size() <= reference_.size() &&
        std::equal(ids_.begin() + begin, ids_.end(), reference_.begin() + begin);
    if (reference_.empty() || !still_follows) reference_ = drafter_.ReferenceOf(ids_);
  }

  DraftSession& model() { return *model_; }
  std::span<const int64_t> reference() const { return reference_; }

 private:
  const ForcedAcceptanceDrafter& drafter_;
  std::unique_ptr<DraftSession> model_;
  std::vector<int64_t> ids_;            // the committed ids, [0, length())
  std::span<const int64_t> reference_;  // the one ids_ follow; empty if none
};

}  // namespace

absl::StatusOr<std::unique_ptr<ForcedAcceptanceDrafter>> ForcedAcceptanceDrafter::Create(
    const Drafter& model, std::vector<std::vector<int64_t>> references, int64_t tau,
    int64_t vocab_size) {
  if (tau < 1 || tau > model.block_size()) {
    return absl::InvalidArgumentError(absl::StrCat("a forced τ of ", tau, " is outside [1, ",
                                                   model.block_size(),
                                                   "] (the drafter's block size)"));
  }
  if (vocab_size < 2) return absl::InvalidArgumentError("forcing needs a vocabulary of 2 or more");
  return std::unique_ptr<ForcedAcceptanceDrafter>(
      new ForcedAcceptanceDrafter(model, std::move(references), tau, vocab_size));
}

ForcedAcceptanceDrafter::ForcedAcceptanceDrafter(const Drafter& model,
                                                 std::vector<std::vector<int64_t>> references,
                                                 int64_t tau, int64_t vocab_size)
    : model_(model), references_(std::move(references)), tau_(tau), vocab_size_(vocab_size) {}

absl::StatusOr<std::unique_ptr<DraftSession>> ForcedAcceptanceDrafter::OpenSession(
    int64_t max_length) const {
  absl::StatusOr<std::unique_ptr<DraftSession>> model = model_.OpenSession(max_length);
  if (!model.ok()) return model.status();
  return std::make_unique<ForcedDraftSession>(*this, *std::move(model));
}

std::vector<absl::StatusOr<DraftProposal>> ForcedAcceptanceDrafter::ProposeBatch(
    std::span<const DraftCall> batch) const {
  std::vector<DraftCall> model_calls(batch.begin(), batch.end());
  for (DraftCall& call : model_calls) {
    auto& session = *static_cast<ForcedDraftSession*>(call.session);
    for (const CommittedContext& context : call.context) session.Follow(context);
    call.session = &session.model();
  }
  std::vector<absl::StatusOr<DraftProposal>> proposals = model_.ProposeBatch(model_calls);
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!proposals[i].ok()) continue;
    const auto& session = *static_cast<const ForcedDraftSession*>(batch[i].session);
    // After the batch's Append, the anchor sits right after the committed positions.
    if (absl::Status forced = Force(session.reference(), batch[i].anchor, session.length(),
                                    batch[i].options, *proposals[i]);
        !forced.ok()) {
      proposals[i] = forced;
    }
  }
  return proposals;
}

std::span<const int64_t> ForcedAcceptanceDrafter::ReferenceOf(std::span<const int64_t> ids) const {
  for (const std::vector<int64_t>& reference : references_) {
    if (ids.size() <= reference.size() && std::equal(ids.begin(), ids.end(), reference.begin())) {
      return reference;
    }
  }
  return {};
}

absl::Status ForcedAcceptanceDrafter::Force(std::span<const int64_t> reference, int64_t anchor,
                                            int64_t position, const DraftOptions& options,
                                            DraftProposal& proposal) const {
  if (options.sampling.temperature > 0) {
    return absl::InvalidArgumentError("forced acceptance applies to greedy requests only");
  }
  const auto reference_size = static_cast<int64_t>(reference.size());
  if (position >= reference_size || reference[position] != anchor) return absl::OkStatus();
  for (int64_t i = 0; i < static_cast<int64_t>(proposal.tokens.size()) && i < tau_; ++i) {
    const int64_t at = position + 1 + i;
    if (at >= reference_size) break;
    proposal.tokens[i] = i < tau_ - 1 ? reference[at] : (reference[at] + 1) % vocab_size_;
  }
  return absl::OkStatus();
}

}  // namespace specd::engine
