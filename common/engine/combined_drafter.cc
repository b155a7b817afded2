#include "common/engine/combined_drafter.h"

#include <algorithm>
#include <optional>
#include <utility>

namespace specd::engine {
namespace {

// How well a proposer's confidences have predicted its acceptance in one sequence: expected
// lengths are scaled by (accepted + 1) / (expected + 1) over the proposals of it verified so far,
// so an overconfident drafter loses its say and a reliable one keeps it.
struct Calibration {
  double expected = 0;
  double accepted = 0;
  double Scale() const { return (accepted + 1) / (expected + 1); }
};

class CombinedDraftSession final : public DraftSession {
 public:
  CombinedDraftSession(std::unique_ptr<DraftSession> model, std::unique_ptr<DraftSession> suffix)
      : model_(std::move(model)), suffix_(std::move(suffix)) {}

  int64_t length() const override { return model_->length(); }

  absl::Status Append(const CommittedContext& context) override {
    if (absl::Status appended = model_->Append(context); !appended.ok()) return appended;
    return suffix_->Append(context);
  }

  absl::StatusOr<DraftProposal> Propose(int64_t anchor, int64_t count, const DraftOptions& options,
                                        bool report_confidence) override {
    absl::StatusOr<DraftProposal> model = model_->Propose(anchor, count, options, true);
    if (!model.ok()) return model;
    return Choose(*std::move(model), anchor, count, options, report_confidence);
  }

  DraftSession& model() { return *model_; }

  // The model's proposal or the suffix drafter's, whichever is expected to be accepted longer
  // after calibration.
  absl::StatusOr<DraftProposal> Choose(DraftProposal model, int64_t anchor, int64_t count,
                                       const DraftOptions& options, bool report_confidence) {
    Settle();
    absl::StatusOr<DraftProposal> suffix = suffix_->Propose(anchor, count, options, true);
    if (!suffix.ok()) return suffix;
    const double model_expected = ExpectedAcceptedLength(model.confidence);
    const double suffix_expected = ExpectedAcceptedLength(suffix->confidence);
    const bool take_suffix = suffix_expected * calibration_[kSuffix].Scale() >
                             model_expected * calibration_[kModel].Scale();
    DraftProposal chosen = take_suffix ? *std::move(suffix) : std::move(model);
    pending_ = {.source = take_suffix ? kSuffix : kModel,
                .first_position = length() + 1,
                .length = static_cast<int64_t>(chosen.tokens.size()),
                .expected = take_suffix ? suffix_expected : model_expected};
    if (!report_confidence) chosen.confidence.clear();
    return chosen;
  }

  // The suffix index takes in what the model's batched call took in.
  absl::Status AppendToSuffix(std::span<const CommittedContext> context) {
    for (const CommittedContext& part : context) {
      if (absl::Status appended = suffix_->Append(part); !appended.ok()) return appended;
    }
    return absl::OkStatus();
  }

 private:
  enum Source { kModel = 0, kSuffix = 1 };
  struct Pending {
    Source source = kModel;
    int64_t first_position = 0;  // of its first token
    int64_t length = 0;
    double expected = 0;
  };

  // Credits the previous proposal with the tokens of it the target committed: verification
  // commits the accepted prefix, and the token after it is the next anchor, at length().
  void Settle() {
    if (!pending_.has_value()) return;
    const int64_t accepted =
        std::clamp<int64_t>(length() - pending_->first_position, 0, pending_->length);
    calibration_[pending_->source].expected += pending_->expected;
    calibration_[pending_->source].accepted += static_cast<double>(accepted);
    pending_.reset();
  }

  std::unique_ptr<DraftSession> model_;
  std::unique_ptr<DraftSession> suffix_;
  Calibration calibration_[2];
  std::optional<Pending> pending_;
};

}  // namespace

double ExpectedAcceptedLength(std::span<const float> confidence) {
  double expected = 0;
  double all_accepted = 1;
  for (const float c : confidence) {
    all_accepted *= c;
    expected += all_accepted;
  }
  return expected;
}

CombinedDrafter::CombinedDrafter(std::unique_ptr<Drafter> model)
    : model_(std::move(model)), suffix_(model_->block_size()) {}

absl::StatusOr<std::unique_ptr<DraftSession>> CombinedDrafter::OpenSession(
    int64_t max_length) const {
  absl::StatusOr<std::unique_ptr<DraftSession>> model = model_->OpenSession(max_length);
  if (!model.ok()) return model.status();
  absl::StatusOr<std::unique_ptr<DraftSession>> suffix = suffix_.OpenSession(max_length);
  if (!suffix.ok()) return suffix.status();
  return std::make_unique<CombinedDraftSession>(*std::move(model), *std::move(suffix));
}

model::CacheFootprint CombinedDrafter::SessionFootprint() const {
  return model_->SessionFootprint() + suffix_.SessionFootprint();
}

std::vector<absl::StatusOr<DraftProposal>> CombinedDrafter::ProposeBatch(
    std::span<const DraftCall> batch) const {
  std::vector<DraftCall> model_calls(batch.begin(), batch.end());
  for (DraftCall& call : model_calls) {
    call.session = &static_cast<CombinedDraftSession*>(call.session)->model();
    call.report_confidence = true;
  }
  std::vector<absl::StatusOr<DraftProposal>> proposals = model_->ProposeBatch(model_calls);
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!proposals[i].ok()) continue;
    auto& session = *static_cast<CombinedDraftSession*>(batch[i].session);
    if (absl::Status appended = session.AppendToSuffix(batch[i].context); !appended.ok()) {
      proposals[i] = appended;
      continue;
    }
    proposals[i] = session.Choose(*std::move(proposals[i]), batch[i].anchor, batch[i].count,
                                  batch[i].options, batch[i].report_confidence);
  }
  return proposals;
}

}  // namespace specd::engine
