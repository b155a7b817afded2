#include "common/text/tokenizer_spec.h"

#include <limits>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace specd::text {
namespace {

using Json = nlohmann::json;

absl::Status Malformed(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed tokenizer.json: ", what));
}

absl::Status Unsupported(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("unsupported tokenizer.json: ", what));
}

// The member `key` of `object`, or nullptr when absent or null. Non-const where the parser
// moves strings out of the document rather than copying them.
template <typename JsonType>
JsonType* Member(JsonType& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

std::string TypeOf(const Json& component) {
  const Json* type = Member(component, "type");
  return type != nullptr && type->is_string() ? type->get<std::string>() : "";
}

// An optional boolean option; absent means `fallback`.
absl::StatusOr<bool> Flag(const Json& object, const std::string& key, bool fallback,
                          const std::string& where) {
  const Json* value = Member(object, key);
  if (value == nullptr) return fallback;
  if (!value->is_boolean()) return Malformed(absl::StrCat(where, ".", key, " is not a boolean"));
  return value->get<bool>();
}

// Rejects an option set to anything but its inert value (false, or an empty string).
absl::Status RequireInert(const Json& object, const std::string& key, const std::string& where) {
  const Json* value = Member(object, key);
  if (value == nullptr || (value->is_boolean() && !value->get<bool>()) ||
      (value->is_string() && value->get<std::string>().empty())) {
    return absl::OkStatus();
  }
  return Unsupported(absl::StrCat(where, ".", key, " = ", value->dump()));
}

absl::StatusOr<bool> ParseNormalizer(const Json& root) {
  const Json* normalizer = Member(root, "normalizer");
  if (normalizer == nullptr) return false;
  if (TypeOf(*normalizer) == "NFC") return true;
  return Unsupported(absl::StrCat("normalizer ", normalizer->dump(), " (supported: NFC, null)"));
}

absl::Status CheckByteLevelPreTokenizer(const Json& byte_level) {
  for (const char* option : {"add_prefix_space", "use_regex"}) {
    if (absl::Status status = RequireInert(byte_level, option, "ByteLevel pre-tokenizer");
        !status.ok()) {
      return status;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ParseSplitPattern(const Json& root) {
  const Json* pre_tokenizer = Member(root, "pre_tokenizer");
  const Json* steps = pre_tokenizer ? Member(*pre_tokenizer, "pretokenizers") : nullptr;
  if (pre_tokenizer == nullptr || TypeOf(*pre_tokenizer) != "Sequence" || steps == nullptr ||
      !steps->is_array() || steps->size() != 2 || TypeOf((*steps)[0]) != "Split" ||
      TypeOf((*steps)[1]) != "ByteLevel") {
    return Unsupported(absl::StrCat("pre_tokenizer ",
                                    pre_tokenizer ? pre_tokenizer->dump().substr(0, 200) : "null",
                                    " (supported: Sequence[Split, ByteLevel])"));
  }
  const Json& split = (*steps)[0];
  const Json* pattern = Member(split, "pattern");
  const Json* regex = pattern ? Member(*pattern, "Regex") : nullptr;
  if (regex == nullptr || !regex->is_string()) {
    return Unsupported("Split pre-tokenizer without a \"Regex\" pattern");
  }
  const Json* behavior = Member(split, "behavior");
  if (behavior == nullptr || *behavior != "Isolated") {
    return Unsupported(absl::StrCat("Split behavior ", behavior ? behavior->dump() : "null",
                                    " (supported: \"Isolated\")"));
  }
  if (absl::Status status = RequireInert(split, "invert", "Split pre-tokenizer"); !status.ok()) {
    return status;
  }
  if (absl::Status status = CheckByteLevelPreTokenizer((*steps)[1]); !status.ok()) return status;
  return regex->get<std::string>();
}

absl::Status CheckDecoderAndPostProcessor(const Json& root) {
  const Json* decoder = Member(root, "decoder");
  if (decoder == nullptr || TypeOf(*decoder) != "ByteLevel") {
    return Unsupported(
        absl::StrCat("decoder ", decoder ? decoder->dump() : "null", " (supported: ByteLevel)"));
  }
  // Only a post-processor that adds no tokens fits an encoder that never adds BOS/EOS.
  const Json* post_processor = Member(root, "post_processor");
  if (post_processor != nullptr && TypeOf(*post_processor) != "ByteLevel") {
    return Unsupported(absl::StrCat("post_processor ", post_processor->dump().substr(0, 200),
                                    " (supported: ByteLevel, null)"));
  }
  return absl::OkStatus();
}

absl::Status ParseVocab(Json& model, TokenizerSpec& spec) {
  const Json* vocab = Member(model, "vocab");
  if (vocab == nullptr || !vocab->is_object()) return Malformed("model.vocab is not an object");
  spec.vocab.resize(vocab->size());
  std::vector<bool> seen(vocab->size(), false);
  for (const auto& [token, id] : vocab->items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() >= static_cast<int64_t>(vocab->size()) || seen[id.get<size_t>()]) {
      return Malformed(absl::StrCat("model.vocab id of \"", token, "\" is ", id.dump(),
                                    "; ids must be 0..", vocab->size() - 1, ", each once"));
    }
    seen[id.get<size_t>()] = true;
    spec.vocab[id.get<size_t>()] = token;
  }
  return absl::OkStatus();
}

// A merge is "left right" in older files and ["left", "right"] in newer ones.
absl::Status ParseMerges(Json& model, TokenizerSpec& spec) {
  Json* merges = Member(model, "merges");
  if (merges == nullptr || !merges->is_array()) return Malformed("model.merges is not an array");
  spec.merges.reserve(merges->size());
  for (Json& merge : *merges) {
    if (merge.is_string()) {
      const std::string& text = merge.get_ref<const std::string&>();
      const size_t space = text.find(' ');
      if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
        return Malformed(absl::StrCat("merge \"", text, "\" is not two tokens"));
      }
      spec.merges.emplace_back(text.substr(0, space), text.substr(space + 1));
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      spec.merges.emplace_back(std::move(merge[0].get_ref<std::string&>()),
                               std::move(merge[1].get_ref<std::string&>()));
    } else {
      return Malformed(absl::StrCat("merge ", merge.dump(), " is not two tokens"));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseModel(Json& root, TokenizerSpec& spec) {
  Json* model = Member(root, "model");
  if (model == nullptr || TypeOf(*model) != "BPE") {
    return Unsupported(
        absl::StrCat("model type \"", model ? TypeOf(*model) : "", "\" (supported: BPE)"));
  }
  for (const char* option : {"dropout", "continuing_subword_prefix", "end_of_word_suffix",
                             "byte_fallback", "ignore_merges"}) {
    if (absl::Status status = RequireInert(*model, option, "model"); !status.ok()) return status;
  }
  if (absl::Status status = ParseVocab(*model, spec); !status.ok()) return status;
  return ParseMerges(*model, spec);
}

absl::StatusOr<AddedToken> ParseAddedToken(const Json& entry) {
  const Json* id = Member(entry, "id");
  const Json* content = Member(entry, "content");
  if (id == nullptr || !id->is_number_integer() || id->get<int64_t>() < 0 ||
      id->get<int64_t>() > std::numeric_limits<TokenId>::max() || content == nullptr ||
      !content->is_string()) {
    return Malformed(absl::StrCat("added token ", entry.dump(), " lacks an id or content"));
  }
  AddedToken token;
  token.id = id->get<TokenId>();
  token.content = content->get<std::string>();
  const std::string where = absl::StrCat("added token \"", token.content, "\"");
  // Defaults are HF's for a token without the field.
  struct Option {
    const char* key;
    bool fallback;
    bool* value;
  };
  for (const Option& option :
       {Option{"single_word", false, &token.single_word}, Option{"lstrip", false, &token.lstrip},
        Option{"rstrip", false, &token.rstrip}, Option{"normalized", true, &token.normalized},
        Option{"special", false, &token.special}}) {
    absl::StatusOr<bool> value = Flag(entry, option.key, option.fallback, where);
    if (!value.ok()) return value.status();
    *option.value = *value;
  }
  return token;
}

absl::Status ParseAddedTokens(const Json& root, TokenizerSpec& spec) {
  const Json* added_tokens = Member(root, "added_tokens");
  if (added_tokens == nullptr) return absl::OkStatus();
  if (!added_tokens->is_array()) return Malformed("added_tokens is not an array");
  for (const Json& entry : *added_tokens) {
    absl::StatusOr<AddedToken> token = ParseAddedToken(entry);
    if (!token.ok()) return token.status();
    spec.added_tokens.push_back(*std::move(token));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TokenizerSpec> ParseTokenizerJson(std::string_view json) {
  Json root = Json::parse(json, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return Malformed("not valid JSON");
  if (!root.is_object()) return Malformed("the top level is not an object");
  TokenizerSpec spec;
  absl::StatusOr<bool> nfc = ParseNormalizer(root);
  if (!nfc.ok()) return nfc.status();
  spec.nfc = *nfc;
  absl::StatusOr<std::string> split_pattern = ParseSplitPattern(root);
  if (!split_pattern.ok()) return split_pattern.status();
  spec.split_pattern = *std::move(split_pattern);
  if (absl::Status status = CheckDecoderAndPostProcessor(root); !status.ok()) return status;
  if (absl::Status status = ParseModel(root, spec); !status.ok()) return status;
  if (absl::Status status = ParseAddedTokens(root, spec); !status.ok()) return status;
  return spec;
}

}  // namespace specd::text
