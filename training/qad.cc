#include "training/qad.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "training/parameter_io.h"
#include "training/training_loop.h"

namespace specd::train {
namespace {

absl::Status WithContext(const absl::Status& status, const std::string& context) {
  return absl::Status(status.code(), absl::StrCat(context, ": ", std::string(status.message())));
}

absl::Status ValidateOptions(const QadOptions& options) {
  if (options.loop.steps < 1) return absl::InvalidArgumentError("qad: steps must be at least 1");
  if (options.loop.accumulation < 1) {
    return absl::InvalidArgumentError("qad: accumulation must be at least 1");
  }
  if (options.validation_sequences < 0) {
    return absl::InvalidArgumentError("qad: validation_sequences must be 0 (all) or positive");
  }
  return absl::OkStatus();
}

// The teacher and the model must be the same network, and the data must fit its vocabulary.
absl::Status CheckCompatible(const model::Qwen35Model& teacher, const model::Qwen35Model& model,
                             const PackedDataset& data) {
  const io::Qwen35TextConfig& t = teacher.config();
  const io::Qwen35TextConfig& m = model.config();
  if (t.vocab_size != m.vocab_size || t.hidden_size != m.hidden_size ||
      t.num_hidden_layers != m.num_hidden_layers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "qad: the teacher (vocab ", t.vocab_size, ", hidden ", t.hidden_size, ", ",
        t.num_hidden_layers, " layers) and the student (vocab ", m.vocab_size, ", hidden ",
        m.hidden_size, ", ", m.num_hidden_layers, " layers) are not the same model"));
  }
  if (data.vocab_size() > m.vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("qad: the dataset's vocabulary (", data.vocab_size(),
                     " ids) does not fit the model's (", m.vocab_size, ")"));
  }
  return absl::OkStatus();
}

std::vector<int64_t> Ids(const Sequence& sequence) {
  const at::Tensor ids = sequence.ids.to(at::kLong).contiguous();
  return {ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel()};
}

// Log-probabilities [T, vocab] float32 of the next token at every position of `ids`.
absl::StatusOr<at::Tensor> LogProbs(const model::Qwen35Model& model, std::span<const int64_t> ids) {
  absl::StatusOr<model::Qwen35Cache> cache = model.NewCache(static_cast<int64_t>(ids.size()));
  if (!cache.ok()) return cache.status();
  absl::StatusOr<model::ForwardOutput> output =
      model.Prefill(ids, *cache, {.logit_rows = model::LogitRows::kAll, .hidden_states = {}});
  if (!output.ok()) return output.status();
  return at::log_softmax(output->logits.to(at::kFloat), -1);
}

// KL(p_teacher ‖ p_model) [T] at every position.
at::Tensor ForwardKl(const at::Tensor& teacher_log_probs, const at::Tensor& log_probs) {
  return (teacher_log_probs.exp() * (teacher_log_probs - log_probs)).sum(-1);
}

// The training loss of one packed sequence: the KL averaged over its non-pad tokens.
absl::StatusOr<MicroBatchLoss> DistillationLoss(const model::Qwen35Model& teacher,
                                                const model::Qwen35Model& student,
                                                const Sequence& sequence, int32_t pad_id) {
  const std::vector<int64_t> ids = Ids(sequence);
  at::Tensor teacher_log_probs;
  {
    at::NoGradGuard no_grad;
    absl::StatusOr<at::Tensor> log_probs = LogProbs(teacher, ids);
    if (!log_probs.ok()) return WithContext(log_probs.status(), "qad: teacher forward");
    teacher_log_probs = *std::move(log_probs);
  }
  absl::StatusOr<at::Tensor> log_probs = LogProbs(student, ids);
  if (!log_probs.ok()) return WithContext(log_probs.status(), "qad: student forward");
  const at::Tensor keep = sequence.ids.to(at::kLong).ne(pad_id).to(at::kFloat);
  const int64_t tokens = keep.sum().item<int64_t>();
  const at::Tensor kl = ForwardKl(teacher_log_probs, *log_probs);
  return MicroBatchLoss{
      .loss = (kl * keep).sum() / static_cast<double>(std::max<int64_t>(tokens, 1)),
      .tokens = tokens};
}

Metrics ToMetrics(const DistillationMetrics& metrics) {
  return {{"loss", metrics.kl},
          {"kl", metrics.kl},
          {"perplexity", metrics.perplexity},
          {"student_loss", metrics.student_loss},
          {"tokens", static_cast<double>(metrics.tokens)}};
}

DistillationMetrics FromMetrics(const Metrics& metrics) {
  const auto get = [&metrics](const char* key) {
    const auto it = metrics.find(key);
    return it == metrics.end() ? 0.0 : it->second;
  };
  return {.kl = get("kl"),
          .perplexity = get("perplexity"),
          .student_loss = get("student_loss"),
          .tokens = static_cast<int64_t>(get("tokens"))};
}

}  // namespace

absl::StatusOr<DistillationMetrics> MeasureDistillation(const model::Qwen35Model& teacher,
                                                        const model::Qwen35Model& model,
                                                        const PackedDataset& data, Split split,
                                                        int64_t max_sequences) {
  if (absl::Status status = CheckCompatible(teacher, model, data); !status.ok()) return status;
  const int64_t sequences =
      max_sequences > 0 ? std::min(max_sequences, data.size(split)) : data.size(split);
  at::NoGradGuard no_grad;
  double kl_sum = 0;
  double nll_sum = 0;
  int64_t kl_tokens = 0;
  int64_t nll_tokens = 0;
  for (int64_t i = 0; i < sequences; ++i) {
    const Sequence sequence = data.Get(split, i);
    const std::vector<int64_t> ids = Ids(sequence);
    absl::StatusOr<at::Tensor> teacher_log_probs = LogProbs(teacher, ids);
    if (!teacher_log_probs.ok()) {
      return WithContext(teacher_log_probs.status(), "qad: teacher forward");
    }
    absl::StatusOr<at::Tensor> log_probs = LogProbs(model, ids);
    if (!log_probs.ok()) return WithContext(log_probs.status(), "qad: model forward");
    const at::Tensor tokens = sequence.ids.to(at::kLong);
    const at::Tensor keep = tokens.ne(data.pad_id());
    kl_sum += ForwardKl(*teacher_log_probs, *log_probs).masked_select(keep).sum().item<double>();
    kl_tokens += keep.sum().item<int64_t>();

    const int64_t length = tokens.size(0);
    const at::Tensor next = tokens.narrow(0, 1, length - 1);
    const at::Tensor next_keep =
        keep.narrow(0, 0, length - 1).logical_and(keep.narrow(0, 1, length - 1));
    const at::Tensor next_log_probs =
        log_probs->narrow(0, 0, length - 1).gather(1, next.unsqueeze(1)).squeeze(1);
    nll_sum -= next_log_probs.masked_select(next_keep).sum().item<double>();
    nll_tokens += next_keep.sum().item<int64_t>();
  }
  if (kl_tokens == 0 || nll_tokens == 0) {
    return absl::FailedPreconditionError(absl::StrCat("qad: no tokens to measure in the first ",
                                                      sequences, " sequences of the ",
                                                      SplitName(split), " split"));
  }
  const double student_loss = nll_sum / static_cast<double>(nll_tokens);
  return DistillationMetrics{.kl = kl_sum / static_cast<double>(kl_tokens),
                             .perplexity = std::exp(student_loss),
                             .student_loss = student_loss,
                             .tokens = kl_tokens};
}

absl::StatusOr<QadResult> RunQad(const QadOptions& options) {
  if (absl::Status status = ValidateOptions(options); !status.ok()) return status;
  absl::StatusOr<model::Qwen35Model> teacher = model::Qwen35Model::Load(options.teacher);
  if (!teacher.ok()) {
    return WithContext(teacher.status(),
                       absl::StrCat("qad: loading the teacher ", options.teacher.string()));
  }
  absl::StatusOr<model::Qwen35Model> student =
      model::Qwen35Model::Load(options.student, {.trainable = true});
  if (!student.ok()) {
    return WithContext(student.status(),
                       absl::StrCat("qad: loading the student ", options.student.string()));
  }
  const std::vector<model::NamedParameter>& parameters = student->parameters();
  if (std::none_of(parameters.begin(), parameters.end(),
                   [](const model::NamedParameter& p) { return p.fake_quant != nullptr; })) {
    return absl::InvalidArgumentError(absl::StrCat(
        "qad: the student ", options.student.string(),
        " has no W4A16 Linears; QAD trains a compressed-tensors W4A16 checkpoint on its grid"));
  }
  absl::StatusOr<PackedDataset> data = PackedDataset::Open(options.data);
  if (!data.ok()) return WithContext(data.status(), "qad: opening the dataset");
  if (absl::Status status = CheckCompatible(*teacher, *student, *data); !status.ok()) {
    return status;
  }
  if (data->size(Split::kTrain) == 0 || data->size(Split::kValidation) == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("qad: the dataset ", options.data.string(),
                     " needs training and validation sequences; it has ", data->size(Split::kTrain),
                     " and ", data->size(Split::kValidation)));
  }

  EpochOrder order(data->size(Split::kTrain), options.seed);
  const TrainingHooks hooks = {
      .loss = [&](int64_t index) -> absl::StatusOr<MicroBatchLoss> {
        return DistillationLoss(*teacher, *student, data->Get(Split::kTrain, order(index)),
                                data->pad_id());
      },
      .validate = [&]() -> absl::StatusOr<Metrics> {
        absl::StatusOr<DistillationMetrics> metrics = MeasureDistillation(
            *teacher, *student, *data, Split::kValidation, options.validation_sequences);
        if (!metrics.ok()) return metrics.status();
        return ToMetrics(*metrics);
      },
      .export_model =
          [&](const std::filesystem::path& dir) {
            return ExportCheckpoint(parameters, options.student, dir);
          }};
  absl::StatusOr<TrainingSummary> summary = RunTraining(parameters, options.loop, hooks);
  if (!summary.ok()) return summary.status();
  return QadResult{.before = FromMetrics(summary->first_validation),
                   .after = FromMetrics(summary->best_validation),
                   .checkpoint = summary->best_dir};
}

}  // namespace specd::train
