#pragma once
// The whole recipe on one machine, from nothing but local text to a served pair
// (research/dflash.md §6.2): pretrain a teacher → quantize it (AWQ) → QAD → regenerate answers
// with each target → drafter stage 1 (teacher) → stage 2 (QAD target) → GPTQ drafter →
// evaluate with the real engine. Every step writes its own directory under `out` and is skipped
// when that output exists, and the training steps resume inside (training_loop.h), so an
// interrupted pipeline continues where it stopped.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/io/qwen35_config.h"

namespace specd::train {

struct PipelinePreset {
  std::string name;
  // Data: the pinned corpus, cut into documents and into conversations (a chunk as the prompt, the
  // text after it as the answer).
  int64_t corpus_bytes = 0;
  int64_t prompt_chars = 0;
  int64_t response_chars = 0;
  int64_t sequence_length = 0;  // packed training sequences
  double validation_fraction = 0.05;
  int64_t regenerate_conversations = 0;  // answered by each target
  int64_t regenerate_max_new_tokens = 0;
  double regenerate_temperature = 0;
  // The teacher and its pretraining.
  io::Qwen35TextConfig teacher;
  int64_t pretrain_steps = 0;
  int64_t pretrain_accumulation = 1;
  double pretrain_lr = 0;
  // The INT4 target.
  int64_t group_size = 0;
  int64_t awq_samples = 0;
  int64_t qad_steps = 0;
  int64_t qad_effective_batch = 0;
  double qad_lr = 0;
  // The drafter.
  int64_t drafter_layers = 0;
  int64_t block_size = 0;
  int64_t anchors = 0;
  int64_t stage1_steps = 0;
  int64_t stage2_steps = 0;
  int64_t drafter_accumulation = 1;
  double drafter_lr = 0;
  // Stage 2 starts from a drafter that already fits a target this close to the teacher: a
  // lower rate refines it where the full one first undoes part of stage 1.
  double drafter_finetune_lr = 0;
  int64_t gptq_sequences = 0;
  int64_t gptq_anchors = 0;
  int64_t drafter_group_size = 0;
  // Evaluation.
  int64_t eval_prompts = 0;
  int64_t eval_new_tokens = 0;
  int64_t long_prompt_tokens = 0;  // beyond the drafter's training context
  int64_t drafter_window = 0;      // the symmetric window it is trained for and drafts with
  uint64_t seed = 0;
};

// "smoke" (minutes; what CI runs) or "tiny" (≤ 30 minutes on 2 cores; a pair worth serving).
absl::StatusOr<PipelinePreset> PipelinePresetNamed(std::string_view name);

// Runs every step into `out`, on the corpus installed in `corpus_dir` (local_corpus.h), and
// writes out/report.json, out/report.md and out/plots/*.png. Returns the report's JSON text.
absl::StatusOr<std::string> RunPipeline(const PipelinePreset& preset,
                                        const std::filesystem::path& corpus_dir,
                                        const std::filesystem::path& out);

}  // namespace specd::train
