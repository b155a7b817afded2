// Regeneration with a tiny random teacher: the final assistant turn is the teacher's answer, the
// same seed gives the same file, and a run resumed after an interruption (a partial last line)
// ends with the file an uninterrupted run writes.
#include "training/regenerate.h"

#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "common/model/synthetic/random_checkpoint.h"
#include "gtest/gtest.h"
#include "tests/support/odd_qwen35_shapes.h"
#include "tests/support/temp_dir.h"
#include "training/byte_tokenizer.h"
#include "training/conversations.h"

namespace specd::train {
namespace {

using text::ChatRole;

std::string ReadText(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

text::ChatMessage Message(ChatRole role, std::string content) {
  return {.role = role, .content = std::move(content), .reasoning = std::nullopt};
}

class RegenerateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The teacher's vocabulary is the tokenizer's, so that every sampled id decodes.
    io::Qwen35TextConfig config = specd::testing::OddQwen35Shapes();
    config.vocab_size = kByteLevelTokenizerSize;
    config.eos_token_ids = {kByteLevelImEndId};
    std::filesystem::create_directories(teacher());
    model::RandomCheckpointOptions checkpoint;
    checkpoint.seed = 5;
    ASSERT_TRUE(model::WriteRandomQwen35Checkpoint(teacher(), config, checkpoint).ok());
    ASSERT_TRUE(WriteByteLevelTokenizer(teacher()).ok());
    const std::vector<Conversation> input = {
        {.messages = {Message(ChatRole::kUser, "Hi"), Message(ChatRole::kAssistant, "orig")},
         .text = std::nullopt},
        {.messages = {Message(ChatRole::kUser, "Continue: abc")}, .text = std::nullopt},
        {.messages = {}, .text = "a document"},
        {.messages = {Message(ChatRole::kSystem, "s"), Message(ChatRole::kUser, "q")},
         .text = std::nullopt},
        {.messages = {Message(ChatRole::kUser, "x")}, .text = std::nullopt},
    };
    ASSERT_TRUE(WriteConversations(input_path(), input).ok());
  }

  std::filesystem::path teacher() const { return dir_.path() / "teacher"; }
  std::filesystem::path input_path() const { return dir_.path() / "in.jsonl"; }

  RegenerateOptions Options(const std::string& output, uint64_t seed = 11) const {
    return {.input = input_path(),
            .output = dir_.path() / output,
            .teacher = teacher(),
            .tokenizer = {},
            .flavor = text::ChatFlavor::kQwen3_5,
            .enable_thinking = false,
            .temperature = 1.0,
            .top_p = 0.95,
            .top_k = 50,
            .max_new_tokens = 6,
            .seed = seed,
            .batch_size = 2,
            .on_progress = nullptr};
  }

  std::string Run(const RegenerateOptions& options) {
    const absl::Status status = Regenerate(options);
    EXPECT_TRUE(status.ok()) << status;
    return ReadText(options.output);
  }

  specd::testing::TempDir dir_;
};

TEST_F(RegenerateTest, ReplacesOrAppendsTheFinalAssistantTurnAndKeepsTexts) {
  Run(Options("out.jsonl"));
  const absl::StatusOr<std::vector<Conversation>> out =
      ReadConversations(dir_.path() / "out.jsonl");
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 5);
  ASSERT_EQ((*out)[0].messages.size(), 2);
  EXPECT_EQ((*out)[0].messages[1].role, ChatRole::kAssistant);
  EXPECT_NE((*out)[0].messages[1].content, "orig");
  ASSERT_EQ((*out)[1].messages.size(), 2);
  EXPECT_EQ((*out)[1].messages[1].role, ChatRole::kAssistant);
  EXPECT_EQ((*out)[2].text, "a document");
  EXPECT_EQ((*out)[3].messages.size(), 3);
}

TEST_F(RegenerateTest, SameSeedGivesTheSameFileAndAnotherSeedAnother) {
  const std::string first = Run(Options("a.jsonl"));
  EXPECT_EQ(Run(Options("b.jsonl")), first);
  EXPECT_NE(Run(Options("c.jsonl", /*seed=*/12)), first);
}

TEST_F(RegenerateTest, ResumesAfterAPartialLineAsIfNeverInterrupted) {
  const std::string uninterrupted = Run(Options("full.jsonl"));
  // An interrupted run: two complete lines and half of the third.
  size_t cut = uninterrupted.find('\n');
  cut = uninterrupted.find('\n', cut + 1) + 1;
  const size_t third_end = uninterrupted.find('\n', cut);
  std::ofstream(dir_.path() / "resumed.jsonl", std::ios::binary)
      << uninterrupted.substr(0, cut + (third_end - cut) / 2);
  std::vector<std::pair<int64_t, int64_t>> progress;
  RegenerateOptions options = Options("resumed.jsonl");
  options.on_progress = [&](int64_t done, int64_t total) { progress.emplace_back(done, total); };
  EXPECT_EQ(Run(options), uninterrupted);
  // Groups of two from conversation 2 on: 2..3, then 4.
  EXPECT_EQ(progress, (std::vector<std::pair<int64_t, int64_t>>{{4, 5}, {5, 5}}));
}

TEST_F(RegenerateTest, RefusesAnOutputLongerThanTheInput) {
  std::ofstream(dir_.path() / "long.jsonl") << std::string(6, '\n');
  EXPECT_FALSE(Regenerate(Options("long.jsonl")).ok());
}

}  // namespace
}  // namespace specd::train
