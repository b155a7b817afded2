#include "training/training_loop.h"

#include <ATen/ATen.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/io/atomic_file.h"
#include "nlohmann/json.hpp"
#include "training/lr_schedule.h"
#include "training/parameter_io.h"

namespace specd::train {
namespace {

using Clock = std::chrono::steady_clock;

struct Progress {
  int64_t step = 0;  // steps done
  double best_loss = std::numeric_limits<double>::infinity();
  Metrics first_validation;
  Metrics best_validation;
};

nlohmann::json ToJson(const Metrics& metrics) {
  nlohmann::json json = nlohmann::json::object();
  for (const auto& [key, value] : metrics) json[key] = value;
  return json;
}

Metrics FromJson(const nlohmann::json& json) {
  Metrics metrics;
  for (const auto& [key, value] : json.items()) metrics[key] = value.get<double>();
  return metrics;
}

// Appends lines to metrics.jsonl, flushed per line so a killed run keeps what it logged.
class MetricsLog {
 public:
  explicit MetricsLog(const std::filesystem::path& path) : out_(path, std::ios::app) {}
  void Write(const nlohmann::json& line) { out_ << line.dump() << "\n" << std::flush; }
  bool good() const { return out_.good(); }

 private:
  std::ofstream out_;
};

// The human-readable side of a run, in train.log and on stderr: events (a resume, a validation)
// as lines, and every step as a line of the file and a line stderr overwrites in place.
class RunLog {
 public:
  explicit RunLog(const std::filesystem::path& path) : out_(path, std::ios::app) {}
  ~RunLog() {
    if (step_shown_) std::fputc('\n', stderr);
  }
  void Step(const std::string& line) {
    std::fprintf(stderr, "\r%s   ", line.c_str());
    step_shown_ = true;
    out_ << line << "\n" << std::flush;
  }
  void Event(const std::string& line) {
    if (step_shown_) std::fputc('\n', stderr);
    step_shown_ = false;
    std::fprintf(stderr, "%s\n", line.c_str());
    out_ << line << "\n" << std::flush;
  }

 private:
  std::ofstream out_;
  bool step_shown_ = false;
};

// Keeps the lines of a resumed run's log up to its saved step, dropping what came after.
absl::Status TruncateLog(const std::filesystem::path& path, int64_t step) {
  std::ifstream in(path);
  if (!in) return absl::OkStatus();
  std::string kept, line;
  while (std::getline(in, line)) {
    const nlohmann::json json = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (json.is_discarded()) break;  // a line cut short when the run was killed
    if (json.value("step", int64_t{0}) > step) break;
    absl::StrAppend(&kept, line, "\n");
  }
  return io::WriteFileAtomically(path, kept);
}

absl::Status SaveState(std::span<const model::NamedParameter> parameters,
                       const AdamW8bit& optimizer, const Progress& progress,
                       const std::filesystem::path& dir) {
  if (absl::Status status = SaveParameters(parameters, dir / "parameters.safetensors");
      !status.ok()) {
    return status;
  }
  const std::vector<std::byte> state = optimizer.State();
  if (absl::Status status = io::WriteFileAtomically(dir / "optimizer.bin", state); !status.ok()) {
    return status;
  }
  const nlohmann::json json = {{"step", progress.step},
                               {"best_loss", progress.best_loss},
                               {"first_validation", ToJson(progress.first_validation)},
                               {"best_validation", ToJson(progress.best_validation)}};
  return io::WriteFileAtomically(dir / "progress.json", json.dump(2));  // last: the commit point
}

absl::StatusOr<Progress> LoadState(std::span<const model::NamedParameter> parameters,
                                   AdamW8bit& optimizer, const std::filesystem::path& dir) {
  std::ifstream in(dir / "progress.json");
  const nlohmann::json json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.contains("step")) {
    return absl::DataLossError(absl::StrCat((dir / "progress.json").string(), " is not valid"));
  }
  if (absl::Status status = LoadParameters(parameters, dir / "parameters.safetensors");
      !status.ok()) {
    return status;
  }
  std::ifstream optimizer_file(dir / "optimizer.bin", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(optimizer_file)), {});
  std::vector<std::byte> state(bytes.size());
  std::memcpy(state.data(), bytes.data(), bytes.size());
  if (absl::Status status = optimizer.LoadState(state); !status.ok()) return status;
  Progress progress;
  progress.step = json["step"].get<int64_t>();
  progress.best_loss = json.value("best_loss", std::numeric_limits<double>::infinity());
  progress.first_validation = FromJson(json.value("first_validation", nlohmann::json::object()));
  progress.best_validation = FromJson(json.value("best_validation", nlohmann::json::object()));
  return progress;
}

std::string Duration(double seconds) {
  const auto s = static_cast<int64_t>(seconds);
  return s >= 60 ? absl::StrFormat("%dm%02ds", s / 60, s % 60) : absl::StrFormat("%ds", s);
}

}  // namespace

int64_t EpochOrder::operator()(int64_t index) {
  const int64_t epoch = index / size_;
  if (epoch != epoch_) {
    const auto low = [](uint64_t x) { return static_cast<uint32_t>(x); };
    const auto high = [](uint64_t x) { return static_cast<uint32_t>(x >> 32); };
    const uint64_t e = static_cast<uint64_t>(epoch);
    std::seed_seq seeds = {low(seed_), high(seed_), low(e), high(e)};
    std::mt19937_64 random(seeds);
    permutation_.resize(static_cast<size_t>(size_));
    std::iota(permutation_.begin(), permutation_.end(), 0);
    for (int64_t i = size_ - 1; i > 0; --i) {
      const uint64_t j = random() % static_cast<uint64_t>(i + 1);
      std::swap(permutation_[static_cast<size_t>(i)], permutation_[static_cast<size_t>(j)]);
    }
    epoch_ = epoch;
  }
  return permutation_[static_cast<size_t>(index % size_)];
}

absl::StatusOr<TrainingSummary> RunTraining(std::span<const model::NamedParameter> parameters,
                                            const TrainingLoopOptions& options,
                                            const TrainingHooks& hooks) {
  if (options.steps <= 0 || options.accumulation <= 0 || options.lr <= 0) {
    return absl::InvalidArgumentError("steps, accumulation and lr must be positive");
  }
  if (!hooks.loss || !hooks.export_model) {
    return absl::InvalidArgumentError("a training run needs a loss and an export");
  }
  std::vector<at::Tensor> tensors;
  for (const model::NamedParameter& parameter : parameters) tensors.push_back(parameter.tensor);
  absl::StatusOr<AdamW8bit> optimizer = AdamW8bit::Create(tensors, options.adamw);
  if (!optimizer.ok()) return optimizer.status();
  absl::StatusOr<CosineSchedule> schedule =
      CosineSchedule::Create({.peak_lr = options.lr,
                              .total_steps = options.steps,
                              .warmup_ratio = options.warmup_ratio,
                              .min_lr = 0});
  if (!schedule.ok()) return schedule.status();

  std::error_code error;
  std::filesystem::create_directories(options.dir, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot create ", options.dir.string(), ": ", error.message()));
  }
  const std::filesystem::path state_dir = options.dir / "state";
  const std::filesystem::path best_dir = options.dir / "best";
  const std::filesystem::path log_path = options.dir / "metrics.jsonl";
  RunLog run_log(options.dir / "train.log");
  Progress progress;
  if (std::filesystem::exists(state_dir / "progress.json")) {
    absl::StatusOr<Progress> resumed = LoadState(parameters, *optimizer, state_dir);
    if (!resumed.ok()) return resumed.status();
    progress = *std::move(resumed);
    run_log.Event(absl::StrFormat("%s: resuming after step %d of %d", options.name, progress.step,
                                  options.steps));
  }
  if (absl::Status status = TruncateLog(log_path, progress.step); !status.ok()) return status;
  MetricsLog log(log_path);

  // Validates, logs, and exports the model when it is the best so far (always without a
  // validator, so best/ is the last step's model).
  const auto validate = [&](int64_t step) -> absl::Status {
    Metrics metrics;
    if (hooks.validate) {
      absl::StatusOr<Metrics> measured = hooks.validate();
      if (!measured.ok()) return measured.status();
      metrics = *std::move(measured);
      log.Write({{"step", step}, {"validation", ToJson(metrics)}});
      if (step == 0) progress.first_validation = metrics;
      run_log.Event(
          absl::StrFormat("%s: step %d validation loss %.5f", options.name, step, metrics["loss"]));
    }
    const double loss = metrics.contains("loss") ? metrics["loss"] : -static_cast<double>(step);
    // The start counts: a run that never improves on it keeps the model it began with.
    if (loss <= progress.best_loss) {
      progress.best_loss = loss;
      progress.best_validation = metrics;
      return hooks.export_model(best_dir);
    }
    return absl::OkStatus();
  };
  if (progress.step == 0 && hooks.validate) {
    if (absl::Status status = validate(0); !status.ok()) return status;
  }

  TrainingSummary summary;
  const Clock::time_point start = Clock::now();
  const int64_t first_step = progress.step;
  for (int64_t step = progress.step; step < options.steps; ++step) {
    optimizer->ZeroGrad();
    double loss_sum = 0;
    int64_t tokens = 0;
    for (int64_t i = 0; i < options.accumulation; ++i) {
      absl::StatusOr<MicroBatchLoss> micro = hooks.loss(step * options.accumulation + i);
      if (!micro.ok()) return micro.status();
      const double value = micro->loss.item<double>();
      if (!std::isfinite(value)) {
        return absl::InternalError(absl::StrCat(options.name, ": loss is ", value, " at step ",
                                                step + 1, "; the last saved state is in ",
                                                state_dir.string()));
      }
      (micro->loss / static_cast<double>(options.accumulation)).backward();
      loss_sum += value;
      tokens += micro->tokens;
    }
    const double grad_norm = options.clip > 0 ? ClipGradNorm(tensors, options.clip) : 0.0;
    const double lr = schedule->LearningRate(step + 1);
    optimizer->Step(lr);
    progress.step = step + 1;
    summary.last_loss = loss_sum / static_cast<double>(options.accumulation);

    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    log.Write({{"step", progress.step},
               {"loss", summary.last_loss},
               {"lr", lr},
               {"grad_norm", grad_norm},
               {"tokens", tokens},
               {"seconds", seconds}});
    const double per_step = seconds / static_cast<double>(progress.step - first_step);
    run_log.Step(
        absl::StrFormat("%s: step %d/%d loss %.4f lr %.2e %s elapsed, ETA %s", options.name,
                        progress.step, options.steps, summary.last_loss, lr, Duration(seconds),
                        Duration(per_step * static_cast<double>(options.steps - progress.step))));
    const bool last = progress.step == options.steps;
    if (last || (options.validate_every > 0 && progress.step % options.validate_every == 0)) {
      if (absl::Status status = validate(progress.step); !status.ok()) return status;
    }
    if (last || (options.save_every > 0 && progress.step % options.save_every == 0)) {
      if (absl::Status status = SaveState(parameters, *optimizer, progress, state_dir);
          !status.ok()) {
        return status;
      }
    }
  }
  if (!log.good()) return absl::InternalError(absl::StrCat("cannot write ", log_path.string()));
  summary.steps = progress.step;
  summary.first_validation = progress.first_validation;
  summary.best_validation = progress.best_validation;
  summary.best_dir = best_dir;
  return summary;
}

}  // namespace specd::train
