// Properties of encode and decode over many random inputs (fixed seeds).
#include <gtest/gtest.h>
#include <utf8proc.h>

#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tests/unit/common/text/qwen3_tokenizer.h"

namespace specd::text {
namespace {

// NFC straight from utf8proc, independent of the tokenizer's fast path.
std::string ReferenceNfc(const std::string& text) {
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> normalized(
      utf8proc_NFC(reinterpret_cast<const utf8proc_uint8_t*>(text.c_str())), &std::free);
  return reinterpret_cast<const char*>(normalized.get());
}

// Random text from the kinds of pieces that stress a byte-level BPE: ASCII words and code,
// Latin letters with stacked combining marks (NFC composes some), Hangul jamo, CJK, Greek,
// Arabic, Devanagari, Thai, emoji with skin tones and ZWJ sequences, digits, runs of whitespace
// and newlines, and special tokens.
class RandomText {
 public:
  explicit RandomText(uint32_t seed) : random_(seed) {}

  std::string Next() {
    std::string text;
    const int parts = Uniform(0, 24);
    for (int i = 0; i < parts; ++i) text += Pick(kFragments);
    return text;
  }

 private:
  static inline const std::vector<std::string> kFragments = {
      "hello",
      " world",
      "def f(x):\n    return x",
      "{ }",
      "+=",
      "'s",
      "'LL",
      "e\u0301",
      "a\u0308\u0304",
      "o\u0323\u0302",
      "\u0301",
      "\u1100\u1161\u11A8",
      "\uAC00\u11A8",
      "\u00C5",
      "\u212B",
      "\u4E2D\u6587",
      "\u65E5\u672C\u8A9E",
      "\uD55C\uAD6D\uC5B4",
      "\u0395\u03BB\u03BB\u03B7\u03BD\u03B9\u03BA\u03AC",
      "\u0645\u0631\u062D\u0628\u0627",
      "\u0915\u094D\u0937",
      "\u0E44\u0E17\u0E22",
      "\U0001F600",
      "\U0001F44D\U0001F3FD",
      "\U0001F468\u200D\U0001F469\u200D\U0001F467",
      "\U0001F3F3\uFE0F\u200D\U0001F308",
      "\u2764\uFE0F",
      "0",
      "42",
      "3.14159",
      " ",
      "   ",
      "\t",
      "\n",
      "\r\n",
      "\n\n\n",
      "\u00A0",
      "\u3000",
      "\u0085",
      "<|im_end|>",
      "<think>",
      "<|im",
      "\x7F",
      "\U0010FFFF",
      "\uFFFD"};

  int Uniform(int low, int high) { return std::uniform_int_distribution<int>(low, high)(random_); }
  const std::string& Pick(const std::vector<std::string>& items) {
    return items[Uniform(0, static_cast<int>(items.size()) - 1)];
  }

  std::mt19937 random_;
};

TEST(RoundTripPropertyTest, DecodeOfEncodeIsTheNfcOfTheText) {
  const Tokenizer& tokenizer = Qwen3Tokenizer();
  RandomText random_text(/*seed=*/20260521);
  for (int i = 0; i < 10000; ++i) {
    const std::string text = random_text.Next();
    const absl::StatusOr<std::vector<TokenId>> ids = tokenizer.Encode(text);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*tokenizer.Decode(*ids), ReferenceNfc(text)) << "text: " << text;
  }
}

// Property: arbitrary bytes and arbitrary ids give a result or a clear error, never a crash.
TEST(RoundTripPropertyTest, ArbitraryInputIsAnErrorOrAResult) {
  const Tokenizer& tokenizer = Qwen3Tokenizer();
  std::mt19937 random(/*seed=*/7);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<TokenId> id(-2, tokenizer.vocab_size() + 1);
  for (int i = 0; i < 2000; ++i) {
    std::string bytes(i % 64, '\0');
    for (char& b : bytes) b = static_cast<char>(byte(random));
    const absl::StatusOr<std::vector<TokenId>> ids = tokenizer.Encode(bytes);
    if (!ids.ok()) {
      EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument);
    }

    std::vector<TokenId> random_ids(i % 16);
    for (TokenId& random_id : random_ids) random_id = id(random);
    const absl::StatusOr<std::string> text = tokenizer.Decode(random_ids);
    if (!text.ok()) {
      EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
    }
  }
}

}  // namespace
}  // namespace specd::text
