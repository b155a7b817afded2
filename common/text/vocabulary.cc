#include "common/text/vocabulary.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/text/byte_level.h"

namespace specd::text {

absl::StatusOr<Vocabulary> Vocabulary::Create(std::vector<std::string> model_tokens,
                                              const std::vector<AddedToken>& added_tokens) {
  Vocabulary vocabulary;
  const size_t model_size = model_tokens.size();
  vocabulary.tokens_ = std::move(model_tokens);
  vocabulary.assigned_.assign(model_size, true);
  vocabulary.special_.assign(model_size, false);
  for (const AddedToken& token : added_tokens) {
    if (token.id < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("added token \"", token.content, "\" has negative id ", token.id));
    }
    const auto id = static_cast<size_t>(token.id);
    if (id >= vocabulary.tokens_.size()) {
      vocabulary.tokens_.resize(id + 1);
      vocabulary.assigned_.resize(id + 1, false);
      vocabulary.special_.resize(id + 1, false);
    }
    vocabulary.tokens_[id] = token.content;
    vocabulary.assigned_[id] = true;
    vocabulary.special_[id] = token.special;
  }
  vocabulary.bytes_.resize(vocabulary.tokens_.size());
  vocabulary.ids_.reserve(vocabulary.tokens_.size());
  for (size_t id = 0; id < vocabulary.tokens_.size(); ++id) {
    if (!vocabulary.assigned_[id]) continue;
    const std::string& token = vocabulary.tokens_[id];
    const auto [it, inserted] = vocabulary.ids_.emplace(token, static_cast<TokenId>(id));
    if (!inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat("token \"", token, "\" has two ids, ", it->second, " and ", id));
    }
    std::optional<std::string> bytes = ByteLevelDecode(token);
    vocabulary.bytes_[id] = bytes ? *std::move(bytes) : token;
  }
  return vocabulary;
}

std::optional<TokenId> Vocabulary::Find(std::string_view token) const {
  const auto it = ids_.find(token);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

}  // namespace specd::text
