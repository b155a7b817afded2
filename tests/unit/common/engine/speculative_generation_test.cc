// Speculative decoding on the qwen35-tiny-a targets: whatever the drafter proposes, the output is
// what target-only decoding gives (greedy: token for token; sampled: the same sequence for the
// same seed), blocks stop exactly where target-only output stops, and the acceptance statistics
// describe what happened. The oracle drafter shows the engine accepting whole blocks.
#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "common/engine/dflash_block_drafter.h"
#include "common/engine/generator.h"
#include "common/engine/oracle_drafter.h"
#include "common/text/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/support/paths.h"
#include "tests/unit/common/engine/engine_fixture.h"

namespace specd::engine {
namespace {

using testing::Drafting;
using testing::FixtureDrafter;
using testing::LoadTarget;
using testing::RandomDrafter;
using testing::RandomPrompt;
using testing::Request;
using testing::Speculative;
using testing::TargetOnly;

constexpr int64_t kNewTokens = 24;
constexpr int64_t kMaxBlock = 8;  // the drafters' trained block size

class SpeculativeGenerationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    for (const char* name : {"qwen35-tiny-a", "qwen35-tiny-a-w4a16"}) {
      targets_[name] = LoadTarget(name);
    }
  }
  static void TearDownTestSuite() { targets_.clear(); }
  void SetUp() override {
    for (const auto& [name, target] : targets_) ASSERT_NE(target, nullptr) << name;
  }

  static const model::Qwen35Model& Target(const std::string& name = "qwen35-tiny-a") {
    return *targets_.at(name);
  }

  // A DFlash drafter for `target` (the fixture drafter, or a random one) and `options`.
  static Drafting DFlash(const model::Qwen35Model& target, const std::string& kind,
                         const DraftOptions& options) {
    absl::StatusOr<model::DFlashDrafter> drafter =
        kind == "fixture" ? FixtureDrafter()
                          : RandomDrafter(target, {.num_layers = 2,
                                                   .block_size = kMaxBlock,
                                                   .seed = 11,
                                                   .mask_token_id = -1,
                                                   .window = 0});
    EXPECT_TRUE(drafter.ok()) << drafter.status();
    if (!drafter.ok()) return {};
    absl::StatusOr<std::unique_ptr<DFlashBlockDrafter>> block =
        DFlashBlockDrafter::Create(*std::move(drafter), target.token_head(), target.config());
    EXPECT_TRUE(block.ok()) << block.status();
    if (!block.ok()) return {};
    return {.drafter = *std::move(block), .options = options};
  }

  static std::vector<int64_t> Prompt(int64_t length) {
    return RandomPrompt(/*seed=*/length, length, Target().config().vocab_size);
  }

  static inline std::map<std::string, std::unique_ptr<model::Qwen35Model>> targets_;
};

// target × drafter
using GreedyCase = std::tuple<std::string, std::string>;

class GreedyIdentityTest : public SpeculativeGenerationTest,
                           public ::testing::WithParamInterface<GreedyCase> {};

TEST_P(GreedyIdentityTest, GreedyOutputIsTargetOnlysTokenForTokenAtEveryBlockSizeAndWindow) {
  const auto& [target_name, drafter_kind] = GetParam();
  const model::Qwen35Model& target = Target(target_name);
  for (const int64_t block_size : {2, 4, 8}) {
    for (const int64_t window : {0, 5}) {
      const Drafting drafter = DFlash(
          target, drafter_kind, {.block_size = block_size, .window = window, .min_confidence = 0});
      ASSERT_NE(drafter.drafter, nullptr);
      for (const int64_t prompt_length : {1, 9, 40}) {
        const GenerationRequest request = Request(Prompt(prompt_length), kNewTokens);
        const GenerationResult actual = Speculative(target, drafter, request);
        EXPECT_EQ(actual.ids, TargetOnly(target, request).ids)
            << "block " << block_size << ", window " << window << ", prompt of " << prompt_length;
        ASSERT_TRUE(actual.acceptance.has_value());
        EXPECT_LE(actual.acceptance->tau(), static_cast<double>(block_size));
      }
    }
  }
}

std::string CaseName(const ::testing::TestParamInfo<GreedyCase>& info) {
  const auto& [target, drafter] = info.param;
  return (target == "qwen35-tiny-a" ? std::string("Dense") : std::string("W4A16")) +
         (drafter == "random" ? "RandomDrafter" : "FixtureDrafter");
}

INSTANTIATE_TEST_SUITE_P(TargetsAndDrafters, GreedyIdentityTest,
                         ::testing::Combine(::testing::Values("qwen35-tiny-a",
                                                              "qwen35-tiny-a-w4a16"),
                                            ::testing::Values("random", "fixture")),
                         CaseName);

TEST_F(SpeculativeGenerationTest, TheOracleIsAcceptedWholeBlocksAtATime) {
  for (const int64_t block_size : {2, 4, 8}) {
    OracleDrafter oracle(Target(), block_size);
    const GenerationRequest request = Request(Prompt(20), 30);
    const GenerationResult result = Speculative(Target(), oracle, request);
    EXPECT_EQ(result.ids, TargetOnly(Target(), request).ids);
    ASSERT_TRUE(result.acceptance.has_value());
    const std::vector<int64_t>& lengths = result.acceptance->acceptance_lengths;
    ASSERT_FALSE(lengths.empty());
    // Only the last block is cut short, by the 30-token budget.
    for (size_t i = 0; i + 1 < lengths.size(); ++i) EXPECT_EQ(lengths[i], block_size) << i;
    EXPECT_EQ(lengths.back(), (30 - 1) % block_size == 0 ? block_size : (30 - 1) % block_size);
  }
}

TEST_F(SpeculativeGenerationTest, GreedyWithPenaltiesAcceptsPartOfEachBlockAndKeepsTheOutput) {
  // The oracle proposes the unpenalised greedy continuation; the target's choice is penalised, so
  // blocks are accepted in part, and each later position's penalty must count the drafts
  // accepted before it.
  OracleDrafter oracle(Target(), 8);
  GenerationRequest request = Request(Prompt(6), 40);
  request.sampling.repetition_penalty = 1.5;
  request.sampling.presence_penalty = 0.5;
  request.sampling.frequency_penalty = 0.3;
  const GenerationResult result = Speculative(Target(), oracle, request);
  EXPECT_EQ(result.ids, TargetOnly(Target(), request).ids);
  ASSERT_TRUE(result.acceptance.has_value());
  EXPECT_GT(result.acceptance->tau(), 1);
  EXPECT_LT(result.acceptance->tau(), 8);
}

TEST_F(SpeculativeGenerationTest, MinNewTokensKeepsTheEndingIdFromTheFirstTokensOfBothDecoders) {
  // The end-of-sequence id is the token greedy decoding picks first, so only min_new_tokens
  // keeps the output going, in speculative decoding as in target-only.
  OracleDrafter oracle(Target(), 4);
  GenerationRequest request = Request(Prompt(6), 12);
  const int64_t first = TargetOnly(Target(), request).ids.front();
  request.stop.eos_ids = {first};
  request.stop.min_new_tokens = 5;
  request.sampling.min_new_tokens = 5;
  request.sampling.ending_ids = {first};
  const GenerationResult target_only = TargetOnly(Target(), request);
  ASSERT_GE(target_only.ids.size(), 5u);
  for (size_t i = 0; i < 5; ++i) EXPECT_NE(target_only.ids[i], first) << i;
  EXPECT_EQ(Speculative(Target(), oracle, request).ids, target_only.ids);
}

TEST_F(SpeculativeGenerationTest, AcceptanceStatisticsAddUpToTheOutput) {
  OracleDrafter oracle(Target(), 4);
  const GenerationResult result = Speculative(Target(), oracle, Request(Prompt(12), 11));
  ASSERT_TRUE(result.acceptance.has_value());
  const AcceptanceStats& stats = *result.acceptance;
  // The prefill gives the first token, each verify step the rest: 1 + 4 + 4 + 2.
  EXPECT_EQ(stats.acceptance_lengths, (std::vector<int64_t>{4, 4, 2}));
  EXPECT_DOUBLE_EQ(stats.tau(), 10.0 / 3);
  EXPECT_EQ(stats.proposed_at, (std::vector<int64_t>{3, 2, 2}));  // the last step proposes 1
  EXPECT_EQ(stats.accepted_at, stats.proposed_at);
  EXPECT_GT(stats.draft_ms, 0);
  EXPECT_GT(stats.verify_ms, 0);
}

TEST_F(SpeculativeGenerationTest, SampledOutputIsTargetOnlysSampleForTheSameSeed) {
  const Drafting random =
      DFlash(Target(), "random", {.block_size = 4, .window = 0, .min_confidence = 0});
  ASSERT_NE(random.drafter, nullptr);
  OracleDrafter oracle(Target(), 4);
  for (uint64_t seed = 0; seed < 6; ++seed) {
    GenerationRequest request = Request(Prompt(16), 20, /*temperature=*/1.0, seed);
    request.sampling.top_p = 0.95;
    request.sampling.repetition_penalty = 1.1;
    const GenerationResult expected = TargetOnly(Target(), request);
    EXPECT_EQ(Speculative(Target(), random, request).ids, expected.ids) << "seed " << seed;
    const GenerationResult with_oracle = Speculative(Target(), oracle, request);
    EXPECT_EQ(with_oracle.ids, expected.ids) << "seed " << seed;
  }
}

TEST_F(SpeculativeGenerationTest, AGuardedGeneratorKeepsTheOutputWhateverBlocksItChooses) {
  // One guarded generator serves every request, so later requests run on what the first ones
  // measured: full blocks, single tokens, and the sizes in between that it prices.
  const Drafting random =
      DFlash(Target(), "random", {.block_size = 8, .window = 0, .min_confidence = 0});
  ASSERT_NE(random.drafter, nullptr);
  OracleDrafter oracle(Target(), 8);
  for (const Drafter* drafter :
       {static_cast<const Drafter*>(random.drafter.get()), static_cast<const Drafter*>(&oracle)}) {
    absl::StatusOr<Generator> guarded =
        Generator::Speculative(Target(), *drafter, nullptr, {}, {}, /*guarded=*/true);
    ASSERT_TRUE(guarded.ok()) << guarded.status();
    for (uint64_t seed = 0; seed < 6; ++seed) {
      GenerationRequest request = Request(Prompt(12 + static_cast<int64_t>(seed)), 40,
                                          /*temperature=*/seed % 2 == 0 ? 0.0 : 1.0, seed);
      absl::StatusOr<GenerationResult> result = guarded->Generate(request);
      ASSERT_TRUE(result.ok()) << result.status();
      EXPECT_EQ(result->ids, TargetOnly(Target(), request).ids) << "seed " << seed;
      ASSERT_TRUE(result->acceptance.has_value());
      EXPECT_EQ(static_cast<int64_t>(result->ids.size()),
                1 + std::accumulate(result->acceptance->acceptance_lengths.begin(),
                                    result->acceptance->acceptance_lengths.end(), int64_t{0}));
    }
  }
}

TEST_F(SpeculativeGenerationTest, StopsOnAnEosTokenInsideABlockAndKeepsIt) {
  const std::vector<int64_t> continuation = TargetOnly(Target(), Request(Prompt(10), 20)).ids;
  GenerationRequest request = Request(Prompt(10), 20);
  request.stop.ignore_eos = false;
  request.stop.eos_ids = {continuation[6]};
  OracleDrafter oracle(Target(), 8);
  const GenerationResult result = Speculative(Target(), oracle, request);
  const GenerationResult expected = TargetOnly(Target(), request);
  EXPECT_EQ(result.ids, expected.ids);
  EXPECT_EQ(result.stop_reason, StopReason::kEos);
  EXPECT_EQ(result.ids.back(), continuation[6]);
  ASSERT_TRUE(result.acceptance.has_value());
  EXPECT_EQ(std::accumulate(result.acceptance->acceptance_lengths.begin(),
                            result.acceptance->acceptance_lengths.end(), int64_t{1}),
            static_cast<int64_t>(result.ids.size()));
}

TEST_F(SpeculativeGenerationTest, StopsOnAStopStringWhereTargetOnlyStops) {
  // The fixture's ids are Qwen3 byte tokens, so the real tokenizer gives them text.
  absl::StatusOr<text::Tokenizer> tokenizer = text::Tokenizer::FromFile(
      specd::testing::CacheDir() / "tokenizer" / "qwen3" / "tokenizer.json");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const std::string full_text =
      TargetOnly(Target(), Request(testing::ReferencePrompt(), kNewTokens), &*tokenizer).text;
  ASSERT_GE(full_text.size(), 12u);
  GenerationRequest request = Request(testing::ReferencePrompt(), kNewTokens);
  request.stop.stop_strings = {full_text.substr(8, 3)};
  OracleDrafter oracle(Target(), 8);
  std::string streamed;
  const GenerationResult result =
      Speculative(Target(), oracle, request, &*tokenizer,
                  [&](const GenerationChunk& chunk) { streamed += chunk.text; });
  const GenerationResult expected = TargetOnly(Target(), request, &*tokenizer);
  EXPECT_EQ(result.stop_reason, StopReason::kStopString);
  EXPECT_EQ(result.ids, expected.ids);
  EXPECT_EQ(result.text, expected.text);
  EXPECT_EQ(streamed, result.text);
}

TEST_F(SpeculativeGenerationTest, StreamsOneChunkPerStepThatAddUpToTheResult) {
  OracleDrafter oracle(Target(), 4);
  std::vector<GenerationChunk> chunks;
  const GenerationResult result =
      Speculative(Target(), oracle, Request(Prompt(8), 13), nullptr,
                  [&](const GenerationChunk& chunk) { chunks.push_back(chunk); });
  ASSERT_TRUE(result.acceptance.has_value());
  ASSERT_EQ(chunks.size(), result.acceptance->acceptance_lengths.size() + 1);
  std::vector<int64_t> streamed;
  for (const GenerationChunk& chunk : chunks) {
    streamed.insert(streamed.end(), chunk.ids.begin(), chunk.ids.end());
  }
  EXPECT_EQ(streamed, result.ids);
}

TEST_F(SpeculativeGenerationTest, AdaptiveLengthProposesFewerDraftsAndKeepsTheOutput) {
  const Drafting fixed =
      DFlash(Target(), "fixture", {.block_size = 8, .window = 0, .min_confidence = 0});
  const Drafting adaptive =
      DFlash(Target(), "fixture", {.block_size = 8, .window = 0, .min_confidence = 0.9});
  ASSERT_TRUE(fixed.drafter != nullptr && adaptive.drafter != nullptr);
  const GenerationRequest request = Request(Prompt(30), kNewTokens);
  const GenerationResult full = Speculative(Target(), fixed, request);
  const GenerationResult cut = Speculative(Target(), adaptive, request);
  EXPECT_EQ(cut.ids, TargetOnly(Target(), request).ids);
  ASSERT_TRUE(full.acceptance.has_value() && cut.acceptance.has_value());
  const auto drafted = [](const AcceptanceStats& stats) {
    return std::accumulate(stats.proposed_at.begin(), stats.proposed_at.end(), int64_t{0});
  };
  EXPECT_LT(drafted(*cut.acceptance) / cut.acceptance->steps(),
            drafted(*full.acceptance) / full.acceptance->steps());
}

TEST_F(SpeculativeGenerationTest, ReusesItsCachesAcrossRequests) {
  const Drafting drafter =
      DFlash(Target(), "fixture", {.block_size = 8, .window = 0, .min_confidence = 0});
  ASSERT_NE(drafter.drafter, nullptr);
  absl::StatusOr<Generator> decoder =
      Generator::Speculative(Target(), *drafter.drafter, nullptr, drafter.options);
  ASSERT_TRUE(decoder.ok()) << decoder.status();
  for (const int64_t prompt_length : {40, 5, 17}) {
    const GenerationRequest request = Request(Prompt(prompt_length), kNewTokens);
    absl::StatusOr<GenerationResult> result = decoder->Generate(request);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->ids, TargetOnly(Target(), request).ids) << "prompt of " << prompt_length;
  }
}

TEST_F(SpeculativeGenerationTest, ResultsCarryThePromptsRegime) {
  OracleDrafter oracle(Target(), 4);
  absl::StatusOr<Generator> decoder =
      Generator::Speculative(Target(), oracle, nullptr, {}, {.medium_from = 8, .long_from = 32});
  ASSERT_TRUE(decoder.ok()) << decoder.status();
  for (const auto& [length, regime] : std::vector<std::pair<int64_t, Regime>>{
           {4, Regime::kShort}, {8, Regime::kMedium}, {40, Regime::kLong}}) {
    absl::StatusOr<GenerationResult> result = decoder->Generate(Request(Prompt(length), 2));
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->regime, regime) << "prompt of " << length;
  }
}

TEST_F(SpeculativeGenerationTest, RefusesABlockLargerThanTheDrafterWasMadeFor) {
  absl::StatusOr<model::DFlashDrafter> drafter = FixtureDrafter();
  ASSERT_TRUE(drafter.ok()) << drafter.status();
  absl::StatusOr<std::unique_ptr<DFlashBlockDrafter>> block =
      DFlashBlockDrafter::Create(*std::move(drafter), Target().token_head(), Target().config());
  ASSERT_TRUE(block.ok()) << block.status();
  EXPECT_EQ(Generator::Speculative(Target(), **block, nullptr,
                                   {.block_size = kMaxBlock + 1, .window = 0, .min_confidence = 0})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

// A drafter trained on short sequences drafts with its window (config.json's sliding_window) on
// every path that resolves a request's options; a request may still name another.
TEST_F(SpeculativeGenerationTest, ADrafterDraftsWithTheWindowItWasTrainedForUnlessAskedOtherwise) {
  for (const int64_t trained : {0, 5}) {
    absl::StatusOr<model::DFlashDrafter> drafter = RandomDrafter(Target(), {.num_layers = 1,
                                                                            .block_size = kMaxBlock,
                                                                            .seed = 12,
                                                                            .mask_token_id = -1,
                                                                            .window = trained});
    ASSERT_TRUE(drafter.ok()) << drafter.status();
    EXPECT_EQ(drafter->config().sliding_window, trained);
    absl::StatusOr<std::unique_ptr<DFlashBlockDrafter>> block =
        DFlashBlockDrafter::Create(*std::move(drafter), Target().token_head(), Target().config());
    ASSERT_TRUE(block.ok()) << block.status();
    for (const auto& [asked, drafted] : {std::pair<int64_t, int64_t>{0, trained}, {7, 7}}) {
      absl::StatusOr<DraftOptions> resolved =
          (*block)->Resolve({.block_size = 0, .window = asked, .min_confidence = 0});
      ASSERT_TRUE(resolved.ok()) << resolved.status();
      EXPECT_EQ(resolved->window, drafted) << "trained " << trained << ", asked " << asked;
    }
  }
}

TEST_F(SpeculativeGenerationTest, RefusesPromptIdsOutsideTheVocabulary) {
  OracleDrafter oracle(Target(), 4);
  GenerationRequest request = Request(Prompt(4), 4);
  request.prompt.push_back(Target().config().vocab_size);
  absl::StatusOr<Generator> decoder = Generator::Speculative(Target(), oracle, nullptr);
  ASSERT_TRUE(decoder.ok()) << decoder.status();
  EXPECT_EQ(decoder->Generate(request).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace specd::engine
