#pragma once
// Training text that every Debian 12 machine has (Python's standard library, the common
// licenses), so that small models can be trained and regenerated offline; and the prompts cut
// from it: each chunk of a document becomes a conversation whose user turn asks to continue its
// beginning and whose assistant turn is the document's real continuation.
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "training/conversations.h"

namespace specd::train {

struct CorpusSource {
  std::string name;
  std::filesystem::path root;     // its regular files directly inside (not in subfolders)
  std::string extension_or_glob;  // a file name pattern, fnmatch(3) style: "*.py", "*"
};

struct Document {
  std::string source;  // CorpusSource::name
  std::filesystem::path path;
  std::string text;
};

// Files above this size are skipped: a few huge generated files would outweigh the rest.
inline constexpr int64_t kMaxDocumentBytes = 256 * 1024;

// /usr/lib/python3.11/*.py and /usr/share/common-licenses/*.
std::vector<CorpusSource> DefaultCorpusSources();

// The sources' documents in order (sources as given, each one's files by sorted path), until
// the next one would bring the total text above `max_bytes`. Files that are empty, too large or
// not valid UTF-8 are skipped. Fails when a source's root is not a directory.
absl::StatusOr<std::vector<Document>> ReadCorpus(std::span<const CorpusSource> sources,
                                                 int64_t max_bytes);

struct ConversationOptions {
  int64_t prompt_chars = 512;    // characters (code points) of a chunk that the user gives
  int64_t response_chars = 512;  // the characters after them, the assistant's answer
  uint64_t seed = 0;             // picks each chunk's instruction
};

// Cuts each document into consecutive chunks of prompt_chars + response_chars characters and
// makes one conversation per chunk (a final chunk too short to have any answer is dropped), in
// document order.
std::vector<Conversation> ConversationsFromDocuments(std::span<const Document> documents,
                                                     const ConversationOptions& options);

}  // namespace specd::train
