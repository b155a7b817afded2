#pragma once
// What the drafter stages' tests train on: a tiny random 4-layer target over the byte-level
// vocabulary (its last id is the drafter's MASK), a random 1-layer drafter for it, and packed
// chats whose answers run through the alphabet from a letter that varies — each next token
// follows from the one before, so a drafter learns them fast.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/model/synthetic/random_checkpoint.h"
#include "common/model/synthetic/random_drafter.h"
#include "common/text/tokenizer.h"
#include "tests/support/odd_qwen35_shapes.h"
#include "tests/support/temp_dir.h"
#include "training/byte_tokenizer.h"
#include "training/conversations.h"
#include "training/drafter_training.h"
#include "training/packed_dataset.h"

namespace specd::train::testing {

inline constexpr int64_t kBlockSize = 8;
// The untrained drafter every test starts from.
inline constexpr model::RandomDrafterOptions kDrafterInit = {.num_layers = 1,
                                                             .block_size = kBlockSize,
                                                             .seed = 4,
                                                             .mask_token_id = kByteLevelMaskId,
                                                             .window = 0};

inline io::Qwen35TextConfig TinyTarget() {
  io::Qwen35TextConfig config = specd::testing::OddQwen35Shapes();
  config.vocab_size = kByteLevelVocabSize;
  config.num_hidden_layers = 4;
  config.layer_types = {io::LayerType::kLinearAttention, io::LayerType::kFullAttention,
                        io::LayerType::kLinearAttention, io::LayerType::kFullAttention};
  config.eos_token_ids = {kByteLevelImEndId};
  return config;
}

inline std::vector<Conversation> AlphabetChats() {
  const std::string alphabet = "abcdefghijklmnopqrstuvwxyz";
  std::vector<Conversation> chats;
  for (int i = 0; i < 16; ++i) {
    std::string answer;
    for (int j = 0; j < 80; ++j) answer += alphabet[(i * 5 + j) % 26];
    chats.push_back({.messages = {{.role = text::ChatRole::kUser,
                                   .content = "Recite from letter " + std::to_string(i),
                                   .reasoning = std::nullopt},
                                  {.role = text::ChatRole::kAssistant,
                                   .content = answer,
                                   .reasoning = std::nullopt}},
                     .text = std::nullopt});
  }
  return chats;
}

class DrafterFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(target());
    model::RandomCheckpointOptions checkpoint;
    checkpoint.seed = 3;
    ASSERT_TRUE(model::WriteRandomQwen35Checkpoint(target(), TinyTarget(), checkpoint).ok());
    std::filesystem::create_directories(init());
    ASSERT_TRUE(model::WriteRandomDFlashDrafter(init(), TinyTarget(), kDrafterInit).ok());
    ASSERT_TRUE(WriteByteLevelTokenizer(dir_.path() / "tokenizer").ok());
    absl::StatusOr<text::Tokenizer> tokenizer =
        text::Tokenizer::FromFile(dir_.path() / "tokenizer" / "tokenizer.json");
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    const absl::Status packed = Pack(AlphabetChats(), *tokenizer,
                                     {.sequence_length = 128,
                                      .validation_fraction = 0.25,
                                      .seed = 1,
                                      .flavor = text::ChatFlavor::kQwen3_5,
                                      .sequences_per_shard = 4096,
                                      .tokenizer_name = "bytes"},
                                     data());
    ASSERT_TRUE(packed.ok()) << packed;
  }

  // What a test varies of a drafter run on this fixture's target and data.
  struct Run {
    std::filesystem::path out;
    std::filesystem::path init;
    int64_t anchors = 0;
    int64_t steps = 0;
    double lr = 0;
    double warmup_ratio = 0;
    int64_t validate_every = 0;
    uint64_t seed = 0;
  };
  DrafterTrainingOptions DrafterOptions(const Run& run) const {
    DrafterTrainingOptions options{
        .target = target(), .data = data(), .init = run.init, .anchors = run.anchors, .gamma = 7.0};
    options.loop.dir = run.out;
    options.loop.steps = run.steps;
    options.loop.lr = run.lr;
    options.loop.warmup_ratio = run.warmup_ratio;
    options.loop.validate_every = run.validate_every;
    options.seed = run.seed;
    return options;
  }

  std::filesystem::path target() const { return dir_.path() / "target"; }
  std::filesystem::path init() const { return dir_.path() / "init"; }
  std::filesystem::path data() const { return dir_.path() / "data"; }

  specd::testing::TempDir dir_;
};

}  // namespace specd::train::testing
