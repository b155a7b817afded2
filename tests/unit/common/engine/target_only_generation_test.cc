// Target-only generation on the qwen35-tiny-a fixture: the greedy continuation transformers
// produced, each way of stopping, and seeded sampling (../shared/fixtures/README.md).
#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "common/engine/generator.h"
#include "common/io/safetensors_file.h"
#include "gtest/gtest.h"
#include "tests/support/paths.h"
#include "tests/unit/common/model/tensor_matchers.h"

namespace specd::engine {
namespace {

constexpr int64_t kPromptLength = 40;  // the reference's greedy continuation follows ids[:40]

std::vector<int64_t> ReferenceIds(const io::SafetensorsFile& reference, const std::string& name) {
  const at::Tensor ids = model::testing::ReferenceTensor(reference, name);
  return {ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel()};
}

class TargetOnlyGenerationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const auto dir = specd::testing::SharedDir() / "fixtures" / "qwen35-tiny-a";
    absl::StatusOr<model::Qwen35Model> model = model::Qwen35Model::Load(dir);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::make_unique<model::Qwen35Model>(*std::move(model));
    absl::StatusOr<io::SafetensorsFile> reference =
        io::SafetensorsFile::Open(dir / "reference.safetensors");
    ASSERT_TRUE(reference.ok()) << reference.status();
    prompt_ = ReferenceIds(*reference, "input_ids");
    prompt_.resize(kPromptLength);
    greedy_ids_ = ReferenceIds(*reference, "greedy_ids");
    // The fixture's ids are Qwen3 byte tokens, so the real tokenizer gives them text.
    absl::StatusOr<text::Tokenizer> tokenizer = text::Tokenizer::FromFile(
        specd::testing::CacheDir() / "tokenizer" / "qwen3" / "tokenizer.json");
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = std::make_unique<text::Tokenizer>(*std::move(tokenizer));
  }
  static void TearDownTestSuite() {
    model_.reset();
    tokenizer_.reset();
  }

  void SetUp() override { ASSERT_NE(model_, nullptr); }

  GenerationRequest Greedy(int64_t max_new_tokens) const {
    GenerationRequest request{.prompt = prompt_, .sampling = {}, .stop = {}};
    request.stop.max_new_tokens = max_new_tokens;
    request.stop.ignore_eos = true;
    return request;
  }

  GenerationResult Generate(const GenerationRequest& request,
                            const ChunkCallback& on_chunk = nullptr) const {
    Generator decoder(*model_, tokenizer_.get());
    absl::StatusOr<GenerationResult> result = decoder.Generate(request, on_chunk);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *std::move(result) : GenerationResult{};
  }

  static std::unique_ptr<model::Qwen35Model> model_;
  static std::unique_ptr<text::Tokenizer> tokenizer_;
  static std::vector<int64_t> prompt_;
  static std::vector<int64_t> greedy_ids_;
};

std::unique_ptr<model::Qwen35Model> TargetOnlyGenerationTest::model_;
std::unique_ptr<text::Tokenizer> TargetOnlyGenerationTest::tokenizer_;
std::vector<int64_t> TargetOnlyGenerationTest::prompt_;
std::vector<int64_t> TargetOnlyGenerationTest::greedy_ids_;

TEST_F(TargetOnlyGenerationTest, GreedyReproducesTheReferenceContinuation) {
  const GenerationResult result = Generate(Greedy(24));
  EXPECT_EQ(result.ids, greedy_ids_);
  EXPECT_EQ(result.stop_reason, StopReason::kMaxTokens);
  EXPECT_GT(result.timings.prefill_ms, 0);
  EXPECT_GT(result.timings.decode_ms_per_token, 0);
  EXPECT_GE(result.timings.total_ms, result.timings.prefill_ms);
}

TEST_F(TargetOnlyGenerationTest, StopsAfterMaxNewTokens) {
  const GenerationResult result = Generate(Greedy(5));
  EXPECT_EQ(result.ids, std::vector<int64_t>(greedy_ids_.begin(), greedy_ids_.begin() + 5));
}

TEST_F(TargetOnlyGenerationTest, StopsOnTheFirstEosIdAndKeepsIt) {
  GenerationRequest request = Greedy(24);
  request.stop.ignore_eos = false;
  request.stop.eos_ids = {greedy_ids_[6]};
  const GenerationResult result = Generate(request);
  EXPECT_EQ(result.stop_reason, StopReason::kEos);
  ASSERT_FALSE(result.ids.empty());
  EXPECT_EQ(result.ids.back(), greedy_ids_[6]);
  EXPECT_LE(result.ids.size(), 7u);
}

TEST_F(TargetOnlyGenerationTest, StopsOnAStopStringAndStreamsOnlyTheTextBeforeIt) {
  const std::string full_text = Generate(Greedy(24)).text;
  ASSERT_GE(full_text.size(), 12u);
  const std::string stop_string = full_text.substr(8, 3);
  GenerationRequest request = Greedy(24);
  request.stop.stop_strings = {stop_string};
  std::string streamed;
  const GenerationResult result =
      Generate(request, [&](const GenerationChunk& chunk) { streamed += chunk.text; });
  EXPECT_EQ(result.stop_reason, StopReason::kStopString);
  EXPECT_EQ(result.text, full_text.substr(0, full_text.find(stop_string)));
  EXPECT_EQ(streamed, result.text);
  EXPECT_LT(result.ids.size(), 24u);
}

TEST_F(TargetOnlyGenerationTest, StreamsOneTokenPerChunk) {
  std::vector<int64_t> streamed;
  const GenerationResult result = Generate(Greedy(6), [&](const GenerationChunk& chunk) {
    EXPECT_EQ(chunk.ids.size(), 1u);
    streamed.insert(streamed.end(), chunk.ids.begin(), chunk.ids.end());
  });
  EXPECT_EQ(streamed, result.ids);
}

TEST_F(TargetOnlyGenerationTest, ResultsCarryThePromptsRegime) {
  EXPECT_EQ(Generate(Greedy(2)).regime, Regime::kShort);
  Generator decoder(*model_, nullptr, {.medium_from = 10, .long_from = kPromptLength});
  absl::StatusOr<GenerationResult> result = decoder.Generate(Greedy(2));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->regime, Regime::kLong);
}

TEST_F(TargetOnlyGenerationTest, TheSameSeedGivesTheSameSample) {
  GenerationRequest request = Greedy(16);
  request.sampling.temperature = 1.0;
  request.sampling.seed = 7;
  EXPECT_EQ(Generate(request).ids, Generate(request).ids);
}

TEST_F(TargetOnlyGenerationTest, DifferentSeedsGiveDifferentSamples) {
  GenerationRequest request = Greedy(16);
  request.sampling.temperature = 1.0;
  request.sampling.seed = 7;
  const std::vector<int64_t> first = Generate(request).ids;
  request.sampling.seed = 8;
  EXPECT_NE(first, Generate(request).ids);
}

TEST_F(TargetOnlyGenerationTest, RefusesPromptIdsOutsideTheVocabulary) {
  GenerationRequest request = Greedy(4);
  request.prompt.push_back(model_->config().vocab_size);
  Generator decoder(*model_, nullptr);
  EXPECT_EQ(decoder.Generate(request).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(TargetOnlyGenerationTest, ReusesItsCacheAcrossRequests) {
  Generator decoder(*model_, nullptr);
  absl::StatusOr<GenerationResult> longer = decoder.Generate(Greedy(24));
  absl::StatusOr<GenerationResult> shorter = decoder.Generate(Greedy(5));
  ASSERT_TRUE(longer.ok() && shorter.ok());
  EXPECT_EQ(shorter->ids, std::vector<int64_t>(longer->ids.begin(), longer->ids.begin() + 5));
}

}  // namespace
}  // namespace specd::engine
