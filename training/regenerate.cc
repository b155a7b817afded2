#include "training/regenerate.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/engine/generator.h"
#include "common/model/qwen35_model.h"
#include "common/text/chat_prompt.h"
#include "common/text/tokenizer.h"
#include "training/conversations.h"

namespace specd::train {
namespace {

// SplitMix64's finalizer: nearby (seed, index) pairs give unrelated streams.
uint64_t ConversationSeed(uint64_t seed, int64_t index) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (static_cast<uint64_t>(index) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Keeps the complete lines of an existing output and returns how many there are.
absl::StatusOr<int64_t> TruncateToCompleteLines(const std::filesystem::path& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InternalError(absl::StrCat("cannot open ", path.string()));
  int64_t lines = 0;
  uint64_t complete_bytes = 0;
  uint64_t offset = 0;
  std::vector<char> buffer(1 << 16);
  while (in.read(buffer.data(), static_cast<std::streamsize>(buffer.size())) || in.gcount() > 0) {
    const auto count = static_cast<size_t>(in.gcount());
    for (size_t i = 0; i < count; ++i) {
      if (buffer[i] == '\n') {
        ++lines;
        complete_bytes = offset + i + 1;
      }
    }
    offset += count;
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat("cannot read ", path.string()));
  if (complete_bytes != offset) std::filesystem::resize_file(path, complete_bytes, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot truncate ", path.string(), ": ", error.message()));
  }
  return lines;
}

absl::Status AppendAndSync(int fd, std::string_view bytes, const std::filesystem::path& path) {
  while (!bytes.empty()) {
    const ssize_t written = ::write(fd, bytes.data(), bytes.size());
    if (written < 0 && errno == EINTR) continue;
    if (written < 0) {
      return absl::InternalError(
          absl::StrCat("cannot write ", path.string(), ": ", std::strerror(errno)));
    }
    bytes.remove_prefix(static_cast<size_t>(written));
  }
  if (::fsync(fd) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot sync ", path.string(), ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// The answer as a chat message: with thinking on, the text up to </think> is the reasoning (all
// of it when the budget ran out inside the think block).
text::ChatMessage AnswerMessage(std::string text, bool thinking) {
  text::ChatMessage message{
      .role = text::ChatRole::kAssistant, .content = "", .reasoning = std::nullopt};
  if (!thinking) {
    message.content = std::move(text);
    return message;
  }
  constexpr std::string_view kThinkEnd = "</think>";
  const size_t end = text.find(kThinkEnd);
  if (end == std::string::npos) {
    message.reasoning = std::move(text);
    return message;
  }
  const std::string_view reasoning = std::string_view(text).substr(0, end);
  const size_t first = reasoning.find_first_not_of('\n');
  const size_t last = reasoning.find_last_not_of('\n');
  message.reasoning = first == std::string_view::npos
                          ? std::string()
                          : std::string(reasoning.substr(first, last - first + 1));
  const size_t answer = text.find_first_not_of('\n', end + kThinkEnd.size());
  message.content = answer == std::string::npos ? std::string() : text.substr(answer);
  return message;
}

class Regenerator {
 public:
  Regenerator(const RegenerateOptions& options, const model::Qwen35Model& teacher,
              const text::Tokenizer& tokenizer, std::vector<int64_t> end_ids)
      : options_(options),
        tokenizer_(tokenizer),
        chat_(options.flavor),
        decoder_(teacher, &tokenizer),
        end_ids_(std::move(end_ids)) {}

  absl::StatusOr<Conversation> Run(const Conversation& conversation, int64_t index) {
    if (conversation.text) return conversation;
    if (conversation.messages.empty()) return absl::InvalidArgumentError("no messages");
    Conversation out = conversation;
    if (out.messages.back().role == text::ChatRole::kAssistant) out.messages.pop_back();
    absl::StatusOr<std::vector<int64_t>> ids =
        text::ChatPromptIds(tokenizer_, chat_, out.messages, options_.enable_thinking);
    if (!ids.ok()) return ids.status();
    const engine::GenerationRequest request{
        .prompt = *std::move(ids),
        .sampling = {.temperature = options_.temperature,
                     .top_k = options_.top_k,
                     .top_p = options_.top_p,
                     .min_p = 0,
                     .repetition_penalty = 1,
                     .presence_penalty = 0,
                     .seed = ConversationSeed(options_.seed, index)},
        .stop = {.max_new_tokens = options_.max_new_tokens,
                 .eos_ids = end_ids_,
                 .stop_ids = {},
                 .stop_strings = {},
                 .ignore_eos = false}};
    absl::StatusOr<engine::GenerationResult> result = decoder_.Generate(request);
    if (!result.ok()) return result.status();
    out.messages.push_back(AnswerMessage(std::move(result->text), options_.enable_thinking));
    return out;
  }

 private:
  const RegenerateOptions& options_;
  const text::Tokenizer& tokenizer_;
  text::ChatTemplate chat_;
  // One sequence per forward: the CPU engine has no batched decode, so a "batch" is a group of
  // conversations run one after another between two syncs of the output.
  engine::Generator decoder_;
  std::vector<int64_t> end_ids_;
};

}  // namespace

absl::Status Regenerate(const RegenerateOptions& options) {
  if (options.batch_size <= 0 || options.max_new_tokens <= 0) {
    return absl::InvalidArgumentError("regenerate: batch_size and max_new_tokens must be positive");
  }
  absl::StatusOr<std::vector<Conversation>> conversations = ReadConversations(options.input);
  if (!conversations.ok()) return conversations.status();
  // Without one the teacher's missing tokenizer.json is the error.
  absl::StatusOr<text::Tokenizer> tokenizer =
      text::Tokenizer::FromFile(text::Tokenizer::FileFor(options.teacher, options.tokenizer)
                                    .value_or(options.teacher / "tokenizer.json"));
  if (!tokenizer.ok()) return tokenizer.status();
  absl::StatusOr<model::Qwen35Model> teacher = model::Qwen35Model::Load(options.teacher);
  if (!teacher.ok()) return teacher.status();
  std::vector<int64_t> end_ids = teacher->config().eos_token_ids;
  for (const char* token : {"<|im_end|>", "<|endoftext|>"}) {
    if (const std::optional<text::TokenId> id = tokenizer->TokenToId(token)) {
      end_ids.push_back(*id);
    }
  }

  const int64_t total = static_cast<int64_t>(conversations->size());
  absl::StatusOr<int64_t> done = TruncateToCompleteLines(options.output);
  if (!done.ok()) return done.status();
  if (*done > total) {
    return absl::FailedPreconditionError(
        absl::StrCat(options.output.string(), " has ", *done, " lines, more than the ", total,
                     " conversations of ", options.input.string()));
  }
  const int fd = ::open(options.output.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("cannot open ", options.output.string(), ": ", std::strerror(errno)));
  }
  Regenerator regenerator(options, *teacher, *tokenizer, std::move(end_ids));
  absl::Status status = absl::OkStatus();
  for (int64_t first = *done; first < total && status.ok(); first += options.batch_size) {
    const int64_t last = std::min(total, first + options.batch_size);
    std::string lines;
    for (int64_t i = first; i < last && status.ok(); ++i) {
      absl::StatusOr<Conversation> answered =
          regenerator.Run((*conversations)[static_cast<size_t>(i)], i);
      if (!answered.ok()) {
        status =
            absl::Status(answered.status().code(),
                         absl::StrCat("regenerate: conversation ", i, " (line ", i + 1, " of ",
                                      options.input.string(), "): ", answered.status().message()));
        break;
      }
      absl::StrAppend(&lines, ConversationToJson(*answered), "\n");
    }
    // A failed group still keeps the conversations before the failure.
    if (absl::Status written = AppendAndSync(fd, lines, options.output); !written.ok()) {
      status = written;
    }
    if (status.ok() && options.on_progress) options.on_progress(last, total);
  }
  ::close(fd);
  return status;
}

void PrintRegenerateProgress(int64_t done, int64_t total) {
  std::fprintf(stderr, "\rregenerate: %ld/%ld conversations   ", static_cast<long>(done),
               static_cast<long>(total));
  if (done == total) std::fputc('\n', stderr);
}

}  // namespace specd::train
