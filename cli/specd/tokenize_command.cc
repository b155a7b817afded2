// specd tokenize / detokenize: text <-> token ids with a tokenizer.json, for inspecting prompts
// and checking the tokenizer against other implementations.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/specd/commands.h"
#include "common/text/tokenizer.h"

namespace specd::cli {
namespace {

constexpr char kDefaultTokenizer[] = ".cache/tokenizer/qwen3/tokenizer.json";

struct TokenizeFlags {
  std::string tokenizer;
  std::string text;
  std::string input;
  std::string format = "json";
};

struct DetokenizeFlags {
  std::string tokenizer;
  std::string ids;
  std::string input;
  bool skip_special_tokens = false;
};

absl::StatusOr<text::Tokenizer> LoadTokenizer(const std::string& flag) {
  if (!flag.empty()) return text::Tokenizer::FromFile(flag);
  if (!std::filesystem::exists(kDefaultTokenizer)) {
    return absl::InvalidArgumentError(
        absl::StrCat("no --tokenizer given and ./", kDefaultTokenizer, " does not exist"));
  }
  return text::Tokenizer::FromFile(kDefaultTokenizer);
}

// The contents of `path`, or of standard input for "-".
absl::StatusOr<std::string> ReadInput(const std::string& path) {
  if (path == "-") {
    return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

// Ids separated by commas and/or whitespace, as `tokenize --format text` prints them.
absl::StatusOr<std::vector<text::TokenId>> ParseIds(const std::string& list) {
  std::vector<text::TokenId> ids;
  for (absl::string_view field :
       absl::StrSplit(list, absl::ByAnyChar(", \t\r\n"), absl::SkipEmpty())) {
    text::TokenId id;
    if (!absl::SimpleAtoi(field, &id)) {
      return absl::InvalidArgumentError(absl::StrCat("\"", field, "\" is not a token id"));
    }
    ids.push_back(id);
  }
  return ids;
}

absl::Status Tokenize(const TokenizeFlags& flags) {
  absl::StatusOr<text::Tokenizer> tokenizer = LoadTokenizer(flags.tokenizer);
  if (!tokenizer.ok()) return tokenizer.status();
  absl::StatusOr<std::string> input = flags.input.empty() ? flags.text : ReadInput(flags.input);
  if (!input.ok()) return input.status();
  absl::StatusOr<std::vector<text::TokenId>> ids = tokenizer->Encode(*input);
  if (!ids.ok()) return ids.status();
  if (flags.format == "json") {
    std::cout << "{\"ids\":[" << absl::StrJoin(*ids, ",") << "]}\n";
  } else {
    std::cout << absl::StrJoin(*ids, " ") << "\n";
  }
  return absl::OkStatus();
}

absl::Status Detokenize(const DetokenizeFlags& flags) {
  absl::StatusOr<text::Tokenizer> tokenizer = LoadTokenizer(flags.tokenizer);
  if (!tokenizer.ok()) return tokenizer.status();
  absl::StatusOr<std::string> list = flags.input.empty() ? flags.ids : ReadInput(flags.input);
  if (!list.ok()) return list.status();
  absl::StatusOr<std::vector<text::TokenId>> ids = ParseIds(*list);
  if (!ids.ok()) return ids.status();
  absl::StatusOr<std::string> decoded = tokenizer->Decode(
      *ids, {.skip_special_tokens = flags.skip_special_tokens, .skip_unknown_ids = false});
  if (!decoded.ok()) return decoded.status();
  std::cout << *decoded << "\n";
  return absl::OkStatus();
}

}  // namespace

void AddTokenizeCommands(CLI::App& app) {
  const std::string tokenizer_help =
      absl::StrCat("tokenizer.json to use (default: ./", kDefaultTokenizer, " if it exists)");

  auto tokenize_flags = std::make_shared<TokenizeFlags>();
  CLI::App* tokenize = app.add_subcommand("tokenize", "Encode text into token ids");
  tokenize->add_option("--tokenizer", tokenize_flags->tokenizer, tokenizer_help);
  CLI::Option* text = tokenize->add_option("--text", tokenize_flags->text, "Text to encode");
  CLI::Option* input = tokenize->add_option("--input", tokenize_flags->input,
                                            "File holding the text to encode (- for stdin)");
  text->excludes(input);
  tokenize
      ->add_option("--format", tokenize_flags->format,
                   "json prints {\"ids\":[...]}, text prints the ids separated by spaces")
      ->check(CLI::IsMember({"json", "text"}));
  tokenize->callback([tokenize, tokenize_flags, text, input] {
    RunOrExit(*tokenize, [&] {
      if (text->count() == 0 && input->count() == 0) {
        return absl::InvalidArgumentError("give --text or --input");
      }
      return Tokenize(*tokenize_flags);
    });
  });

  auto detokenize_flags = std::make_shared<DetokenizeFlags>();
  CLI::App* detokenize = app.add_subcommand(
      "detokenize", "Decode token ids into text (printed with a newline after it)");
  detokenize->add_option("--tokenizer", detokenize_flags->tokenizer, tokenizer_help);
  CLI::Option* ids =
      detokenize->add_option("--ids", detokenize_flags->ids, "Token ids, e.g. 9707,11,1879");
  CLI::Option* ids_input =
      detokenize->add_option("--input", detokenize_flags->input,
                             "File holding ids separated by commas or whitespace (- for stdin)");
  ids->excludes(ids_input);
  detokenize->add_flag("--skip-special-tokens", detokenize_flags->skip_special_tokens,
                       "Leave out special tokens such as <|im_end|>");
  detokenize->callback([detokenize, detokenize_flags, ids, ids_input] {
    RunOrExit(*detokenize, [&] {
      if (ids->count() == 0 && ids_input->count() == 0) {
        return absl::InvalidArgumentError("give --ids or --input");
      }
      return Detokenize(*detokenize_flags);
    });
  });
}

}  // namespace specd::cli
