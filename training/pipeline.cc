#include "training/pipeline.h"

#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/io/atomic_file.h"
#include "common/model/qwen35_model.h"
#include "common/model/synthetic/qwen35_presets.h"
#include "common/model/synthetic/random_drafter.h"
#include "common/quantize/awq.h"
#include "common/quantize/quantize_checkpoint.h"
#include "common/text/chat_prompt.h"
#include "common/text/chat_template.h"
#include "common/text/tokenizer.h"
#include "nlohmann/json.hpp"
#include "training/byte_tokenizer.h"
#include "training/conversations.h"
#include "training/drafter_training.h"
#include "training/gptq_drafter.h"
#include "training/local_corpus.h"
#include "training/packed_dataset.h"
#include "training/pair_evaluation.h"
#include "training/pretrain.h"
#include "training/qad.h"
#include "training/regenerate.h"
#include "training/report/line_plot.h"

namespace specd::train {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// Where each step writes, under the pipeline's directory.
struct Layout {
  explicit Layout(const std::filesystem::path& out) : out(out) {}
  std::filesystem::path out;
  std::filesystem::path tokenizer = out / "tokenizer";
  std::filesystem::path data = out / "data";
  std::filesystem::path prompts = data / "prompts.jsonl";
  std::filesystem::path eval_prompts = data / "eval-prompts.jsonl";
  std::filesystem::path calibration = data / "calibration.txt";
  std::filesystem::path corpus = data / "corpus.json";
  std::filesystem::path pretrain_data = data / "pretrain";
  std::filesystem::path teacher_answers = data / "teacher-answers.jsonl";
  std::filesystem::path teacher_chat = data / "teacher-chat";
  std::filesystem::path qad_answers = data / "qad-answers.jsonl";
  std::filesystem::path qad_chat = data / "qad-chat";
  std::filesystem::path teacher_run = out / "teacher";
  std::filesystem::path int4 = out / "int4-awq";
  std::filesystem::path qad_run = out / "qad";
  std::filesystem::path drafter_init = out / "drafter-init";
  std::filesystem::path stage1_run = out / "drafter-stage1";
  std::filesystem::path stage2_run = out / "drafter-stage2";
  std::filesystem::path gptq = out / "drafter-gptq";
  std::filesystem::path plots = out / "plots";
  std::filesystem::path teacher() const { return teacher_run / "best"; }
  std::filesystem::path qad() const { return qad_run / "best"; }
  std::filesystem::path stage1() const { return stage1_run / "best"; }
  std::filesystem::path stage2() const { return stage2_run / "best"; }
};

bool HasModel(const std::filesystem::path& dir) {
  return std::filesystem::exists(dir / "config.json");
}
bool HasDataset(const std::filesystem::path& dir) {
  return std::filesystem::exists(dir / "manifest.json");
}

absl::Status PrepareData(const PipelinePreset& preset, const std::filesystem::path& corpus_dir,
                         const Layout& layout) {
  if (!std::filesystem::exists(layout.tokenizer / "tokenizer.json")) {
    if (absl::Status status = WriteByteLevelTokenizer(layout.tokenizer); !status.ok())
      return status;
  }
  if (HasDataset(layout.pretrain_data) && std::filesystem::exists(layout.eval_prompts)) {
    return absl::OkStatus();
  }
  const std::vector<CorpusSource> sources = DefaultCorpusSources(corpus_dir);
  absl::StatusOr<std::vector<Document>> documents = ReadCorpus(sources, preset.corpus_bytes);
  if (!documents.ok()) return documents.status();
  Json corpus = {{"documents", documents->size()}, {"sha256", CorpusSha256(*documents)}};
  int64_t corpus_bytes = 0;
  for (const Document& document : *documents) corpus_bytes += document.text.size();
  corpus["bytes"] = corpus_bytes;
  for (const CorpusSource& source : sources) {
    corpus["sources"].push_back(absl::StrCat(source.name, ": ", source.extension_or_glob,
                                             " without ", source.skipped_folder, "/"));
  }
  const std::vector<Conversation> conversations =
      ConversationsFromDocuments(*documents, {.prompt_chars = preset.prompt_chars,
                                              .response_chars = preset.response_chars,
                                              .seed = preset.seed});
  // Held-out conversations are the evaluation prompts: no stage trains on them.
  const SplitIndices split = SplitRecords(static_cast<int64_t>(conversations.size()),
                                          preset.validation_fraction, preset.seed);
  std::vector<Conversation> train, held_out;
  for (const int64_t i : split.train) train.push_back(conversations[i]);
  for (const int64_t i : split.validation) held_out.push_back(conversations[i]);
  if (static_cast<int64_t>(held_out.size()) < preset.eval_prompts) {
    return absl::FailedPreconditionError(
        absl::StrCat("the corpus gives ", held_out.size(), " held-out conversations; ",
                     preset.eval_prompts, " evaluation prompts are asked for"));
  }
  held_out.resize(preset.eval_prompts);
  // The teacher learns the text and the chat format together: documents plus the conversations'
  // original answers (prompts that are answered again later stay out of its data).
  std::vector<Conversation> pretrain_records;
  for (const Document& document : *documents) {
    pretrain_records.push_back({.messages = {}, .text = document.text});
  }
  const int64_t regenerated = std::min<int64_t>(preset.regenerate_conversations, train.size());
  const std::vector<Conversation> prompts(train.begin(), train.begin() + regenerated);
  pretrain_records.insert(pretrain_records.end(), train.begin() + regenerated, train.end());

  absl::StatusOr<text::Tokenizer> tokenizer =
      text::Tokenizer::FromFile(layout.tokenizer / "tokenizer.json");
  if (!tokenizer.ok()) return tokenizer.status();
  std::string calibration;
  for (const Document& document : *documents) {
    if (static_cast<int64_t>(calibration.size()) > preset.awq_samples * preset.sequence_length)
      break;
    absl::StrAppend(&calibration, document.text, "\n");
  }
  std::error_code error;
  std::filesystem::create_directories(layout.data, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot create ", layout.data.string(), ": ", error.message()));
  }
  if (absl::Status status = io::WriteFileAtomically(layout.calibration, calibration);
      !status.ok()) {
    return status;
  }
  if (absl::Status status = io::WriteFileAtomically(layout.corpus, corpus.dump(2) + "\n");
      !status.ok()) {
    return status;
  }
  if (absl::Status status = WriteConversations(layout.prompts, prompts); !status.ok())
    return status;
  if (absl::Status status = Pack(pretrain_records, *tokenizer,
                                 {.sequence_length = preset.sequence_length,
                                  .validation_fraction = preset.validation_fraction,
                                  .seed = preset.seed,
                                  .flavor = text::ChatFlavor::kQwen3_5,
                                  .sequences_per_shard = 4096,
                                  .tokenizer_name = "byte-level"},
                                 layout.pretrain_data);
      !status.ok()) {
    return status;
  }
  return WriteConversations(layout.eval_prompts, held_out);  // last: marks the step done
}

absl::Status QuantizeWithAwq(const PipelinePreset& preset, const Layout& layout) {
  if (HasModel(layout.int4)) return absl::OkStatus();
  std::filesystem::remove_all(layout.int4);  // a partial earlier attempt
  absl::StatusOr<std::vector<std::vector<int32_t>>> calibration = quant::ReadCalibrationText(
      layout.calibration, layout.teacher(), preset.sequence_length, preset.awq_samples);
  if (!calibration.ok()) return calibration.status();
  const quant::RtnOptions rtn{
      .group_size = preset.group_size, .symmetric = true, .scale_dtype = io::DType::kBF16};
  quant::AwqOptions awq;
  awq.rtn = rtn;
  absl::StatusOr<quant::AwqResult> result =
      quant::ComputeAwqOverrides(layout.teacher(), awq, *calibration);
  if (!result.ok()) return result.status();
  return quant::QuantizeCheckpoint(layout.teacher(), layout.int4,
                                   {.rtn = rtn, .ignore = quant::DefaultQuantizeIgnore()}, {},
                                   &result->overrides);
}

// Answers the prompts with `teacher` and packs the conversations for training.
absl::Status RegenerateAndPack(const PipelinePreset& preset, const Layout& layout,
                               const std::filesystem::path& teacher,
                               const std::filesystem::path& answers,
                               const std::filesystem::path& packed) {
  if (HasDataset(packed)) return absl::OkStatus();
  if (absl::Status status = Regenerate({.input = layout.prompts,
                                        .output = answers,
                                        .teacher = teacher,
                                        .tokenizer = layout.tokenizer / "tokenizer.json",
                                        .flavor = text::ChatFlavor::kQwen3_5,
                                        .enable_thinking = false,
                                        .temperature = preset.regenerate_temperature,
                                        .top_p = 1.0,
                                        .top_k = 0,
                                        .max_new_tokens = preset.regenerate_max_new_tokens,
                                        .seed = preset.seed,
                                        .batch_size = 8,
                                        .on_progress = PrintRegenerateProgress});
      !status.ok()) {
    return status;
  }
  absl::StatusOr<std::vector<Conversation>> conversations = ReadConversations(answers);
  if (!conversations.ok()) return conversations.status();
  absl::StatusOr<text::Tokenizer> tokenizer =
      text::Tokenizer::FromFile(layout.tokenizer / "tokenizer.json");
  if (!tokenizer.ok()) return tokenizer.status();
  return Pack(*conversations, *tokenizer,
              {.sequence_length = preset.sequence_length,
               .validation_fraction = preset.validation_fraction,
               .seed = preset.seed,
               .flavor = text::ChatFlavor::kQwen3_5,
               .sequences_per_shard = 4096,
               .tokenizer_name = "byte-level"},
              packed);
}

// The held-out prompts as the engine receives them: rendered with the generation prompt
// (thinking off, as the data was regenerated) and tokenized. `min_tokens` > 0 makes long
// prompts by giving each the text of the following ones until it is that long.
absl::StatusOr<std::vector<std::vector<int64_t>>> EvaluationPrompts(const Layout& layout,
                                                                    int64_t min_tokens) {
  absl::StatusOr<std::vector<Conversation>> conversations = ReadConversations(layout.eval_prompts);
  if (!conversations.ok()) return conversations.status();
  absl::StatusOr<text::Tokenizer> tokenizer =
      text::Tokenizer::FromFile(layout.tokenizer / "tokenizer.json");
  if (!tokenizer.ok()) return tokenizer.status();
  const text::ChatTemplate chat(text::ChatFlavor::kQwen3_5);
  std::vector<std::vector<int64_t>> prompts;
  for (size_t i = 0; i < conversations->size(); ++i) {
    text::ChatMessage user = (*conversations)[i].messages.front();
    for (size_t j = i + 1; min_tokens > 0 && static_cast<int64_t>(user.content.size()) < min_tokens;
         ++j) {
      const Conversation& next = (*conversations)[j % conversations->size()];
      absl::StrAppend(&user.content, "\n", next.messages.front().content, "\n",
                      next.messages.back().content);
    }
    absl::StatusOr<std::vector<int64_t>> ids =
        text::ChatPromptIds(*tokenizer, chat, std::span(&user, 1), /*enable_thinking=*/false);
    if (!ids.ok()) return ids.status();
    prompts.push_back(*std::move(ids));
  }
  return prompts;
}

// The (step, value) series of one key of a run's metrics.jsonl, training or validation lines.
report::Series MetricSeries(const std::filesystem::path& run, const std::string& name,
                            bool validation) {
  report::Series series{.name = name, .x = {}, .y = {}};
  std::ifstream in(run / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const Json json = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (json.is_discarded()) continue;
    const Json* values = validation ? (json.contains("validation") ? &json["validation"] : nullptr)
                                    : (json.contains("validation") ? nullptr : &json);
    if (values == nullptr || !values->contains("loss")) continue;
    series.x.push_back(json["step"].get<double>());
    series.y.push_back((*values)["loss"].get<double>());
  }
  return series;
}

absl::Status WritePlots(const Layout& layout, const Json& report) {
  std::filesystem::create_directories(layout.plots);
  const struct {
    const char* file;
    const char* title;
    std::filesystem::path run;
    const char* y_label;
  } runs[] = {
      {"pretrain.png", "Teacher pretraining", layout.teacher_run, "cross-entropy (nats/token)"},
      {"qad.png", "QAD of the INT4 target", layout.qad_run, "KL(teacher || student) per token"},
      {"drafter-stage1.png", "Drafter stage 1 (teacher)", layout.stage1_run, "weighted CE"},
      {"drafter-stage2.png", "Drafter stage 2 (QAD target)", layout.stage2_run, "weighted CE"},
  };
  for (const auto& run : runs) {
    report::LinePlot plot{.title = run.title,
                          .x_label = "optimizer step",
                          .y_label = run.y_label,
                          .series = {MetricSeries(run.run, "train", false),
                                     MetricSeries(run.run, "validation", true)},
                          .log_y = false,
                          .bars = false,
                          .width = 800,
                          .height = 480};
    if (absl::Status status = report::WritePng(plot, layout.plots / run.file); !status.ok()) {
      return status;
    }
  }
  report::LinePlot acceptance{.title = "Acceptance per draft position (INT4 target, greedy)",
                              .x_label = "block position",
                              .y_label = "drafts accepted",
                              .series = {},
                              .log_y = false,
                              .bars = true,
                              .width = 800,
                              .height = 480};
  for (const char* key : {"stage1", "stage2", "gptq"}) {
    report::Series series{.name = key, .x = {}, .y = {}};
    const Json& rates = report["acceptance_by_position"][key];
    for (size_t k = 0; k < rates.size(); ++k) {
      series.x.push_back(static_cast<double>(k + 1));
      series.y.push_back(rates[k].get<double>());
    }
    acceptance.series.push_back(series);
  }
  return report::WritePng(acceptance, layout.plots / "acceptance.png");
}

std::string Markdown(const PipelinePreset& preset, const Json& report) {
  const auto number = [&](const char* key) {
    return absl::StrFormat("%.4g", report[key].get<double>());
  };
  std::ostringstream md;
  md << "# specd pipeline report — preset `" << preset.name << "`\n\n"
     << "Reproduce: `specd pipeline --preset " << preset.name << " --out DIR`"
     << " (the teacher is a " << report["teacher_parameters"].get<int64_t>()
     << "-parameter Qwen3.5-architecture model with a byte-level vocabulary, pretrained here on "
     << report["corpus"]["bytes"].get<int64_t>() << " bytes of pinned text: "
     << absl::StrJoin(report["corpus"]["sources"].get<std::vector<std::string>>(), "; ")
     << ", SHA-256 " << report["corpus"]["sha256"].get<std::string>() << ").\n\n"
     << "| metric | value |\n|---|---|\n";
  for (const char* key :
       {"teacher_val_loss", "kl_before_qad", "kl_after_qad", "tau_stage1", "tau_stage2", "tau_gptq",
        "tau_long_full", "tau_long_swa", "tokens_per_s_plain", "tokens_per_s_spec"}) {
    md << "| `" << key << "` | " << number(key) << " |\n";
  }
  md << "| speculative / plain tokens per second | " << number("speedup") << "× |\n";
  md << "\nKL is KL(teacher ‖ INT4 target) per token on the validation split of the teacher's "
        "regenerated data; τ is the mean acceptance length of greedy speculative decoding by "
        "the engine on held-out prompts, always on the INT4 (QAD) target; the long prompts "
        "are "
     << preset.long_prompt_tokens << "+ tokens, the window " << preset.drafter_window
     << ". Speeds are decode tokens per second of the same target on the same prompts with "
        "the GPTQ drafter and without, timed in alternation prompt by prompt.\n\n"
     << "![pretraining](plots/pretrain.png)\n![QAD](plots/qad.png)\n"
     << "![drafter stage 1](plots/drafter-stage1.png)\n![drafter stage "
        "2](plots/drafter-stage2.png)\n"
     << "![acceptance per position](plots/acceptance.png)\n\n"
     << "Seconds per step: `" << report["seconds"].dump() << "`\n";
  return md.str();
}

// A small Qwen3.5: the real layer pattern (three Gated DeltaNet layers, then gated attention),
// head sizes scaled down with the width, the byte-level vocabulary and its end tokens.
io::Qwen35TextConfig SmallQwen35(int64_t hidden, int64_t groups) {
  io::Qwen35TextConfig config;
  config.architecture = "Qwen3_5ForCausalLM";
  config.model_type = "qwen3_5_text";
  config.tensor_prefix = "model.";
  config.vocab_size = kByteLevelVocabSize;
  config.hidden_size = hidden;
  config.intermediate_size = 3 * hidden;
  config.num_hidden_layers = 4 * groups;
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    config.layer_types.push_back(i % 4 == 3 ? io::LayerType::kFullAttention
                                            : io::LayerType::kLinearAttention);
  }
  config.num_attention_heads = 4;
  config.num_key_value_heads = 2;
  config.head_dim = hidden / 4;
  config.linear_num_key_heads = 2;
  config.linear_num_value_heads = 4;
  config.linear_key_head_dim = hidden / 4;
  config.linear_value_head_dim = hidden / 4;
  config.linear_conv_kernel_dim = 4;
  config.rms_norm_eps = 1e-6;
  config.rope_theta = 1e6;
  config.partial_rotary_factor = 0.25;
  config.max_position_embeddings = 32768;
  config.tie_word_embeddings = true;
  config.eos_token_ids = {kByteLevelImEndId, kByteLevelEndOfTextId};
  return config;
}

// Passes over the evaluation prompts that time plain and speculative decoding in alternation.
constexpr int64_t kSpeedRounds = 2;

// Held-out sequences each validation measures.
constexpr int64_t kValidationSequences = 16;

// A stage's loop as the preset sizes it; the other hyper-parameters keep the stage's (paper)
// defaults. Five validations and resumable states per run.
void SetLoop(TrainingLoopOptions& loop, const std::filesystem::path& dir, int64_t steps,
             int64_t accumulation, double lr) {
  loop.dir = dir;
  loop.steps = steps;
  loop.accumulation = accumulation;
  loop.lr = lr;
  loop.validate_every = std::max<int64_t>(1, steps / 5);
  loop.save_every = loop.validate_every;
}

// The pipeline's steps. Each reads what earlier steps wrote under the layout, writes its own
// output (or finds it there and returns) and adds its numbers to the report.
struct Pipeline {
  const PipelinePreset& preset;
  Layout layout;
  io::Qwen35TextConfig teacher_config;
  Json report;

  absl::Status Pretrain() {
    PretrainOptions options{
        .model = teacher_config, .tokenizer = layout.tokenizer, .data = layout.pretrain_data};
    SetLoop(options.loop, layout.teacher_run, preset.pretrain_steps, preset.pretrain_accumulation,
            preset.pretrain_lr);
    options.validation_sequences = kValidationSequences;
    options.seed = preset.seed;
    absl::StatusOr<PretrainResult> result = RunPretrain(options);
    if (!result.ok()) return result.status();
    report["teacher_val_loss"] = result->validation_loss;
    return absl::OkStatus();
  }

  absl::Status Qad() {
    QadOptions options{
        .teacher = layout.teacher(), .student = layout.int4, .data = layout.teacher_chat};
    SetLoop(options.loop, layout.qad_run, preset.qad_steps, preset.qad_effective_batch,
            preset.qad_lr);
    options.validation_sequences = kValidationSequences;
    options.seed = preset.seed;
    return RunQad(options).status();
  }

  // KL(teacher ‖ target) of the served INT4 targets before and after QAD.
  absl::Status MeasureKl() {
    absl::StatusOr<PackedDataset> data = PackedDataset::Open(layout.teacher_chat);
    if (!data.ok()) return data.status();
    absl::StatusOr<model::Qwen35Model> teacher = model::Qwen35Model::Load(layout.teacher());
    if (!teacher.ok()) return teacher.status();
    for (const auto& [key, dir] :
         {std::pair{"kl_before_qad", layout.int4}, std::pair{"kl_after_qad", layout.qad()}}) {
      absl::StatusOr<model::Qwen35Model> target = model::Qwen35Model::Load(dir);
      if (!target.ok()) return target.status();
      absl::StatusOr<DistillationMetrics> metrics =
          MeasureDistillation(*teacher, *target, *data, Split::kValidation, 0);
      if (!metrics.ok()) return metrics.status();
      report[key] = metrics->kl;
    }
    report["teacher_parameters"] = model::Qwen35ParameterCount(teacher->config());
    return absl::OkStatus();
  }

  absl::Status TrainDrafterStage(const std::filesystem::path& target,
                                 const std::filesystem::path& data,
                                 const std::filesystem::path& init,
                                 const std::filesystem::path& run, int64_t steps, double lr) {
    DrafterTrainingOptions options{
        .target = target, .data = data, .init = init, .anchors = preset.anchors, .gamma = 7.0};
    SetLoop(options.loop, run, steps, preset.drafter_accumulation, lr);
    options.validation_sequences = kValidationSequences;
    options.seed = preset.seed;
    return TrainDrafter(options).status();
  }

  absl::Status DrafterStage1() {
    if (!HasModel(layout.drafter_init)) {
      std::filesystem::create_directories(layout.drafter_init);
      if (absl::Status status =
              model::WriteRandomDFlashDrafter(layout.drafter_init, teacher_config,
                                              {.num_layers = preset.drafter_layers,
                                               .block_size = preset.block_size,
                                               .seed = preset.seed,
                                               .mask_token_id = kByteLevelMaskId,
                                               .window = preset.drafter_window});
          !status.ok()) {
        return status;
      }
    }
    return TrainDrafterStage(layout.teacher(), layout.teacher_chat, layout.drafter_init,
                             layout.stage1_run, preset.stage1_steps, preset.drafter_lr);
  }

  absl::Status DrafterStage2() {
    return TrainDrafterStage(layout.qad(), layout.qad_chat, layout.stage1(), layout.stage2_run,
                             preset.stage2_steps, preset.drafter_finetune_lr);
  }

  absl::Status GptqDrafter() {
    if (HasModel(layout.gptq)) return absl::OkStatus();
    std::filesystem::remove_all(layout.gptq);
    return RunGptqDrafter({.target = layout.qad(),
                           .drafter = layout.stage2(),
                           .data = layout.qad_chat,
                           .out = layout.gptq,
                           .sequences = preset.gptq_sequences,
                           .anchors_per_sequence = preset.gptq_anchors,
                           .gptq = {.group_size = preset.drafter_group_size,
                                    .symmetric = true,
                                    .damp = 0.01,
                                    .act_order = false,
                                    .block_size = 128,
                                    .scale_dtype = io::DType::kBF16}});
  }

  // τ of each drafter on the INT4 target, the speed with and without the GPTQ drafter (each
  // drafting with the window it was trained for, as served), and τ on long prompts without and
  // with that window.
  absl::Status Evaluate() {
    absl::StatusOr<model::Qwen35Model> target = model::Qwen35Model::Load(layout.qad());
    if (!target.ok()) return target.status();
    absl::StatusOr<std::vector<std::vector<int64_t>>> prompts = EvaluationPrompts(layout, 0);
    if (!prompts.ok()) return prompts.status();
    const EvaluationOptions options{.max_new_tokens = preset.eval_new_tokens, .window = 0};
    for (const auto& [key, drafter] :
         {std::pair{"stage1", layout.stage1()}, std::pair{"stage2", layout.stage2()},
          std::pair{"gptq", layout.gptq}}) {
      absl::StatusOr<SpeculativeEvaluation> evaluation =
          EvaluateSpeculative(*target, drafter, *prompts, options);
      if (!evaluation.ok()) return evaluation.status();
      report[absl::StrCat("tau_", key)] = evaluation->tau;
      report["acceptance_by_position"][key] = evaluation->acceptance_by_position;
    }
    absl::StatusOr<SpeedComparison> speeds =
        CompareSpeeds(*target, layout.gptq, *prompts, options, kSpeedRounds);
    if (!speeds.ok()) return speeds.status();
    report["tokens_per_s_plain"] = speeds->plain_tokens_per_s;
    report["tokens_per_s_spec"] = speeds->speculative_tokens_per_s;
    report["speedup"] = speeds->speculative_tokens_per_s / speeds->plain_tokens_per_s;

    absl::StatusOr<std::vector<std::vector<int64_t>>> long_prompts =
        EvaluationPrompts(layout, preset.long_prompt_tokens);
    if (!long_prompts.ok()) return long_prompts.status();
    long_prompts->resize(std::min<size_t>(long_prompts->size(), 4));
    // A window longer than any context is none; 0 is the drafter's own.
    constexpr int64_t kFullAttention = std::numeric_limits<int32_t>::max();
    for (const auto& [key, window] :
         {std::pair{"tau_long_full", kFullAttention}, std::pair{"tau_long_swa", int64_t{0}}}) {
      absl::StatusOr<SpeculativeEvaluation> evaluation =
          EvaluateSpeculative(*target, layout.gptq, *long_prompts,
                              {.max_new_tokens = preset.eval_new_tokens, .window = window});
      if (!evaluation.ok()) return evaluation.status();
      report[key] = evaluation->tau;
    }
    return absl::OkStatus();
  }
};

}  // namespace

absl::StatusOr<PipelinePreset> PipelinePresetNamed(std::string_view name) {
  PipelinePreset preset;
  preset.name = std::string(name);
  if (name == "smoke") {
    preset.corpus_bytes = 600'000;
    preset.prompt_chars = 96;
    preset.response_chars = 96;
    preset.sequence_length = 128;
    preset.validation_fraction = 0.05;
    preset.regenerate_conversations = 96;
    preset.regenerate_max_new_tokens = 96;
    preset.regenerate_temperature = 0;
    preset.teacher = SmallQwen35(64, 1);
    preset.pretrain_steps = 600;
    preset.pretrain_accumulation = 2;
    preset.pretrain_lr = 3e-3;
    preset.group_size = 32;
    preset.awq_samples = 8;
    preset.qad_steps = 60;
    preset.qad_effective_batch = 2;
    preset.qad_lr = 1e-4;
    preset.drafter_layers = 1;
    preset.block_size = 8;
    preset.anchors = 32;
    preset.stage1_steps = 400;
    preset.stage2_steps = 100;
    preset.drafter_accumulation = 1;
    preset.drafter_lr = 3e-3;
    preset.drafter_finetune_lr = 1e-3;
    preset.gptq_sequences = 16;
    preset.gptq_anchors = 8;
    preset.drafter_group_size = 32;
    preset.eval_prompts = 4;
    preset.eval_new_tokens = 48;
    preset.long_prompt_tokens = 512;
    preset.drafter_window = 128;
    preset.seed = 0;
    return preset;
  }
  if (name == "tiny") {
    preset.corpus_bytes = 3'000'000;
    preset.prompt_chars = 192;
    preset.response_chars = 192;
    preset.sequence_length = 256;
    preset.validation_fraction = 0.02;
    preset.regenerate_conversations = 400;
    preset.regenerate_max_new_tokens = 160;
    preset.regenerate_temperature = 0;
    preset.teacher = SmallQwen35(128, 2);
    preset.pretrain_steps = 600;
    preset.pretrain_accumulation = 4;
    preset.pretrain_lr = 3e-3;
    preset.group_size = 32;
    preset.awq_samples = 32;
    preset.qad_steps = 60;
    preset.qad_effective_batch = 4;
    preset.qad_lr = 2e-4;
    preset.drafter_layers = 2;
    preset.block_size = 8;
    preset.anchors = 48;
    preset.stage1_steps = 1000;
    preset.stage2_steps = 300;
    preset.drafter_accumulation = 2;
    preset.drafter_lr = 2e-3;
    preset.drafter_finetune_lr = 4e-4;
    preset.gptq_sequences = 64;
    preset.gptq_anchors = 16;
    preset.drafter_group_size = 64;
    preset.eval_prompts = 16;
    preset.eval_new_tokens = 96;
    preset.long_prompt_tokens = 1536;
    preset.drafter_window = 256;
    preset.seed = 0;
    return preset;
  }
  return absl::NotFoundError(
      absl::StrCat("no pipeline preset \"", std::string(name), "\"; there are smoke and tiny"));
}

absl::StatusOr<std::string> RunPipeline(const PipelinePreset& preset,
                                        const std::filesystem::path& corpus_dir,
                                        const std::filesystem::path& out) {
  io::Qwen35TextConfig teacher_config = preset.teacher;
  teacher_config.vocab_size = kByteLevelVocabSize;
  Pipeline pipeline{.preset = preset,
                    .layout = Layout(out),
                    .teacher_config = teacher_config,
                    .report = {{"preset", preset.name}, {"teacher_parameters", 0}}};
  const Layout& layout = pipeline.layout;
  Json& report = pipeline.report;
  const std::pair<const char*, std::function<absl::Status()>> steps[] = {
      {"data",
       [&]() -> absl::Status {
         if (absl::Status status = PrepareData(preset, corpus_dir, layout); !status.ok())
           return status;
         std::ifstream in(layout.corpus);
         report["corpus"] = Json::parse(in, nullptr, /*allow_exceptions=*/false);
         if (!report["corpus"].is_discarded()) return absl::OkStatus();
         return absl::DataLossError(
             absl::StrCat(layout.corpus.string(), " is missing or unreadable: remove ",
                          layout.data.string(), " to prepare the data again"));
       }},
      {"pretrain", [&] { return pipeline.Pretrain(); }},
      {"quantize (AWQ)", [&] { return QuantizeWithAwq(preset, layout); }},
      {"regenerate (teacher)",
       [&] {
         return RegenerateAndPack(preset, layout, layout.teacher(), layout.teacher_answers,
                                  layout.teacher_chat);
       }},
      {"qad", [&] { return pipeline.Qad(); }},
      {"kl", [&] { return pipeline.MeasureKl(); }},
      {"regenerate (QAD target)",
       [&] {
         return RegenerateAndPack(preset, layout, layout.qad(), layout.qad_answers,
                                  layout.qad_chat);
       }},
      {"drafter stage 1", [&] { return pipeline.DrafterStage1(); }},
      {"drafter stage 2", [&] { return pipeline.DrafterStage2(); }},
      {"gptq drafter", [&] { return pipeline.GptqDrafter(); }},
      {"evaluate", [&] { return pipeline.Evaluate(); }},
  };
  for (const auto& [name, step] : steps) {
    std::fprintf(stderr, "== pipeline: %s\n", name);
    const Clock::time_point start = Clock::now();
    if (absl::Status status = step(); !status.ok()) {
      return absl::Status(status.code(), absl::StrCat(name, ": ", status.message()));
    }
    report["seconds"][name] = std::chrono::duration<double>(Clock::now() - start).count();
  }
  if (absl::Status status = WritePlots(layout, report); !status.ok()) return status;
  const std::string json = report.dump(2) + "\n";
  if (absl::Status status = io::WriteFileAtomically(out / "report.json", json); !status.ok()) {
    return status;
  }
  if (absl::Status status = io::WriteFileAtomically(out / "report.md", Markdown(preset, report));
      !status.ok()) {
    return status;
  }
  return json;
}

}  // namespace specd::train
