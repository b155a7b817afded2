#include "common/text/tokenizer.h"

#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/text/nfc.h"
#include "common/text/utf8.h"

namespace specd::text {

Tokenizer::Tokenizer(bool nfc, Vocabulary vocabulary, BpeModel model, RegexSplitter pre_tokenizer,
                     AddedTokenMatcher raw_added_tokens, AddedTokenMatcher normalized_added_tokens)
    : nfc_(nfc),
      vocabulary_(std::move(vocabulary)),
      model_(std::move(model)),
      pre_tokenizer_(std::move(pre_tokenizer)),
      raw_added_tokens_(std::move(raw_added_tokens)),
      normalized_added_tokens_(std::move(normalized_added_tokens)) {}

std::optional<std::filesystem::path> Tokenizer::FileFor(const std::filesystem::path& model_dir,
                                                        const std::filesystem::path& given) {
  if (!given.empty()) return given;
  std::filesystem::path own = model_dir / "tokenizer.json";
  if (std::filesystem::exists(own)) return own;
  return std::nullopt;
}

absl::StatusOr<Tokenizer> Tokenizer::FromFile(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot open ", path.string()));
  std::string contents(static_cast<size_t>(file.tellg()), '\0');
  file.seekg(0);
  if (!file.read(contents.data(), static_cast<std::streamsize>(contents.size()))) {
    return absl::DataLossError(absl::StrCat("cannot read ", path.string()));
  }
  absl::StatusOr<Tokenizer> tokenizer = FromJson(contents);
  if (!tokenizer.ok()) {
    return absl::Status(tokenizer.status().code(),
                        absl::StrCat(path.string(), ": ", tokenizer.status().message()));
  }
  return tokenizer;
}

absl::StatusOr<Tokenizer> Tokenizer::FromJson(std::string_view json) {
  absl::StatusOr<TokenizerSpec> spec = ParseTokenizerJson(json);
  if (!spec.ok()) return spec.status();
  return FromSpec(*std::move(spec));
}

absl::StatusOr<Tokenizer> Tokenizer::FromSpec(TokenizerSpec spec) {
  absl::StatusOr<Vocabulary> vocabulary =
      Vocabulary::Create(std::move(spec.vocab), spec.added_tokens);
  if (!vocabulary.ok()) return vocabulary.status();
  absl::StatusOr<BpeModel> model = BpeModel::Create(*vocabulary, spec.merges);
  if (!model.ok()) return model.status();
  absl::StatusOr<RegexSplitter> pre_tokenizer = RegexSplitter::Compile(spec.split_pattern);
  if (!pre_tokenizer.ok()) return pre_tokenizer.status();

  std::vector<AddedTokenMatcher::Entry> raw_added_tokens;
  std::vector<AddedTokenMatcher::Entry> normalized_added_tokens;
  for (const AddedToken& token : spec.added_tokens) {
    if (!token.normalized) {
      raw_added_tokens.push_back({token.content, token});
      continue;
    }
    std::string storage;
    normalized_added_tokens.push_back(
        {std::string(spec.nfc ? ToNfc(token.content, storage) : token.content), token});
  }
  return Tokenizer(spec.nfc, *std::move(vocabulary), *std::move(model), *std::move(pre_tokenizer),
                   AddedTokenMatcher(std::move(raw_added_tokens)),
                   AddedTokenMatcher(std::move(normalized_added_tokens)));
}

absl::StatusOr<std::vector<TokenId>> Tokenizer::Encode(std::string_view text) const {
  if (const size_t bad = FindInvalidUtf8(text); bad != std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("text is not valid UTF-8 at byte ", bad));
  }
  std::vector<TokenId> ids;
  ids.reserve(text.size() / 3);
  BpeModel::Workspace workspace;
  absl::Status status;
  raw_added_tokens_.Split(text, [&](std::string_view segment, std::optional<TokenId> added) {
    if (added) {
      ids.push_back(*added);
    } else if (status.ok()) {
      status = EncodeSegment(segment, workspace, ids);
    }
  });
  if (!status.ok()) return status;
  return ids;
}

absl::Status Tokenizer::EncodeSegment(std::string_view segment, BpeModel::Workspace& workspace,
                                      std::vector<TokenId>& ids) const {
  std::string storage;
  const std::string_view normalized = nfc_ ? ToNfc(segment, storage) : segment;
  absl::Status status;
  normalized_added_tokens_.Split(
      normalized, [&](std::string_view part, std::optional<TokenId> added) {
        if (added) {
          ids.push_back(*added);
        } else if (status.ok()) {
          status = pre_tokenizer_.Split(
              part, [&](std::string_view piece) { model_.Encode(piece, workspace, ids); });
        }
      });
  return status;
}

absl::Status Tokenizer::AppendTokenBytes(TokenId id, const DecodeOptions& options,
                                         std::string& bytes) const {
  if (!vocabulary_.Contains(id)) {
    if (options.skip_unknown_ids && id >= 0) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("token id ", id, " is not in the vocabulary (size ", vocab_size(), ")"));
  }
  if (!(options.skip_special_tokens && vocabulary_.IsSpecial(id))) {
    bytes.append(vocabulary_.Bytes(id));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Tokenizer::Decode(std::span<const TokenId> ids,
                                              const DecodeOptions& options) const {
  std::string bytes;
  for (const TokenId id : ids) {
    if (absl::Status status = AppendTokenBytes(id, options, bytes); !status.ok()) return status;
  }
  std::string text;
  AppendUtf8Lossy(bytes, text);
  return text;
}

std::optional<TokenId> Tokenizer::TokenToId(std::string_view token) const {
  return vocabulary_.Find(token);
}

std::optional<std::string_view> Tokenizer::IdToToken(TokenId id) const {
  if (!vocabulary_.Contains(id)) return std::nullopt;
  return vocabulary_.Token(id);
}

}  // namespace specd::text
