// Packing: the loss mask covers what the assistant says and nothing else, records are separated
// by <|endoftext|>, only the last sequence is padded, the split is deterministic, and a damaged
// shard is refused by name.
#include "training/packed_dataset.h"

#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"
#include "training/byte_tokenizer.h"

namespace specd::train {
namespace {

using text::ChatRole;

class PackedDatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(WriteByteLevelTokenizer(dir_.path() / "tokenizer").ok());
    absl::StatusOr<text::Tokenizer> loaded =
        text::Tokenizer::FromFile(dir_.path() / "tokenizer" / "tokenizer.json");
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    tokenizer_.emplace(*std::move(loaded));
  }

  TokenizedRecord Tokenize(const Conversation& record) {
    absl::StatusOr<TokenizedRecord> tokenized =
        TokenizeRecord(record, *tokenizer_, text::ChatFlavor::kQwen3_5);
    EXPECT_TRUE(tokenized.ok()) << tokenized.status();
    return tokenized.value_or(TokenizedRecord{});
  }

  // The text of the ids whose mask is `mask`.
  std::string TextWhere(const TokenizedRecord& record, uint8_t mask) {
    std::vector<text::TokenId> ids;
    for (size_t i = 0; i < record.ids.size(); ++i) {
      if (record.mask[i] == mask) ids.push_back(record.ids[i]);
    }
    return tokenizer_->Decode(ids).value_or("<bad ids>");
  }

  std::filesystem::path Packed(const std::vector<Conversation>& records,
                               const PackOptions& options) {
    const std::filesystem::path out = dir_.path() / "packed";
    const absl::Status status = Pack(records, *tokenizer_, options, out);
    EXPECT_TRUE(status.ok()) << status;
    return out;
  }

  testing::TempDir dir_;
  std::optional<text::Tokenizer> tokenizer_;
};

Conversation Chat(std::vector<std::pair<ChatRole, std::string>> turns) {
  Conversation conversation;
  for (auto& [role, content] : turns) {
    conversation.messages.push_back(
        {.role = role, .content = std::move(content), .reasoning = std::nullopt});
  }
  return conversation;
}

Conversation Text(std::string text) { return {.messages = {}, .text = std::move(text)}; }

PackOptions Options(int64_t length, double validation_fraction = 0) {
  return {.sequence_length = length,
          .validation_fraction = validation_fraction,
          .seed = 1,
          .flavor = text::ChatFlavor::kQwen3_5,
          .sequences_per_shard = 4096,
          .tokenizer_name = "bytes"};
}

std::vector<int64_t> Values(const at::Tensor& tensor) {
  const at::Tensor longs = tensor.to(at::kLong).contiguous();
  return {longs.data_ptr<int64_t>(), longs.data_ptr<int64_t>() + longs.numel()};
}

TEST_F(PackedDatasetTest, MasksTheAssistantAnswerThroughItsImEnd) {
  const TokenizedRecord record = Tokenize(
      Chat({{ChatRole::kSystem, "sys"}, {ChatRole::kUser, "hi"}, {ChatRole::kAssistant, "ok"}}));
  // The generation prompt "<|im_start|>assistant\n<think>\n" is given, the rest is trained.
  EXPECT_EQ(TextWhere(record, 1), "\n</think>\n\nok<|im_end|>");
  EXPECT_EQ(TextWhere(record, 0),
            "<|im_start|>system\nsys<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n<|endoftext|>");
}

TEST_F(PackedDatasetTest, MasksEveryAssistantTurnOfAMultiTurnChat) {
  const TokenizedRecord record = Tokenize(Chat({{ChatRole::kUser, "a"},
                                                {ChatRole::kAssistant, "b"},
                                                {ChatRole::kUser, "c"},
                                                {ChatRole::kAssistant, "d"}}));
  EXPECT_EQ(TextWhere(record, 1), "b<|im_end|>\n</think>\n\nd<|im_end|>");
}

TEST_F(PackedDatasetTest, TrainsOnAllOfAPlainTextAndItsSeparator) {
  const TokenizedRecord record = Tokenize(Text("doc"));
  EXPECT_EQ(record.ids, (std::vector<int32_t>{'d', 'o', 'c', kByteLevelEndOfTextId}));
  EXPECT_EQ(record.mask, (std::vector<uint8_t>{1, 1, 1, 1}));
}

TEST_F(PackedDatasetTest, SeparatesRecordsWithEndOfTextAndPadsOnlyTheLastSequence) {
  const std::filesystem::path out = Packed({Text("abc"), Text("de"), Text("fghij")}, Options(5));
  absl::StatusOr<PackedDataset> dataset = PackedDataset::Open(out);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  // a b c E d | e E f g h | i j E P P
  ASSERT_EQ(dataset->size(Split::kTrain), 3);
  EXPECT_EQ(dataset->size(Split::kValidation), 0);
  constexpr int64_t E = kByteLevelEndOfTextId;
  EXPECT_EQ(Values(dataset->Get(Split::kTrain, 0).ids),
            (std::vector<int64_t>{'a', 'b', 'c', E, 'd'}));
  EXPECT_EQ(Values(dataset->Get(Split::kTrain, 1).mask), (std::vector<int64_t>{1, 1, 1, 1, 1}));
  const Sequence last = dataset->Get(Split::kTrain, 2);
  EXPECT_EQ(Values(last.ids), (std::vector<int64_t>{'i', 'j', E, E, E}));
  EXPECT_EQ(Values(last.mask), (std::vector<int64_t>{1, 1, 1, 0, 0}));
  EXPECT_EQ(dataset->pad_id(), E);
  EXPECT_EQ(dataset->eos_id(), kByteLevelImEndId);
  EXPECT_EQ(dataset->sequence_length(), 5);
}

TEST_F(PackedDatasetTest, SplitIsDeterministicDisjointAndOfTheAskedSize) {
  const SplitIndices a = SplitRecords(100, 0.2, 7);
  const SplitIndices b = SplitRecords(100, 0.2, 7);
  EXPECT_EQ(a.train, b.train);
  EXPECT_EQ(a.validation, b.validation);
  EXPECT_EQ(a.validation.size(), 20);
  EXPECT_EQ(a.train.size(), 80);
  std::vector<int64_t> all = a.train;
  all.insert(all.end(), a.validation.begin(), a.validation.end());
  std::sort(all.begin(), all.end());
  for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(all[static_cast<size_t>(i)], i);
  EXPECT_NE(SplitRecords(100, 0.2, 8).validation, a.validation);
}

TEST_F(PackedDatasetTest, PacksEachSplitSeparately) {
  const std::filesystem::path out =
      Packed({Text("aaaa"), Text("bbbb"), Text("cccc"), Text("dddd")}, Options(5, 0.5));
  absl::StatusOr<PackedDataset> dataset = PackedDataset::Open(out);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  // Two records of 5 tokens per split: two sequences each, none padded.
  EXPECT_EQ(dataset->size(Split::kTrain), 2);
  EXPECT_EQ(dataset->size(Split::kValidation), 2);
  const std::vector<int64_t> first = Values(dataset->Get(Split::kValidation, 0).ids);
  EXPECT_EQ(first.back(), kByteLevelEndOfTextId);
}

TEST_F(PackedDatasetTest, CutsShardsAtSequencesPerShard) {
  PackOptions options = Options(2);
  options.sequences_per_shard = 2;
  const std::filesystem::path out = Packed({Text("abcdefg")}, options);  // 8 tokens, 4 sequences
  EXPECT_TRUE(std::filesystem::exists(out / "train-00001.bin"));
  EXPECT_TRUE(std::filesystem::exists(out / "train-00001.mask.bin"));
  EXPECT_FALSE(std::filesystem::exists(out / "train-00002.bin"));
  absl::StatusOr<PackedDataset> dataset = PackedDataset::Open(out);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_EQ(Values(dataset->Get(Split::kTrain, 3).ids),
            (std::vector<int64_t>{'g', kByteLevelEndOfTextId}));
}

TEST_F(PackedDatasetTest, RefusesAShardWhoseChecksumDiffersNamingIt) {
  const std::filesystem::path out = Packed({Text("abcdef")}, Options(4));
  {
    std::fstream shard(out / "train-00000.bin", std::ios::in | std::ios::out | std::ios::binary);
    shard.seekp(0);
    shard.put('z');
  }
  const absl::StatusOr<PackedDataset> dataset = PackedDataset::Open(out);
  ASSERT_FALSE(dataset.ok());
  EXPECT_NE(dataset.status().message().find("train-00000.bin"), std::string::npos);
  EXPECT_NE(dataset.status().message().find("SHA-256"), std::string::npos) << dataset.status();
}

TEST_F(PackedDatasetTest, RefusesATruncatedMaskShardNamingIt) {
  const std::filesystem::path out = Packed({Text("abcdef")}, Options(4));
  std::filesystem::resize_file(out / "train-00000.mask.bin", 3);
  const absl::StatusOr<PackedDataset> dataset = PackedDataset::Open(out);
  ASSERT_FALSE(dataset.ok());
  EXPECT_NE(dataset.status().message().find("train-00000.mask.bin has 3 bytes"), std::string::npos)
      << dataset.status();
}

TEST_F(PackedDatasetTest, ADirectoryWithoutManifestIsNotADataset) {
  const std::filesystem::path out = Packed({Text("abcdef")}, Options(4));
  std::filesystem::remove(out / "manifest.json");
  const absl::StatusOr<PackedDataset> dataset = PackedDataset::Open(out);
  ASSERT_FALSE(dataset.ok());
  EXPECT_NE(dataset.status().message().find("interrupted pack"), std::string::npos);
}

TEST_F(PackedDatasetTest, RefusesAChatWithoutAUserMessage) {
  const std::vector<Conversation> records = {Chat({{ChatRole::kAssistant, "x"}})};
  const absl::Status status = Pack(records, *tokenizer_, Options(4), dir_.path() / "packed");
  EXPECT_NE(status.message().find("record 0"), std::string::npos) << status;
}

}  // namespace
}  // namespace specd::train
