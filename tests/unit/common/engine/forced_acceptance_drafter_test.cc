// Forcing acceptance makes any drafter's blocks accept exactly τ tokens under greedy
// verification, while the output stays target-only's: what the forced-τ benchmark relies on.
#include "common/engine/forced_acceptance_drafter.h"

#include <memory>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/common/engine/engine_fixture.h"

namespace specd::engine {
namespace {

using ::testing::Each;
using ::testing::HasSubstr;

class ForcedAcceptanceDrafterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    target_ = testing::LoadTarget("qwen35-tiny-a");
    ASSERT_NE(target_, nullptr);
    // A random drafter: left alone it is almost never accepted.
    drafter_ = testing::BlockDrafter(
        testing::RandomDrafter(*target_, {.num_layers = 1, .block_size = 8, .seed = 3}), *target_);
    ASSERT_NE(drafter_, nullptr);
  }

  // The prompt followed by the target's greedy continuation of it.
  std::vector<int64_t> Reference(const GenerationRequest& request) const {
    std::vector<int64_t> reference = request.prompt;
    const GenerationResult alone = testing::TargetOnly(*target_, request);
    reference.insert(reference.end(), alone.ids.begin(), alone.ids.end());
    return reference;
  }

  std::unique_ptr<model::Qwen35Model> target_;
  std::unique_ptr<Drafter> drafter_;
};

TEST_F(ForcedAcceptanceDrafterTest, EveryBlockAcceptsTauTokensAndTheOutputIsTargetOnlys) {
  // The first token comes from the prefill, then 10 steps of 4.
  const GenerationRequest request = testing::Request(testing::ReferencePrompt(), 1 + 10 * 4);
  const std::vector<int64_t> reference = Reference(request);
  absl::StatusOr<std::unique_ptr<ForcedAcceptanceDrafter>> forced = ForcedAcceptanceDrafter::Create(
      *drafter_, {reference}, /*tau=*/4, target_->config().vocab_size);
  ASSERT_TRUE(forced.ok()) << forced.status();
  const GenerationResult result = testing::Speculative(*target_, **forced, request);
  EXPECT_EQ(result.ids,
            std::vector<int64_t>(reference.begin() + request.prompt.size(), reference.end()));
  ASSERT_TRUE(result.acceptance.has_value());
  EXPECT_THAT(result.acceptance->acceptance_lengths, Each(4));
  EXPECT_EQ(result.acceptance->steps(), 10);
}

TEST_F(ForcedAcceptanceDrafterTest, ASequenceThatLeftTheReferenceKeepsTheDraftersProposals) {
  // A reference of another prompt: nothing to force, so the output is still target-only's and
  // the random drafter's blocks are (almost) never accepted.
  const GenerationRequest request = testing::Request(testing::ReferencePrompt(), 25);
  const std::vector<int64_t> other = Reference(testing::Request({5, 17, 42, 99}, 25));
  absl::StatusOr<std::unique_ptr<ForcedAcceptanceDrafter>> forced =
      ForcedAcceptanceDrafter::Create(*drafter_, {other}, /*tau=*/4, target_->config().vocab_size);
  ASSERT_TRUE(forced.ok()) << forced.status();
  const GenerationResult result = testing::Speculative(*target_, **forced, request);
  EXPECT_EQ(result.ids, testing::TargetOnly(*target_, request).ids);
  ASSERT_TRUE(result.acceptance.has_value());
  EXPECT_LT(result.acceptance->tau(), 2);
}

TEST_F(ForcedAcceptanceDrafterTest, ConcurrentRequestsEachFollowTheirOwnPromptsReference) {
  // Two prompts in flight at once, their draft calls batched: each session finds its prompt's
  // reference by its committed ids.
  const std::vector<GenerationRequest> requests = {
      testing::Request(testing::ReferencePrompt(), 1 + 6 * 3),
      testing::Request({5, 17, 42, 99}, 1 + 6 * 3)};
  std::vector<std::vector<int64_t>> references;
  for (const GenerationRequest& request : requests) references.push_back(Reference(request));
  absl::StatusOr<std::unique_ptr<ForcedAcceptanceDrafter>> forced = ForcedAcceptanceDrafter::Create(
      *drafter_, references, /*tau=*/3, target_->config().vocab_size);
  ASSERT_TRUE(forced.ok()) << forced.status();
  absl::StatusOr<Generator> generator = Generator::Speculative(*target_, **forced, nullptr);
  ASSERT_TRUE(generator.ok()) << generator.status();
  std::vector<absl::StatusOr<GenerationResult>> results(requests.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < requests.size(); ++i) {
    clients.emplace_back([&, i] { results[i] = generator->Generate(requests[i]); });
  }
  for (std::thread& client : clients) client.join();
  for (size_t i = 0; i < requests.size(); ++i) {
    ASSERT_TRUE(results[i].ok()) << results[i].status();
    EXPECT_EQ(results[i]->ids,
              std::vector<int64_t>(references[i].begin() + requests[i].prompt.size(),
                                   references[i].end()));
    ASSERT_TRUE(results[i]->acceptance.has_value());
    EXPECT_THAT(results[i]->acceptance->acceptance_lengths, Each(3)) << "request " << i;
  }
}

TEST_F(ForcedAcceptanceDrafterTest, RefusesATauTheBlockCannotHoldAndDrawnDrafts) {
  const int64_t vocab = target_->config().vocab_size;
  EXPECT_THAT(ForcedAcceptanceDrafter::Create(*drafter_, {{1, 2}}, 0, vocab).status().message(),
              HasSubstr("outside [1, 8]"));
  EXPECT_FALSE(ForcedAcceptanceDrafter::Create(*drafter_, {{1, 2}}, 9, vocab).ok());
  const std::vector<int64_t> reference = {1, 2, 3};
  absl::StatusOr<std::unique_ptr<ForcedAcceptanceDrafter>> forced =
      ForcedAcceptanceDrafter::Create(*drafter_, {reference}, 2, vocab);
  ASSERT_TRUE(forced.ok()) << forced.status();
  // Rejection sampling draws the drafts from the drafter's distributions, which forcing would
  // no longer match.
  DraftProposal proposal{.tokens = {7, 7}, .confidence = {}, .distributions = {}};
  DraftOptions drawn;
  drawn.sampling.temperature = 0.8;
  EXPECT_THAT((*forced)->Force(reference, 1, 0, drawn, proposal).message(),
              HasSubstr("greedy requests only"));
  ASSERT_TRUE((*forced)->Force(reference, 1, 0, DraftOptions(), proposal).ok());
  EXPECT_EQ(proposal.tokens, (std::vector<int64_t>{2, 4}));  // the reference's 2, then 3 + 1
}

TEST_F(ForcedAcceptanceDrafterTest, ASessionFollowsTheReferenceItsIdsArePrefixOf) {
  absl::StatusOr<std::unique_ptr<ForcedAcceptanceDrafter>> forced = ForcedAcceptanceDrafter::Create(
      *drafter_, {{1, 2, 3}, {1, 4, 5}}, 2, target_->config().vocab_size);
  ASSERT_TRUE(forced.ok()) << forced.status();
  const std::vector<int64_t> ids = {1, 4};
  EXPECT_THAT((*forced)->ReferenceOf(ids), ::testing::ElementsAre(1, 4, 5));
  const std::vector<int64_t> none = {2};
  EXPECT_TRUE((*forced)->ReferenceOf(none).empty());
}

}  // namespace
}  // namespace specd::engine
