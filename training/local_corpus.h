#pragma once
// Training text for small models, the same bytes on every machine: the sources of a pinned
// package that scripts/setup.sh downloads with its checksum into .cache/corpus
// (scripts/corpus-requirements.txt); and the prompts cut from it: each chunk of a document
// becomes a conversation whose user turn asks to continue its beginning and whose assistant turn
// is the document's real continuation.
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
  std::filesystem::path root;     // its regular files, in subfolders too
  std::string extension_or_glob;  // a file name pattern, fnmatch(3) style: "*.py", "*"
  std::string skipped_folder;     // subfolders of this name are left out ("tests"); "" for none
};

struct Document {
  std::string source;          // CorpusSource::name
  std::filesystem::path path;  // relative to the source's root
  std::string text;
};

// Files above this size are skipped: a few huge generated files would outweigh the rest.
inline constexpr int64_t kMaxDocumentBytes = 256 * 1024;

// Where scripts/setup.sh puts the corpus: the checkout's .cache/corpus.
std::filesystem::path DefaultCorpusDir();

// networkx 3.6.1's modules without their tests (4.0 MB of code and docstrings), as unpacked in
// `corpus_dir`.
std::vector<CorpusSource> DefaultCorpusSources(const std::filesystem::path& corpus_dir);

// The sources' documents in order (sources as given, each one's files by sorted path), until
// the next one would bring the total text above `max_bytes`. Files that are empty, too large or
// not valid UTF-8 are skipped. Fails when a source's root is not a directory.
absl::StatusOr<std::vector<Document>> ReadCorpus(std::span<const CorpusSource> sources,
                                                 int64_t max_bytes);

// SHA-256 of the documents' sources, paths and texts, in order: equal on two machines exactly
// when they train on the same text.
std::string CorpusSha256(std::span<const Document> documents);

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
