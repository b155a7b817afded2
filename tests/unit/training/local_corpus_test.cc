// The corpus: matching files in sorted order, subfolders too, valid UTF-8 only, within a byte
// budget; the pinned corpus set-up installs, checked by its checksum; and the conversations cut
// from it, whose answer is the text that follows the prompt.
#include "training/local_corpus.h"

#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace specd::train {
namespace {

void WriteText(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

Document Doc(const std::string& text) { return {.source = "s", .path = "p", .text = text}; }

TEST(LocalCorpusTest, ReadsMatchingFilesInSortedOrderAndSkipsInvalidUtf8) {
  testing::TempDir dir;
  WriteText(dir.path() / "b.py", "b");
  WriteText(dir.path() / "a.py", "a");
  WriteText(dir.path() / "bad.py", "\xFF\xFE");
  WriteText(dir.path() / "empty.py", "");
  WriteText(dir.path() / "c.txt", "c");
  std::filesystem::create_directory(dir.path() / "sub.py");
  const CorpusSource source{
      .name = "test", .root = dir.path(), .extension_or_glob = "*.py", .skipped_folder = ""};
  const absl::StatusOr<std::vector<Document>> docs = ReadCorpus({&source, 1}, 1 << 20);
  ASSERT_TRUE(docs.ok()) << docs.status();
  ASSERT_EQ(docs->size(), 2);
  EXPECT_EQ((*docs)[0].path, "a.py");
  EXPECT_EQ((*docs)[0].text, "a");
  EXPECT_EQ((*docs)[1].text, "b");
  EXPECT_EQ((*docs)[1].source, "test");
}

TEST(LocalCorpusTest, StopsBeforeTheDocumentThatExceedsTheBudget) {
  testing::TempDir dir;
  WriteText(dir.path() / "1", "aaa");
  WriteText(dir.path() / "2", "bbb");
  const CorpusSource source{
      .name = "test", .root = dir.path(), .extension_or_glob = "*", .skipped_folder = ""};
  const absl::StatusOr<std::vector<Document>> docs = ReadCorpus({&source, 1}, 5);
  ASSERT_TRUE(docs.ok()) << docs.status();
  EXPECT_EQ(docs->size(), 1);
}

TEST(LocalCorpusTest, FailsOnAMissingRoot) {
  const CorpusSource source{
      .name = "nope", .root = "/nonexistent/specd", .extension_or_glob = "*", .skipped_folder = ""};
  const absl::StatusOr<std::vector<Document>> docs = ReadCorpus({&source, 1}, 100);
  ASSERT_FALSE(docs.ok());
  EXPECT_NE(docs.status().message().find("nope"), std::string::npos);
}

TEST(LocalCorpusTest, ReadsSubfoldersInPathOrderAndLeavesOutTheSkippedFolder) {
  testing::TempDir dir;
  for (const char* folder : {"pkg", "pkg/sub", "pkg/tests", "tests"}) {
    std::filesystem::create_directory(dir.path() / folder);
  }
  WriteText(dir.path() / "z.py", "z");
  WriteText(dir.path() / "pkg" / "b.py", "b");
  WriteText(dir.path() / "pkg" / "sub" / "a.py", "a");
  WriteText(dir.path() / "pkg" / "tests" / "test_b.py", "t");
  WriteText(dir.path() / "tests" / "test_z.py", "t");
  const CorpusSource source{
      .name = "test", .root = dir.path(), .extension_or_glob = "*.py", .skipped_folder = "tests"};
  const absl::StatusOr<std::vector<Document>> docs = ReadCorpus({&source, 1}, 1 << 20);
  ASSERT_TRUE(docs.ok()) << docs.status();
  std::vector<std::string> paths;
  for (const Document& doc : *docs) paths.push_back(doc.path.generic_string());
  EXPECT_EQ(paths, (std::vector<std::string>{"pkg/b.py", "pkg/sub/a.py", "z.py"}));
}

TEST(LocalCorpusTest, TheChecksumChangesWithAnyTextPathOrBoundary) {
  const std::vector<Document> base = {{.source = "s", .path = "a", .text = "xy"},
                                      {.source = "s", .path = "b", .text = "z"}};
  std::vector<Document> moved_boundary = base;
  moved_boundary[0].text = "x";
  moved_boundary[1].text = "yz";
  std::vector<Document> renamed = base;
  renamed[1].path = "c";
  EXPECT_EQ(CorpusSha256(base), CorpusSha256(base));
  EXPECT_NE(CorpusSha256(base), CorpusSha256(moved_boundary));
  EXPECT_NE(CorpusSha256(base), CorpusSha256(renamed));
  EXPECT_NE(CorpusSha256(base), CorpusSha256(std::span(base).first(1)));
}

// What the pipeline's presets train on (pipeline.cc: smoke 600 kB, tiny 3 MB), byte for byte: a
// changed download, unpacking or reading order shows here before it changes any report.
TEST(LocalCorpusTest, TheInstalledCorpusIsThePinnedOne) {
  const std::vector<CorpusSource> sources = DefaultCorpusSources(DefaultCorpusDir());
  const struct {
    int64_t budget;
    size_t documents;
    const char* sha256;
  } presets[] = {
      {600'000, 68, "383416c4292b83fa23db16beeffea0659dde78fdf926011a2ab41201b239dfa9"},
      {3'000'000, 218, "0a253179d711c61fb92c010f94ae11a686afb331eb6ca54843178fdd39abc347"},
  };
  for (const auto& preset : presets) {
    const absl::StatusOr<std::vector<Document>> docs = ReadCorpus(sources, preset.budget);
    ASSERT_TRUE(docs.ok()) << docs.status();
    EXPECT_EQ(docs->size(), preset.documents) << preset.budget;
    EXPECT_EQ(CorpusSha256(*docs), preset.sha256) << preset.budget;
  }
}

TEST(LocalCorpusTest, ConversationAsksToContinueAndAnswersWithTheContinuation) {
  const std::vector<Document> docs = {Doc("abcdefghij")};
  const std::vector<Conversation> conversations =
      ConversationsFromDocuments(docs, {.prompt_chars = 3, .response_chars = 2, .seed = 0});
  // Chunks "abcde", "fghij".
  ASSERT_EQ(conversations.size(), 2);
  const std::vector<text::ChatMessage>& first = conversations[0].messages;
  ASSERT_EQ(first.size(), 2);
  EXPECT_EQ(first[0].role, text::ChatRole::kUser);
  EXPECT_TRUE(first[0].content.ends_with("\n\nabc")) << first[0].content;
  EXPECT_EQ(first[1].role, text::ChatRole::kAssistant);
  EXPECT_EQ(first[1].content, "de");
  EXPECT_EQ(conversations[1].messages[1].content, "ij");
}

TEST(LocalCorpusTest, CountsCharactersNotBytesAndDropsAChunkWithoutAnswer) {
  // "é" and "€" are 2 and 3 bytes; the last chunk "x" has no answer.
  const std::vector<Document> docs = {
      Doc("\xC3\xA9\xE2\x82\xAC"
          "abx")};
  const std::vector<Conversation> conversations =
      ConversationsFromDocuments(docs, {.prompt_chars = 1, .response_chars = 1, .seed = 0});
  ASSERT_EQ(conversations.size(), 2);
  EXPECT_TRUE(conversations[0].messages[0].content.ends_with("\xC3\xA9"));
  EXPECT_EQ(conversations[0].messages[1].content, "\xE2\x82\xAC");
  EXPECT_EQ(conversations[1].messages[1].content, "b");
}

TEST(LocalCorpusTest, SameSeedGivesTheSameConversations) {
  const std::vector<Document> docs = {Doc(std::string(200, 'x'))};
  const ConversationOptions options{.prompt_chars = 5, .response_chars = 5, .seed = 3};
  const std::vector<Conversation> a = ConversationsFromDocuments(docs, options);
  const std::vector<Conversation> b = ConversationsFromDocuments(docs, options);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(ConversationToJson(a[i]), ConversationToJson(b[i]));
}

}  // namespace
}  // namespace specd::train
