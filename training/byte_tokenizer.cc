#include "training/byte_tokenizer.h"

#include <cstddef>
#include <span>
#include <string>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/io/atomic_file.h"
#include "common/text/byte_level.h"
#include "nlohmann/json.hpp"

namespace specd::train {
namespace {

using Json = nlohmann::json;

struct SpecialToken {
  int64_t id;
  const char* content;
  bool special;  // as Qwen's files mark them: the think tags are not special
};

constexpr SpecialToken kSpecialTokens[] = {
    {kByteLevelEndOfTextId, "<|endoftext|>", true}, {kByteLevelImStartId, "<|im_start|>", true},
    {kByteLevelImEndId, "<|im_end|>", true},        {kByteLevelThinkId, "<think>", false},
    {kByteLevelThinkEndId, "</think>", false},
};

// Qwen's pre-tokenizer regex: it only decides where pieces end, which without merges changes no
// id, but text::Tokenizer requires a Split step before the ByteLevel one.
constexpr char kSplitRegex[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

Json ByteLevelStep() {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", false},
          {"trim_offsets", false},
          {"use_regex", false}};
}

Json TokenizerJson() {
  Json vocab = Json::object();
  for (int byte = 0; byte < 256; ++byte) {
    vocab[std::string(text::ByteLevelChar(static_cast<uint8_t>(byte)))] = byte;
  }
  Json added_tokens = Json::array();
  for (const SpecialToken& token : kSpecialTokens) {
    added_tokens.push_back({{"id", token.id},
                            {"content", token.content},
                            {"single_word", false},
                            {"lstrip", false},
                            {"rstrip", false},
                            {"normalized", false},
                            {"special", token.special}});
  }
  // No normalizer: NFC would change non-NFC input, and the tokenizer must round-trip any text.
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added_tokens},
          {"normalizer", nullptr},
          {"pre_tokenizer",
           {{"type", "Sequence"},
            {"pretokenizers", Json::array({{{"type", "Split"},
                                            {"pattern", {{"Regex", kSplitRegex}}},
                                            {"behavior", "Isolated"},
                                            {"invert", false}},
                                           ByteLevelStep()})}}},
          {"post_processor", ByteLevelStep()},
          {"decoder", ByteLevelStep()},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", ""},
            {"end_of_word_suffix", ""},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"ignore_merges", false},
            {"vocab", vocab},
            {"merges", Json::array()}}}};
}

// The transformers side of the tokenizer; the chat template is common/text's, not a Jinja copy.
Json TokenizerConfigJson() {
  Json decoder = Json::object();
  for (const SpecialToken& token : kSpecialTokens) {
    decoder[std::to_string(token.id)] = {{"content", token.content}, {"lstrip", false},
                                         {"normalized", false},      {"rstrip", false},
                                         {"single_word", false},     {"special", token.special}};
  }
  return {{"tokenizer_class", "PreTrainedTokenizerFast"},
          {"added_tokens_decoder", decoder},
          {"bos_token", nullptr},
          {"eos_token", "<|im_end|>"},
          {"pad_token", "<|endoftext|>"},
          {"unk_token", nullptr},
          {"clean_up_tokenization_spaces", false},
          {"model_max_length", 131072}};
}

absl::Status WriteJson(const std::filesystem::path& path, const Json& json) {
  return io::WriteFileAtomically(path, json.dump(2) + "\n");
}

}  // namespace

absl::Status WriteByteLevelTokenizer(const std::filesystem::path& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot create ", dir.string(), ": ", error.message()));
  }
  if (absl::Status status = WriteJson(dir / "tokenizer.json", TokenizerJson()); !status.ok()) {
    return status;
  }
  return WriteJson(dir / "tokenizer_config.json", TokenizerConfigJson());
}

}  // namespace specd::train
