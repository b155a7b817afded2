#include "services/trainer/service/progress_tracker.h"

#include <google/protobuf/util/time_util.h>

#include <array>
#include <fstream>
#include <regex>

#include "nlohmann/json.hpp"

namespace specd::trainer {
namespace {

using google::protobuf::util::TimeUtil;

// The steps of `specd pipeline` (pipeline.cc) by the prefix of their header's name: the job
// type each is, and the subdirectory its training run writes (empty: no training loop).
struct PipelineStep {
  std::string_view prefix;
  v1::JobType stage;
  std::string_view run;
};
constexpr std::array<PipelineStep, 10> kPipelineSteps = {{
    {"data", v1::JOB_TYPE_PACK, ""},
    {"pretrain", v1::JOB_TYPE_PRETRAIN, "teacher"},
    {"quantize", v1::JOB_TYPE_QUANTIZE, ""},
    {"regenerate", v1::JOB_TYPE_REGENERATE, ""},
    {"qad", v1::JOB_TYPE_QAD, "qad"},
    {"kl", v1::JOB_TYPE_QAD, ""},
    {"drafter stage 1", v1::JOB_TYPE_DRAFTER_STAGE1, "drafter-stage1"},
    {"drafter stage 2", v1::JOB_TYPE_DRAFTER_STAGE2, "drafter-stage2"},
    {"gptq drafter", v1::JOB_TYPE_GPTQ_DRAFTER, ""},
    {"evaluate", v1::JOB_TYPE_PIPELINE, ""},
}};

// training_loop.cc's lines: "NAME: step S/T loss L lr X 5s elapsed, ETA 1m02s",
// "NAME: step S validation loss V", "NAME: resuming after step S of T".
const std::regex kStepLine(R"(^[^:]+: step (\d+)/(\d+) loss (\S+) .* ETA (\d+m)?(\d+)s$)");
const std::regex kValidationLine(R"(^[^:]+: step (\d+) validation loss (\S+)$)");
const std::regex kResumeLine(R"(^[^:]+: resuming after step (\d+) of (\d+)$)");
// Counters: regenerate.cc, gptq_drafter.cc, and the quantize stage's AWQ search and tensors.
const std::regex kCounterLine(
    R"(^(?:regenerate: (\d+)/(\d+) conversations|gptq drafter: calibrated (\d+)/(\d+) sequences|awq search \[(\d+)/(\d+)\].*|\[(\d+)/(\d+)\] .*)$)");
const std::regex kPipelineLine(R"(^== pipeline: (.+)$)");

uint64_t ToUint(const std::ssub_match& match) { return std::stoull(match.str()); }

}  // namespace

ProgressTracker::ProgressTracker(v1::JobType type, std::filesystem::path run_dir,
                                 v1::JobProgress initial)
    : type_(type),
      run_dir_(std::move(run_dir)),
      current_run_(type == v1::JOB_TYPE_PIPELINE ? std::filesystem::path() : run_dir_),
      progress_(std::move(initial)) {
  if (progress_.stage() == v1::JOB_TYPE_UNSPECIFIED) progress_.set_stage(type);
  if (type == v1::JOB_TYPE_PIPELINE) {
    for (const PipelineStep& step : kPipelineSteps) {
      if (step.stage == progress_.stage() && !step.run.empty()) current_run_ = run_dir_ / step.run;
    }
  }
}

bool ProgressTracker::OnLine(std::string_view text, absl::Time now) {
  const std::string line(text);
  std::smatch match;
  if (std::regex_match(line, match, kStepLine)) {
    progress_.set_step(ToUint(match[1]));
    progress_.set_total_steps(ToUint(match[2]));
    progress_.set_loss(std::stod(match[3].str()));
    const int64_t minutes = match[4].matched ? std::stoll(match[4].str()) : 0;
    *progress_.mutable_estimated_time_remaining() =
        TimeUtil::SecondsToDuration(minutes * 60 + std::stoll(match[5].str()));
    ReadThroughput();
  } else if (std::regex_match(line, match, kValidationLine)) {
    progress_.set_step(ToUint(match[1]));
    progress_.set_validation_loss(std::stod(match[2].str()));
  } else if (std::regex_match(line, match, kResumeLine)) {
    progress_.set_step(ToUint(match[1]));
    progress_.set_total_steps(ToUint(match[2]));
  } else if (std::regex_match(line, match, kCounterLine)) {
    for (size_t group = 1; group + 1 < match.size(); group += 2) {
      if (!match[group].matched) continue;
      progress_.set_step(ToUint(match[group]));
      progress_.set_total_steps(ToUint(match[group + 1]));
    }
  } else if (type_ == v1::JOB_TYPE_PIPELINE && std::regex_match(line, match, kPipelineLine)) {
    EnterPipelineStep(match[1].str());
  } else {
    return false;
  }
  *progress_.mutable_update_time() = TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(now));
  return true;
}

void ProgressTracker::EnterPipelineStep(std::string_view name) {
  v1::JobProgress next;
  next.set_stage(v1::JOB_TYPE_PIPELINE);
  current_run_.clear();
  for (const PipelineStep& step : kPipelineSteps) {
    if (name.starts_with(step.prefix)) {
      next.set_stage(step.stage);
      if (!step.run.empty()) current_run_ = run_dir_ / step.run;
      break;
    }
  }
  progress_ = next;  // the numbers are the current stage's
  metrics_offset_ = 0;
  last_metrics_step_.reset();
}

void ProgressTracker::ReadThroughput() {
  if (current_run_.empty()) return;
  const std::filesystem::path path = current_run_ / "metrics.jsonl";
  std::error_code error;
  const uintmax_t size = std::filesystem::file_size(path, error);
  if (error) return;
  if (size < metrics_offset_) {  // a resumed run rewrote it without the steps after its state
    metrics_offset_ = 0;
    last_metrics_step_.reset();
  }
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(metrics_offset_));
  std::string line;
  while (std::getline(in, line)) {
    if (in.eof()) break;  // no newline yet: the line may still be being written
    metrics_offset_ += line.size() + 1;
    const nlohmann::json json = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!json.is_object() || !json.contains("tokens") || !json.contains("seconds") ||
        !json.contains("step")) {
      continue;  // a validation line
    }
    const int64_t step = json["step"].get<int64_t>();
    const double tokens = json["tokens"].get<double>();
    const double seconds = json["seconds"].get<double>();
    // "seconds" counts from the start of the process's loop: consecutive steps of one process
    // give the interval; the first step of a process is its own interval.
    double interval = seconds;
    if (last_metrics_step_ && step == last_metrics_step_->first + 1 &&
        seconds >= last_metrics_step_->second) {
      interval = seconds - last_metrics_step_->second;
    }
    if (interval > 0) progress_.set_tokens_per_second(tokens / interval);
    last_metrics_step_ = {step, seconds};
  }
}

std::string ProgressTracker::LastCheckpoint(const std::string& previous) const {
  if (current_run_.empty()) return previous;
  const std::filesystem::path state = current_run_ / "state";
  std::error_code error;
  return std::filesystem::exists(state / "progress.json", error) ? state.string() : previous;
}

}  // namespace specd::trainer
