#include "training/pretrain.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/model/synthetic/random_checkpoint.h"
#include "training/parameter_io.h"
#include "training/training_loop.h"

namespace specd::train {
namespace {

constexpr const char* kTokenizerFiles[] = {"tokenizer.json", "tokenizer_config.json"};

// The starting weights, with the tokenizer beside them so every export carries it.
absl::Status WriteInitialModel(const PretrainOptions& options, const std::filesystem::path& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot create ", dir.string(), ": ", error.message()));
  }
  for (const char* name : kTokenizerFiles) {
    std::filesystem::copy_file(options.tokenizer / name, dir / name,
                               std::filesystem::copy_options::overwrite_existing, error);
    if (error) {
      return absl::InternalError(
          absl::StrCat("cannot copy ", (options.tokenizer / name).string(), ": ", error.message()));
    }
  }
  return model::WriteRandomQwen35Checkpoint(
      dir, options.model,
      {.layout = model::CheckpointLayout::kCausalLm,
       .seed = options.seed,
       .max_shard_bytes = std::numeric_limits<uint64_t>::max(),
       .dtype = io::DType::kF32,
       .quantization_config = nullptr,
       .training_start = true});
}

}  // namespace

absl::StatusOr<SequenceLoss> NextTokenLoss(const model::Qwen35Model& model,
                                           const Sequence& sequence) {
  const int64_t length = sequence.ids.size(0);
  absl::StatusOr<model::Qwen35Cache> cache = model.NewCache(length);
  if (!cache.ok()) return cache.status();
  const std::span<const int64_t> ids(sequence.ids.data_ptr<int64_t>(), length);
  absl::StatusOr<model::ForwardOutput> output =
      model.Prefill(ids, *cache, {.logit_rows = model::LogitRows::kAll, .hidden_states = {}});
  if (!output.ok()) return output.status();
  // Position i predicts ids[i + 1], counted where the mask keeps ids[i + 1].
  const at::Tensor targets = sequence.ids.narrow(0, 1, length - 1);
  const at::Tensor kept = sequence.mask.narrow(0, 1, length - 1).to(at::kFloat);
  const at::Tensor losses = at::cross_entropy_loss(output->logits.narrow(0, 0, length - 1), targets,
                                                   {}, at::Reduction::None);
  return SequenceLoss{.total = (losses * kept).sum(),
                      .tokens = static_cast<int64_t>(kept.sum().item<double>())};
}

absl::StatusOr<double> MeasureLanguageModelLoss(const model::Qwen35Model& model,
                                                const PackedDataset& data, Split split,
                                                int64_t max_sequences) {
  const int64_t count =
      max_sequences > 0 ? std::min(max_sequences, data.size(split)) : data.size(split);
  at::NoGradGuard no_grad;
  double total = 0;
  int64_t tokens = 0;
  for (int64_t i = 0; i < count; ++i) {
    absl::StatusOr<SequenceLoss> loss = NextTokenLoss(model, data.Get(split, i));
    if (!loss.ok()) return loss.status();
    total += loss->total.item<double>();
    tokens += loss->tokens;
  }
  if (tokens == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("the ", SplitName(split), " split has no tokens to measure"));
  }
  return total / static_cast<double>(tokens);
}

absl::StatusOr<PretrainResult> RunPretrain(const PretrainOptions& options) {
  absl::StatusOr<PackedDataset> data = PackedDataset::Open(options.data);
  if (!data.ok()) return data.status();
  if (data->vocab_size() > options.model.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat("the data's vocabulary of ", data->vocab_size(),
                                                   " ids does not fit the model's ",
                                                   options.model.vocab_size));
  }
  if (data->size(Split::kTrain) == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(options.data.string(), " has no training sequences"));
  }
  const std::filesystem::path init = options.loop.dir / "init";
  if (!std::filesystem::exists(init / "config.json")) {
    if (absl::Status status = WriteInitialModel(options, init); !status.ok()) return status;
  }
  absl::StatusOr<model::Qwen35Model> model = model::Qwen35Model::Load(init, {.trainable = true});
  if (!model.ok()) return model.status();

  EpochOrder order(data->size(Split::kTrain), options.seed);
  TrainingHooks hooks{
      .loss = [&](int64_t index) -> absl::StatusOr<MicroBatchLoss> {
        const Sequence sequence = data->Get(Split::kTrain, order(index));
        absl::StatusOr<SequenceLoss> loss = NextTokenLoss(*model, sequence);
        if (!loss.ok()) return loss.status();
        return MicroBatchLoss{
            .loss = loss->total / static_cast<double>(std::max<int64_t>(1, loss->tokens)),
            .tokens = loss->tokens};
      },
      .validate = nullptr,
      .export_model =
          [&](const std::filesystem::path& dir) {
            return ExportCheckpoint(model->parameters(), init, dir);
          }};
  if (data->size(Split::kValidation) > 0) {
    hooks.validate = [&]() -> absl::StatusOr<Metrics> {
      absl::StatusOr<double> loss =
          MeasureLanguageModelLoss(*model, *data, Split::kValidation, options.validation_sequences);
      if (!loss.ok()) return loss.status();
      return Metrics{{"loss", *loss}, {"perplexity", std::exp(*loss)}};
    };
  }
  absl::StatusOr<TrainingSummary> summary = RunTraining(model->parameters(), options.loop, hooks);
  if (!summary.ok()) return summary.status();
  return PretrainResult{.validation_loss = summary->best_validation.contains("loss")
                                               ? summary->best_validation.at("loss")
                                               : summary->last_loss,
                        .checkpoint = summary->best_dir};
}

}  // namespace specd::train
