#pragma once
// A small but complete tokenizer.json in the Qwen layout, for tests that need to vary one part
// of the file: 256 byte tokens (id = byte value) and a few merges over "a", "b", "c".
#include <nlohmann/json.hpp>
#include <string>

#include "common/text/byte_level.h"

namespace specd::text {

inline nlohmann::json TinyTokenizerJson() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int byte = 0; byte < 256; ++byte) {
    vocab[std::string(ByteLevelChar(static_cast<uint8_t>(byte)))] = byte;
  }
  vocab["bc"] = 256;
  vocab["ab"] = 257;
  vocab["aa"] = 258;
  return {
      {"version", "1.0"},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         nlohmann::json::array(
             {{{"type", "Split"},
               {"pattern",
                {{"Regex", R"((?i:'s|'t)|\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"}}},
               {"behavior", "Isolated"},
               {"invert", false}},
              {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}}},
      {"post_processor", {{"type", "ByteLevel"}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""},
        {"byte_fallback", false},
        {"vocab", vocab},
        {"merges", nlohmann::json::array({{"b", "c"}, {"a", "b"}, {"a", "a"}})}}},
      {"added_tokens",
       nlohmann::json::array(
           {{{"id", 300}, {"content", "<|end|>"}, {"special", true}, {"normalized", false}},
            {{"id", 301}, {"content", "<tool>"}, {"special", false}, {"normalized", false}}})},
  };
}

}  // namespace specd::text
