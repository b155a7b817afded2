#pragma once
// A tiny byte-level tokenizer for models trained from scratch on this machine: the 256 byte
// tokens (GPT-2's ByteLevel alphabet, a BPE model without merges, so one token per byte) and the
// Qwen chat specials after them. Written as a Hugging Face tokenizer.json that
// text::Tokenizer loads, it encodes any UTF-8 text and decodes it back exactly.
#include <cstdint>
#include <filesystem>

#include "absl/status/status.h"

namespace specd::train {

// Ids of the tokenizer: byte b is id b, then the added tokens.
inline constexpr int64_t kByteLevelEndOfTextId = 256;  // <|endoftext|>: padding, separator
inline constexpr int64_t kByteLevelImStartId = 257;    // <|im_start|>
inline constexpr int64_t kByteLevelImEndId = 258;      // <|im_end|>: end of a chat turn (EOS)
inline constexpr int64_t kByteLevelThinkId = 259;      // <think>
inline constexpr int64_t kByteLevelThinkEndId = 260;   // </think>
inline constexpr int64_t kByteLevelTokenizerSize = 261;

// The vocabulary of a model that uses this tokenizer: its 261 ids padded to 272 (a multiple of
// 16), so that ids 261..271 never come out of the tokenizer and the last one is free to be the
// DFlash drafter's MASK token.
inline constexpr int64_t kByteLevelVocabSize = 272;
inline constexpr int64_t kByteLevelMaskId = kByteLevelVocabSize - 1;

// Writes `dir`/tokenizer.json and `dir`/tokenizer_config.json (eos "<|im_end|>", pad
// "<|endoftext|>"), each atomically; `dir` is created if missing.
absl::Status WriteByteLevelTokenizer(const std::filesystem::path& dir);

}  // namespace specd::train
