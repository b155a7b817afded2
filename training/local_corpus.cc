#include "training/local_corpus.h"

#include <fnmatch.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <string_view>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/text/utf8.h"
#include "training/sha256.h"

namespace specd::train {
namespace {

constexpr std::string_view kInstructions[] = {
    "Continue the following text.",
    "Here is the beginning of a file. Write what comes next.",
    "Continue this document from where it stops.",
    "Write the continuation of the text below.",
};

// The source's matching files, relative to its root, sorted.
absl::StatusOr<std::vector<std::filesystem::path>> MatchingFiles(const CorpusSource& source) {
  std::error_code error;
  if (!std::filesystem::is_directory(source.root, error)) {
    return absl::NotFoundError(absl::StrCat(
        "corpus source ", source.name, ": ", source.root.string(),
        " is not a directory (scripts/setup.sh installs the corpus into .cache/corpus)"));
  }
  std::vector<std::filesystem::path> paths;
  std::filesystem::recursive_directory_iterator it(source.root, error), end;
  for (; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (it->is_directory(error)) {
      if (name == source.skipped_folder) it.disable_recursion_pending();
    } else if (it->is_regular_file(error) &&
               fnmatch(source.extension_or_glob.c_str(), name.c_str(), 0) == 0) {
      paths.push_back(it->path().lexically_relative(source.root));
    }
  }
  if (error) {
    return absl::InternalError(absl::StrCat("corpus source ", source.name, ": cannot list ",
                                            source.root.string(), ": ", error.message()));
  }
  std::sort(paths.begin(), paths.end(),
            [](const auto& a, const auto& b) { return a.native() < b.native(); });
  return paths;
}

// The file's text, or nullopt when it is to be skipped.
std::optional<std::string> ReadDocumentText(const std::filesystem::path& path) {
  std::error_code error;
  const uintmax_t size = std::filesystem::file_size(path, error);
  if (error || size == 0 || size > static_cast<uintmax_t>(kMaxDocumentBytes)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) return std::nullopt;
  if (text.empty() || text::FindInvalidUtf8(text) != std::string_view::npos) return std::nullopt;
  return text;
}

// Byte offsets where each code point of valid UTF-8 `text` starts, plus text.size().
std::vector<size_t> CodePointStarts(std::string_view text) {
  std::vector<size_t> starts;
  for (size_t pos = 0; pos < text.size();) {
    starts.push_back(pos);
    size_t length = 0;
    text::CodePointAt(text, pos, &length);
    pos += length;
  }
  starts.push_back(text.size());
  return starts;
}

}  // namespace

std::filesystem::path DefaultCorpusDir() { return SPECD_DEFAULT_CORPUS_DIR; }

std::vector<CorpusSource> DefaultCorpusSources(const std::filesystem::path& corpus_dir) {
  return {{.name = "networkx-3.6.1",
           .root = corpus_dir / "networkx-3.6.1" / "networkx",
           .extension_or_glob = "*.py",
           .skipped_folder = "tests"}};
}

absl::StatusOr<std::vector<Document>> ReadCorpus(std::span<const CorpusSource> sources,
                                                 int64_t max_bytes) {
  std::vector<Document> documents;
  int64_t total = 0;
  for (const CorpusSource& source : sources) {
    absl::StatusOr<std::vector<std::filesystem::path>> paths = MatchingFiles(source);
    if (!paths.ok()) return paths.status();
    for (const std::filesystem::path& path : *paths) {
      std::optional<std::string> text = ReadDocumentText(source.root / path);
      if (!text) continue;
      if (total + static_cast<int64_t>(text->size()) > max_bytes) return documents;
      total += static_cast<int64_t>(text->size());
      documents.push_back({.source = source.name, .path = path, .text = *std::move(text)});
    }
  }
  return documents;
}

std::string CorpusSha256(std::span<const Document> documents) {
  std::string bytes;
  for (const Document& document : documents) {
    // Each field after its length, so that no two corpora give the same bytes.
    for (const std::string& field :
         {document.source, document.path.generic_string(), document.text}) {
      absl::StrAppend(&bytes, field.size(), ":", field);
    }
  }
  return Sha256Hex(std::as_bytes(std::span(bytes)));
}

std::vector<Conversation> ConversationsFromDocuments(std::span<const Document> documents,
                                                     const ConversationOptions& options) {
  std::mt19937_64 random(options.seed);
  std::vector<Conversation> conversations;
  const size_t prompt_chars = static_cast<size_t>(std::max<int64_t>(options.prompt_chars, 1));
  const size_t chunk_chars =
      prompt_chars + static_cast<size_t>(std::max<int64_t>(options.response_chars, 1));
  for (const Document& document : documents) {
    const std::vector<size_t> starts = CodePointStarts(document.text);
    const size_t chars = starts.size() - 1;
    for (size_t begin = 0; begin + prompt_chars < chars; begin += chunk_chars) {
      const size_t split = begin + prompt_chars;
      const size_t end = std::min(begin + chunk_chars, chars);
      const std::string_view text = document.text;
      const std::string_view prompt = text.substr(starts[begin], starts[split] - starts[begin]);
      const std::string_view response = text.substr(starts[split], starts[end] - starts[split]);
      const std::string_view instruction = kInstructions[random() % std::size(kInstructions)];
      conversations.push_back({.messages = {{.role = text::ChatRole::kUser,
                                             .content = absl::StrCat(std::string(instruction),
                                                                     "\n\n", std::string(prompt)),
                                             .reasoning = std::nullopt},
                                            {.role = text::ChatRole::kAssistant,
                                             .content = std::string(response),
                                             .reasoning = std::nullopt}},
                               .text = std::nullopt});
    }
  }
  return conversations;
}

}  // namespace specd::train
