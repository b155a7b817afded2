#pragma once
// Regenerates a chat dataset's answers with the teacher (the model being distilled), so that a
// student learns the teacher's own distribution rather than the original responses: DFlash's
// recipe for drafter data, and the data of quantization-aware distillation.
//
// For each conversation the prompt is every message but a final assistant turn, rendered with
// the generation prompt; the teacher samples a new answer, which replaces (or, when the
// conversation ends without one, is appended as) that turn. Plain text records pass through.
#include <cstdint>
#include <filesystem>
#include <functional>

#include "absl/status/status.h"
#include "common/text/chat_template.h"

namespace specd::train {

struct RegenerateOptions {
  std::filesystem::path input;      // conversations JSONL
  std::filesystem::path output;     // conversations JSONL; resumed where it ends if it exists
  std::filesystem::path teacher;    // a Qwen3.5 checkpoint directory, dense or W4A16
  std::filesystem::path tokenizer;  // tokenizer.json; empty: the teacher's own
  text::ChatFlavor flavor = text::ChatFlavor::kQwen3_5;
  bool enable_thinking = false;
  double temperature = 0.7;
  double top_p = 0.8;
  int64_t top_k = 20;
  int64_t max_new_tokens = 1024;
  // Conversation i is sampled from a stream seeded by (seed, i), so an answer does not depend on
  // where a run started or resumed.
  uint64_t seed = 0;
  // Conversations per group; the output is flushed and synced after each group.
  int64_t batch_size = 16;
  std::function<void(int64_t done, int64_t total)> on_progress = nullptr;  // after each group
};

// Generation stops at max_new_tokens or an end token (<|im_end|>, <|endoftext|>, the teacher's
// EOS). An existing output's complete lines are kept (a partial last line is cut off) and the
// run continues with the next conversation.
absl::Status Regenerate(const RegenerateOptions& options);

// An on_progress that keeps one line on stderr up to date.
void PrintRegenerateProgress(int64_t done, int64_t total);

}  // namespace specd::train
