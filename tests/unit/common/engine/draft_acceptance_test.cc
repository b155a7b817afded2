// The rejection-sampling rule on one verify row, without a model: a draft drawn from the
// drafter's distribution q is accepted with probability min(1, p/q) and the first rejected one is
// replaced from the residual, so the emitted token follows the target's p (Pearson's chi-square
// over a fixed set of seeds) and a draft is accepted with probability Σ min(p, q); emitting the
// drafts as drawn would fail the same test. Malformed distributions are refused.
#include "common/engine/draft_acceptance.h"

#include <ATen/ATen.h>

#include <cmath>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/common/engine/chi_square.h"

namespace specd::engine {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kTrials = 4000;
constexpr int64_t kAnchor = 5;

// The target's logits for a vocabulary of 6: row 0 after the anchor, row 1 after the draft.
at::Tensor TargetLogits() {
  return at::tensor({0.5, 1.5, -0.5, 1.0, 0.0, -1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0}, at::kFloat)
      .view({2, 6});
}

// The drafter's distribution: most of its mass where the target has little.
const DraftDistribution kDraft{.ids = {0, 2, 4, 1}, .probabilities = {0.4f, 0.3f, 0.2f, 0.1f}};

struct Trials {
  std::vector<int64_t> drafts;  // as drawn from q
  std::vector<int64_t> first;   // the first token each step emitted
  int64_t accepted = 0;
};

Trials RunTrials(double temperature) {
  Trials trials;
  const at::Tensor logits = TargetLogits();
  for (uint64_t seed = 0; seed < kTrials; ++seed) {
    std::mt19937_64 drafter(seed + kTrials);
    std::discrete_distribution<size_t> q(kDraft.probabilities.begin(), kDraft.probabilities.end());
    const int64_t draft = kDraft.ids[q(drafter)];
    model::Sampler sampler({.temperature = temperature, .seed = seed});
    std::vector<int64_t> generated = {kAnchor};
    absl::StatusOr<int64_t> accepted =
        AcceptDrafts(logits, std::vector<int64_t>{kAnchor, draft}, {&kDraft, 1}, sampler, {},
                     generated, [&](int64_t token) -> absl::StatusOr<bool> {
                       generated.push_back(token);
                       return false;
                     });
    EXPECT_TRUE(accepted.ok()) << accepted.status();
    trials.drafts.push_back(draft);
    trials.first.push_back(generated.at(1));
    trials.accepted += *accepted;
  }
  return trials;
}

TEST(RejectionSamplingTest, EmittedTokensFollowTheTargetAndDraftsAreAcceptedAtOneMinusTv) {
  const Trials trials = RunTrials(/*temperature=*/1);
  const at::Tensor p = at::softmax(TargetLogits()[0].to(at::kDouble), 0);
  EXPECT_TRUE(testing::FitsDistribution(trials.first, p));

  double overlap = 0;  // Σ min(p, q) = 1 − TV(p, q)
  for (size_t k = 0; k < kDraft.ids.size(); ++k) {
    overlap += std::min<double>(p[kDraft.ids[k]].item<double>(), kDraft.probabilities[k]);
  }
  const double rate = static_cast<double>(trials.accepted) / kTrials;
  const double sigma = std::sqrt(overlap * (1 - overlap) / kTrials);
  EXPECT_NEAR(rate, overlap, 4.5 * sigma) << "acceptance rate against Σ min(p, q)";
}

TEST(RejectionSamplingTest, EmittingTheDraftsAsDrawnWouldFailTheTest) {
  const at::Tensor p = at::softmax(TargetLogits()[0].to(at::kDouble), 0);
  EXPECT_FALSE(testing::FitsDistribution(RunTrials(1).drafts, p));
}

TEST(RejectionSamplingTest, AGreedyTargetTakesItsMostLikelyTokenWhateverTheDraft) {
  const Trials trials = RunTrials(/*temperature=*/0);
  for (const int64_t token : trials.first) ASSERT_EQ(token, 1);
  EXPECT_EQ(trials.accepted, std::count(trials.drafts.begin(), trials.drafts.end(), 1));
}

TEST(RejectionSamplingTest, MalformedDistributionsAreRefused) {
  struct Case {
    const char* what;
    Drafts drafts;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"one per draft", {.tokens = {1, 2}, .distributions = {kDraft}}, "1 draft distributions"},
      {"ids and probabilities",
       {.tokens = {1}, .distributions = {{.ids = {1, 2}, .probabilities = {1}}}},
       "2 ids but 1"},
      {"vocabulary",
       {.tokens = {1}, .distributions = {{.ids = {1, 6}, .probabilities = {0.5, 0.5}}}},
       "outside the vocabulary"},
      {"repeated id",
       {.tokens = {1}, .distributions = {{.ids = {1, 1}, .probabilities = {0.5, 0.5}}}},
       "twice"},
      {"negative",
       {.tokens = {1}, .distributions = {{.ids = {1, 2}, .probabilities = {1.5, -0.5}}}},
       "outside [0, 1]"},
      {"sum",
       {.tokens = {1}, .distributions = {{.ids = {1, 2}, .probabilities = {0.5, 0.4}}}},
       "sum to"},
      {"draft without mass",
       {.tokens = {3}, .distributions = {{.ids = {1, 2}, .probabilities = {0.5, 0.5}}}},
       "no probability"},
  };
  for (const Case& bad : cases) {
    const absl::Status status = CheckDraftDistributions(bad.drafts, /*vocab_size=*/6);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad.what;
    EXPECT_THAT(status.message(), HasSubstr(bad.message)) << bad.what;
  }
  EXPECT_TRUE(CheckDraftDistributions({.tokens = {1}, .distributions = {kDraft}}, 6).ok());
  EXPECT_TRUE(CheckDraftDistributions({.tokens = {1, 2}, .distributions = {}}, 6).ok());
}

}  // namespace
}  // namespace specd::engine
