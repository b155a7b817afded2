#pragma once
// Tokenized training data in fixed-length sequences, as the trainer reads it. Pack renders each
// record (a chat through the chat template, whole, assistant turns included; or a plain text),
// tokenizes it with a loss mask, ends it with <|endoftext|>, concatenates the records of a split
// and cuts the stream into sequences of `sequence_length` tokens; only the last is padded.
//
// The loss mask is 1 on the tokens a model is trained to produce: an assistant turn's content
// (its think block included) through its closing <|im_end|>, and all of a plain text and its
// separator; 0 on system and user turns, the template's role headers and generation prompt, a
// chat's separator and padding. Text and mask are tokenized in segments cut at those borders,
// which lie next to special tokens or the header's newline, so the ids are those of the whole.
//
// Layout of a packed directory:
//   train-00000.bin, ...        int32 little-endian ids, sequence-major [sequences, length]
//   train-00000.mask.bin, ...   uint8 loss mask, same shape
//   validation-00000.bin, ...   the same for the validation split
//   manifest.json               shapes, ids, the split and every file's size and SHA-256
// Every file is written atomically and manifest.json last (an old one is removed first), so an
// interrupted Pack leaves a directory that Open refuses, never a half-valid dataset.
#include <ATen/ATen.h>

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/text/chat_template.h"
#include "common/text/tokenizer.h"
#include "training/conversations.h"

namespace specd::train {

enum class Split { kTrain, kValidation };

// "train" or "validation", the shard files' prefix.
const char* SplitName(Split split);

struct PackOptions {
  int64_t sequence_length = 2048;
  // The share of records held out, rounded to a whole number; which ones depends on `seed` only.
  double validation_fraction = 0.05;
  uint64_t seed = 0;
  text::ChatFlavor flavor = text::ChatFlavor::kQwen3_5;
  int64_t sequences_per_shard = 4096;
  std::string tokenizer_name = "";  // recorded in the manifest, e.g. the tokenizer.json path
};

// One record's ids and loss mask, its <|endoftext|> separator included.
struct TokenizedRecord {
  std::vector<int32_t> ids;
  std::vector<uint8_t> mask;
};

absl::StatusOr<TokenizedRecord> TokenizeRecord(const Conversation& record,
                                               const text::Tokenizer& tokenizer,
                                               text::ChatFlavor flavor);

// The record indices of each split, each in input order.
struct SplitIndices {
  std::vector<int64_t> train;
  std::vector<int64_t> validation;
};
SplitIndices SplitRecords(int64_t records, double validation_fraction, uint64_t seed);

// Packs `records` into `dir` (created if missing). The tokenizer needs <|endoftext|> (padding
// and separator) and <|im_end|> (the manifest's EOS).
absl::Status Pack(std::span<const Conversation> records, const text::Tokenizer& tokenizer,
                  const PackOptions& options, const std::filesystem::path& dir);

struct Sequence {
  at::Tensor ids;   // int64 [sequence_length]
  at::Tensor mask;  // bool [sequence_length]: the loss counts the prediction of ids[i]
};

class PackedDataset {
 public:
  // Reads the manifest and every shard, checking sizes, SHA-256 sums, mask values and ids
  // against the vocabulary; an error names the offending file.
  static absl::StatusOr<PackedDataset> Open(const std::filesystem::path& dir);

  int64_t size(Split split) const;
  // 0 <= index < size(split).
  Sequence Get(Split split, int64_t index) const;

  int64_t sequence_length() const { return sequence_length_; }
  int64_t vocab_size() const { return vocab_size_; }
  int32_t pad_id() const { return pad_id_; }
  int32_t eos_id() const { return eos_id_; }

 private:
  struct SplitData {
    std::vector<int32_t> ids;
    std::vector<uint8_t> mask;
  };

  const SplitData& data(Split split) const { return split == Split::kTrain ? train_ : validation_; }

  int64_t sequence_length_ = 0;
  int64_t vocab_size_ = 0;
  int32_t pad_id_ = 0;
  int32_t eos_id_ = 0;
  SplitData train_;
  SplitData validation_;
};

}  // namespace specd::train
